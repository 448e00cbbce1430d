//! A realistic data set for every domain, written through the real handlers (each request goes
//! through the front door like any other, so every invariant holds: locks with their vehicles,
//! copies counted in the availability index, loans counted against their patrons).
//!
//! Some loans are lent in the past, through the same checkout route on a clock set back (as
//! `invoke --clock` runs a function), so that they are due already or in the coming days and
//! `mark-overdue` finds them as it finds loans that fell due. Each change of a resource is made
//! by its own reviewer (the token's subject is the event's actor). A domain that already has
//! data is left alone.

use super::api_client::{ApiClient, Sent};
use super::patterns::{Data, isbn13, names};
use super::table;
use aws_sdk_dynamodb::error::DisplayErrorContext;
use serde::Serialize;
use serde_json::{Value, json};
use singlet_functions::clock;
use singlet_functions::model::library::Tier;
use singlet_tools::seed_marker;
use std::collections::BTreeMap;
use time::OffsetDateTime;
use tracing::instrument::WithSubscriber;

const VEHICLES: &[(&str, &str, &str)] = &[
    ("KA51 MN2040", "WVWZZZ1JZXW004410", "airport"),
    ("MH12 DE1433", "JTDBR32E720051234", "airport"),
    ("DL8C AF5030", "1HGCM82633A004352", "south"),
    ("TN09 BZ2211", "WBA3A5C5XDF598765", "east"),
    ("KL07 CU7475", "VF1RFB00X56712345", "harbour"),
    ("GJ01 KL5566", "ZFA31200000123456", "west"),
    ("RJ14 CV9090", "SALGA2EF9EA123456", "south"),
    ("UP32 GH1234", "WDD2050041R123456", "airport"),
    ("WB06 MN4321", "YV1MS382262123456", "east"),
    ("AP28 QR8765", "KMHCT41BAEU123456", "harbour"),
    ("HR26 DK8337", "TMBJJ7NE5F0123456", "west"),
    ("PB10 EF2468", "NMTKZ3BE10R123456", "airport"),
];

type Change = (&'static str, &'static str, &'static str);

const RESOURCES: &[(&str, &str, &[Change])] = &[
    (
        "gate-12",
        "closed",
        &[("open", "unlock", "grace"), ("closed", "lock", "alan")],
    ),
    (
        "invoice-2041",
        "draft",
        &[
            ("in_review", "submit", "ada"),
            ("approved", "approve", "barbara"),
        ],
    ),
    (
        "deploy-prod-118",
        "pending",
        &[("running", "start", "ci"), ("succeeded", "finish", "ci")],
    ),
    (
        "contract-17",
        "draft",
        &[
            ("in_review", "submit", "ken"),
            ("changes_requested", "review", "margaret"),
            ("in_review", "resubmit", "ken"),
            ("signed", "sign", "margaret"),
        ],
    ),
    (
        "incident-311",
        "open",
        &[("investigating", "acknowledge", "radia")],
    ),
    ("policy-retention", "active", &[]),
];

const BRANCHES: &[(&str, &str, &str, &str)] = &[
    (
        "old-town",
        "Old Town Library",
        "1 Library Square",
        "+44 20 7946 0000",
    ),
    (
        "riverside",
        "Riverside Branch",
        "22 Mill Lane",
        "+44 20 7946 0100",
    ),
    (
        "hillcrest",
        "Hillcrest Branch",
        "9 Observatory Road",
        "+44 20 7946 0200",
    ),
];

const BOOKS: &[(&str, &str, &str, i64, &str, i64)] = &[
    (
        "Designing Data-Intensive Applications",
        "Martin Kleppmann",
        "O'Reilly Media",
        2017,
        "Computer science",
        616,
    ),
    (
        "The Pragmatic Programmer",
        "Andrew Hunt and David Thomas",
        "Addison-Wesley",
        1999,
        "Computer science",
        352,
    ),
    (
        "Structure and Interpretation of Computer Programs",
        "Harold Abelson and Gerald Jay Sussman",
        "MIT Press",
        1985,
        "Computer science",
        657,
    ),
    (
        "The Left Hand of Darkness",
        "Ursula K. Le Guin",
        "Ace Books",
        1969,
        "Science fiction",
        304,
    ),
    (
        "Middlemarch",
        "George Eliot",
        "William Blackwood and Sons",
        1871,
        "Fiction",
        880,
    ),
    (
        "A Brief History of Time",
        "Stephen Hawking",
        "Bantam Books",
        1988,
        "Science",
        256,
    ),
    (
        "The Name of the Rose",
        "Umberto Eco",
        "Harcourt",
        1983,
        "Mystery",
        536,
    ),
    (
        "Things Fall Apart",
        "Chinua Achebe",
        "Heinemann",
        1958,
        "Fiction",
        209,
    ),
    (
        "Gödel, Escher, Bach",
        "Douglas Hofstadter",
        "Basic Books",
        1979,
        "Philosophy",
        777,
    ),
    (
        "The Hobbit",
        "J. R. R. Tolkien",
        "George Allen & Unwin",
        1937,
        "Fantasy",
        310,
    ),
    (
        "Silent Spring",
        "Rachel Carson",
        "Houghton Mifflin",
        1962,
        "Science",
        368,
    ),
    (
        "Invisible Cities",
        "Italo Calvino",
        "Einaudi",
        1972,
        "Fiction",
        165,
    ),
];

const ACCOUNTS: usize = 10;
const PATRONS: usize = 15;
const LOANS: usize = 18;
const RETURNED: &[usize] = &[0, 7, 13];
const RENEWED: &[usize] = &[2, 9];
/// Loans whose due date moves: (loan, days from now; negative is already due).
const DUE: &[(usize, i64)] = &[
    (1, -1),
    (4, -2),
    (6, -4),
    (10, -7),
    (12, -12),
    (15, -20),
    (3, 2),
    (5, 5),
];

/// The branches a book's copies are at: every book at old-town, some at the others too.
fn copies_of(book: usize) -> Vec<usize> {
    let mut at = vec![0];
    if book < 4 {
        at.push(0);
    }
    if book.is_multiple_of(2) {
        at.push(1);
    }
    if book.is_multiple_of(3) {
        at.push(2);
    }
    at
}

fn isbn(book: usize) -> String {
    isbn13(978_149_190_000 + book as u64 * 37)
}

/// What a seed did.
#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SeedReport {
    /// Requests that succeeded, by pattern.
    pub created: BTreeMap<String, usize>,
    /// Domains left alone because they already had data.
    pub skipped: Vec<String>,
    /// Of those, the domains a seed stopped part way left partial (its mark,
    /// [`seed_marker::PARTITION`], is still there): a seed cannot tell which of their requests were
    /// made, so it neither repeats nor finishes them, and says so.
    pub partial: Vec<String>,
    /// Loans lent in the past: due already, or in the coming days.
    pub lent_in_the_past: usize,
    /// Requests that did not succeed (a seed on a table changed meanwhile).
    pub failures: Vec<String>,
}

/// Called after each step: steps done, steps in all, what was just done.
pub type Progress<'a> = &'a (dyn Fn(u64, u64, &str) + Send + Sync);

struct Seeder<'a> {
    api: &'a ApiClient,
    person: &'a str,
    progress: Progress<'a>,
    done: u64,
    total: u64,
    report: SeedReport,
    /// A test hook: end the process, as a kill would, after this many requests.
    stop_after: Option<u64>,
}

impl Seeder<'_> {
    fn step(&mut self, what: &str) {
        self.done += 1;
        (self.progress)(self.done, self.total, what);
        if self.stop_after == Some(self.done) {
            // As if killed: nothing after this request runs, its domain's mark included.
            std::process::exit(137);
        }
    }

    /// One request; its answer's body when it succeeded.
    async fn send(&mut self, pattern: &str, sent: Sent) -> Option<Value> {
        self.send_at(None, pattern, sent).await
    }

    /// One request, handled as if the clock read `at` (now when `None`).
    async fn send_at(
        &mut self,
        at: Option<OffsetDateTime>,
        pattern: &str,
        sent: Sent,
    ) -> Option<Value> {
        let line = format!("{} {}", sent.method, sent.path);
        let answer = match at {
            Some(at) => self.api.at(at).call(self.person, sent).await,
            None => self.api.call(self.person, sent).await,
        };
        self.step(&line);
        match answer {
            Ok(answer) if answer.status < 300 => {
                *self.report.created.entry(pattern.to_owned()).or_default() += 1;
                Some(answer.body)
            }
            Ok(answer) => {
                self.report
                    .failures
                    .push(format!("{line}: {} {}", answer.status, answer.body));
                None
            }
            Err(error) => {
                self.report.failures.push(format!("{line}: {error}"));
                None
            }
        }
    }
}

fn post(path: impl Into<String>, body: Value) -> Sent {
    Sent::new("POST", path).json(body)
}

fn steps(fleet: bool, accounts: bool, audit: bool, library: bool) -> u64 {
    let mut total = 0;
    if fleet {
        total += VEHICLES.len() + 2;
    }
    if accounts {
        total += ACCOUNTS + 1;
    }
    if audit {
        total += RESOURCES.iter().map(|r| 1 + r.2.len()).sum::<usize>();
    }
    if library {
        let copies: usize = (0..BOOKS.len()).map(|b| copies_of(b).len()).sum();
        total += BRANCHES.len()
            + BOOKS.len()
            + copies
            + PATRONS
            + LOANS
            + RETURNED.len()
            + RENEWED.len();
    }
    total as u64
}

/// Marks `domain` as being seeded.
async fn mark(api: &ApiClient, domain: &str) -> Result<(), String> {
    api.ctx
        .db
        .put_item()
        .table_name(&*api.ctx.table)
        .set_item(Some(seed_marker::item(domain)))
        .send()
        .await
        .map(|_| ())
        .map_err(|e| {
            format!(
                "cannot mark {domain} as being seeded: {}",
                DisplayErrorContext(e)
            )
        })
}

/// Deletes `domain`'s mark: every request of its seed was made.
async fn unmark(api: &ApiClient, domain: &str) -> Result<(), String> {
    api.ctx
        .db
        .delete_item()
        .table_name(&*api.ctx.table)
        .set_key(Some(seed_marker::key(domain)))
        .send()
        .await
        .map(|_| ())
        .map_err(|e| {
            format!(
                "{domain} is seeded, but its mark ({}) could not be deleted: {}",
                seed_marker::PARTITION,
                DisplayErrorContext(e)
            )
        })
}

/// Fills every domain that has no data yet.
pub async fn seed(
    api: &ApiClient,
    person: &str,
    progress: Progress<'_>,
) -> Result<SeedReport, String> {
    seed_stopping_after(api, person, progress, None).await
}

/// [`seed`], ending the process after `stop_after` requests (a test's kill).
pub async fn seed_stopping_after(
    api: &ApiClient,
    person: &str,
    progress: Progress<'_>,
    stop_after: Option<u64>,
) -> Result<SeedReport, String> {
    let snapshot = table::scan(&api.ctx).await?;
    let marked = |domain: &str| {
        snapshot
            .keys()
            .any(|(pk, sk)| seed_marker::is_mark_of(pk, sk, domain))
    };
    let data = Data::read(&snapshot);
    let fleet = data.vehicles.is_empty();
    let accounts = data.accounts.is_empty();
    let audit = data.resources.is_empty();
    let library = data.branches.is_empty();
    let mut seeder = Seeder {
        api,
        person,
        progress,
        done: 0,
        total: steps(fleet, accounts, audit, library),
        report: SeedReport::default(),
        stop_after,
    };
    for (has_data, name) in [
        (!fleet, "fleet"),
        (!accounts, "accounts"),
        (!audit, "audit"),
        (!library, "library"),
    ] {
        if has_data {
            seeder.report.skipped.push(name.to_owned());
            if marked(name) {
                seeder.report.partial.push(name.to_owned());
            }
        }
    }
    if fleet {
        mark(api, "fleet").await?;
        seed_fleet(&mut seeder).await;
        unmark(api, "fleet").await?;
    }
    if accounts {
        mark(api, "accounts").await?;
        seed_accounts(&mut seeder).await;
        unmark(api, "accounts").await?;
    }
    if audit {
        mark(api, "audit").await?;
        seed_audit(&mut seeder).await;
        unmark(api, "audit").await?;
    }
    if library {
        mark(api, "library").await?;
        seed_library(&mut seeder).await?;
        unmark(api, "library").await?;
    }
    Ok(seeder.report)
}

async fn seed_fleet(seeder: &mut Seeder<'_>) {
    let mut ids = Vec::new();
    for (plate, chassis, depot) in VEHICLES {
        let body = json!({"plate": plate, "chassis": chassis, "depot": depot});
        if let Some(vehicle) = seeder
            .send("register-vehicle", post("/vehicles", body))
            .await
        {
            ids.push(vehicle["vehicleId"].as_str().unwrap_or_default().to_owned());
        }
    }
    if let Some(id) = ids.get(3) {
        let sent =
            Sent::new("PUT", format!("/vehicles/{id}/plate")).json(json!({"plate": "TN09 BZ2299"}));
        seeder.send("change-plate", sent).await;
    }
    if let Some(id) = ids.last() {
        seeder
            .send(
                "retire-vehicle",
                Sent::new("DELETE", format!("/vehicles/{id}")),
            )
            .await;
    }
}

async fn seed_accounts(seeder: &mut Seeder<'_>) {
    let mut ids = Vec::new();
    for (first, last) in names().take(ACCOUNTS) {
        let body = json!({
            "email": format!("{first}.{last}@example.com"),
            "username": format!("{first}_{last}").to_lowercase(),
            "displayName": format!("{first} {last}"),
        });
        if let Some(account) = seeder.send("create-account", post("/accounts", body)).await {
            ids.push(account["accountId"].as_str().unwrap_or_default().to_owned());
        }
    }
    if let Some(id) = ids.first() {
        let sent = Sent::new("PUT", format!("/accounts/{id}/email"))
            .json(json!({"email": "first.account@example.net"}));
        seeder.send("change-email", sent).await;
    }
}

async fn seed_audit(seeder: &mut Seeder<'_>) {
    for (id, status, changes) in RESOURCES {
        let body = json!({"resourceId": id, "status": status});
        if seeder
            .send("create-resource", post("/resources", body))
            .await
            .is_none()
        {
            continue;
        }
        // The API takes the actor from the token: each reviewer sends their own change.
        let person = seeder.person;
        for (version, (status, action, actor)) in (1..).zip(changes.iter()) {
            let sent = Sent::new("PATCH", format!("/resources/{id}"))
                .json(json!({"status": status, "action": action}))
                .header("if-match", &format!("\"{version}\""));
            seeder.person = actor;
            seeder.send("change-resource", sent).await;
        }
        seeder.person = person;
    }
}

async fn seed_library(seeder: &mut Seeder<'_>) -> Result<(), String> {
    for (id, name, address, phone) in BRANCHES {
        let body = json!({
            "branchId": id, "name": name, "address": address, "city": "Springfield",
            "phone": phone, "openingHours": "Mon-Sat 09:00-20:00",
        });
        seeder.send("create-branch", post("/branches", body)).await;
    }
    for (i, (title, author, publisher, year, genre, pages)) in BOOKS.iter().enumerate() {
        let body = json!({
            "isbn": isbn(i), "title": title, "author": author, "publisher": publisher,
            "publishYear": year, "genre": genre, "pageCount": pages,
            "description": format!("{title}, by {author} ({year})."),
        });
        seeder.send("create-book", post("/books", body)).await;
    }
    let conditions = ["new", "good", "good", "fair", "poor"];
    let mut copies = Vec::new();
    for book in 0..BOOKS.len() {
        for (k, branch) in copies_of(book).into_iter().enumerate() {
            let branch_id = BRANCHES[branch].0;
            let body =
                json!({"isbn": isbn(book), "condition": conditions[(book + k) % conditions.len()]});
            if let Some(copy) = seeder
                .send(
                    "add-copy",
                    post(format!("/branches/{branch_id}/copies"), body),
                )
                .await
            {
                copies.push((
                    branch_id,
                    copy["copyId"].as_str().unwrap_or_default().to_owned(),
                ));
            }
        }
    }
    let mut patrons = Vec::new();
    for (i, (first, last)) in names().skip(ACCOUNTS).take(PATRONS).enumerate() {
        let branch_id = BRANCHES[i % BRANCHES.len()].0;
        let tier = if i % 3 == 0 {
            Tier::Premium
        } else {
            Tier::Standard
        };
        let body = json!({
            "cardNumber": format!("C-{:06}", 100 + i),
            "firstName": first, "lastName": last,
            "email": format!("{first}.{last}@example.org"),
            "membershipTier": tier,
        });
        if let Some(patron) = seeder
            .send(
                "register-patron",
                post(format!("/branches/{branch_id}/patrons"), body),
            )
            .await
        {
            let id = patron["patronId"].as_str().unwrap_or_default().to_owned();
            patrons.push((id, tier));
        }
    }
    if patrons.is_empty() {
        let last = seeder.report.failures.last().cloned().unwrap_or_default();
        return Err(format!("no patron could be registered ({last})"));
    }
    // Spread the loans over the copies: every other copy, then the rest. A loan of `DUE` is
    // lent in the past, by the checkout route on a clock set back, so that its due date is where
    // `DUE` says: the handler writes its dates and index keys, as it would have then.
    let order: Vec<usize> = (0..copies.len())
        .step_by(2)
        .chain((1..copies.len()).step_by(2))
        .collect();
    let now = clock::now();
    let mut loans: Vec<Option<(String, String)>> = Vec::new();
    for (k, &c) in order.iter().take(LOANS).enumerate() {
        let (branch_id, copy_id) = &copies[c];
        let (patron_id, tier) = &patrons[(k * 7) % patrons.len()];
        let body = json!({"patronId": patron_id, "branchId": branch_id, "copyId": copy_id});
        let lent_at = DUE.iter().find(|(loan, _)| *loan == k).map(|(_, days)| {
            now + clock::days(*days) - clock::days(tier.loan_period_days().into())
        });
        let loan = seeder
            .send_at(lent_at, "checkout-book", post("/checkouts", body))
            .await;
        if loan.is_some() && lent_at.is_some() {
            seeder.report.lent_in_the_past += 1;
        }
        loans.push(loan.map(|l| {
            (
                patron_id.clone(),
                l["checkoutId"].as_str().unwrap_or_default().to_owned(),
            )
        }));
    }
    for &k in RETURNED {
        if let Some(Some((patron, checkout))) = loans.get(k) {
            let path = format!("/patrons/{patron}/checkouts/{checkout}/return");
            seeder.send("return-book", Sent::new("POST", path)).await;
        }
    }
    for &k in RENEWED {
        if let Some(Some((patron, checkout))) = loans.get(k) {
            let path = format!("/patrons/{patron}/checkouts/{checkout}/renew");
            seeder.send("renew-checkout", Sent::new("POST", path)).await;
        }
    }
    Ok(())
}

/// `cargo run -- seed`: the data set, with a progress bar.
pub async fn run_cli(api: &ApiClient, stop_after: Option<u64>) -> Result<(), String> {
    let bar = indicatif::ProgressBar::new(0);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{spinner} seeding [{bar:40}] {pos}/{len} {wide_msg}",
        )
        .expect("a valid template")
        .progress_chars("=> "),
    );
    let progress = |done: u64, total: u64, what: &str| {
        bar.set_length(total);
        bar.set_position(done);
        bar.set_message(what.to_owned());
    };
    // The handlers' request logs would scroll the bar away: the report below says what happened.
    let report = seed_stopping_after(api, "seed", &progress, stop_after)
        .with_subscriber(tracing::subscriber::NoSubscriber::default())
        .await?;
    bar.finish_and_clear();
    for domain in &report.skipped {
        match report.partial.contains(domain) {
            true => eprintln!(
                "{domain}: partial: a seed stopped part way through it (its mark {} \
                 is still there), and which of its requests were made is not known; left alone",
                seed_marker::PARTITION
            ),
            false => eprintln!("{domain}: already has data, left alone"),
        }
    }
    let created: usize = report.created.values().sum();
    eprintln!(
        "seeded {created} requests ({}), {} loans lent in the past (due already or in the coming days)",
        report
            .created
            .iter()
            .map(|(pattern, n)| format!("{n} {pattern}"))
            .collect::<Vec<_>>()
            .join(", "),
        report.lent_in_the_past
    );
    for failure in &report.failures {
        eprintln!("failed: {failure}");
    }
    if !report.failures.is_empty() {
        return Err(format!("{} seed requests failed", report.failures.len()));
    }
    if !report.partial.is_empty() {
        return Err(format!(
            "{} partly seeded by a seed that was stopped: delete the data file (or the table) and \
             seed again",
            report.partial.join(", ")
        ));
    }
    Ok(())
}
