//! Library loans: docs/API.md, "Library" (checkout, return, renew, active loans, overdue).

use crate::both;
use crate::fixtures::{ISBN, checkout, copy, lend, library, patron};
use crate::harness::mark_overdue;
use crate::harness::{Api, Item, Mode, n, s};
use serde_json::{Value, json};
use singlet_functions::clock;
use singlet_functions::loans::mark_overdue::Report;
use time::OffsetDateTime;

fn loan_path(loan: &Value, action: &str) -> String {
    format!(
        "/patrons/{}/checkouts/{}/{action}",
        loan["patronId"].as_str().unwrap(),
        loan["checkoutId"].as_str().unwrap()
    )
}

async fn loan_item(api: &Api, loan: &Value) -> Option<Item> {
    api.item(
        &format!("PATRON#{}", loan["patronId"].as_str().unwrap()),
        &format!("CHECKOUT#{}", loan["checkoutId"].as_str().unwrap()),
    )
    .await
}

async fn copy_item(api: &Api, branch_id: &str, copy_id: &str) -> Item {
    api.item(&format!("BRANCH#{branch_id}"), &format!("COPY#{copy_id}"))
        .await
        .unwrap()
}

async fn patron_item(api: &Api, branch_id: &str, patron_id: &str) -> Item {
    api.item(
        &format!("BRANCH#{branch_id}"),
        &format!("PATRON#{patron_id}"),
    )
    .await
    .unwrap()
}

fn days_from_now(days: i64) -> OffsetDateTime {
    clock::now() + clock::days(days)
}

async fn run_marker(api: &Api, now: OffsetDateTime) -> Report {
    mark_overdue(&api.ctx, now, 100, || true).await.unwrap()
}

fn ids(page: &Value) -> Vec<String> {
    page["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["checkoutId"].as_str().unwrap().to_owned())
        .collect()
}

both!(
    a_premium_patron_holds_ten_loans_renewed_by_28_days,
    a_loan_past_due_is_not_renewed_before_the_marker_runs,
    overdue_cursors_stay_in_their_branch,
    checkout_writes_the_loan_moves_the_copy_and_counts_the_loan,
    checkout_refusals_name_what_is_at_fault,
    active_checkouts_list_active_loans_only,
    return_reverses_the_checkout,
    renew_moves_the_due_date_under_the_rules,
    overdue_loans_are_listed_oldest_due_first,
    a_loan_reads_overdue_a_second_after_its_due_date_with_no_marker_run,
    as_of_moves_only_when_a_marker_run_completes,
    the_library_wide_overdue_list_spans_every_branch,
    one_loan_is_read_active_or_returned,
    the_history_lists_returned_loans_newest_return_first,
    a_patron_with_loans_is_not_removed,
    a_lower_tier_keeps_its_loans_and_borrows_nothing_above_the_limit,
    loans_made_after_a_correction_carry_the_corrected_title,
);

async fn checkout_writes_the_loan_moves_the_copy_and_counts_the_loan(api: Api) {
    library(&api).await;
    let patron_id = patron(&api, "central", "card-1", "standard").await;
    let copy_id = copy(&api, "east").await;
    let before = clock::now();
    let reply = checkout(&api, &patron_id, "east", &copy_id).await;
    assert_eq!(reply.status, 201, "{reply:?}");
    let loan = &reply.body;
    assert_eq!(
        loan["title"], "Fundamentals of Data Structures",
        "the title is denormalised"
    );
    assert_eq!(loan["isbn"], ISBN);
    assert_eq!(loan["status"], "open");
    assert_eq!(loan["renewalCount"], 0);
    assert_eq!(loan["returnedDate"], Value::Null);
    let due = clock::parse_iso(loan["dueDate"].as_str().unwrap()).unwrap();
    let expected = before + clock::days(21);
    assert!(
        (due - expected).whole_seconds().abs() <= 2,
        "a standard loan lasts 21 days: {due}"
    );

    let item = loan_item(&api, loan).await.unwrap();
    assert!(
        s(&item, "GSI1PK").starts_with("OPEN#"),
        "in the open-loans index"
    );
    assert_eq!(
        s(&item, "GSI1SK"),
        format!(
            "{}#{}",
            loan["dueDate"].as_str().unwrap(),
            loan["checkoutId"].as_str().unwrap()
        )
    );
    assert!(!item.contains_key("GSI3PK"), "not overdue");
    let copy = copy_item(&api, "east", &copy_id).await;
    assert_eq!(s(&copy, "status"), "checked_out");
    assert!(s(&copy, "GSI2SK").starts_with("checked_out#east#"));
    assert_eq!(
        n(
            &patron_item(&api, "central", &patron_id).await,
            "activeLoans"
        ),
        1
    );
    let availability = api.get(format!("/books/{ISBN}/availability")).await;
    assert_eq!(availability.body["branches"], json!([]), "{availability:?}");

    let premium = patron(&api, "central", "card-2", "premium").await;
    let loan = lend(&api, &premium, "central").await;
    let due = clock::parse_iso(loan["dueDate"].as_str().unwrap()).unwrap();
    assert!(
        (due - (clock::now() + clock::days(28)))
            .whole_seconds()
            .abs()
            <= 2,
        "a premium loan lasts 28 days"
    );
}

async fn checkout_refusals_name_what_is_at_fault(api: Api) {
    library(&api).await;
    let patron_id = patron(&api, "central", "card-1", "standard").await;
    let copy_id = copy(&api, "central").await;
    api.post("/checkouts", json!({})).await.assert_problem(
        400,
        &[
            ("branchId", "required"),
            ("copyId", "required"),
            ("patronId", "required"),
        ],
    );
    api.post(
        "/checkouts",
        json!({"patronId": "a#b", "branchId": "central", "copyId": copy_id}),
    )
    .await
    .assert_problem(400, &[("patronId", "invalid")]);
    checkout(&api, "nobody", "central", &copy_id)
        .await
        .assert_problem(404, &[]);
    checkout(&api, &patron_id, "central", "no-copy")
        .await
        .assert_problem(404, &[]);
    checkout(&api, &patron_id, "east", &copy_id)
        .await
        .assert_problem(404, &[]);
    assert_eq!(
        checkout(&api, &patron_id, "central", &copy_id).await.status,
        201
    );
    let other = patron(&api, "central", "card-2", "standard").await;
    checkout(&api, &other, "central", &copy_id)
        .await
        .assert_problem(409, &[("copyId", "unavailable")]);
    for _ in 0..4 {
        lend(&api, &patron_id, "central").await;
    }
    assert_eq!(
        n(
            &patron_item(&api, "central", &patron_id).await,
            "activeLoans"
        ),
        5
    );
    let spare = copy(&api, "central").await;
    checkout(&api, &patron_id, "central", &spare)
        .await
        .assert_problem(409, &[("patronId", "limit_reached")]);
    // At the limit and asking for a lent copy: both are named.
    checkout(&api, &patron_id, "central", &copy_id)
        .await
        .assert_problem(
            409,
            &[("copyId", "unavailable"), ("patronId", "limit_reached")],
        );
    assert_eq!(
        s(&copy_item(&api, "central", &spare).await, "status"),
        "available"
    );
    assert_eq!(
        api.items_with_pk_prefix(&format!("PATRON#{patron_id}"))
            .await
            .len(),
        5
    );
}

async fn active_checkouts_list_active_loans_only(api: Api) {
    library(&api).await;
    let patron_id = patron(&api, "central", "card-1", "premium").await;
    let empty = api.get(format!("/patrons/{patron_id}/checkouts")).await;
    assert_eq!(empty.status, 200);
    assert_eq!(empty.body, json!({"items": [], "nextCursor": null}));
    let mut loans = Vec::new();
    for _ in 0..4 {
        loans.push(lend(&api, &patron_id, "central").await);
    }
    assert_eq!(
        api.post(loan_path(&loans[1], "return"), json!({}))
            .await
            .status,
        200
    );
    let mut seen = Vec::new();
    let mut path = format!("/patrons/{patron_id}/checkouts?limit=2");
    loop {
        let page = api.get(&path).await;
        assert_eq!(page.status, 200, "{page:?}");
        seen.extend(ids(&page.body));
        match page.body["nextCursor"].as_str() {
            Some(cursor) => {
                path = format!("/patrons/{patron_id}/checkouts?limit=2&cursor={cursor}")
            }
            None => break,
        }
    }
    let mut expected: Vec<String> = [0, 2, 3]
        .iter()
        .map(|i| loans[*i]["checkoutId"].as_str().unwrap().to_owned())
        .collect();
    expected.sort();
    seen.sort();
    assert_eq!(
        seen, expected,
        "returned loans are not listed, active ones once each"
    );
    api.get("/patrons/nobody/checkouts")
        .await
        .assert_problem(404, &[]);
    let foreign = api
        .get(format!("/patrons/{patron_id}/checkouts?limit=1"))
        .await
        .body["nextCursor"]
        .as_str()
        .unwrap()
        .to_owned();
    let other = patron(&api, "central", "card-2", "standard").await;
    api.get(format!("/patrons/{other}/checkouts?cursor={foreign}"))
        .await
        .assert_problem(400, &[("cursor", "invalid")]);
}

async fn return_reverses_the_checkout(api: Api) {
    library(&api).await;
    let patron_id = patron(&api, "central", "card-1", "standard").await;
    let copy_id = copy(&api, "east").await;
    let loan = checkout(&api, &patron_id, "east", &copy_id).await.body;
    let reply = api.post(loan_path(&loan, "return"), json!({})).await;
    assert_eq!(reply.status, 200, "{reply:?}");
    assert_eq!(reply.body["status"], "returned");
    assert!(clock::parse_iso(reply.body["returnedDate"].as_str().unwrap()).is_some());
    assert_eq!(reply.body["dueDate"], loan["dueDate"]);

    assert!(
        loan_item(&api, &loan).await.is_none(),
        "no longer an active loan"
    );
    let returned = api
        .item(
            &format!("PATRON#{patron_id}"),
            &format!("RETURNED#{}", loan["checkoutId"].as_str().unwrap()),
        )
        .await
        .unwrap();
    for index_key in ["GSI3PK", "GSI3SK", "GSI4PK", "GSI4SK"] {
        assert!(
            !returned.contains_key(index_key),
            "a returned loan is in no overdue index: {index_key}"
        );
    }
    assert_eq!(
        s(&returned, "GSI1PK"),
        format!("HISTORY#{patron_id}"),
        "out of the open-loans index, into the patron's history"
    );
    assert_eq!(
        s(&returned, "GSI1SK"),
        format!(
            "{}#{}",
            reply.body["returnedDate"].as_str().unwrap(),
            loan["checkoutId"].as_str().unwrap()
        )
    );
    let copy = copy_item(&api, "east", &copy_id).await;
    assert_eq!(s(&copy, "status"), "available");
    assert!(s(&copy, "GSI2SK").starts_with("available#east#"));
    assert_eq!(
        n(
            &patron_item(&api, "central", &patron_id).await,
            "activeLoans"
        ),
        0
    );

    api.post(loan_path(&loan, "return"), json!({}))
        .await
        .assert_problem(409, &[("checkoutId", "returned")]);
    api.post(
        format!("/patrons/{patron_id}/checkouts/nope/return"),
        json!({}),
    )
    .await
    .assert_problem(404, &[]);
    assert_eq!(
        checkout(&api, &patron_id, "east", &copy_id).await.status,
        201,
        "the copy lends again"
    );
}

async fn renew_moves_the_due_date_under_the_rules(api: Api) {
    library(&api).await;
    let patron_id = patron(&api, "central", "card-1", "standard").await;
    let loan = lend(&api, &patron_id, "central").await;
    let due = clock::parse_iso(loan["dueDate"].as_str().unwrap()).unwrap();
    let renewed = api.post(loan_path(&loan, "renew"), json!({})).await;
    assert_eq!(renewed.status, 200, "{renewed:?}");
    assert_eq!(renewed.body["renewalCount"], 1);
    let new_due = renewed.body["dueDate"].as_str().unwrap();
    assert_eq!(clock::parse_iso(new_due).unwrap(), due + clock::days(21));
    let item = loan_item(&api, &loan).await.unwrap();
    assert_eq!(
        s(&item, "GSI1SK"),
        format!("{new_due}#{}", loan["checkoutId"].as_str().unwrap()),
        "the open index moves too"
    );
    assert_eq!(
        api.post(loan_path(&loan, "renew"), json!({})).await.body["renewalCount"],
        2
    );
    api.post(loan_path(&loan, "renew"), json!({}))
        .await
        .assert_problem(409, &[("checkoutId", "renewal_limit")]);

    let late = lend(&api, &patron_id, "central").await;
    run_marker(&api, days_from_now(22)).await;
    api.post(loan_path(&late, "renew"), json!({}))
        .await
        .assert_problem(409, &[("checkoutId", "overdue")]);
    api.post(loan_path(&late, "return"), json!({})).await;
    api.post(loan_path(&late, "renew"), json!({}))
        .await
        .assert_problem(409, &[("checkoutId", "returned")]);
    api.post(
        format!("/patrons/{patron_id}/checkouts/nope/renew"),
        json!({}),
    )
    .await
    .assert_problem(404, &[]);
}

async fn overdue_loans_are_listed_oldest_due_first(api: Api) {
    library(&api).await;
    let standard = patron(&api, "central", "card-1", "standard").await;
    let premium = patron(&api, "central", "card-2", "premium").await;
    let first = lend(&api, &standard, "central").await; // due in 21 days
    let renewed = lend(&api, &standard, "central").await;
    api.post(loan_path(&renewed, "renew"), json!({})).await; // due in 42 days
    let second = lend(&api, &premium, "central").await; // due in 28 days
    let returned = lend(&api, &standard, "central").await;
    api.post(loan_path(&returned, "return"), json!({})).await;
    let elsewhere = lend(&api, &premium, "east").await;
    let not_due = lend(&api, &premium, "central").await;
    api.post(loan_path(&not_due, "renew"), json!({})).await; // due in 56 days

    assert_eq!(
        api.get("/branches/central/overdue").await.body,
        json!({"items": [], "nextCursor": null, "asOf": null}),
        "no marker run yet"
    );
    let report = run_marker(&api, days_from_now(45)).await;
    assert_eq!(report.marked, 4, "{report:?}");
    assert!(report.complete);
    let mut seen = Vec::new();
    let mut path = "/branches/central/overdue?limit=1".to_owned();
    loop {
        let page = api.get(&path).await;
        assert_eq!(page.status, 200, "{page:?}");
        for loan in page.body["items"].as_array().unwrap() {
            assert_eq!(loan["status"], "overdue");
        }
        seen.extend(ids(&page.body));
        match page.body["nextCursor"].as_str() {
            Some(cursor) => path = format!("/branches/central/overdue?limit=1&cursor={cursor}"),
            None => break,
        }
    }
    let id = |loan: &Value| loan["checkoutId"].as_str().unwrap().to_owned();
    assert_eq!(
        seen,
        vec![id(&first), id(&second), id(&renewed)],
        "oldest due first; the returned and the not-yet-due loan are absent"
    );
    assert_eq!(
        ids(&api.get("/branches/east/overdue").await.body),
        vec![id(&elsewhere)]
    );
    api.get("/branches/nowhere/overdue")
        .await
        .assert_problem(404, &[]);
    // An overdue loan is still an active loan of its patron.
    let active = api.get(format!("/patrons/{standard}/checkouts")).await.body;
    let first_active = active["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["checkoutId"] == first["checkoutId"]);
    assert_eq!(first_active.unwrap()["status"], "overdue");
    // A return takes a loan out of the overdue index and frees the patron's slot.
    let before = n(
        &patron_item(&api, "central", &standard).await,
        "activeLoans",
    );
    assert_eq!(
        api.post(loan_path(&first, "return"), json!({}))
            .await
            .status,
        200
    );
    assert_eq!(
        ids(&api.get("/branches/central/overdue").await.body),
        vec![id(&second), id(&renewed)]
    );
    assert_eq!(
        n(
            &patron_item(&api, "central", &standard).await,
            "activeLoans"
        ),
        before - 1
    );
    let returned = api
        .item(
            &format!("PATRON#{standard}"),
            &format!("RETURNED#{}", id(&first)),
        )
        .await
        .unwrap();
    assert!(!returned.contains_key("GSI3PK"));
}

/// Every active loan is where the clock says: due before `now` means in the overdue index (and
/// out of the open one), otherwise in the open index only. Returned loans are in neither.
async fn assert_marked_as_of(api: &Api, now: OffsetDateTime) -> (usize, usize) {
    let cutoff = clock::iso(now);
    let (mut overdue, mut open) = (0, 0);
    for item in api.items().await {
        let sk = s(&item, "SK");
        if sk.starts_with("RETURNED#") {
            assert!(s(&item, "GSI1PK").starts_with("HISTORY#"), "{item:?}");
            assert!(!item.contains_key("GSI3PK") && !item.contains_key("GSI4PK"));
        }
        if !sk.starts_with("CHECKOUT#") {
            continue;
        }
        if s(&item, "dueDate") < cutoff.as_str() {
            assert!(!item.contains_key("GSI1PK"), "{item:?}");
            assert!(s(&item, "GSI3PK").starts_with("OVERDUE#"));
            assert_eq!(s(&item, "GSI4PK"), "OVERDUE");
            assert_eq!(s(&item, "GSI4SK"), s(&item, "GSI3SK"));
            assert_eq!(s(&item, "status"), "overdue");
            overdue += 1;
        } else {
            assert!(s(&item, "GSI1PK").starts_with("OPEN#"));
            assert!(!item.contains_key("GSI3PK") && !item.contains_key("GSI4PK"));
            open += 1;
        }
    }
    (overdue, open)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_marker_is_idempotent_and_resumable() {
    let api = Api::start(Mode::Direct).await;
    library(&api).await;
    let standard: Vec<String> = futures::future::join_all((0..3).map(|i| {
        let api = api.clone();
        async move { patron(&api, "central", &format!("std-{i}"), "standard").await }
    }))
    .await;
    let premium = patron(&api, "central", "prem", "premium").await;
    for patron_id in &standard {
        for _ in 0..4 {
            lend(&api, patron_id, "central").await;
        }
    }
    for _ in 0..5 {
        lend(&api, &premium, "east").await;
    }
    let returned = lend(&api, &standard[0], "central").await;
    api.post(loan_path(&returned, "return"), json!({})).await;
    let now = days_from_now(22);

    // Killed midway: a page of one loan at a time, stopped after 20 pages. On DynamoDB a whole run
    // takes 28 (a shard whose last page was full may end on a page without a due loan, and each
    // due loan is a page), so this one stops short, having marked at least 20 - 16 = 4 loans.
    // moto ends a shard on its last loan, with no empty page after, and reads all 12 in 20
    // pages: there it stops after 8, having marked at most 8.
    let stop_after: usize = if crate::harness::external_engine().is_some() {
        8
    } else {
        20
    };
    let mut pages = 0;
    let partial = mark_overdue(&api.ctx, now, 1, || {
        pages += 1;
        pages <= stop_after
    })
    .await
    .unwrap();
    assert!(!partial.complete, "{partial:?}");
    assert_eq!(partial.pages_read, stop_after as u64);
    assert!(
        (stop_after.saturating_sub(16)..=stop_after.min(11)).contains(&(partial.marked as usize)),
        "{partial:?}"
    );
    // Run again to the end, then once more: the same state as one run.
    let rest = run_marker(&api, now).await;
    assert!(rest.complete);
    assert_eq!(
        partial.marked + rest.marked,
        12,
        "every due loan is marked exactly once"
    );
    let after_one = api.items().await;
    let again = run_marker(&api, now).await;
    assert_eq!((again.marked, again.skipped), (0, 0), "{again:?}");
    assert_eq!(
        sorted(api.items().await),
        sorted(after_one),
        "a second run changes nothing"
    );
    assert_eq!(assert_marked_as_of(&api, now).await, (12, 5));
    // Overlapping runs end the same too.
    let later = days_from_now(30);
    let (a, b) = tokio::join!(run_marker(&api, later), run_marker(&api, later));
    assert_eq!(a.marked + b.marked, 5, "{a:?} {b:?}");
    assert_eq!(assert_marked_as_of(&api, later).await, (17, 0));
}

/// 32 concurrent checkouts of one copy: one loan.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_copy_raced_by_32_checkouts_is_lent_once() {
    let api = Api::start(Mode::Http).await;
    library(&api).await;
    let copy_id = copy(&api, "central").await;
    let patrons: Vec<String> = futures::future::join_all((0..32).map(|i| {
        let api = api.clone();
        async move { patron(&api, "central", &format!("card-{i}"), "standard").await }
    }))
    .await;
    let replies = futures::future::join_all(patrons.iter().map(|p| {
        let (api, copy_id) = (api.clone(), copy_id.clone());
        async move { checkout(&api, p, "central", &copy_id).await }
    }))
    .await;
    assert_eq!(
        replies.iter().filter(|r| r.status == 201).count(),
        1,
        "{replies:?}"
    );
    for reply in replies.iter().filter(|r| r.status != 201) {
        reply.assert_problem(409, &[("copyId", "unavailable")]);
    }
    let items = api.items().await;
    assert_eq!(
        items
            .iter()
            .filter(|i| s(i, "SK").starts_with("CHECKOUT#"))
            .count(),
        1
    );
    let counted: i64 = items
        .iter()
        .filter(|i| s(i, "SK").starts_with("PATRON#"))
        .map(|i| n(i, "activeLoans"))
        .sum();
    assert_eq!(counted, 1, "one patron counts the loan");
}

/// A standard patron one loan below the limit races six checkouts: one wins.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_patron_at_the_limit_never_goes_over_it() {
    let api = Api::start(Mode::Http).await;
    library(&api).await;
    let patron_id = patron(&api, "central", "card-1", "standard").await;
    for _ in 0..4 {
        lend(&api, &patron_id, "central").await;
    }
    let mut copies = Vec::new();
    for _ in 0..6 {
        copies.push(copy(&api, "central").await);
    }
    let replies = futures::future::join_all(copies.iter().map(|c| {
        let (api, patron_id) = (api.clone(), patron_id.clone());
        async move { checkout(&api, &patron_id, "central", c).await }
    }))
    .await;
    assert_eq!(
        replies.iter().filter(|r| r.status == 201).count(),
        1,
        "{replies:?}"
    );
    for reply in replies.iter().filter(|r| r.status != 201) {
        reply.assert_problem(409, &[("patronId", "limit_reached")]);
    }
    assert_eq!(
        n(
            &patron_item(&api, "central", &patron_id).await,
            "activeLoans"
        ),
        5
    );
    assert_eq!(
        api.items_with_pk_prefix(&format!("PATRON#{patron_id}"))
            .await
            .len(),
        5
    );
    let lent =
        futures::future::join_all(copies.iter().map(|c| copy_item(&api, "central", c))).await;
    assert_eq!(
        lent.iter()
            .filter(|c| s(c, "status") == "checked_out")
            .count(),
        1
    );
}

/// The marker's cost grows with the loans that fell due, not with the open loans: the same five
/// due loans among 20 or among 200 open ones cost the same, by `ReturnConsumedCapacity`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_markers_cost_grows_with_newly_due_loans_only() {
    if crate::harness::skip_on_external_engine(crate::harness::CAPACITY_NOT_DYNAMODBS) {
        return;
    }
    let mut costs = Vec::new();
    for open_loans in [20, 200] {
        let api = Api::start(Mode::Direct).await;
        library(&api).await;
        let standard = patron(&api, "central", "due", "standard").await;
        for _ in 0..5 {
            lend(&api, &standard, "central").await;
        }
        for p in 0..open_loans / 10 {
            let premium = patron(&api, "central", &format!("p{p}"), "premium").await;
            for _ in 0..10 {
                lend(&api, &premium, "central").await;
            }
        }
        let report = run_marker(&api, days_from_now(22)).await;
        assert_eq!(report.marked, 5, "{report:?}");
        println!(
            "mark-overdue with {open_loans} open loans not due and 5 due: {:.1} capacity units, {} pages",
            report.capacity_units, report.pages_read
        );
        costs.push(report.capacity_units);
    }
    assert!(costs[0] > 0.0);
    assert!(
        (costs[1] - costs[0]).abs() < 1.0,
        "ten times the open loans, the same cost: {costs:?}"
    );
}

async fn a_premium_patron_holds_ten_loans_renewed_by_28_days(api: Api) {
    library(&api).await;
    let patron_id = patron(&api, "central", "card-1", "premium").await;
    let mut loans = Vec::new();
    for _ in 0..10 {
        loans.push(lend(&api, &patron_id, "central").await);
    }
    let spare = copy(&api, "central").await;
    checkout(&api, &patron_id, "central", &spare)
        .await
        .assert_problem(409, &[("patronId", "limit_reached")]);
    assert_eq!(
        n(
            &patron_item(&api, "central", &patron_id).await,
            "activeLoans"
        ),
        10
    );
    let due = clock::parse_iso(loans[0]["dueDate"].as_str().unwrap()).unwrap();
    let renewed = api.post(loan_path(&loans[0], "renew"), json!({})).await;
    assert_eq!(
        clock::parse_iso(renewed.body["dueDate"].as_str().unwrap()).unwrap(),
        due + clock::days(28)
    );
}

async fn a_loan_past_due_is_not_renewed_before_the_marker_runs(api: Api) {
    library(&api).await;
    let patron_id = patron(&api, "central", "card-1", "standard").await;
    let loan = lend(&api, &patron_id, "central").await;
    // The loan fell due an hour ago, and mark-overdue has not run since.
    let past = clock::iso(clock::now() - time::Duration::hours(1));
    let checkout_id = loan["checkoutId"].as_str().unwrap();
    set_due_date(&api, &loan, &past).await;
    api.post(loan_path(&loan, "renew"), json!({}))
        .await
        .assert_problem(409, &[("checkoutId", "overdue")]);
    assert_eq!(
        s(&loan_item(&api, &loan).await.unwrap(), "dueDate"),
        past,
        "nothing changed"
    );
    // The marker then lists it with "now" as its time.
    assert_eq!(run_marker(&api, clock::now()).await.marked, 1);
    assert_eq!(
        ids(&api.get("/branches/central/overdue").await.body),
        vec![checkout_id.to_owned()]
    );
}

async fn overdue_cursors_stay_in_their_branch(api: Api) {
    library(&api).await;
    let patron_id = patron(&api, "central", "card-1", "premium").await;
    for branch in ["central", "central", "east"] {
        lend(&api, &patron_id, branch).await;
    }
    run_marker(&api, days_from_now(30)).await;
    let page = api.get("/branches/central/overdue?limit=1").await;
    let cursor = page.body["nextCursor"].as_str().unwrap().to_owned();
    api.get(format!("/branches/east/overdue?cursor={cursor}"))
        .await
        .assert_problem(400, &[("cursor", "invalid")]);
    api.get(format!("/patrons/{patron_id}/checkouts?cursor={cursor}"))
        .await
        .assert_problem(400, &[("cursor", "invalid")]);
    let edited = format!("{}A", &cursor[..cursor.len() - 1]);
    let edited = if edited == cursor {
        format!("{}B", &cursor[..cursor.len() - 1])
    } else {
        edited
    };
    api.get(format!("/branches/central/overdue?cursor={edited}"))
        .await
        .assert_problem(400, &[("cursor", "invalid")]);
    api.get("/branches/central/overdue?limit=0")
        .await
        .assert_problem(400, &[("limit", "invalid")]);
    let next = api
        .get(format!("/branches/central/overdue?limit=1&cursor={cursor}"))
        .await;
    assert_eq!(next.status, 200);
    assert_eq!(ids(&next.body).len(), 1);
}

fn sorted(items: Vec<Item>) -> Vec<Vec<(String, String)>> {
    let mut rows: Vec<Vec<(String, String)>> = items
        .into_iter()
        .map(|item| {
            let mut row: Vec<(String, String)> = item
                .into_iter()
                .map(|(k, v)| (k, format!("{v:?}")))
                .collect();
            row.sort();
            row
        })
        .collect();
    rows.sort();
    rows
}

/// Eight concurrent returns of one loan: one `200`, the rest `409 returned`, and the loan is
/// reversed once (the patron's count drops by one, the copy is available once).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_loan_returned_eight_times_at_once_is_returned_once() {
    let api = Api::start(Mode::Http).await;
    library(&api).await;
    let patron_id = patron(&api, "central", "card-1", "standard").await;
    let keep = lend(&api, &patron_id, "central").await;
    let loan = lend(&api, &patron_id, "central").await;
    let replies = futures::future::join_all((0..8).map(|_| {
        let (api, path) = (api.clone(), loan_path(&loan, "return"));
        async move { api.post(path, json!({})).await }
    }))
    .await;
    assert_eq!(
        replies.iter().filter(|r| r.status == 200).count(),
        1,
        "{replies:?}"
    );
    for reply in replies.iter().filter(|r| r.status != 200) {
        reply.assert_problem(409, &[("checkoutId", "returned")]);
    }
    assert_eq!(
        n(
            &patron_item(&api, "central", &patron_id).await,
            "activeLoans"
        ),
        1
    );
    assert!(loan_item(&api, &loan).await.is_none());
    assert!(loan_item(&api, &keep).await.is_some());
    let copy = copy_item(&api, "central", loan["copyId"].as_str().unwrap()).await;
    assert_eq!(s(&copy, "status"), "available");
    let returned = api
        .items()
        .await
        .into_iter()
        .filter(|i| s(i, "SK").starts_with("RETURNED#"))
        .count();
    assert_eq!(returned, 1);
}

/// Moves an open loan's due date (and its open-index sort key with it), as if it had been lent
/// long ago.
async fn set_due_date(api: &Api, loan: &Value, due: &str) {
    let field = |name: &str| loan[name].as_str().unwrap().to_owned();
    crate::harness::set_due_date(
        &api.ctx.db,
        &api.ctx.table,
        &field("patronId"),
        &field("checkoutId"),
        due,
    )
    .await;
}

fn one_loan_path(loan: &Value) -> String {
    format!(
        "/patrons/{}/checkouts/{}",
        loan["patronId"].as_str().unwrap(),
        loan["checkoutId"].as_str().unwrap()
    )
}

async fn a_loan_reads_overdue_a_second_after_its_due_date_with_no_marker_run(api: Api) {
    library(&api).await;
    let patron_id = patron(&api, "central", "card-1", "standard").await;
    let loan = lend(&api, &patron_id, "central").await;
    // Due two seconds from now (to the second, as every date is).
    let due = clock::parse_iso(&clock::iso(clock::now())).unwrap() + time::Duration::seconds(2);
    set_due_date(&api, &loan, &clock::iso(due)).await;
    let before = api.get(one_loan_path(&loan)).await;
    assert_eq!(before.body["status"], "open", "{before:?}");

    let wait = due + time::Duration::seconds(1) - clock::now();
    tokio::time::sleep(wait.try_into().unwrap_or_default()).await;
    // One second after the due date, no marker has run: every answer says overdue.
    let one = api.get(one_loan_path(&loan)).await;
    assert_eq!(one.body["status"], "overdue", "{one:?}");
    let active = api.get(format!("/patrons/{patron_id}/checkouts")).await;
    assert_eq!(active.body["items"][0]["status"], "overdue");
    api.post(loan_path(&loan, "renew"), json!({}))
        .await
        .assert_problem(409, &[("checkoutId", "overdue")]);
    // The stored item is as stored: only the marker moves it into the overdue indexes.
    let item = loan_item(&api, &loan).await.unwrap();
    assert_eq!(s(&item, "status"), "open");
    assert!(!item.contains_key("GSI3PK") && !item.contains_key("GSI4PK"));
    assert_eq!(
        api.get("/overdue").await.body,
        json!({"items": [], "nextCursor": null, "asOf": null}),
        "the lists say how fresh they are"
    );
    // A return answers returned.
    let returned = api.post(loan_path(&loan, "return"), json!({})).await;
    assert_eq!(returned.body["status"], "returned");
}

async fn as_of_moves_only_when_a_marker_run_completes(api: Api) {
    library(&api).await;
    let patron_id = patron(&api, "central", "card-1", "standard").await;
    for _ in 0..3 {
        lend(&api, &patron_id, "central").await;
    }
    let as_of = |api: Api| async move {
        let branch = api.get("/branches/central/overdue").await.body["asOf"].clone();
        let all = api.get("/overdue").await.body["asOf"].clone();
        assert_eq!(branch, all, "both lists read the same run");
        branch
    };
    assert_eq!(as_of(api.clone()).await, Value::Null);
    let t1 = days_from_now(22);
    // A run stopped after its first page has not completed: asOf does not move.
    let partial = mark_overdue(&api.ctx, t1, 1, {
        let mut pages = 0;
        move || {
            pages += 1;
            pages <= 1
        }
    })
    .await
    .unwrap();
    assert!(!partial.complete);
    assert_eq!(as_of(api.clone()).await, Value::Null);
    assert!(
        api.item("MARKER#mark-overdue", "MARKER#mark-overdue")
            .await
            .is_none()
    );
    // A complete run: asOf is its time.
    assert!(run_marker(&api, t1).await.complete);
    assert_eq!(as_of(api.clone()).await, json!(clock::iso(t1)));
    let marker = api
        .item("MARKER#mark-overdue", "MARKER#mark-overdue")
        .await
        .unwrap();
    assert_eq!(s(&marker, "time"), clock::iso(t1));
    let listed = api.get("/overdue").await.body;
    assert_eq!(listed["items"].as_array().unwrap().len(), 3);
    // A later run stopped midway leaves asOf where it was; completed, it moves it.
    let t2 = days_from_now(23);
    let stopped = mark_overdue(&api.ctx, t2, 100, || false).await.unwrap();
    assert!(!stopped.complete);
    assert_eq!(as_of(api.clone()).await, json!(clock::iso(t1)));
    run_marker(&api, t2).await;
    assert_eq!(as_of(api.clone()).await, json!(clock::iso(t2)));
    // An older run completing late (runs may overlap) never moves it back.
    run_marker(&api, t1).await;
    assert_eq!(as_of(api.clone()).await, json!(clock::iso(t2)));
}

async fn the_library_wide_overdue_list_spans_every_branch(api: Api) {
    library(&api).await;
    let standard = patron(&api, "central", "card-1", "standard").await;
    let premium = patron(&api, "east", "card-2", "premium").await;
    let central = lend(&api, &standard, "central").await; // due in 21 days
    let east = lend(&api, &standard, "east").await;
    set_due_date(&api, &east, &clock::iso(days_from_now(10))).await; // due in 10 days
    let premium_loan = lend(&api, &premium, "central").await; // due in 28 days
    let returned = lend(&api, &standard, "central").await;
    api.post(loan_path(&returned, "return"), json!({})).await;
    let not_due = lend(&api, &premium, "east").await;
    api.post(loan_path(&not_due, "renew"), json!({})).await; // due in 56 days

    let now = days_from_now(30);
    assert_eq!(run_marker(&api, now).await.marked, 3);
    let id = |loan: &Value| loan["checkoutId"].as_str().unwrap().to_owned();
    let mut seen = Vec::new();
    let mut path = "/overdue?limit=1".to_owned();
    loop {
        let page = api.get(&path).await;
        assert_eq!(page.status, 200, "{page:?}");
        assert_eq!(page.body["asOf"], json!(clock::iso(now)));
        for loan in page.body["items"].as_array().unwrap() {
            assert_eq!(loan["status"], "overdue");
        }
        seen.extend(ids(&page.body));
        match page.body["nextCursor"].as_str() {
            Some(cursor) => {
                api.get(format!("/branches/central/overdue?cursor={cursor}"))
                    .await
                    .assert_problem(400, &[("cursor", "invalid")]);
                path = format!("/overdue?limit=1&cursor={cursor}");
            }
            None => break,
        }
    }
    assert_eq!(
        seen,
        vec![id(&east), id(&central), id(&premium_loan)],
        "every branch, oldest due first; returned and not-yet-due loans absent"
    );
    let item = loan_item(&api, &east).await.unwrap();
    assert_eq!(s(&item, "GSI4PK"), "OVERDUE");
    assert_eq!(
        s(&item, "GSI4SK"),
        format!("{}#{}", s(&item, "dueDate"), id(&east))
    );
    // A return takes a loan out of both overdue lists at once.
    api.post(loan_path(&central, "return"), json!({})).await;
    assert_eq!(
        ids(&api.get("/overdue").await.body),
        vec![id(&east), id(&premium_loan)]
    );
    assert_eq!(
        ids(&api.get("/branches/central/overdue").await.body),
        vec![id(&premium_loan)]
    );
    api.get("/overdue?limit=0")
        .await
        .assert_problem(400, &[("limit", "invalid")]);
    api.get("/overdue?cursor=bm90LWEtY3Vyc29y")
        .await
        .assert_problem(400, &[("cursor", "invalid")]);
}

async fn one_loan_is_read_active_or_returned(api: Api) {
    library(&api).await;
    let patron_id = patron(&api, "central", "card-1", "standard").await;
    let other = patron(&api, "central", "card-2", "standard").await;
    let loan = lend(&api, &patron_id, "central").await;
    let active = api.get(one_loan_path(&loan)).await;
    assert_eq!(active.status, 200, "{active:?}");
    assert_eq!(active.body, loan, "the loan as the checkout answered it");
    if crate::harness::capacity_as_dynamodb() {
        assert_eq!(active.consumed(), (1.0, 0.0), "an active loan: one GetItem");
    }

    let returned = api.post(loan_path(&loan, "return"), json!({})).await;
    let read = api.get(one_loan_path(&loan)).await;
    assert_eq!(read.status, 200, "{read:?}");
    assert_eq!(read.body, returned.body);
    assert_eq!(read.body["status"], "returned");
    if crate::harness::capacity_as_dynamodb() {
        assert_eq!(read.consumed(), (2.0, 0.0), "a returned loan: two GetItems");
    }

    let checkout_id = loan["checkoutId"].as_str().unwrap();
    for path in [
        format!("/patrons/{other}/checkouts/{checkout_id}"),
        format!("/patrons/{patron_id}/checkouts/nope"),
        format!("/patrons/nobody/checkouts/{checkout_id}"),
    ] {
        api.get(path).await.assert_problem(404, &[]);
    }
    api.get(format!("/patrons/{patron_id}/checkouts/a%23b"))
        .await
        .assert_problem(400, &[("checkoutId", "invalid")]);
}

async fn the_history_lists_returned_loans_newest_return_first(api: Api) {
    library(&api).await;
    let patron_id = patron(&api, "central", "card-1", "premium").await;
    let other = patron(&api, "central", "card-2", "premium").await;
    assert_eq!(
        api.get(format!("/patrons/{patron_id}/history")).await.body,
        json!({"items": [], "nextCursor": null})
    );
    let mut loans = Vec::new();
    for _ in 0..4 {
        loans.push(lend(&api, &patron_id, "central").await);
    }
    let elsewhere = lend(&api, &other, "central").await;
    api.post(loan_path(&elsewhere, "return"), json!({})).await;
    // Returned in this order, each in its own second (return dates are to the second).
    let mut returned = Vec::new();
    for i in [2, 0, 3] {
        let reply = api.post(loan_path(&loans[i], "return"), json!({})).await;
        assert_eq!(reply.status, 200);
        returned.push(reply.body);
        tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    }
    returned.reverse();
    let mut seen = Vec::new();
    let mut path = format!("/patrons/{patron_id}/history?limit=2");
    loop {
        let page = api.get(&path).await;
        assert_eq!(page.status, 200, "{page:?}");
        seen.extend(page.body["items"].as_array().unwrap().iter().cloned());
        match page.body["nextCursor"].as_str() {
            Some(cursor) => {
                api.get(format!("/patrons/{other}/history?cursor={cursor}"))
                    .await
                    .assert_problem(400, &[("cursor", "invalid")]);
                path = format!("/patrons/{patron_id}/history?limit=2&cursor={cursor}")
            }
            None => break,
        }
    }
    assert_eq!(
        seen, returned,
        "newest return first; the active loan and other patrons' are absent"
    );
    api.get("/patrons/nobody/history")
        .await
        .assert_problem(404, &[]);
    api.get("/patrons/a%23b/history")
        .await
        .assert_problem(400, &[("patronId", "invalid")]);
}

async fn a_patron_with_loans_is_not_removed(api: Api) {
    library(&api).await;
    let patron_id = patron(&api, "central", "card-1", "standard").await;
    let loan = lend(&api, &patron_id, "central").await;
    let refused = api.delete(format!("/patrons/{patron_id}")).await;
    refused.assert_problem(409, &[("patronId", "has_loans")]);
    assert_eq!(refused.body["detail"], "patronId has active loans");
    assert_eq!(
        n(
            &patron_item(&api, "central", &patron_id).await,
            "activeLoans"
        ),
        1
    );
    assert!(api.item("CARD#card-1", "CARD#card-1").await.is_some());

    api.post(loan_path(&loan, "return"), json!({})).await;
    assert_eq!(
        api.delete(format!("/patrons/{patron_id}")).await.status,
        204
    );
    assert!(
        api.item("BRANCH#central", &format!("PATRON#{patron_id}"))
            .await
            .is_none()
    );
    assert!(api.item("CARD#card-1", "CARD#card-1").await.is_none());
    // Its returned loans stay, readable by the patron's id; it borrows nothing more.
    let history = api.get(format!("/patrons/{patron_id}/history")).await;
    assert_eq!(
        ids(&history.body),
        vec![loan["checkoutId"].as_str().unwrap().to_owned()]
    );
    assert_eq!(
        api.get(one_loan_path(&loan)).await.body["status"],
        "returned"
    );
    let copy_id = copy(&api, "central").await;
    checkout(&api, &patron_id, "central", &copy_id)
        .await
        .assert_problem(404, &[]);
    assert_eq!(
        s(&copy_item(&api, "central", &copy_id).await, "status"),
        "available"
    );
}

async fn a_lower_tier_keeps_its_loans_and_borrows_nothing_above_the_limit(api: Api) {
    library(&api).await;
    let patron_id = patron(&api, "central", "card-1", "premium").await;
    let mut loans = Vec::new();
    for _ in 0..7 {
        loans.push(lend(&api, &patron_id, "central").await);
    }
    let lowered = api
        .put(
            format!("/patrons/{patron_id}/tier"),
            json!({"membershipTier": "standard"}),
        )
        .await;
    assert_eq!(lowered.status, 200, "{lowered:?}");
    assert_eq!(lowered.body["loanLimit"], 5);
    assert_eq!(lowered.body["activeLoans"], 7, "it keeps its loans");
    let spare = copy(&api, "central").await;
    checkout(&api, &patron_id, "central", &spare)
        .await
        .assert_problem(409, &[("patronId", "limit_reached")]);
    for loan in &loans[..3] {
        api.post(loan_path(loan, "return"), json!({})).await;
    }
    let lent = checkout(&api, &patron_id, "central", &spare).await;
    assert_eq!(lent.status, 201, "under the limit again: {lent:?}");
    let due = clock::parse_iso(lent.body["dueDate"].as_str().unwrap()).unwrap();
    assert!(
        (due - days_from_now(21)).whole_seconds().abs() <= 2,
        "a loan made now lasts the new tier's period"
    );
    assert_eq!(
        loans[3]["loanPeriodDays"], 28,
        "loans made before keep theirs"
    );
}

async fn loans_made_after_a_correction_carry_the_corrected_title(api: Api) {
    library(&api).await;
    let patron_id = patron(&api, "central", "card-1", "premium").await;
    let copy_before = copy(&api, "central").await;
    let earlier = lend(&api, &patron_id, "central").await;
    let corrected = api
        .call("PATCH", format!("/books/{ISBN}"))
        .json(json!({"title": "Fundamentals of Data Structures in Pascal"}))
        .send()
        .await;
    assert_eq!(corrected.status, 200, "{corrected:?}");
    let later = checkout(&api, &patron_id, "central", &copy_before).await;
    assert_eq!(later.status, 201);
    assert_eq!(
        later.body["title"],
        "Fundamentals of Data Structures in Pascal"
    );
    // What a checkout costs: the patron (GSI1, eventually consistent), the copy and the book.
    println!(
        "checkout consumed {:?} (read, write) units",
        later.consumed()
    );
    if crate::harness::capacity_as_dynamodb() {
        assert_eq!(later.consumed().0, 2.5);
    }
    // An earlier loan keeps the title it was lent under; a copy, the title it was added with.
    assert_eq!(
        api.get(one_loan_path(&earlier)).await.body["title"],
        "Fundamentals of Data Structures"
    );
    assert_eq!(
        s(&copy_item(&api, "central", &copy_before).await, "title"),
        "Fundamentals of Data Structures"
    );
}

/// A removal and a checkout of the same patron at the same moment, round after round: either
/// the checkout wins (the removal is `409 has_loans`) or the removal does (the checkout is `404`),
/// and never is there a loan for a removed patron.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_removal_racing_a_checkout_never_leaves_a_loan_for_a_removed_patron() {
    let api = Api::start(Mode::Http).await;
    library(&api).await;
    let mut outcomes = std::collections::BTreeMap::new();
    for round in 0..12 {
        let patron_id = patron(&api, "central", &format!("card-{round}"), "standard").await;
        let copy_id = copy(&api, "central").await;
        let (lent, removed) = tokio::join!(
            checkout(&api, &patron_id, "central", &copy_id),
            api.delete(format!("/patrons/{patron_id}")),
        );
        let row = api
            .item("BRANCH#central", &format!("PATRON#{patron_id}"))
            .await;
        let loans = api
            .items_with_pk_prefix(&format!("PATRON#{patron_id}"))
            .await;
        let copy = copy_item(&api, "central", &copy_id).await;
        match (lent.status, removed.status) {
            (201, 409) => {
                removed.assert_problem(409, &[("patronId", "has_loans")]);
                assert_eq!(n(row.as_ref().unwrap(), "activeLoans"), 1);
                assert_eq!(loans.len(), 1);
                assert_eq!(s(&copy, "status"), "checked_out");
            }
            (404, 204) => {
                assert!(row.is_none());
                assert!(loans.is_empty(), "round {round}: {loans:?}");
                assert_eq!(s(&copy, "status"), "available");
                assert!(
                    api.item(&format!("CARD#card-{round}"), &format!("CARD#card-{round}"))
                        .await
                        .is_none()
                );
            }
            other => panic!("round {round}: {other:?} {lent:?} {removed:?}"),
        }
        *outcomes.entry((lent.status, removed.status)).or_insert(0) += 1;
    }
    println!("checkout vs removal outcomes: {outcomes:?}");
}

/// The library-wide overdue list reads overdue loans only: the same overdue loans among 10 or
/// among 100 open ones cost the same (by `ReturnConsumedCapacity`), and more overdue loans cost
/// more.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_library_wide_overdue_lists_cost_grows_with_overdue_loans_only() {
    if crate::harness::skip_on_external_engine(crate::harness::CAPACITY_NOT_DYNAMODBS) {
        return;
    }
    let mut costs = Vec::new();
    for (overdue_patrons, open_loans) in [(1, 10), (1, 100), (6, 10)] {
        let api = Api::start(Mode::Direct).await;
        library(&api).await;
        // Standard loans (21 days) fall due before the run; premium ones (28 days) do not.
        for p in 0..overdue_patrons {
            let standard = patron(&api, "central", &format!("s{p}"), "standard").await;
            for _ in 0..5 {
                lend(&api, &standard, if p % 2 == 0 { "central" } else { "east" }).await;
            }
        }
        for p in 0..open_loans / 10 {
            let premium = patron(&api, "east", &format!("p{p}"), "premium").await;
            for _ in 0..10 {
                lend(&api, &premium, "central").await;
            }
        }
        let returned = lend(&api, &patron(&api, "east", "r", "standard").await, "east").await;
        api.post(loan_path(&returned, "return"), json!({})).await;
        run_marker(&api, days_from_now(22)).await;
        let page = api.get("/overdue?limit=100").await;
        assert_eq!(
            page.body["items"].as_array().unwrap().len(),
            5 * overdue_patrons
        );
        let (read, write) = page.consumed();
        assert_eq!(write, 0.0);
        println!(
            "GET /overdue with {} overdue and {open_loans} open loans: {read} read units",
            5 * overdue_patrons
        );
        costs.push(read);
    }
    assert_eq!(
        costs[0], costs[1],
        "ten times the open loans, the same cost: {costs:?}"
    );
    assert!(
        costs[2] > costs[0],
        "more overdue loans, more cost: {costs:?}"
    );
}

/// A local table made before GSI4 existed gains it when the runner starts (backfilled by the
/// engine), and the library-wide overdue list then reads the loans marked before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_made_before_gsi4_gains_it_backfilled() {
    use aws_sdk_dynamodb::types::{DeleteGlobalSecondaryIndexAction, GlobalSecondaryIndexUpdate};
    use singlet_functions::table::add_missing_indexes;
    let api = Api::start(Mode::Direct).await;
    library(&api).await;
    let patron_id = patron(&api, "central", "card-1", "standard").await;
    let loan = lend(&api, &patron_id, "central").await;
    run_marker(&api, days_from_now(22)).await;
    api.ctx
        .db
        .update_table()
        .table_name(&*api.ctx.table)
        .global_secondary_index_updates(
            GlobalSecondaryIndexUpdate::builder()
                .delete(
                    DeleteGlobalSecondaryIndexAction::builder()
                        .index_name("GSI4")
                        .build()
                        .unwrap(),
                )
                .build(),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(api.get("/overdue").await.status, 500, "no index to read");

    let added = add_missing_indexes(&api.ctx.db, &api.ctx.table)
        .await
        .unwrap();
    assert_eq!(added, ["GSI4"]);
    assert_eq!(
        ids(&api.get("/overdue").await.body),
        vec![loan["checkoutId"].as_str().unwrap().to_owned()]
    );
    assert!(
        add_missing_indexes(&api.ctx.db, &api.ctx.table)
            .await
            .unwrap()
            .is_empty()
    );
}

/// An event from a month ahead marks nothing that is not due by the clock (plus 5 minutes), and
/// `asOf` stays with the clock; a context whose clock reads a month ahead (`invoke --clock`,
/// the console) marks the loan, as the schedule will by then.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_from_the_future_marks_only_what_the_clock_says_is_due() {
    let api = Api::start(Mode::Direct).await;
    library(&api).await;
    let patron_id = patron(&api, "central", "card-1", "standard").await;
    let loan = lend(&api, &patron_id, "central").await;
    let month_ahead = clock::now() + time::Duration::days(30);
    let event = json!({"time": clock::iso(month_ahead), "detail-type": "Scheduled Event"});

    let report = singlet::invoke::invoke(&api.ctx, "mark-overdue", &event.to_string())
        .await
        .unwrap();
    assert_eq!(report["marked"], 0, "{report}");
    let now = clock::parse_iso(report["now"].as_str().unwrap()).unwrap();
    assert!(
        now <= OffsetDateTime::now_utc() + time::Duration::minutes(5),
        "now is the clock's plus 5 minutes at most: {report}"
    );
    let as_of = api.get("/overdue").await.body["asOf"].clone();
    let as_of = clock::parse_iso(as_of.as_str().unwrap()).unwrap();
    assert!(as_of <= OffsetDateTime::now_utc() + time::Duration::minutes(5));
    let item = loan_item(&api, &loan).await.unwrap();
    assert!(!item.contains_key("GSI3PK"), "not marked: {item:?}");

    let mut clocked = api.ctx.clone();
    clocked.clock = clock::Clock::reading(month_ahead);
    let report = singlet::invoke::invoke(&clocked, "mark-overdue", &event.to_string())
        .await
        .unwrap();
    assert_eq!(report["marked"], 1, "{report}");
    assert_eq!(report["now"], json!(clock::iso(month_ahead)));
    let item = loan_item(&api, &loan).await.unwrap();
    assert!(item.contains_key("GSI3PK"), "marked: {item:?}");
}

/// A handler runs on its context's clock (`invoke --clock`): a checkout made "a month ahead" is
/// due from then.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_checkout_on_a_set_clock_is_due_from_that_time() {
    let api = Api::start(Mode::Direct).await;
    library(&api).await;
    let patron_id = patron(&api, "central", "card-1", "standard").await;
    let copy_id = copy(&api, "central").await;
    let month_ahead = clock::now() + time::Duration::days(30);
    let mut clocked = api.ctx.clone();
    clocked.clock = clock::Clock::reading(month_ahead);
    let loan = checkout(&api.with_ctx(clocked), &patron_id, "central", &copy_id).await;
    assert_eq!(loan.status, 201, "{loan:?}");
    let due = clock::parse_iso(loan.body["dueDate"].as_str().unwrap()).unwrap();
    let expected = month_ahead + time::Duration::days(21);
    assert!(
        (due - expected).abs() < time::Duration::minutes(1),
        "due {due}, expected about {expected}"
    );
}
