//! Nothing lost, nothing doubled (issue 11): reused keys and deleted ids, a poison item in every
//! open-loans shard, look-alike plates and hidden text, cursors across processes and through a
//! key rotation, and `TransactionConflict` on every transactional route. Stalls and lost
//! responses are in `faults.rs`.

use crate::both;
use crate::fixtures::{ISBN, copy, library, patron};
use crate::harness::{Api, Item, Mode, Reply, s};
use crate::process::{self, Running};
use aws_sdk_dynamodb::types::AttributeValue;
use serde_json::{Value, json};
use singlet_functions::Ctx;
use singlet_functions::cursor::CursorKeys;
use std::process::Command;
use std::time::Duration;

fn vehicle(plate: &str) -> Value {
    json!({"plate": plate, "chassis": format!("CH-{plate}"), "depot": "north"})
}

fn account(name: &str) -> Value {
    json!({"email": format!("{name}@example.com"), "username": name})
}

fn patron_body(card: &str) -> Value {
    json!({"cardNumber": card, "firstName": "Ada", "lastName": "Lovelace",
        "email": format!("{card}@example.com"), "membershipTier": "premium"})
}

async fn post_with_key(api: &Api, path: &str, key: &str, body: Value) -> Reply {
    api.call("POST", path.to_owned())
        .header("idempotency-key", key)
        .json(body)
        .send()
        .await
}

/// Every item, in key order: two snapshots are equal only if nothing was written.
async fn snapshot(api: &Api) -> Vec<Item> {
    let mut items = api.items().await;
    items.sort_by(|a, b| (s(a, "PK"), s(a, "SK")).cmp(&(s(b, "PK"), s(b, "SK"))));
    items
}

// ---------------------------------------------------------------------------------------------
// An id derived from a key is held once, whatever becomes of the key's record.

both!(
    a_reused_key_never_makes_a_second_holder_of_its_id,
    a_deleted_entitys_id_never_comes_back,
    look_alike_plates_and_chassis_numbers_are_refused,
    hidden_characters_are_refused_in_every_free_text_field,
    tabs_line_breaks_and_joiners_are_text_and_kept,
);

/// Tab, line feed and carriage return, and the zero-width joiner and non-joiner (emoji
/// sequences, Persian, Indic scripts), are text: stored and answered exactly as sent.
async fn tabs_line_breaks_and_joiners_are_text_and_kept(api: Api) {
    let title = "\u{1F469}\u{200D}\u{1F4BB} \u{0645}\u{06CC}\u{200C}\u{062E}\u{0648}\u{0627}\u{0647}\u{0645}";
    let description = "line one\r\nline two\n\tindented";
    let mut book = crate::fixtures::book_body("9780306406157");
    book["title"] = title.into();
    book["description"] = description.into();
    let created = api.post("/books", book).await;
    assert_eq!(created.status, 201, "{created:?}");
    assert_eq!(created.body["title"], title);
    assert_eq!(created.body["description"], description);
    let read = api.get("/books/9780306406157").await;
    assert_eq!(read.body["title"], title);
    assert_eq!(read.body["description"], description);
    let stored = api.item("BOOK#9780306406157", "BOOK#9780306406157").await;
    let stored = stored.expect("the book is stored");
    assert_eq!(s(&stored, "title"), title);
    assert_eq!(s(&stored, "description"), description);
}

/// Every route that derives its entity's id from the key: after the key's record has expired,
/// the same key at another branch or with another body is `422` and writes nothing, so no id
/// ever has two holders.
async fn a_reused_key_never_makes_a_second_holder_of_its_id(api: Api) {
    library(&api).await;
    let borrower = patron(&api, "central", "borrower", "premium").await;
    let copies = [copy(&api, "central").await, copy(&api, "central").await];
    let loan =
        |copy_id: &str| json!({"patronId": borrower, "branchId": "central", "copyId": copy_id});
    let cases = [
        (
            "/vehicles",
            vehicle("KA-1"),
            "/vehicles",
            vehicle("KA-2"),
            "vehicleId",
        ),
        (
            "/accounts",
            account("ada"),
            "/accounts",
            account("grace"),
            "accountId",
        ),
        (
            "/branches/central/patrons",
            patron_body("card-1"),
            "/branches/east/patrons",
            patron_body("card-2"),
            "patronId",
        ),
        (
            "/branches/central/copies",
            json!({"isbn": ISBN, "condition": "good"}),
            "/branches/east/copies",
            json!({"isbn": ISBN, "condition": "fair"}),
            "copyId",
        ),
        (
            "/checkouts",
            loan(&copies[0]),
            "/checkouts",
            loan(&copies[1]),
            "checkoutId",
        ),
    ];
    for (path, body, other_path, other, id_field) in cases {
        let first = post_with_key(&api, path, "reused", body).await;
        assert_eq!(first.status, 201, "{path}: {first:?}");
        let id = first.body[id_field].as_str().unwrap().to_owned();
        api.forget_idempotency_keys().await;
        let before = snapshot(&api).await;
        let reused = post_with_key(&api, other_path, "reused", other).await;
        reused.assert_problem(422, &[]);
        assert!(
            reused.body["detail"].as_str().unwrap().contains("new key"),
            "{reused:?}"
        );
        assert_eq!(
            snapshot(&api).await,
            before,
            "{other_path}: nothing written"
        );
        assert!(
            api.item(&format!("ID#{id}"), &format!("ID#{id}"))
                .await
                .is_some()
        );
    }
}

/// An entity deleted (a retired vehicle, a deleted account, a removed patron, a returned loan):
/// the key that made it, sent again with the same body after its record expired, never brings
/// its id back.
async fn a_deleted_entitys_id_never_comes_back(api: Api) {
    library(&api).await;
    let borrower = patron(&api, "central", "borrower", "premium").await;
    let copy_id = copy(&api, "central").await;
    let cases = [
        ("/vehicles", vehicle("GONE-1"), "vehicleId"),
        ("/accounts", account("gone"), "accountId"),
        (
            "/branches/central/patrons",
            patron_body("gone-1"),
            "patronId",
        ),
        (
            "/checkouts",
            json!({"patronId": borrower, "branchId": "central", "copyId": copy_id}),
            "checkoutId",
        ),
    ];
    for (path, body, id_field) in &cases {
        let first = post_with_key(&api, path, "gone", body.clone()).await;
        assert_eq!(first.status, 201, "{path}: {first:?}");
        let id = first.body[id_field].as_str().unwrap();
        let removed = match *id_field {
            "vehicleId" => api.delete(format!("/vehicles/{id}")).await,
            "accountId" => api.delete(format!("/accounts/{id}")).await,
            "patronId" => api.delete(format!("/patrons/{id}")).await,
            _ => {
                api.call("POST", format!("/patrons/{borrower}/checkouts/{id}/return"))
                    .send()
                    .await
            }
        };
        assert!((200..300).contains(&removed.status), "{path}: {removed:?}");
    }
    api.forget_idempotency_keys().await;
    // A record expires a day after its request, long after DynamoDB has forgotten the request's
    // `ClientRequestToken` (10 minutes). Within the same second the retry would be the same
    // transaction byte for byte, which the engine would answer from its token cache: the next
    // second, it is not.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let before = snapshot(&api).await;
    for (path, body, _) in cases {
        let again = post_with_key(&api, path, "gone", body).await;
        again.assert_problem(422, &[]);
        assert_eq!(
            snapshot(&api).await,
            before,
            "{path}: the id did not come back"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Look-alikes and hidden text.

/// Cyrillic, Greek and Arabic-Indic look-alikes of a plate or chassis number are `400 invalid`
/// on registration and on a plate change; full-width forms fold to the ASCII they show and meet
/// its holder (`409 taken`). Nothing is written either way.
async fn look_alike_plates_and_chassis_numbers_are_refused(api: Api) {
    let holder = api
        .post(
            "/vehicles",
            json!({"plate": "KA19XT", "chassis": "WVW19XT", "depot": "north"}),
        )
        .await;
    assert_eq!(holder.status, 201);
    let other = api.post("/vehicles", vehicle("OTHER-1")).await;
    let other_id = other.body["vehicleId"].as_str().unwrap().to_owned();
    // (plate, chassis, code): the holder's plate and chassis number as they read, in another
    // script or width.
    let looks_alike = [
        ("КА19ХТ", "WVW19ХТ", "invalid"), // Cyrillic Ka, A, Kha, Te
        ("ΚΑ19ΧΤ", "WVW19ΧΤ", "invalid"), // Greek Kappa, Alpha, Chi, Tau
        ("KA١٩XT", "WVW١٩XT", "invalid"), // Arabic-Indic digits
        ("ＫＡ１９ＸＴ", "ＷＶＷ１９ＸＴ", "taken"), // full width: folds to what is held
    ];
    let before = snapshot(&api).await;
    for (plate, chassis, code) in looks_alike {
        let status = if code == "taken" { 409 } else { 400 };
        api.post(
            "/vehicles",
            json!({"plate": plate, "chassis": "FRESH-1", "depot": "north"}),
        )
        .await
        .assert_problem(status, &[("plate", code)]);
        api.post(
            "/vehicles",
            json!({"plate": "FRESH-1", "chassis": chassis, "depot": "north"}),
        )
        .await
        .assert_problem(status, &[("chassis", code)]);
        api.put(
            format!("/vehicles/{other_id}/plate"),
            json!({"plate": plate}),
        )
        .await
        .assert_problem(status, &[("plate", code)]);
    }
    assert_eq!(snapshot(&api).await, before, "nothing written");
}

/// Every kind of character the contract refuses (C0 and C1 controls, DEL, the bidi marks,
/// embeddings, overrides and isolates) in every free-text field of every route that takes one
/// (and in the emails and usernames, which become keys): `400` naming the field, and nothing
/// written. (A zero-width space, U+200B, is a format character the contract does not list among
/// the refused ones: it is stored as sent; so are the joiners, below.)
async fn hidden_characters_are_refused_in_every_free_text_field(api: Api) {
    library(&api).await;
    let account = api.post("/accounts", account("owner")).await;
    let account_id = account.body["accountId"].as_str().unwrap().to_owned();
    assert_eq!(
        api.post("/resources", json!({"resourceId": "r1", "status": "open"}))
            .await
            .status,
        201
    );
    let branch = json!({"branchId": "north", "name": "North", "address": "2 Road", "city": "Springfield",
        "phone": "1", "openingHours": "always"});
    let book = json!({"isbn": "080442957X", "title": "T", "author": "A", "publisher": "P",
        "publishYear": 2000, "genre": "G", "description": "D", "pageCount": 10});
    // (method, path, a valid body, the fields to spoil one at a time)
    let routes: [(&'static str, String, Value, &[&str]); 8] = [
        (
            "POST",
            "/branches".into(),
            branch,
            &["name", "address", "city", "phone", "openingHours"],
        ),
        (
            "POST",
            "/books".into(),
            book,
            &["title", "author", "publisher", "genre", "description"],
        ),
        (
            "PATCH",
            format!("/books/{ISBN}"),
            json!({"title": "T", "author": "A", "publisher": "P", "genre": "G", "description": "D"}),
            &["title", "author", "publisher", "genre", "description"],
        ),
        (
            "POST",
            "/branches/central/patrons".into(),
            patron_body("card-9"),
            &["firstName", "lastName", "email"],
        ),
        (
            "POST",
            "/accounts".into(),
            json!({"email": "new@example.com", "username": "newbie", "displayName": "New"}),
            &["displayName", "email", "username"],
        ),
        (
            "PUT",
            format!("/accounts/{account_id}/email"),
            json!({"email": "moved@example.com"}),
            &["email"],
        ),
        ("POST", "/vehicles".into(), vehicle("FRESH-2"), &["depot"]),
        (
            "PATCH",
            "/resources/r1".into(),
            json!({"status": "closed", "action": "close"}),
            &["action"],
        ),
    ];
    let before = snapshot(&api).await;
    for hidden in [
        '\u{0007}', '\u{007F}', '\u{0085}', '\u{009F}', '\u{061C}', '\u{200E}', '\u{200F}',
        '\u{202A}', '\u{202E}', '\u{2066}', '\u{2069}',
    ] {
        for (method, path, body, fields) in &routes {
            for field in *fields {
                let mut spoiled = body.clone();
                let text = spoiled[*field].as_str().unwrap();
                // In the middle, where trimming cannot remove it.
                let (head, tail) = text.split_at(text.find('@').unwrap_or(1).min(text.len()));
                spoiled[*field] = format!("{head}{hidden}gnp.exe{tail}").into();
                let mut call = api.call(method, path.clone()).json(spoiled);
                if path.starts_with("/resources") {
                    call = call.header("if-match", "\"1\"");
                }
                let reply = call.send().await;
                let label = format!("{method} {path} {field} U+{:04X}", hidden as u32);
                assert_eq!(reply.status, 400, "{label}: {reply:?}");
                reply.assert_problem(400, &[(*field, "invalid")]);
            }
        }
    }
    assert_eq!(snapshot(&api).await, before, "nothing written");
}

// ---------------------------------------------------------------------------------------------
// mark-overdue past poison items.

/// The `singlet` binary on the engine at `endpoint`, with `env` set.
fn singlet(endpoint: &str, env: &[(&str, &str)]) -> Command {
    let mut command = process::singlet();
    command
        .args(["--endpoint", endpoint])
        .envs(env.iter().copied());
    command
}

/// An API on an engine whose endpoint other processes can use too (handlers called directly).
async fn shared_engine() -> (Api, String) {
    let (client, endpoint) = singlet::serve::engine::start_in_memory("singlet").await;
    let api = Api::start(Mode::Direct).await;
    let api = api.with_ctx(Ctx::new(
        client,
        "singlet",
        CursorKeys::new(singlet_functions::cursor::LOCAL_SECRET),
    ));
    (api, endpoint)
}

/// An undecodable item in every one of the 16 open-loans shards, all long due: one run of the
/// real `mark-overdue` (the runner's `invoke`, its log on stderr) marks every real loan due,
/// counts the 16 as `unreadable`, and logs each by its key and nothing else.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_poison_item_in_every_open_loans_shard_blocks_no_loan() {
    let (api, endpoint) = shared_engine().await;
    library(&api).await;
    let borrower = patron(&api, "central", "borrower", "premium").await;
    let mut loans = Vec::new();
    for _ in 0..3 {
        loans.push(crate::fixtures::lend(&api, &borrower, "central").await);
    }
    for shard in 0..singlet_shared::keys::OPEN_LOAN_SHARDS {
        let poison = Item::from([
            ("PK".into(), AttributeValue::S("PATRON#poison".into())),
            (
                "SK".into(),
                AttributeValue::S(format!("CHECKOUT#poison-{shard}")),
            ),
            (
                "GSI1PK".into(),
                AttributeValue::S(format!("OPEN#{shard:02}")),
            ),
            (
                "GSI1SK".into(),
                AttributeValue::S(format!("2000-01-01T00:00:00Z#poison-{shard}")),
            ),
            // Personal data where a loan's status belongs: it must not reach the log.
            (
                "status".into(),
                AttributeValue::S("Mallory Secretname".into()),
            ),
        ]);
        api.ctx
            .db
            .put_item()
            .table_name(&*api.ctx.table)
            .set_item(Some(poison))
            .send()
            .await
            .unwrap();
    }
    let due =
        singlet_functions::clock::iso(singlet_functions::clock::now() + time::Duration::days(60));
    // The repository's sample event, whose `time` is in the past: two months ahead, `--clock`
    // fires it then too, or the marker would mark as of the event's time (nothing).
    let event = concat!(env!("CARGO_MANIFEST_DIR"), "/events/mark-overdue.json");
    let output = tokio::task::spawn_blocking(move || {
        singlet(&endpoint, &[])
            .args(["invoke", "mark-overdue", "--clock", &due, "--event"])
            .arg(event)
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let log = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{log}");
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["marked"], 3, "{report}");
    assert_eq!(report["unreadable"], 16, "{report}");
    assert_eq!(report["complete"], true, "{report}");
    let skips: Vec<&str> = log
        .lines()
        .filter(|line| line.contains("skipped an item it cannot read"))
        .collect();
    assert_eq!(skips.len(), 16, "{log}");
    for shard in 0..singlet_shared::keys::OPEN_LOAN_SHARDS {
        assert!(
            skips
                .iter()
                .any(|l| l.contains(&format!("CHECKOUT#poison-{shard}\""))),
            "shard {shard} not logged by its key: {log}"
        );
    }
    assert!(
        !log.contains("Secretname"),
        "personal data in the log: {log}"
    );
    // Every real loan is in the overdue indexes; every poison item is where it was.
    for loan in &loans {
        let item = api
            .item(
                &format!("PATRON#{borrower}"),
                &format!("CHECKOUT#{}", loan["checkoutId"].as_str().unwrap()),
            )
            .await
            .unwrap();
        assert!(
            item.contains_key("GSI3PK") && !item.contains_key("GSI1PK"),
            "{item:?}"
        );
    }
    assert_eq!(api.items_with_pk_prefix("PATRON#poison").await.len(), 16);
}

// ---------------------------------------------------------------------------------------------
// Cursors across processes and through a key rotation.

const KEY_A: &str = "cursor-key-a-0123456789abcdefghijklmnop";
const KEY_B: &str = "cursor-key-b-0123456789abcdefghijklmnop";

/// A runner serving the API on `endpoint`'s table with `env`.
fn runner(endpoint: &str, env: &[(&str, &str)]) -> Running {
    let mut command = singlet(endpoint, env);
    command.args(["--mark-overdue-every", "0"]);
    process::serve(command)
}

async fn get(base: &str, path: &str) -> (u16, Value) {
    let token = crate::harness::token("tester", &crate::harness::all_scopes(), &[]);
    let response = reqwest::Client::new()
        .get(format!("{base}{path}"))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    (response.status().as_u16(), response.json().await.unwrap())
}

/// A cursor from one runner is good on another with the same `CURSOR_KEY`; after a rotation it
/// stays good while `CURSOR_KEY_PREVIOUS_UNTIL` is ahead, and is `400 cursor invalid` after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cursors_cross_processes_and_survive_a_rotation_within_its_grace() {
    let (api, endpoint) = shared_engine().await;
    for branch in ["a-branch", "b-branch", "c-branch"] {
        crate::fixtures::branch(&api, branch).await;
    }
    let clock = singlet_functions::clock::now();
    let later = singlet_functions::clock::iso(clock + time::Duration::hours(1));
    let earlier = singlet_functions::clock::iso(clock - time::Duration::hours(1));
    let rotated = |until: &str| {
        vec![
            ("CURSOR_KEY", KEY_B.to_owned()),
            ("CURSOR_KEY_PREVIOUS", KEY_A.to_owned()),
            ("CURSOR_KEY_PREVIOUS_UNTIL", until.to_owned()),
        ]
    };
    let envs = [
        vec![("CURSOR_KEY", KEY_A.to_owned())],
        vec![("CURSOR_KEY", KEY_A.to_owned())],
        rotated(&later),
        rotated(&earlier),
        vec![("CURSOR_KEY", KEY_B.to_owned())],
    ];
    let runners = futures::future::join_all(envs.iter().map(|env| {
        let (env, endpoint) = (env.clone(), endpoint.clone());
        tokio::task::spawn_blocking(move || {
            let env: Vec<(&str, &str)> = env.iter().map(|(n, v)| (*n, v.as_str())).collect();
            runner(&endpoint, &env)
        })
    }))
    .await
    .into_iter()
    .map(Result::unwrap)
    .collect::<Vec<_>>();
    let [a, b, within, after, unrelated] = &runners[..] else {
        unreachable!()
    };
    let (status, first) = get(&a.api, "/branches?limit=1").await;
    assert_eq!(status, 200, "{first}");
    let cursor = first["nextCursor"].as_str().unwrap().to_owned();
    let next = format!("/branches?limit=1&cursor={cursor}");
    let (status, page) = get(&b.api, &next).await;
    assert_eq!(status, 200, "another process, the same key: {page}");
    assert_eq!(page["items"].as_array().unwrap().len(), 1);
    assert_ne!(page["items"][0]["branchId"], first["items"][0]["branchId"]);
    let (status, rotated_page) = get(&within.api, &next).await;
    assert_eq!(
        (status, &rotated_page["items"]),
        (200, &page["items"]),
        "within the grace period (its next cursor signed with the new key)"
    );
    for (label, base) in [
        ("after the grace period", &after.api),
        ("another key", &unrelated.api),
    ] {
        let (status, problem) = get(base, &next).await;
        assert_eq!(status, 400, "{label}: {problem}");
        let errors: Vec<(&str, &str)> = problem["errors"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| (e["field"].as_str().unwrap(), e["code"].as_str().unwrap()))
            .collect();
        assert_eq!(errors, [("cursor", "invalid")], "{label}: {problem}");
    }
}

/// A function that does not hold the server's keys starts with neither the secret nor
/// `CURSOR_KEY` (it is not granted them), and still needs its table.
#[test]
fn a_lambda_that_holds_no_server_keys_starts_without_them() {
    let only_table = |name: &str| (name == "TABLE_NAME").then(|| "singlet".to_owned());
    assert!(Ctx::without_server_keys(only_table).is_ok());
    assert!(
        Ctx::from_vars(only_table).is_err(),
        "one that holds them does not"
    );
    let Err(reason) = Ctx::without_server_keys(|_: &str| None) else {
        panic!("started without a table")
    };
    assert!(reason.contains("TABLE_NAME is not set"), "{reason}");
}

/// On the Lambda path a missing or short cursor key stops the cold start with a clear reason.
#[test]
fn a_lambda_without_a_cursor_key_does_not_start() {
    let env = |vars: &'static [(&'static str, &'static str)]| {
        move |name: &str| {
            vars.iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| (*v).to_owned())
        }
    };
    for vars in [
        &[("TABLE_NAME", "singlet")][..],
        &[("TABLE_NAME", "singlet"), ("CURSOR_KEY", "short")][..],
    ] {
        let Err(reason) = Ctx::from_vars(env(vars)) else {
            panic!("started with {vars:?}")
        };
        assert!(
            reason.contains("CURSOR_KEY is unset or shorter than 32 bytes"),
            "{reason}"
        );
    }
    let Err(reason) = Ctx::from_vars(env(&[("CURSOR_KEY", KEY_A)])) else {
        panic!("started without a table")
    };
    assert!(reason.contains("TABLE_NAME is not set"), "{reason}");
    let Err(reason) = Ctx::from_vars(env(&[
        ("TABLE_NAME", "singlet"),
        ("CURSOR_KEY", KEY_B),
        ("CURSOR_KEY_PREVIOUS", KEY_A),
    ])) else {
        panic!("started with a previous key and no end to its grace")
    };
    assert!(reason.contains("CURSOR_KEY_PREVIOUS_UNTIL"), "{reason}");
    assert!(Ctx::from_vars(env(&[("TABLE_NAME", "singlet"), ("CURSOR_KEY", KEY_A)])).is_ok());
}

/// The keys published with the source (the runner's, `events/env.json`'s) stop a Lambda's cold
/// start, current or previous; `sam local invoke` (which sets `AWS_SAM_LOCAL`) may use them.
#[test]
fn a_lambda_refuses_the_published_local_keys() {
    use singlet_functions::cursor::PUBLISHED_KEYS;
    assert!(PUBLISHED_KEYS.contains(&singlet_functions::cursor::LOCAL_SECRET));
    let env_json =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/events/env.json")).unwrap();
    let env_json: serde_json::Value = serde_json::from_str(&env_json).unwrap();
    for variables in env_json.as_object().unwrap().values() {
        let key = variables["CURSOR_KEY"].as_str().unwrap();
        assert!(PUBLISHED_KEYS.contains(&key), "{key} is published");
    }
    for key in PUBLISHED_KEYS {
        let vars = [("TABLE_NAME", "singlet"), ("CURSOR_KEY", key)];
        let var = |name: &str| {
            vars.iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| (*v).to_owned())
        };
        let Err(reason) = Ctx::from_vars(var) else {
            panic!("started with the published {key}")
        };
        assert!(reason.contains("published"), "{reason}");
        let sam_local = |name: &str| match name {
            "AWS_SAM_LOCAL" => Some("true".to_owned()),
            other => var(other),
        };
        assert!(Ctx::from_vars(sam_local).is_ok(), "sam local may use {key}");
    }
    let previous = [
        ("TABLE_NAME", "singlet"),
        ("CURSOR_KEY", KEY_A),
        ("CURSOR_KEY_PREVIOUS", PUBLISHED_KEYS[0]),
        ("CURSOR_KEY_PREVIOUS_UNTIL", "2099-01-01T00:00:00Z"),
    ];
    let var = |name: &str| {
        previous
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| (*v).to_owned())
    };
    assert!(Ctx::from_vars(var).is_err(), "nor as the previous key");
}

/// On AWS the server's keys are read once per cold start from the Secrets Manager secret
/// `SERVER_SECRET_ARN` names (here a Secrets Manager on a real socket, answering as the service
/// does): the keys it holds are the ones the context uses; a published key in it stops the start
/// as in a variable; a missing secret, an unreachable service and a value that is not the JSON
/// object of keys each stop it with a sentence that names the secret and shows none of its value.
/// The request is signed with SigV4 for Secrets Manager; a failure on the service's side or a
/// throttled read is tried again, three times in all, and a refusal is not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_secret_is_read_from_secrets_manager_at_cold_start() {
    use aws_credential_types::Credentials;
    use axum::http::{HeaderMap, StatusCode};
    use singlet_functions::cursor::PUBLISHED_KEYS;
    use singlet_functions::ids::{Caller, IdKey};
    use singlet_functions::secret::{SecretsManager, ServerSecret};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    let requests = Arc::new(AtomicUsize::new(0));
    let counted = requests.clone();
    let service = axum::Router::new().route(
        "/",
        axum::routing::post(move |headers: HeaderMap, body: String| {
            let counted = counted.clone();
            async move {
                let seen = counted.fetch_add(1, Ordering::SeqCst);
                assert_eq!(headers["x-amz-target"], "secretsmanager.GetSecretValue");
                // Signed as the SDK signs: SigV4, for Secrets Manager in the region, over the
                // headers that say what is asked.
                let authorization = headers["authorization"].to_str().unwrap();
                assert!(
                    authorization.starts_with("AWS4-HMAC-SHA256 Credential=local/")
                        && authorization.contains("/us-east-1/secretsmanager/aws4_request")
                        && authorization.contains(
                            "SignedHeaders=content-type;host;x-amz-date;x-amz-target"
                        ),
                    "{authorization}"
                );
                let request: Value = serde_json::from_str(&body).unwrap();
                let value = |string: String| json!({"ARN": "arn:aws:secretsmanager:us-east-1:1:secret:x", "SecretString": string});
                let (status, answer) = match request["SecretId"].as_str().unwrap() {
                    "singlet/server" => (StatusCode::OK, value(json!({"CURSOR_KEY": KEY_A}).to_string())),
                    "singlet/rotated" => (
                        StatusCode::OK,
                        value(json!({"CURSOR_KEY": KEY_B, "OWNER_KEY": KEY_A}).to_string()),
                    ),
                    "singlet/published" => (
                        StatusCode::OK,
                        value(json!({"CURSOR_KEY": PUBLISHED_KEYS[0]}).to_string()),
                    ),
                    "singlet/plain" => (StatusCode::OK, value(format!("{KEY_B} as plain text"))),
                    "singlet/binary" => (StatusCode::OK, json!({"SecretBinary": "AAAA"})),
                    // Fails once (the request after the five before it), then answers.
                    "singlet/flaky" if seen == 5 => (
                        StatusCode::INTERNAL_SERVER_ERROR,
                        json!({"__type": "InternalServiceError", "message": "try again"}),
                    ),
                    "singlet/flaky" => (StatusCode::OK, value(json!({"CURSOR_KEY": KEY_A}).to_string())),
                    "singlet/throttled" => (
                        StatusCode::BAD_REQUEST,
                        json!({"__type": "ThrottlingException", "message": "Rate exceeded"}),
                    ),
                    _ => (
                        StatusCode::BAD_REQUEST,
                        json!({"__type": "ResourceNotFoundException",
                               "message": "Secrets Manager can't find the specified secret."}),
                    ),
                };
                (
                    status,
                    [("content-type", "application/x-amz-json-1.1")],
                    answer.to_string(),
                )
            }
        }),
    );
    let (endpoint, _server) = crate::harness::serve_on_loopback(service).await;
    let client_on = |endpoint: &str| {
        SecretsManager::new(
            endpoint,
            "us-east-1",
            Credentials::new("local", "local", None, None, "test"),
            singlet_functions::context::lambda_connector(),
        )
    };
    let client = client_on(&endpoint);
    let table = |name: &str| (name == "TABLE_NAME").then(|| "singlet".to_owned());

    // The keys in the secret are the context's: ids derive under them, and no variable is needed.
    let secret = ServerSecret::fetch(&client, "singlet/server")
        .await
        .unwrap();
    let ctx = Ctx::from_secret_and_vars(&secret, table).unwrap();
    let caller = Caller {
        issuer: "i",
        subject: "s",
    };
    let key = singlet_shared::Id::parse("key-1").unwrap();
    assert_eq!(
        ctx.ids.uuid("register-vehicle", caller, &key),
        IdKey::derived_from(KEY_A.as_bytes()).uuid("register-vehicle", caller, &key),
    );
    // A field of the secret wins over a variable of the same name.
    let also_variable = |name: &str| match name {
        "CURSOR_KEY" => Some(KEY_B.to_owned()),
        other => table(other),
    };
    let ctx = Ctx::from_secret_and_vars(&secret, also_variable).unwrap();
    assert_eq!(
        ctx.ids.uuid("register-vehicle", caller, &key),
        IdKey::derived_from(KEY_A.as_bytes()).uuid("register-vehicle", caller, &key),
    );

    let published = ServerSecret::fetch(&client, "singlet/published")
        .await
        .unwrap();
    let Err(reason) = Ctx::from_secret_and_vars(&published, table) else {
        panic!("started with a published key from the secret")
    };
    assert!(reason.contains("published"), "{reason}");

    for (id, expected) in [
        ("singlet/missing", "ResourceNotFoundException"),
        ("singlet/binary", "holds no SecretString"),
        ("singlet/plain", "is not a JSON object"),
    ] {
        let Err(reason) = ServerSecret::fetch(&client, id).await else {
            panic!("{id} was read")
        };
        assert!(reason.contains(id) && reason.contains(expected), "{reason}");
        assert!(
            !reason.contains(KEY_B),
            "the value is never shown: {reason}"
        );
    }
    assert_eq!(
        requests.load(Ordering::SeqCst),
        5,
        "one GetSecretValue per read"
    );

    // A failure that may pass is tried again (as the SDK's standard retries would), three times
    // in all; one that cannot is not (above).
    ServerSecret::fetch(&client, "singlet/flaky")
        .await
        .expect("read on the second attempt");
    assert_eq!(requests.load(Ordering::SeqCst), 7);
    let Err(reason) = ServerSecret::fetch(&client, "singlet/throttled").await else {
        panic!("a throttled read succeeded")
    };
    assert!(reason.contains("ThrottlingException"), "{reason}");
    assert_eq!(requests.load(Ordering::SeqCst), 10);

    // After a rotation the secret keeps the replaced key as `OWNER_KEY`: subjects' one-account
    // locks stay keyed under it, while ids derive under the new key.
    let rotated = ServerSecret::fetch(&client, "singlet/rotated")
        .await
        .unwrap();
    let ctx = Ctx::from_secret_and_vars(&rotated, table).unwrap();
    assert_eq!(
        ctx.owners.uuid("owner", caller, &key),
        IdKey::derived_from(KEY_A.as_bytes()).uuid("owner", caller, &key),
    );
    assert_eq!(
        ctx.ids.uuid("register-vehicle", caller, &key),
        IdKey::derived_from(KEY_B.as_bytes()).uuid("register-vehicle", caller, &key),
    );

    // Nothing listens: the cold start stops, saying where it looked.
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", listener.local_addr().unwrap())
    };
    let Err(reason) = ServerSecret::fetch(&client_on(&closed), "singlet/server").await else {
        panic!("read a secret from a closed port")
    };
    assert!(
        reason.contains("cannot read the server secret singlet/server"),
        "{reason}"
    );
}

// ---------------------------------------------------------------------------------------------
// TransactionConflict, through the SDK's own HTTP seam.

mod conflicts {
    use aws_smithy_runtime_api::client::http::{
        HttpClient, HttpConnector, HttpConnectorFuture, HttpConnectorSettings, SharedHttpClient,
        SharedHttpConnector,
    };
    use aws_smithy_runtime_api::client::orchestrator::{HttpRequest, HttpResponse};
    use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
    use aws_smithy_runtime_api::http::StatusCode;
    use aws_smithy_runtime_api::shared::IntoShared;
    use aws_smithy_types::body::SdkBody;
    use serde_json::{Value, json};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// The SDK's real HTTP client, but a `TransactWriteItems` is cancelled for
    /// `TransactionConflict` (as DynamoDB answers when another transaction holds one of its
    /// items) while `conflicts` lasts; everything else, and every later transaction, reaches the
    /// real engine. `transactions` counts the transactions sent.
    #[derive(Debug, Clone, Default)]
    pub struct Conflicting {
        pub conflicts: Arc<AtomicUsize>,
        pub transactions: Arc<AtomicUsize>,
    }

    #[derive(Debug)]
    struct Connector {
        real: SharedHttpConnector,
        seam: Conflicting,
    }

    impl HttpClient for Conflicting {
        fn http_connector(
            &self,
            settings: &HttpConnectorSettings,
            components: &RuntimeComponents,
        ) -> SharedHttpConnector {
            let real: SharedHttpClient = singlet_functions::context::https_client();
            Connector {
                real: real.http_connector(settings, components),
                seam: self.clone(),
            }
            .into_shared()
        }
    }

    impl HttpConnector for Connector {
        fn call(&self, request: HttpRequest) -> HttpConnectorFuture {
            let transaction = request
                .headers()
                .get("x-amz-target")
                .is_some_and(|t| t.ends_with("TransactWriteItems"));
            if !transaction {
                return self.real.call(request);
            }
            self.seam.transactions.fetch_add(1, Ordering::SeqCst);
            let conflict = self
                .seam
                .conflicts
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok();
            if !conflict {
                return self.real.call(request);
            }
            // One reason per part, as DynamoDB gives them: the first part conflicted.
            let parts = request
                .body()
                .bytes()
                .and_then(|b| serde_json::from_slice::<Value>(b).ok())
                .and_then(|b| b["TransactItems"].as_array().map(Vec::len))
                .unwrap_or(1);
            let reasons: Vec<Value> = (0..parts)
                .map(|i| match i {
                    0 => json!({"Code": "TransactionConflict", "Message": "Transaction is ongoing for the item"}),
                    _ => json!({"Code": "None"}),
                })
                .collect();
            let body = json!({
                "__type": "com.amazonaws.dynamodb.v20120810#TransactionCanceledException",
                "Message": "Transaction cancelled, please refer cancellation reasons for specific reasons",
                "CancellationReasons": reasons,
            });
            let mut response = HttpResponse::new(
                StatusCode::try_from(400u16).unwrap(),
                SdkBody::from(body.to_string()),
            );
            response
                .headers_mut()
                .insert("content-type", "application/x-amz-json-1.0");
            HttpConnectorFuture::ready(Ok(response))
        }
    }
}

/// Every route that commits a `TransactWriteItems`: conflicting on every attempt, it answers
/// `503` with `retry-after` after [`CONFLICT_ATTEMPTS`] attempts and writes nothing (never a
/// `409` or `412` the data does not support); conflicting on all but the last, it gives the
/// real answer and its effect.
///
/// [`CONFLICT_ATTEMPTS`]: singlet_functions::store::CONFLICT_ATTEMPTS
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transaction_conflicts_are_retried_then_503_on_every_transactional_route() {
    use singlet_functions::store::CONFLICT_ATTEMPTS;
    use std::sync::atomic::Ordering;
    let (engine_client, _) = singlet::serve::engine::start_in_memory("singlet").await;
    let seam = conflicts::Conflicting::default();
    let client = aws_sdk_dynamodb::Client::from_conf(
        engine_client
            .config()
            .to_builder()
            .http_client(seam.clone())
            .build(),
    );
    let api = Api::start(Mode::Direct).await;
    let api = api.with_ctx(Ctx::new(client, "singlet", CursorKeys::random()));

    library(&api).await;
    let id = |reply: Reply, field: &str| reply.body[field].as_str().unwrap().to_owned();
    let plated = id(api.post("/vehicles", vehicle("CONF-1")).await, "vehicleId");
    let retiring = id(api.post("/vehicles", vehicle("CONF-2")).await, "vehicleId");
    let emailed = id(api.post("/accounts", account("conf1")).await, "accountId");
    let renamed = id(api.post("/accounts", account("conf2")).await, "accountId");
    let deleted = id(api.post("/accounts", account("conf3")).await, "accountId");
    assert_eq!(
        api.post("/resources", json!({"resourceId": "r1", "status": "open"}))
            .await
            .status,
        201
    );
    let carded = patron(&api, "central", "conf-card", "standard").await;
    let removed = patron(&api, "central", "conf-rm", "standard").await;
    let borrower = patron(&api, "central", "conf-borrower", "premium").await;
    let lent = copy(&api, "central").await;
    let returning = crate::fixtures::lend(&api, &borrower, "central").await;
    let renewing = crate::fixtures::lend(&api, &borrower, "central").await;
    let loan = |loan: &Value, action: &str| {
        format!(
            "/patrons/{borrower}/checkouts/{}/{action}",
            loan["checkoutId"].as_str().unwrap()
        )
    };

    // (method, path, body, success status)
    let routes: Vec<(&'static str, String, Option<Value>, u16)> = vec![
        ("POST", "/vehicles".into(), Some(vehicle("CONF-3")), 201),
        (
            "PUT",
            format!("/vehicles/{plated}/plate"),
            Some(json!({"plate": "CONF-9"})),
            200,
        ),
        ("DELETE", format!("/vehicles/{retiring}"), None, 204),
        ("POST", "/accounts".into(), Some(account("conf4")), 201),
        (
            "PUT",
            format!("/accounts/{emailed}/email"),
            Some(json!({"email": "moved@example.com"})),
            200,
        ),
        (
            "PUT",
            format!("/accounts/{renamed}/username"),
            Some(json!({"username": "moved"})),
            200,
        ),
        ("DELETE", format!("/accounts/{deleted}"), None, 204),
        (
            "POST",
            "/resources".into(),
            Some(json!({"resourceId": "r2", "status": "open"})),
            201,
        ),
        (
            "PATCH",
            "/resources/r1".into(),
            Some(json!({"status": "closed", "action": "close"})),
            200,
        ),
        (
            "POST",
            "/branches".into(),
            Some(
                json!({"branchId": "west", "name": "West", "address": "3 Lane", "city": "Springfield",
                "phone": "1", "openingHours": "always"}),
            ),
            201,
        ),
        (
            "POST",
            "/branches/central/patrons".into(),
            Some(patron_body("conf-new")),
            201,
        ),
        (
            "PUT",
            format!("/patrons/{carded}/card"),
            Some(json!({"cardNumber": "conf-card-2"})),
            200,
        ),
        ("DELETE", format!("/patrons/{removed}"), None, 204),
        (
            "POST",
            "/books".into(),
            Some(
                json!({"isbn": "080442957X", "title": "T", "author": "A", "publisher": "P",
                "publishYear": 2000, "genre": "G", "description": "D", "pageCount": 10}),
            ),
            201,
        ),
        (
            "POST",
            "/branches/central/copies".into(),
            Some(json!({"isbn": ISBN, "condition": "good"})),
            201,
        ),
        (
            "POST",
            "/checkouts".into(),
            Some(json!({"patronId": borrower, "branchId": "central", "copyId": lent})),
            201,
        ),
        ("POST", loan(&returning, "return"), None, 200),
        // Renew is one UpdateItem without a key, a transaction with one.
        ("POST", loan(&renewing, "renew"), None, 200),
    ];
    for (method, path, body, success) in routes {
        let send = || {
            let mut call = api
                .call(method, path.clone())
                .header("idempotency-key", "conflicted")
                .header("if-match", "\"1\"");
            if let Some(body) = &body {
                call = call.json(body.clone());
            }
            call.send()
        };
        let before = snapshot(&api).await;
        seam.transactions.store(0, Ordering::SeqCst);
        seam.conflicts.store(usize::MAX, Ordering::SeqCst);
        let refused = send().await;
        seam.conflicts.store(0, Ordering::SeqCst);
        refused.assert_problem(503, &[]);
        assert_eq!(refused.header("retry-after"), Some("1"), "{method} {path}");
        assert_eq!(
            seam.transactions.load(Ordering::SeqCst),
            CONFLICT_ATTEMPTS as usize,
            "{method} {path}: a bounded number of attempts"
        );
        assert_eq!(
            snapshot(&api).await,
            before,
            "{method} {path}: nothing written"
        );

        seam.conflicts
            .store(CONFLICT_ATTEMPTS as usize - 1, Ordering::SeqCst);
        let answered = send().await;
        assert_eq!(answered.status, success, "{method} {path}: {answered:?}");
        assert_eq!(seam.conflicts.load(Ordering::SeqCst), 0, "{method} {path}");
        assert_ne!(snapshot(&api).await, before, "{method} {path}: its effect");
    }
}
