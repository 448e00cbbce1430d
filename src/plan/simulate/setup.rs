//! The simulation's population, made before its window on the engine's clock: branches, books,
//! copies and patrons through the routes themselves, the loans to return lent by the checkout
//! route, the marker's due loans put in bulk as the checkout writes them. The clock moves a
//! second every few calls, so setup never meets the per-key limits it is there to measure.

use super::population::{LOANS_PER_PATRON, Schedule};
use crate::console::api_client::{ApiClient, Sent};
use serde_json::{Value, json};
use singlet_functions::clock::Clock;
use singlet_functions::model::Entity;
use singlet_functions::model::loans::{Checkout, LoanStatus};
use singlet_shared::{Id, Isbn13};
use std::collections::BTreeMap;

/// Setup's calls a virtual second: with every one on one book's index key, 40 stay far under
/// its limits.
const CALLS_A_SECOND: u32 = 40;
/// Due loans put a virtual second: 16 open-loans shards take 25 index entries each.
const DUE_A_SECOND: usize = 400;
/// Who calls (every scope: the simulation is staff and patron at once).
pub const PERSON: &str = "plan-simulate";

/// What setup made: ids by the schedule's indexes.
pub struct Made {
    pub isbns: Vec<String>,
    /// Available copies by (branch, book), taken by the window's checkouts in turn.
    pub copies: BTreeMap<(usize, usize), Vec<String>>,
    /// Patrons of each branch, and how many loans each has been given.
    pub patrons: Vec<Vec<String>>,
    /// Loans given so far at each branch: its patrons take five each in turn.
    pub given: Vec<usize>,
    /// Setup's loans, (patron, checkout) in the order the window returns them.
    pub lent: Vec<(String, String)>,
}

pub fn branch_id(branch: usize) -> String {
    format!("sim-b{branch:03}")
}

/// A valid ISBN-13 for book `n` (978 prefix, its check digit computed).
fn isbn(n: usize) -> String {
    let body = format!("978{:09}", n + 100_000);
    let sum: u32 = body
        .bytes()
        .enumerate()
        .map(|(i, b)| u32::from(b - b'0') * if i % 2 == 0 { 1 } else { 3 })
        .sum();
    format!("{body}{}", (10 - sum % 10) % 10)
}

/// Calls the API, moving the clock a second every [`CALLS_A_SECOND`] calls.
struct Caller<'a> {
    api: &'a ApiClient,
    clock: &'a Clock,
    calls: u32,
}

impl Caller<'_> {
    async fn post(&mut self, path: &str, body: Option<Value>) -> Result<Value, String> {
        self.calls += 1;
        if self.calls.is_multiple_of(CALLS_A_SECOND) {
            self.clock.advance(time::Duration::SECOND);
        }
        let sent = Sent::new("POST", path);
        let sent = match body {
            Some(body) => sent.json(body),
            None => sent,
        };
        let answer = self.api.call(PERSON, sent).await?;
        if answer.status >= 300 {
            return Err(format!(
                "setup's POST {path} answered {}: {}",
                answer.status, answer.body
            ));
        }
        Ok(answer.body)
    }
}

fn field(body: &Value, name: &str) -> Result<String, String> {
    body[name]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| format!("setup's answer has no {name}: {body}"))
}

/// Makes the schedule's population on `api`, on `clock`.
pub async fn make(api: &ApiClient, clock: &Clock, schedule: &Schedule) -> Result<Made, String> {
    let mut caller = Caller {
        api,
        clock,
        calls: 0,
    };
    for branch in 0..schedule.branches {
        let body = json!({
            "branchId": branch_id(branch), "name": format!("Branch {branch}"),
            "address": "1 Main Street", "city": "Springfield", "phone": "+1 555 0100",
            "openingHours": "Mon-Sat 09:00-20:00",
        });
        caller.post("/branches", Some(body)).await?;
    }
    let isbns: Vec<String> = (0..schedule.books).map(isbn).collect();
    for (n, isbn) in isbns.iter().enumerate() {
        let body = json!({
            "isbn": isbn, "title": format!("Book {n}"), "author": "A. Author",
            "publisher": "Press", "publishYear": 2001, "genre": "fiction", "pageCount": 300,
            "description": "Simulated.",
        });
        caller.post("/books", Some(body)).await?;
    }
    // One copy per loan (none is lent twice), one patron per five loans of a branch.
    let mut wanted: BTreeMap<(usize, usize), usize> = BTreeMap::new();
    let mut per_branch = vec![0usize; schedule.branches];
    for lend in schedule.all_lent() {
        *wanted.entry((lend.branch, lend.book)).or_default() += 1;
        per_branch[lend.branch] += 1;
    }
    let mut copies: BTreeMap<(usize, usize), Vec<String>> = BTreeMap::new();
    for (&(branch, book), &count) in &wanted {
        for _ in 0..count {
            let body = json!({"isbn": isbns[book], "condition": "good"});
            let path = format!("/branches/{}/copies", branch_id(branch));
            let copy = caller.post(&path, Some(body)).await?;
            copies
                .entry((branch, book))
                .or_default()
                .push(field(&copy, "copyId")?);
        }
    }
    let mut patrons = Vec::new();
    let mut card = 0;
    for (branch, loans) in per_branch.iter().enumerate() {
        let mut of_branch = Vec::new();
        for _ in 0..loans.div_ceil(LOANS_PER_PATRON).max(1) {
            card += 1;
            let body = json!({
                "cardNumber": format!("S-{card:06}"), "firstName": "Sim", "lastName": format!("Patron{card}"),
                "email": format!("sim.{card}@example.org"), "membershipTier": "standard",
            });
            let path = format!("/branches/{}/patrons", branch_id(branch));
            of_branch.push(field(&caller.post(&path, Some(body)).await?, "patronId")?);
        }
        patrons.push(of_branch);
    }
    let mut made = Made {
        isbns,
        copies,
        patrons,
        given: vec![0; schedule.branches],
        lent: Vec::new(),
    };
    for lend in &schedule.lent_before {
        let body = checkout_body(&mut made, *lend);
        let loan = caller.post("/checkouts", Some(body.clone())).await?;
        made.lent.push((
            body["patronId"].as_str().unwrap_or_default().to_owned(),
            field(&loan, "checkoutId")?,
        ));
    }
    clock.advance(time::Duration::SECOND);
    put_due(api, clock, &schedule.due).await?;
    Ok(made)
}

/// A checkout of `lend`: the next copy of its book at its branch, the branch's next patron with
/// room for a loan.
pub fn checkout_body(made: &mut Made, lend: super::population::Lend) -> Value {
    let copy = made
        .copies
        .get_mut(&(lend.branch, lend.book))
        .and_then(Vec::pop)
        .expect("setup made a copy for every loan");
    let patrons = &made.patrons[lend.branch];
    let patron = &patrons[made.given[lend.branch] / LOANS_PER_PATRON % patrons.len()];
    made.given[lend.branch] += 1;
    json!({"patronId": patron, "branchId": branch_id(lend.branch), "copyId": copy})
}

/// The marker's loans, due long before the window, put as the checkout route writes an open
/// loan (in its open-loans shard), each its own patron's, at the schedule's branches.
async fn put_due(api: &ApiClient, clock: &Clock, due: &[usize]) -> Result<(), String> {
    let id = |raw: String| Id::parse(&raw).map_err(|e| format!("{raw}: {e:?}"));
    let isbn = Isbn13::parse(&isbn(0)).map_err(|e| format!("{e:?}"))?;
    let lent_at = clock.now() - time::Duration::days(60);
    let due_at = lent_at + time::Duration::days(21);
    let mut items = Vec::with_capacity(due.len());
    for (n, branch) in due.iter().enumerate() {
        let branch = id(branch_id(*branch))?;
        items.push(
            Checkout {
                checkout_id: id(format!("sim-due-{n:06}"))?,
                patron_id: id(format!("sim-due-p{n:06}"))?,
                patron_branch_id: branch.clone(),
                branch_id: branch,
                copy_id: id(format!("sim-due-c{n:06}"))?,
                isbn: isbn.clone(),
                title: "Book 0".into(),
                status: LoanStatus::Open,
                checked_out_at: singlet_functions::clock::iso(lent_at),
                due_date: singlet_functions::clock::iso(due_at),
                renewal_count: 0,
                loan_period_days: 21,
                returned_date: None,
                expires_at: None,
            }
            .to_item(),
        );
    }
    for second in items.chunks(DUE_A_SECOND) {
        for batch in second.chunks(singlet_functions::store::bulk::BATCH_LIMIT) {
            singlet_functions::store::bulk::put_batch(&api.ctx.db, &api.ctx.table, batch.to_vec())
                .await?;
        }
        clock.advance(time::Duration::SECOND);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_made_isbn_is_valid() {
        for n in [0, 1, 57, 199] {
            assert!(
                singlet_shared::Isbn13::parse(&super::isbn(n)).is_ok(),
                "{n}"
            );
        }
    }
}
