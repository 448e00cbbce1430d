//! Every `curl` example in the README, run in order against the runner's front door, so the
//! README cannot drift from the code. Placeholders (`<id>`, `<patronId>`, `<copyId>`,
//! `<cursor>`, ...) are filled from earlier answers, `$TOKEN` is a token the runner accepts,
//! and a `# 201`-style comment line after a command is the status it must get (otherwise any
//! `2xx`).

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
async fn every_curl_example_in_the_readme_runs() {
    let api = Api::start(Mode::Http).await;
    let readme = std::fs::read_to_string(format!("{ROOT}/README.md")).unwrap();
    let mut filled: HashMap<String, String> = HashMap::new();
    let mut ran = 0;
    for block in readme.split("```sh\n").skip(1) {
        let block = block.split("```").next().unwrap().replace("\\\n", " ");
        let mut lines = block.lines().peekable();
        while let Some(line) = lines.next() {
            let line = line.trim();
            if !line.starts_with("curl ") {
                continue;
            }
            let promise = lines
                .next_if(|l| l.trim_start().starts_with('#'))
                .map(|l| l.trim().trim_start_matches('#').trim().to_owned());
            // A quoted body may go on over several lines.
            let mut command = line.to_owned();
            while command.matches('\'').count() % 2 == 1 {
                let next = lines.next().expect("a closing quote");
                command.push(' ');
                command.push_str(next.trim());
            }
            for (name, value) in &filled {
                command = command.replace(&format!("<{name}>"), value);
            }
            assert!(
                !command.contains("<"),
                "an unfilled placeholder in `{command}`"
            );
            let reply = run(&api, &command).await;
            match promise
                .as_deref()
                .and_then(|p| p.get(..3)?.parse::<u16>().ok())
            {
                Some(status) => assert_eq!(reply.status, status, "`{command}`: {reply:?}"),
                None => assert!((200..300).contains(&reply.status), "`{command}`: {reply:?}"),
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
            if let Some(cursor) = reply.body["nextCursor"].as_str() {
                filled.insert("cursor".into(), cursor.to_owned());
            }
            ran += 1;
        }
    }
    assert!(
        ran >= 34,
        "the README shows every route ({ran} examples ran)"
    );
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
