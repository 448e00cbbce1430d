//! The overdue marker at scale: 10,000 and then 100,000 open loans, the same 100 of them newly
//! due, and one run of `mark-overdue` (its real handler, the route table's scheduled entry) over
//! each. Prints, per size: loans marked, the read and write units consumed on the table and each
//! index, pages read and time; the ratio of the run's units at the larger size to the smaller;
//! and what the two overdue lists (`GET /overdue`, `GET /branches/{branchId}/overdue`) read
//! afterwards. It asserts only the counts: 100 marked, 100 listed, all overdue.
//!
//! The loans are written straight to the engine with `BatchWriteItem`, each one the item
//! `checkout-book` writes (`Checkout::to_item` of an open loan), so the load is quick and the
//! marker finds exactly what the API would have left. `cargo bench --bench overdue [-- SIZES]`:
//! the sizes default to `10000 100000`.

use aws_sdk_dynamodb::types::{PutRequest, WriteRequest};
use serde_json::{Value, json};
use singlet::console::{self, capture, ops};
use singlet::serve::auth::Authorizer;
use singlet::serve::{engine, front_door};
use singlet_functions::Ctx;
use singlet_functions::cursor::CursorKeys;
use singlet_functions::idempotency::new_id;
use singlet_functions::loans::{Checkout, LoanStatus};
use singlet_functions::model::Entity;
use singlet_functions::request::answer;
use singlet_functions::{clock, routes};
use singlet_shared::{Id, Isbn13};
use std::collections::BTreeMap;
use std::future::Future;
use std::time::{Duration, Instant};
use time::OffsetDateTime;

/// Loans newly due at each size: the marker's real work.
const NEWLY_DUE: usize = 100;
/// The branches the loans are spread over; the newly due ones are all lent at the first.
const BRANCHES: usize = 10;
/// Loans per patron.
const LOANS_PER_PATRON: usize = 10;
/// `BatchWriteItem` takes at most 25 puts; this many batches are in flight at once.
const BATCH: usize = 25;
const BATCHES_IN_FLIGHT: usize = 8;

/// Units per place (`table`, `GSI1`, ...): (read, write).
type Units = BTreeMap<String, (f64, f64)>;

/// Runs `work`, recording every DynamoDB call it makes in this task, and sums their consumed
/// capacity per table and index.
async fn metered<F: Future>(work: F) -> (F::Output, Units, usize) {
    let (output, calls) = capture::recording(work).await;
    let mut units = Units::new();
    for call in &calls {
        let operation = ops::read(call, false);
        let read = matches!(operation.operation.as_str(), "GetItem" | "Query");
        for capacity in &operation.capacity {
            let places = std::iter::once(("table".to_owned(), capacity.table_units.unwrap_or(0.0)))
                .chain(capacity.indexes.iter().cloned());
            for (place, consumed) in places {
                let entry = units.entry(place).or_default();
                if read {
                    entry.0 += consumed;
                } else {
                    entry.1 += consumed;
                }
            }
        }
    }
    units.retain(|_, (r, w)| *r != 0.0 || *w != 0.0);
    (output, units, calls.len())
}

fn total(units: &Units) -> (f64, f64) {
    units
        .values()
        .fold((0.0, 0.0), |(r, w), (read, write)| (r + read, w + write))
}

fn describe(units: &Units) -> String {
    units
        .iter()
        .map(|(place, (r, w))| format!("{place} {r} R + {w} W"))
        .collect::<Vec<_>>()
        .join("; ")
}

fn id(raw: &str) -> Id {
    Id::parse(raw).expect("a valid id")
}

/// One open loan as `checkout-book` makes it, due at `due`.
fn loan(
    patron: &Id,
    branch: &Id,
    isbn: &Isbn13,
    lent: OffsetDateTime,
    due: OffsetDateTime,
) -> Checkout {
    Checkout {
        checkout_id: new_id(None),
        patron_id: patron.clone(),
        patron_branch_id: branch.clone(),
        branch_id: branch.clone(),
        copy_id: new_id(None),
        isbn: isbn.clone(),
        title: "Fundamentals of Data Structures".into(),
        status: LoanStatus::Open,
        checked_out_at: clock::iso(lent),
        due_date: clock::iso(due),
        renewal_count: 0,
        loan_period_days: 21,
        returned_date: None,
        expires_at: None,
    }
}

/// Writes `loans` with `BatchWriteItem`, [`BATCHES_IN_FLIGHT`] batches at a time, writing again
/// whatever the engine hands back unprocessed.
async fn load(ctx: &Ctx, loans: &[Checkout]) {
    use futures::StreamExt;
    futures::stream::iter(loans.chunks(BATCH))
        .for_each_concurrent(BATCHES_IN_FLIGHT, |chunk| async move {
            let mut requests: Vec<WriteRequest> = chunk
                .iter()
                .map(|loan| {
                    WriteRequest::builder()
                        .put_request(
                            PutRequest::builder()
                                .set_item(Some(loan.to_item()))
                                .build()
                                .expect("a put has an item"),
                        )
                        .build()
                })
                .collect();
            while !requests.is_empty() {
                let output = ctx
                    .db
                    .batch_write_item()
                    .request_items(&*ctx.table, requests)
                    .send()
                    .await
                    .expect("the engine takes the batch");
                requests = output
                    .unprocessed_items
                    .and_then(|mut left| left.remove(&*ctx.table))
                    .unwrap_or_default();
            }
        })
        .await;
}

/// The runner's authorizer and a token with every scope.
fn tokens() -> (Authorizer, String) {
    let dir = std::env::temp_dir().join("singlet-bench-keys");
    let (authorizer, issuer) = Authorizer::local(&dir).unwrap();
    let scopes = routes::all_scopes().join(" ");
    let token = issuer.mint("bench", &scopes, &Default::default(), 3600);
    (authorizer, token)
}

/// A GET through its real handler, with the request API Gateway would hand it.
async fn get(ctx: &Ctx, tokens: &(Authorizer, String), path: &str) -> Value {
    let mut headers = axum::http::HeaderMap::new();
    headers.insert(
        "authorization",
        format!("Bearer {}", tokens.1).parse().unwrap(),
    );
    let (route, request) = front_door::lambda_request(
        &tokens.0,
        &axum::http::Method::GET,
        &path.parse().unwrap(),
        &headers,
        &[],
    )
    .unwrap_or_else(|_| panic!("GET {path} is a declared route"));
    let response = answer(ctx, route, request).await.response;
    assert!(response.status().is_success(), "GET {path}: {response:?}");
    serde_json::from_slice(response.body().as_ref()).expect("a JSON body")
}

/// What one size measured.
struct Run {
    open: usize,
    load: Duration,
    marked: u64,
    pages: u64,
    time: Duration,
    units: Units,
    lists: Vec<(String, usize, Units)>,
}

async fn at_size(open: usize, tokens: &(Authorizer, String)) -> Run {
    let (client, _) = engine::start_in_memory("singlet").await;
    let ctx = console::instrument(Ctx::new(client, "singlet", CursorKeys::random()));
    let now = clock::now();
    let isbn = Isbn13::parse("9780306406157").unwrap();
    let branches: Vec<Id> = (0..BRANCHES).map(|b| id(&format!("branch-{b}"))).collect();
    // The branch the overdue list below reads: it must exist for an empty list to be answered.
    let create_branch = json!({"branchId": "branch-0", "name": "Branch 0", "address": "1 Square",
        "city": "Springfield", "phone": "+44 20 7946 0000", "openingHours": "Mon-Sat 09:00-20:00"});
    post(&ctx, tokens, "/branches", create_branch).await;

    let mut loans = Vec::with_capacity(open);
    for i in 0..open {
        let patron = id(&format!("patron-{}", i / LOANS_PER_PATRON));
        if i < NEWLY_DUE {
            // Lent 22 days ago for 21 days: fell due a day ago, since the last run.
            let lent = now - clock::days(22) + Duration::from_secs(i as u64);
            loans.push(loan(
                &patron,
                &branches[0],
                &isbn,
                lent,
                lent + clock::days(21),
            ));
        } else {
            // Lent in the last 20 days: due from tomorrow on.
            let lent = now - Duration::from_secs((i as u64 * 17) % (20 * 86_400));
            let branch = &branches[i % BRANCHES];
            loans.push(loan(&patron, branch, &isbn, lent, lent + clock::days(21)));
        }
    }
    let started = Instant::now();
    load(&ctx, &loans).await;
    let load_time = started.elapsed();

    let marker = routes::scheduled("mark-overdue").expect("mark-overdue is scheduled");
    let event = json!({"time": clock::iso(now), "detail-type": "Scheduled Event", "detail": {}});
    let started = Instant::now();
    let (report, units, _) = metered((marker.handler)(&ctx, event, None)).await;
    let time = started.elapsed();
    let report = report.expect("mark-overdue runs").to_json();

    let mut lists = Vec::new();
    for path in ["/overdue?limit=100", "/branches/branch-0/overdue?limit=100"] {
        let (body, units, _) = metered(get(&ctx, tokens, path)).await;
        let items = body["items"].as_array().expect("a page of loans");
        assert!(
            items.iter().all(|loan| loan["status"] == "overdue"),
            "{path} lists a loan that is not overdue"
        );
        lists.push((path.to_owned(), items.len(), units));
    }
    Run {
        open,
        load: load_time,
        marked: report["marked"].as_u64().unwrap_or_default(),
        pages: report["pagesRead"].as_u64().unwrap_or_default(),
        time,
        units,
        lists,
    }
}

async fn post(ctx: &Ctx, tokens: &(Authorizer, String), path: &str, body: Value) {
    let mut headers = axum::http::HeaderMap::new();
    headers.insert(
        "authorization",
        format!("Bearer {}", tokens.1).parse().unwrap(),
    );
    headers.insert("content-type", "application/json".parse().unwrap());
    let (route, request) = front_door::lambda_request(
        &tokens.0,
        &axum::http::Method::POST,
        &path.parse().unwrap(),
        &headers,
        body.to_string().as_bytes(),
    )
    .unwrap_or_else(|_| panic!("POST {path} is a declared route"));
    let response = answer(ctx, route, request).await.response;
    assert!(response.status().is_success(), "POST {path}: {response:?}");
}

#[tokio::main]
async fn main() {
    let sizes: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|arg| arg.parse().ok())
        .collect();
    let sizes = if sizes.is_empty() {
        vec![10_000, 100_000]
    } else {
        sizes
    };
    let tokens = tokens();
    let mut runs = Vec::new();
    for open in sizes {
        let run = at_size(open, &tokens).await;
        println!(
            "{:>7} open loans: loaded in {:.1} s ({:.0} loans/s); mark-overdue marked {} in {} pages, {:.0} ms, {}",
            run.open,
            run.load.as_secs_f64(),
            run.open as f64 / run.load.as_secs_f64(),
            run.marked,
            run.pages,
            run.time.as_secs_f64() * 1e3,
            describe(&run.units)
        );
        for (path, listed, units) in &run.lists {
            println!(
                "{:>7} open loans: GET {path:<28} listed {listed}, {}",
                run.open,
                describe(units)
            );
        }
        assert_eq!(run.marked, NEWLY_DUE as u64, "{} open loans", run.open);
        for (path, listed, _) in &run.lists {
            assert_eq!(*listed, NEWLY_DUE, "{path}");
        }
        runs.push(run);
    }
    if let [first, .., last] = &runs[..] {
        let (r0, w0) = total(&first.units);
        let (r1, w1) = total(&last.units);
        println!(
            "capacity at {} vs {} open loans: {:.3}× ({} vs {} units: reads {r1} vs {r0}, writes {w1} vs {w0}); time {:.2}×",
            last.open,
            first.open,
            (r1 + w1) / (r0 + w0),
            r1 + w1,
            r0 + w0,
            last.time.as_secs_f64() / first.time.as_secs_f64()
        );
    }
}
