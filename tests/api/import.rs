//! `import` (docs/API.md, "Import and export"): a file of rows written as the create routes write
//! them, on a real engine; its rejects with the API's field codes and the holders of what was
//! taken; a run killed part way and run again; every kind; the CLI's refusals and exit codes.

use crate::fixtures::{self, ISBN};
use crate::harness::{Api, Item, Mode, n, s};
use crate::process::singlet;
use serde_json::{Value, json};
use singlet::serve::engine;
use singlet_functions::Ctx;
use singlet_functions::cursor::CursorKeys;
use singlet_tools::fsck::{self, Options as FsckOptions};
use singlet_tools::import::{self, Kind, Options};
use singlet_tools::transfer;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Rows in the patrons file: large enough for many transactions and every kind of bad row, small
/// enough for a debug build (the bench measures 100,000).
const PATRONS: usize = 10_000;
/// Every 100th row claims an earlier row's card (1 %), every 200th is invalid (0.5 %).
const DUPLICATE_EVERY: usize = 100;
const INVALID_EVERY: usize = 200;
/// How far back a duplicate's card is.
const DUPLICATE_OF: usize = 37;

/// One time for every run, so two runs of one file write the very same items.
fn at() -> time::OffsetDateTime {
    singlet_functions::clock::parse_iso("2026-12-01T10:00:00Z").unwrap()
}

fn options() -> Options {
    Options {
        at: at(),
        progress: false,
        ..Options::default()
    }
}

fn scratch(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("import")
        .join(format!("{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn card(i: usize) -> String {
    format!("L-{i:06}")
}

/// What the generated file expects of a row (by its 0-based index).
#[derive(Debug, Clone, PartialEq)]
enum Expect {
    Created,
    /// The same card as row `of`: equal as written, or only once normalised.
    Duplicate {
        of: usize,
    },
    Invalid {
        field: &'static str,
    },
}

fn expect(i: usize) -> Expect {
    if i % DUPLICATE_EVERY == DUPLICATE_EVERY / 2 {
        Expect::Duplicate {
            of: i - DUPLICATE_OF,
        }
    } else if i % INVALID_EVERY == 123 {
        Expect::Invalid {
            field: ["cardNumber", "email", "firstName"][(i / INVALID_EVERY) % 3],
        }
    } else {
        Expect::Created
    }
}

/// The patrons file: `rows` rows at `central`, duplicates and invalid rows as [`expect`] says.
fn patrons_file(dir: &Path, rows: usize) -> PathBuf {
    let mut text = String::new();
    for i in 0..rows {
        let mut row = json!({
            "branchId": "central",
            "cardNumber": card(i),
            "firstName": format!("Givenname{i:06}"),
            "lastName": format!("Surname{i:06}"),
            "email": format!("reader{i:06}@example.org"),
            "membershipTier": if i % 3 == 0 { "premium" } else { "standard" },
        });
        match expect(i) {
            Expect::Created => {}
            Expect::Duplicate { of } => {
                // Equal as written, in lower case, full width, or padded: one card once normalised.
                let original = card(of);
                row["cardNumber"] = match (i / DUPLICATE_EVERY) % 4 {
                    0 => original.into(),
                    1 => original.to_lowercase().into(),
                    2 => original
                        .chars()
                        .map(|c| match c {
                            'A'..='Z' | '0'..='9' => char::from_u32(c as u32 + 0xFEE0).unwrap(),
                            '-' => '－',
                            c => c,
                        })
                        .collect::<String>()
                        .into(),
                    _ => format!("  {original} ").into(),
                };
            }
            Expect::Invalid {
                field: "cardNumber",
            } => {
                // A Cyrillic `Л` looking like nothing ASCII, and a Cyrillic `С` looking like `C`.
                row["cardNumber"] = format!("С-{i:06}").into();
            }
            Expect::Invalid { field: "email" } => row["email"] = "reader@@example.org".into(),
            Expect::Invalid { .. } => {
                row["firstName"] = format!("Given\u{202E}name{i:06}").into();
            }
        }
        text.push_str(&row.to_string());
        text.push('\n');
    }
    let path = dir.join("patrons.jsonl");
    std::fs::write(&path, text).unwrap();
    path
}

/// An engine of its own with the branch `central` (imported too, so that its event is the same
/// item in every engine), its ids derived under a fixed secret: two of these derive the same
/// ids from the same file.
async fn library_engine() -> Api {
    let (client, _) = engine::start_in_memory("singlet").await;
    let ctx = Ctx::new(
        client,
        "singlet",
        CursorKeys::new(singlet_functions::cursor::LOCAL_SECRET),
    );
    let api = Api::start_on(Mode::Direct, ctx).await;
    static ENGINES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let dir = scratch(&format!(
        "central-{}",
        ENGINES.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    let file = dir.join("branches.jsonl");
    std::fs::write(&file, fixtures::branch_body("central").to_string()).unwrap();
    let summary = import::run(&api.ctx, Kind::Branches, &file, &options())
        .await
        .unwrap();
    assert_eq!(summary.created, 1);
    api
}

/// The same context with a client that waits for as long as a scan of a large table takes in a
/// debug build on a busy machine (the functions' own timeouts are for one request's items).
pub(crate) fn patient(ctx: &Ctx) -> Ctx {
    use aws_sdk_dynamodb::config::timeout::TimeoutConfig;
    let config = ctx
        .db
        .config()
        .to_builder()
        .timeout_config(
            TimeoutConfig::builder()
                .operation_attempt_timeout(std::time::Duration::from_secs(60))
                .operation_timeout(std::time::Duration::from_secs(120))
                .build(),
        )
        .build();
    Ctx {
        db: aws_sdk_dynamodb::Client::from_conf(config),
        ..ctx.clone()
    }
}

/// Asserts two dumps equal, naming the first item that differs rather than printing both.
#[track_caller]
fn assert_same_dump(left: &[Value], right: &[Value]) {
    if let Some((l, r)) = left.iter().zip(right).find(|(l, r)| l != r) {
        panic!("the tables differ first at\n{l}\n{r}");
    }
    assert_eq!(left.len(), right.len());
}

fn rejects(file: &Path) -> Vec<Value> {
    std::fs::read_to_string(import::rejects_path(file))
        .unwrap_or_default()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

/// Every item, sorted by key, as comparable JSON.
fn dump(items: Vec<Item>) -> Vec<Value> {
    let mut items = items;
    items.sort_by(|a, b| (s(a, "PK"), s(a, "SK")).cmp(&(s(b, "PK"), s(b, "SK"))));
    items.iter().map(transfer::item_to_json).collect()
}

fn of_type<'i>(items: &'i [Item], entity_type: &str) -> Vec<&'i Item> {
    items
        .iter()
        .filter(|i| s(i, "_et") == entity_type)
        .collect()
}

async fn assert_fsck_clean(ctx: &Ctx) {
    let report = fsck::fsck(&patient(ctx), FsckOptions::default())
        .await
        .unwrap();
    assert!(report.findings.is_empty(), "{:?}", report.findings);
}

#[tokio::test]
async fn a_patron_file_imports_exactly_its_valid_unique_rows() {
    let api = library_engine().await;
    let dir = scratch("patrons");
    let file = patrons_file(&dir, PATRONS);
    let summary = import::run(&api.ctx, Kind::Patrons, &file, &options())
        .await
        .unwrap();

    let created: Vec<usize> = (0..PATRONS)
        .filter(|i| expect(*i) == Expect::Created)
        .collect();
    let refused = PATRONS - created.len();
    assert_eq!(
        (
            summary.read,
            summary.created,
            summary.rejected,
            summary.already_imported
        ),
        (PATRONS as u64, created.len() as u64, refused as u64, 0)
    );
    assert!(!summary.stopped);

    // Exactly the valid, unique rows exist, each with its card lock and its event.
    let items = api.all_items().await;
    let patrons = of_type(&items, "patron");
    assert_eq!(patrons.len(), created.len());
    let by_card: HashMap<&str, &Item> = patrons.iter().map(|p| (s(p, "cardNumber"), *p)).collect();
    for i in &created {
        let patron = by_card[card(*i).to_lowercase().as_str()];
        assert_eq!(s(patron, "email"), format!("reader{i:06}@example.org"));
        assert_eq!(n(patron, "activeLoans"), 0);
    }
    assert_eq!(of_type(&items, "card-lock").len(), created.len());
    let events = of_type(&items, "outbox")
        .into_iter()
        .filter(|e| s(e, "detailType") == "PatronRegistered")
        .count();
    assert_eq!(events, created.len());

    // Every refused row is in the rejects, in line order: a duplicate naming the patron that
    // holds its card, an invalid row with the API's field codes.
    let rejects = rejects(&file);
    assert_eq!(rejects.len(), refused);
    let mut expected = Vec::new();
    for i in (0..PATRONS).filter(|i| expect(*i) != Expect::Created) {
        expected.push(match expect(i) {
            Expect::Duplicate { of } => {
                let holder = s(by_card[card(of).to_lowercase().as_str()], "patronId");
                json!({"line": i + 1, "errors": [{"field": "cardNumber", "code": "taken"}], "holder": holder})
            }
            Expect::Invalid { field } => {
                json!({"line": i + 1, "errors": [{"field": field, "code": "invalid"}]})
            }
            Expect::Created => unreachable!(),
        });
    }
    assert_eq!(rejects, expected);

    // What the API reads back: a patron by its card, as the route registered it.
    let reply = api.get("/cards/l-000001").await;
    assert_eq!(reply.status, 200, "{reply:?}");
    assert_fsck_clean(&api.ctx).await;
}

#[tokio::test]
async fn killed_part_way_and_run_again_it_writes_what_one_run_writes() {
    let dir = scratch("killed");
    let file = patrons_file(&dir, PATRONS);
    let whole = library_engine().await;
    let once = import::run(&whole.ctx, Kind::Patrons, &file, &options())
        .await
        .unwrap();

    let api = library_engine().await;
    let stop_at = once.created * 3 / 10;
    let killed = import::run(
        &api.ctx,
        Kind::Patrons,
        &file,
        &Options {
            stop_after: Some(stop_at),
            ..options()
        },
    )
    .await
    .unwrap();
    assert!(killed.stopped);
    assert!(killed.created >= stop_at && killed.created < once.created);
    let again = import::run(&api.ctx, Kind::Patrons, &file, &options())
        .await
        .unwrap();
    assert_eq!(again.created + again.already_imported, once.created);
    // The transactions in flight when it stopped may or may not have been applied, as in a kill.
    assert!(again.already_imported >= killed.created, "{again:?}");
    assert_eq!(again.rejected, once.rejected);

    // The same items (ids, times and events included) as one uninterrupted run, and no line twice.
    let items = api.all_items().await;
    assert_same_dump(&dump(items.clone()), &dump(whole.all_items().await));
    let patrons = of_type(&items, "patron");
    assert_eq!(patrons.len() as u64, once.created);
    // A third run finds every row there already.
    let third = import::run(&api.ctx, Kind::Patrons, &file, &options())
        .await
        .unwrap();
    assert_eq!((third.created, third.already_imported), (0, once.created));
    assert_same_dump(&dump(api.all_items().await), &dump(items));
}

#[tokio::test]
async fn a_row_whose_value_the_table_holds_is_rejected_naming_the_holder() {
    let api = library_engine().await;
    let holder = fixtures::patron(&api, "central", "C-1", "standard").await;
    let dir = scratch("taken");
    let file = dir.join("patrons.csv");
    std::fs::write(
        &file,
        "branchId,cardNumber,firstName,lastName,email,membershipTier\n\
         central,c-1,Ada,Byron,ada@example.org,standard\n\
         central,C-2,\"Grace, Jr.\",Hopper,grace@example.org,premium\n\
         nowhere,C-3,Alan,Turing,alan@example.org,standard\n\
         central,C-4,Edsger,Dijkstra,,standard\n\
         central,C-1,Bob,Smith,bob@example.org,standard\n",
    )
    .unwrap();
    let summary = import::run(&api.ctx, Kind::Patrons, &file, &options())
        .await
        .unwrap();
    assert_eq!((summary.read, summary.created, summary.rejected), (5, 1, 4));
    assert_eq!(
        rejects(&file),
        vec![
            json!({"line": 2, "errors": [{"field": "cardNumber", "code": "taken"}], "holder": holder}),
            json!({"line": 4, "errors": [{"field": "branchId", "code": "not_found"}]}),
            json!({"line": 5, "errors": [{"field": "email", "code": "required"}]}),
            // Claimed first by line 2, which the table's holder refused: the holder is the
            // table's, not line 2's id, which was never created.
            json!({"line": 6, "errors": [{"field": "cardNumber", "code": "taken"}], "holder": holder}),
        ]
    );
    let reply = api.get("/cards/C-2").await;
    assert_eq!(reply.status, 200, "{reply:?}");
    let patron = api
        .get(format!(
            "/patrons/{}",
            reply.body["patronId"].as_str().unwrap()
        ))
        .await;
    assert_eq!(patron.body["firstName"], "Grace, Jr.");
    assert_fsck_clean(&api.ctx).await;
}

#[tokio::test]
async fn max_wcu_keeps_every_second_under_the_limit() {
    const MAX_WCU: f64 = 400.0;
    let api = library_engine().await;
    let dir = scratch("throttled");
    let file = patrons_file(&dir, 240);
    let started = std::time::Instant::now();
    let summary = import::run(
        &api.ctx,
        Kind::Patrons,
        &file,
        &Options {
            max_wcu: Some(MAX_WCU),
            ..options()
        },
    )
    .await
    .unwrap();
    let elapsed = started.elapsed().as_secs_f64();
    assert!(summary.write_units > 2.0 * MAX_WCU, "{summary:?}");
    // Every second under the limit, but for the one transaction that may start a window alone.
    let one_transaction = 2.5 * 100.0;
    assert!(
        summary.peak_wcu_per_second <= MAX_WCU + one_transaction,
        "{summary:?}"
    );
    // And over the whole run, the limit: a transaction over what a second allows holds the next
    // one back for its share of time (at 5 units a second, 70 patrons took 2 s, not 84).
    assert!(
        elapsed >= summary.write_units / MAX_WCU - 1.0,
        "{elapsed} s for {summary:?}"
    );
}

#[tokio::test]
async fn every_kind_imports_as_its_route_creates() {
    let api = library_engine().await;
    let dir = scratch("kinds");
    let write = |name: &str, text: &str| {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path
    };
    let run = |kind: Kind, file: PathBuf| {
        let ctx = api.ctx.clone();
        async move {
            let summary = import::run(&ctx, kind, &file, &options()).await.unwrap();
            (summary, rejects(&file))
        }
    };

    let branches = write(
        "branches.jsonl",
        &[fixtures::branch_body("east"), {
            // Another branch under the fixture's id (the same row again would be imported already).
            let mut other = fixtures::branch_body("central");
            other["name"] = "Another Central".into();
            other
        }]
        .map(|b| b.to_string())
        .join("\n"),
    );
    let (summary, refused) = run(Kind::Branches, branches).await;
    assert_eq!((summary.created, summary.rejected), (1, 1));
    assert_eq!(
        refused,
        vec![
            json!({"line": 2, "errors": [{"field": "branchId", "code": "taken"}], "holder": "central"})
        ]
    );

    // CSV numbers are numbers; the ISBN-10 of a book in the file is the same book.
    let books = write(
        "books.csv",
        &format!(
            "isbn,title,author,publisher,publishYear,genre,description,pageCount\n\
             {ISBN},Fundamentals,Horowitz,CSP,1976,CS,Trees,564\n\
             {},Fundamentals,Horowitz,CSP,1976,CS,Trees,564\n\
             9780262033848,Algorithms,Cormen,MIT,1990,CS,Everything,abc\n",
            fixtures::ISBN10
        ),
    );
    let (summary, refused) = run(Kind::Books, books).await;
    assert_eq!((summary.created, summary.rejected), (1, 2));
    assert_eq!(refused[0]["holder"], ISBN);
    assert_eq!(
        refused[1]["errors"],
        json!([{"field": "pageCount", "code": "invalid"}])
    );

    // Copies: one count per book and branch, by as many copies as the rows add.
    let copies = write(
        "copies.jsonl",
        &[
            json!({"branchId": "central", "isbn": ISBN, "condition": "good"}),
            json!({"branchId": "central", "isbn": fixtures::ISBN10, "condition": "new"}),
            json!({"branchId": "east", "isbn": ISBN, "condition": "fair"}),
            json!({"branchId": "east", "isbn": "9780262033848", "condition": "fair"}),
            json!({"branchId": "east", "isbn": ISBN, "condition": "mint"}),
        ]
        .map(|c| c.to_string())
        .join("\n"),
    );
    let (summary, refused) = run(Kind::Copies, copies.clone()).await;
    assert_eq!((summary.created, summary.rejected), (3, 2));
    assert_eq!(
        refused,
        vec![
            json!({"line": 4, "errors": [{"field": "isbn", "code": "not_found"}]}),
            json!({"line": 5, "errors": [{"field": "condition", "code": "invalid"}]}),
        ]
    );
    let availability = api.get(format!("/books/{ISBN}/availability")).await;
    assert_eq!(
        availability.body["branches"],
        json!([{"branchId": "central", "availableCopies": 2}, {"branchId": "east", "availableCopies": 1}])
    );
    // Run again: nothing twice, the counts unchanged.
    let (summary, _) = run(Kind::Copies, copies).await;
    assert_eq!((summary.created, summary.already_imported), (0, 3));
    assert_eq!(
        api.get(format!("/books/{ISBN}/availability")).await.body,
        availability.body
    );

    // Plates equal but for separators are one plate.
    let vehicles = write(
        "vehicles.csv",
        "plate,chassis,depot\nKA-19 XTR,WVW1,North\nka19xtr,WVW2,North\nMH 12,WVW1,South\nКА19,WVW3,North\n",
    );
    let (summary, refused) = run(Kind::Vehicles, vehicles).await;
    assert_eq!((summary.created, summary.rejected), (1, 3));
    let holder = api.get("/plates/KA19XTR").await.body["vehicleId"].clone();
    assert_eq!(refused[0]["holder"], holder);
    assert_eq!(
        refused[0]["errors"],
        json!([{"field": "plate", "code": "taken"}])
    );
    assert_eq!(
        refused[1]["errors"],
        json!([{"field": "chassis", "code": "taken"}])
    );
    assert_eq!(
        refused[2]["errors"],
        json!([{"field": "plate", "code": "invalid"}])
    );
    let depot = api.get("/depots/north/vehicles").await;
    assert_eq!(
        depot.body["items"].as_array().unwrap().len(),
        1,
        "{depot:?}"
    );
    // A value an earlier line claims first is refused even when that line was refused for
    // another field, and the reject says so rather than name a holder no one is.
    let vehicles = write(
        "vehicles-2.csv",
        "plate,chassis,depot\nZZ 11,WVW1,North\nZZ-11,NEW5,North\n",
    );
    let (summary, refused) = run(Kind::Vehicles, vehicles).await;
    assert_eq!((summary.created, summary.rejected), (0, 2));
    assert_eq!(refused[0]["holder"], holder, "the table's holder of WVW1");
    assert_eq!(
        refused[1],
        json!({"line": 3, "errors": [{"field": "plate", "code": "taken"}],
            "detail": "line 2 claims the plate first, and was refused for another field"})
    );

    // Accounts name their owner, who owns one account as the route would let them.
    let accounts = write(
        "accounts.jsonl",
        &[
            json!({"email": "ada@example.com", "username": "ada", "owner": "sub-ada"}),
            json!({"email": "аda@example.com", "username": "ada2", "owner": "sub-other"}),
            json!({"email": "bob@example.com", "username": "bob", "owner": "sub-ada"}),
            json!({"email": "eve@example.com", "username": "eve"}),
        ]
        .map(|a| a.to_string())
        .join("\n"),
    );
    let (summary, refused) = run(Kind::Accounts, accounts).await;
    assert_eq!((summary.created, summary.rejected), (1, 3));
    assert_eq!(
        refused[0]["errors"],
        json!([{"field": "email", "code": "taken"}])
    );
    assert_eq!(
        refused[1]["errors"],
        json!([{"field": "owner", "code": "limit_reached"}])
    );
    assert_eq!(
        refused[2]["errors"],
        json!([{"field": "owner", "code": "required"}])
    );
    let reply = api.get("/emails/ada@example.com").await;
    assert_eq!(reply.body["available"], false);
    // A row whose email and username are both taken names both, as `POST /accounts` does: held
    // in the table, and claimed by an earlier line of the same file.
    let accounts = write(
        "accounts-2.jsonl",
        &[
            json!({"email": "ada@example.com", "username": "ada", "owner": "sub-x"}),
            json!({"email": "cy@example.com", "username": "cyrus", "owner": "sub-cy"}),
            json!({"email": "cy@example.com", "username": "cyrus", "owner": "sub-cy2"}),
        ]
        .map(|a| a.to_string())
        .join("\n"),
    );
    let (summary, refused) = run(Kind::Accounts, accounts).await;
    assert_eq!((summary.created, summary.rejected), (1, 2), "{refused:?}");
    let both = json!([{"field": "email", "code": "taken"}, {"field": "username", "code": "taken"}]);
    assert_eq!(refused[0]["errors"], both, "{refused:?}");
    let holder = refused[0]["holder"].as_str().unwrap();
    let ada = api.get(format!("/accounts/{holder}")).await;
    assert_eq!(ada.body["username"], "ada", "{ada:?}");
    assert_eq!(refused[1]["errors"], both, "{refused:?}");

    // One event per created row, as the routes write them.
    let events = of_type(&api.all_items().await, "outbox").len();
    assert_eq!(
        events,
        1 + 1 + 3 + 1 + 1 + 1 + 1,
        "the fixture's branch, then each import"
    );
    assert_fsck_clean(&api.ctx).await;
}

#[test]
fn the_cli_refuses_bad_input_with_exit_2_and_reports_rejects_with_exit_1() {
    let dir = scratch("cli");
    let data = dir.join("table.db");
    let import = |args: &[&str], file: &Path| {
        singlet()
            .arg("--data")
            .arg(&data)
            .arg("import")
            .args(args)
            .arg(file)
            .output()
            .unwrap()
    };
    let stderr =
        |output: &std::process::Output| String::from_utf8_lossy(&output.stderr).into_owned();

    // Not text at all.
    let binary = dir.join("patrons.bin");
    std::fs::write(&binary, [0x1f, 0x8b, 0x08, 0x00, 0xff, 0xfe, 0x00]).unwrap();
    let output = import(&["patrons"], &binary);
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    assert!(
        stderr(&output).contains("is not JSON Lines or CSV"),
        "{}",
        stderr(&output)
    );

    // JSON Lines whose first line is not an object.
    let lines = dir.join("patrons.jsonl");
    std::fs::write(&lines, "[1, 2]\n").unwrap();
    let output = import(&["patrons"], &lines);
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    assert!(stderr(&output).contains("line 1"), "{}", stderr(&output));

    // A CSV without a column the rows need: nothing is written.
    let csv = dir.join("branches.csv");
    std::fs::write(&csv, "branchId,name,city\ncentral,Central,Pune\n").unwrap();
    let output = import(&["branches"], &csv);
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    assert!(
        stderr(&output).contains("lacks address, phone, openingHours"),
        "{}",
        stderr(&output)
    );

    // An unknown kind is told before anything is opened.
    let output = import(&["cars"], &csv);
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    assert!(
        stderr(&output).contains("the kinds are vehicles"),
        "{}",
        stderr(&output)
    );

    // A missing branch: each of its rows a reject, exit 1, the summary on standard output.
    std::fs::write(
        &lines,
        json!({"branchId": "nowhere", "cardNumber": "C-1", "firstName": "A", "lastName": "B",
               "email": "a@example.org", "membershipTier": "standard"})
        .to_string(),
    )
    .unwrap();
    let output = import(&["patrons", "--json"], &lines);
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let summary: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(
        summary,
        json!({"read": 1, "created": 0, "rejected": 1, "alreadyImported": 0, "hottestKey": null})
    );
    assert_eq!(
        rejects(&lines),
        vec![json!({"line": 1, "errors": [{"field": "branchId", "code": "not_found"}]})]
    );

    // A good file: exit 0, and the stale rejects file is gone.
    std::fs::write(&lines, fixtures::branch_body("central").to_string()).unwrap();
    let output = import(&["branches", "--json", "--max-wcu", "50"], &lines);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert!(!import::rejects_path(&lines).exists());
    // Before it starts, it says how long the file takes on AWS and what holds it back.
    assert!(
        stderr(&output).contains("import branches (1 row): about")
            && stderr(&output).contains("s, held by --max-wcu 50"),
        "{}",
        stderr(&output)
    );
}

/// `singlet --data <data> import <kind> <file>`.
fn import_cli(data: &Path, kind: &str, file: &Path) -> std::process::Output {
    singlet()
        .arg("--data")
        .arg(data)
        .args(["import", kind])
        .arg(file)
        .output()
        .unwrap()
}

/// The rejects file is written beside the import file, often in a folder others write to: a
/// symbolic or hard link planted under its name is refused (exit 2, nothing written, its target
/// untouched), and a file there already is made its owner's alone before the rejects go in.
#[cfg(unix)]
#[test]
fn the_rejects_file_is_never_written_through_a_link_and_is_its_owners_alone() {
    use std::os::unix::fs::PermissionsExt;
    let dir = scratch("rejects-link");
    let data = dir.join("table.db");
    let file = dir.join("branches.jsonl");
    std::fs::write(
        &file,
        [
            fixtures::branch_body("central"),
            json!({"branchId": "east"}),
        ]
        .map(|b| b.to_string())
        .join("\n"),
    )
    .unwrap();
    let target = dir.join("someone-elses.txt");
    std::fs::write(&target, "precious").unwrap();
    std::os::unix::fs::symlink(&target, import::rejects_path(&file)).unwrap();

    let refused = import_cli(&data, "branches", &file);
    assert_eq!(refused.status.code(), Some(2), "{refused:?}");
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(said.contains("is a symbolic link"), "{said}");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "precious");
    assert!(!data.exists(), "nothing written, no table made");

    // A hard link is the target itself under another name: refused the same way.
    std::fs::remove_file(import::rejects_path(&file)).unwrap();
    std::fs::hard_link(&target, import::rejects_path(&file)).unwrap();
    let refused = import_cli(&data, "branches", &file);
    assert_eq!(refused.status.code(), Some(2), "{refused:?}");
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(said.contains("hard links"), "{said}");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "precious");
    assert!(!data.exists(), "nothing written, no table made");

    // A rejects file left there with a mode others can read: rewritten, and its owner's alone.
    std::fs::remove_file(import::rejects_path(&file)).unwrap();
    std::fs::write(import::rejects_path(&file), "old").unwrap();
    std::fs::set_permissions(
        import::rejects_path(&file),
        std::fs::Permissions::from_mode(0o644),
    )
    .unwrap();
    let imported = import_cli(&data, "branches", &file);
    assert_eq!(imported.status.code(), Some(1), "{imported:?}");
    let mode = std::fs::metadata(import::rejects_path(&file))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    assert_eq!(rejects(&file).len(), 1);
    assert_eq!(rejects(&file)[0]["line"], 2);
}

/// A file with no rows (empty, blank lines only, or a CSV header alone) is not an import of
/// nothing that succeeded: exit 2, saying nothing was read, before any engine or table is made.
#[test]
fn a_file_without_rows_is_refused_with_exit_2() {
    let dir = scratch("no-rows");
    let data = dir.join("table.db");
    for (name, text) in [
        ("empty.jsonl", ""),
        ("blank.jsonl", "\n  \n\n"),
        (
            "header.csv",
            "branchId,name,address,city,phone,openingHours\n",
        ),
    ] {
        let file = dir.join(name);
        std::fs::write(&file, text).unwrap();
        let refused = import_cli(&data, "branches", &file);
        assert_eq!(refused.status.code(), Some(2), "{name}: {refused:?}");
        let said = String::from_utf8_lossy(&refused.stderr);
        assert!(
            said.contains("holds no rows: nothing was read and nothing was written"),
            "{name}: {said}"
        );
        assert!(refused.stdout.is_empty(), "{name}");
        assert!(!data.exists(), "{name}: no table made");
    }
}
