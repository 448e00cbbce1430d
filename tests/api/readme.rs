//! Every `curl` example of the README and of the guide (`docs/guide/`), run in reading order
//! (`docs::in_reading_order`: the README, then the guide's pages as its contents list them)
//! against the runner's front door, so the documentation cannot drift from the code. Placeholders (`<id>`, `<patronId>`, `<copyId>`,
//! `<cursor>`, ...) are filled from earlier answers, on the same page or an earlier one, `$TOKEN` is a token the runner accepts,
//! and a `# 201`-style comment line after a command is the status it must get (otherwise any
//! `2xx`). What a comment (on the next line, or after the command) promises of the answer is
//! checked too: each `"field": value` it shows, and each `etag:` or `location:` header.

use crate::docs::{Page, in_reading_order};
use crate::harness::{Api, Mode};
use std::collections::HashMap;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// The ids an answer names, which later examples refer to as `<name>`.
const NAMED: &[&str] = &[
    "checkoutId",
    "copyId",
    "patronId",
    "vehicleId",
    "accountId",
    "resourceId",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_curl_example_in_the_docs_runs() {
    let api = Api::start(Mode::Http).await;
    let mut filled: HashMap<String, String> = HashMap::new();
    let mut ran = 0;
    for Page { path, text } in in_reading_order() {
        ran += run_curl_examples(&api, &path, &text, &mut filled).await;
    }
    assert!(
        ran >= 34,
        "the README and the guide show every route ({ran} examples ran)"
    );
}

/// Runs the `curl` examples of one page in order, filling placeholders from `filled` and adding
/// what each answer names to it; returns how many ran.
async fn run_curl_examples(
    api: &Api,
    page: &str,
    text: &str,
    filled: &mut HashMap<String, String>,
) -> usize {
    let mut ran = 0;
    for block in text.split("```sh\n").skip(1) {
        let block = block.split("```").next().unwrap().replace("\\\n", " ");
        let mut lines = block.lines().peekable();
        while let Some(line) = lines.next() {
            let line = line.trim();
            if !line.starts_with("curl ") {
                continue;
            }
            // A quoted body may go on over several lines. A quote in the comment after the
            // command (`# every branch's`) opens nothing: counted, it once joined the next
            // commands to this one's comment, and they never ran.
            let mut command = line.to_owned();
            while open_quote(&command) {
                let next = lines.next().expect("a closing quote");
                command.push(' ');
                command.push_str(next.trim());
            }
            let promise = lines
                .next_if(|l| l.trim_start().starts_with('#'))
                .map(|l| l.trim().trim_start_matches('#').trim().to_owned())
                .or_else(|| trailing_comment(&command));
            for (name, value) in filled.iter() {
                command = command.replace(&format!("<{name}>"), value);
            }
            assert!(
                !command.contains("<"),
                "{page}: an unfilled placeholder in `{command}`"
            );
            let reply = run(api, &command).await;
            match promise
                .as_deref()
                .and_then(|p| p.get(..3)?.parse::<u16>().ok())
            {
                Some(status) => {
                    assert_eq!(reply.status, status, "{page}: `{command}`: {reply:?}")
                }
                None => assert!(
                    (200..300).contains(&reply.status),
                    "{page}: `{command}`: {reply:?}"
                ),
            }
            if let Some(promise) = &promise {
                let broken = broken_promises(promise, &reply, filled);
                assert!(
                    broken.is_empty(),
                    "{page}: `{command}`: the comment says {}: {reply:?}",
                    broken.join(", ")
                );
            }
            for name in NAMED {
                if let Some(value) = reply.body[*name].as_str() {
                    filled.insert((*name).to_owned(), value.to_owned());
                }
            }
            if reply.status == 201
                && let Some(id) = NAMED.iter().find_map(|n| reply.body[*n].as_str())
            {
                filled.insert("id".into(), id.to_owned());
            }
            if let Some(due) = reply.body["dueDate"].as_str() {
                filled.insert("dueDate".into(), due.to_owned());
            }
            if let Some(cursor) = reply.body["nextCursor"].as_str() {
                filled.insert("cursor".into(), cursor.to_owned());
            }
            ran += 1;
        }
    }
    let shown = text
        .split("```sh\n")
        .skip(1)
        .flat_map(|block| block.split("```").next().unwrap().lines())
        .filter(|line| line.trim_start().starts_with("curl "))
        .count();
    assert_eq!(
        ran, shown,
        "{page}: every `curl` line that starts a command runs"
    );
    ran
}

/// Runs one `curl` command line through the harness (with its own token for `$TOKEN`).
async fn run(api: &Api, line: &str) -> crate::harness::Reply {
    let words = shell_words(line);
    let mut method = "GET";
    let mut url = None;
    let mut headers = Vec::new();
    let mut body = None;
    let mut words = words.iter().skip(1);
    while let Some(word) = words.next() {
        match word.as_str() {
            "-s" | "-si" | "-i" => {}
            "-X" => method = http_method(words.next().unwrap()),
            "-H" => {
                let (name, value) = words.next().unwrap().split_once(": ").unwrap();
                headers.push((name.to_ascii_lowercase(), value.to_owned()));
            }
            "-d" => body = Some(words.next().unwrap().clone()),
            other => url = Some(other.trim_start_matches("localhost:3000").to_owned()),
        }
    }
    if body.is_some() && method == "GET" {
        method = "POST";
    }
    let mut call = api.call(method, url.expect("a URL"));
    if let Some(body) = body {
        call = call.json(serde_json::from_str(&body).unwrap());
    }
    for (name, value) in &headers {
        let value = value.replace("$TOKEN", &api.token);
        call = call.header(name, &value);
    }
    call.send().await
}

fn http_method(name: &str) -> &'static str {
    ["GET", "POST", "PUT", "PATCH", "DELETE"]
        .into_iter()
        .find(|m| *m == name)
        .unwrap_or_else(|| panic!("unknown method {name}"))
}

/// Splits a shell line into words: white space separates, single and double quotes keep a word
/// whole, and an unquoted `#` after white space starts a comment.
fn shell_words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut quote = None;
    let mut started = false;
    for c in line.chars() {
        match (c, quote) {
            ('\'' | '"', None) => {
                quote = Some(c);
                started = true;
            }
            (c, Some(q)) if c == q => quote = None,
            ('#', None) if !started => break,
            (c, None) if c.is_whitespace() => {
                if started {
                    words.push(std::mem::take(&mut word));
                    started = false;
                }
            }
            (c, _) => {
                word.push(c);
                started = true;
            }
        }
    }
    if started {
        words.push(word);
    }
    words
}

/// Whether `command`, its comment aside, leaves a single quote open.
fn open_quote(command: &str) -> bool {
    let code = comment_start(command).map_or(command, |at| &command[..at]);
    code.matches('\'').count() % 2 == 1
}

/// The comment after a command on its line (`curl ... # {"available": true}`), if any.
fn trailing_comment(command: &str) -> Option<String> {
    comment_start(command).map(|at| command[at + 1..].trim().to_owned())
}

/// Where an unquoted `#` after white space starts a comment in `command`.
fn comment_start(command: &str) -> Option<usize> {
    let mut quote = None;
    let mut previous = ' ';
    for (at, c) in command.char_indices() {
        match (c, quote) {
            ('\'' | '"', None) => quote = Some(c),
            (c, Some(q)) if c == q => quote = None,
            ('#', None) if previous.is_whitespace() => return Some(at),
            _ => {}
        }
        previous = c;
    }
    None
}

/// Fields whose value in an example is one moment's (a time, a date): not checked.
const MOMENTS: &[&str] = &[
    "addedAt",
    "updatedAt",
    "createdAt",
    "at",
    "dueDate",
    "checkedOutAt",
    "returnedDate",
    "asOf",
];

/// What `promise` shows that `reply` does not have: each `"field": <JSON scalar>` (found
/// anywhere in the body: an example often elides the nesting), placeholders (`<id>`) filled
/// from earlier answers (a create's new id or a next cursor: any string); `etag: "<n>"` and the fixed part
/// of `location: /path/<id>`; `dueDate + <n> days` against the answer before.
fn broken_promises(
    promise: &str,
    reply: &crate::harness::Reply,
    filled: &HashMap<String, String>,
) -> Vec<String> {
    let mut broken = Vec::new();
    let mut rest = promise;
    while let Some(start) = rest.find('"') {
        let after = &rest[start + 1..];
        let Some(end) = after.find('"') else { break };
        let key = &after[..end];
        let tail = &after[end + 1..];
        rest = tail;
        let Some(value_text) = tail.strip_prefix(": ") else {
            continue;
        };
        let Some(value) = scalar(value_text) else {
            continue;
        };
        if MOMENTS.contains(&key) {
            continue;
        }
        let value = match value.as_str() {
            Some(text) if text.contains('<') => {
                let name = text.trim_start_matches('<').trim_end_matches('>');
                // A create's own new id, or the next page's cursor: some string.
                let new = reply.status == 201 || name == "cursor";
                match filled.get(name) {
                    Some(known) if !new => serde_json::Value::String(known.clone()),
                    _ => {
                        if !holds_any_string(&reply.body, key) {
                            broken.push(format!("\"{key}\": {text}"));
                        }
                        continue;
                    }
                }
            }
            _ => value,
        };
        if !holds(&reply.body, key, &value) {
            broken.push(format!("\"{key}\": {value}"));
        }
    }
    // `dueDate + 21 days`: against the due date the loan had in the answer before.
    if let Some(days) = promise
        .split("dueDate + ")
        .nth(1)
        .and_then(|rest| rest.split(" days").next())
        .and_then(|n| n.parse::<i64>().ok())
    {
        let date = |text: &str| {
            time::OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339).ok()
        };
        let before = filled.get("dueDate").and_then(|d| date(d));
        let after = reply.body["dueDate"].as_str().and_then(date);
        match (before, after) {
            (Some(before), Some(after)) if after - before == time::Duration::days(days) => {}
            _ => broken.push(format!(
                "dueDate + {days} days (was {before:?}, is {after:?})"
            )),
        }
    }
    if let Some(etag) = promise.split("etag: ").nth(1) {
        let etag = etag.split(',').next().unwrap().trim();
        if reply.header("etag") != Some(etag) {
            broken.push(format!("etag: {etag}"));
        }
    }
    if let Some(location) = promise.split("location: ").nth(1) {
        let location = location.split(',').next().unwrap().trim();
        let fixed = location.split('<').next().unwrap();
        if !reply
            .header("location")
            .is_some_and(|l| l.starts_with(fixed))
        {
            broken.push(format!("location: {location}"));
        }
    }
    broken
}

/// The JSON scalar at the start of `text` (a string, a number, `true`, `false`, `null`).
fn scalar(text: &str) -> Option<serde_json::Value> {
    if let Some(string) = text.strip_prefix('"') {
        let end = string.find('"')?;
        return Some(serde_json::Value::String(string[..end].to_owned()));
    }
    let token: String = text
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '.' || *c == '-')
        .collect();
    serde_json::from_str(&token).ok()
}

/// Whether `body` has, at any depth, `key` with `value`.
fn holds(body: &serde_json::Value, key: &str, value: &serde_json::Value) -> bool {
    match body {
        serde_json::Value::Object(map) => {
            map.get(key) == Some(value) || map.values().any(|v| holds(v, key, value))
        }
        serde_json::Value::Array(items) => items.iter().any(|v| holds(v, key, value)),
        _ => false,
    }
}

/// Whether `body` has, at any depth, `key` with a string value.
fn holds_any_string(body: &serde_json::Value, key: &str) -> bool {
    match body {
        serde_json::Value::Object(map) => {
            map.get(key).is_some_and(serde_json::Value::is_string)
                || map.values().any(|v| holds_any_string(v, key))
        }
        serde_json::Value::Array(items) => items.iter().any(|v| holds_any_string(v, key)),
        _ => false,
    }
}

/// Every `cargo run -- <command>` line of the shell blocks of the README and the guide, run as
/// written (its comment aside) by the runner binary, in reading order, in one fresh directory
/// that has the repository's `events/` and `docs/`: so its data and token key are under that directory's
/// `.singlet/`, as for a reader in a fresh clone who follows the pages in turn. Each must succeed; `invoke`'s output must be the JSON
/// response, and `get-vehicle` after `register-vehicle` must find the vehicle the first made.
#[test]
fn every_cargo_run_command_in_the_docs_runs() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("readme-commands-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::os::unix::fs::symlink(format!("{ROOT}/events"), dir.join("events")).unwrap();
    // The docs' own example files (a workload for `plan`), at the paths the pages give.
    std::os::unix::fs::symlink(format!("{ROOT}/docs"), dir.join("docs")).unwrap();
    let mut ran = Vec::new();
    let blocks: Vec<(String, String)> = in_reading_order()
        .into_iter()
        .flat_map(|Page { path, text }| {
            text.split("```sh\n")
                .skip(1)
                .map(|block| (path.clone(), block.to_owned()))
                .collect::<Vec<_>>()
        })
        .collect();
    for (page, block) in &blocks {
        let block = block.split("```").next().unwrap().replace("\\\n", " ");
        for line in block.lines() {
            let line = comment_start(line).map_or(line, |at| &line[..at]).trim();
            // Inside `$(...)` when the line exports what it prints.
            let line = line
                .split_once("$(")
                .map_or(line, |(_, inner)| inner.trim_end_matches([')', '"']));
            // The restore drill's copy, made as the guide says (SQLite's `VACUUM INTO`), with
            // the SQLite the engine links: the `fsck` lines after it check that copy, which a
            // `fsck` refuses to make up when it is missing.
            if let Some(rest) = line.strip_prefix("sqlite3 ") {
                let (file, sql) = rest.split_once(' ').unwrap();
                let sql = sql
                    .trim()
                    .trim_matches('"')
                    .replace("INTO '", &format!("INTO '{}/", dir.display()));
                rusqlite::Connection::open(dir.join(file))
                    .unwrap()
                    .execute_batch(&sql)
                    .unwrap_or_else(|e| panic!("{page}: `{line}`: {e}"));
                ran.push(line.to_owned());
                continue;
            }
            let Some(args) = line
                .strip_prefix("cargo run -q -- ")
                .or_else(|| line.strip_prefix("cargo run -- "))
            else {
                continue;
            };
            let (args, stdin) = match args.split_once(" < ") {
                Some((args, file)) => (args, Some(std::fs::read(dir.join(file.trim())).unwrap())),
                None => (args, None),
            };
            let args = args.replace("<patronId>", "p1");
            let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_singlet"));
            command
                .args(shell_words(&args))
                .current_dir(&dir)
                .env_remove("AWS_ENDPOINT_URL_DYNAMODB")
                .env_remove("TABLE_NAME")
                .env_remove("CURSOR_KEY")
                .env_remove("RUST_LOG")
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped());
            let mut child = command.spawn().unwrap();
            if let Some(stdin) = stdin {
                use std::io::Write;
                child.stdin.take().unwrap().write_all(&stdin).unwrap();
            }
            drop(child.stdin.take());
            let output = child.wait_with_output().unwrap();
            let stdout = String::from_utf8_lossy(&output.stdout);
            if !output.status.success() {
                // What the command printed, and the end of what it logged (a long command's
                // logs would bury the reason at the top of the panic).
                let stderr = String::from_utf8_lossy(&output.stderr);
                let lines: Vec<&str> = stderr.lines().collect();
                let tail = lines[lines.len().saturating_sub(20)..].join("\n");
                panic!(
                    "{page}: `{line}` exited {:?}\nstdout:\n{stdout}\nlast lines of stderr:\n{tail}",
                    output.status.code()
                );
            }
            if args.starts_with("invoke ") && !args.contains("--list") {
                let response: serde_json::Value = serde_json::from_str(&stdout)
                    .unwrap_or_else(|e| panic!("`{line}` printed no JSON ({e}): {stdout}"));
                if args.contains("get-vehicle") {
                    assert_eq!(response["statusCode"], 200, "`{line}`: {response}");
                }
            }
            ran.push(line.to_owned());
        }
    }
    assert!(ran.len() >= 7, "{ran:#?}");
    assert!(
        ran.iter().any(|l| l.contains("register-vehicle"))
            && ran.iter().any(|l| l.contains("get-vehicle")),
        "{ran:#?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
