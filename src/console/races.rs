//! The contention patterns, raced for real: N requests started at one instant (tokio tasks
//! released by one barrier), each through the same front door as any request, and all their
//! answers back with the table afterwards. Exactly one wins; the losers' answers say why.

use super::api_client::{ApiClient, Received, Sent};
use super::capture;
use super::gate;
use super::ops::{self, Operation};
use super::patterns::Data;
use super::table::{self, Partition};
use serde::Serialize;
use serde_json::{Value, json};
use singlet_functions::model::audit::Resource;
use singlet_shared::keys::{self, CopyStatus};
use singlet_shared::{Email, Id, Plate};
use std::collections::BTreeMap;
use std::sync::Arc;

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Racer {
    pub n: usize,
    pub request: Sent,
    pub answer: Option<Received>,
    pub error: Option<String>,
    /// `201`, or `409 plate: taken`: what this racer got, in one line.
    pub outcome: String,
    pub operations: Vec<Operation>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RaceOutcome {
    pub race: String,
    pub title: String,
    pub explanation: String,
    /// Where each loser was refused: by the engine (its transaction sent and cancelled) or by
    /// the handler before it sent one (its read already saw the winner's write).
    pub what_happened: String,
    /// What the race set up first (a resource, a copy), and the requests that did it.
    pub setup: Vec<String>,
    pub racers: Vec<Racer>,
    /// Each distinct outcome and how many racers got it.
    pub tally: Vec<(String, usize)>,
    pub winners: usize,
    pub table: Vec<Partition>,
    pub changes: Value,
    /// The domain events the race's changes emitted (the winner's).
    pub events: Vec<Value>,
}

const DEPOTS: [&str; 4] = ["airport", "south", "east", "west"];

/// Every race the console offers: id, title, the domain whose page shows it.
pub const RACES: &[(&str, &str, &str)] = &[
    ("plate", "16 clients register one plate at once", "fleet"),
    (
        "email",
        "16 clients sign up with one email at once",
        "accounts",
    ),
    ("version", "Two reviewers change one version", "audit"),
    ("copy", "32 checkouts of one copy at once", "library"),
];

fn outcome(answer: &Received) -> String {
    let errors: Vec<String> = answer.body["errors"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| Some(format!("{}: {}", e["field"].as_str()?, e["code"].as_str()?)))
        .collect();
    match (answer.status, errors.is_empty()) {
        (412, _) => format!(
            "412 stale version (current {})",
            answer.body["currentVersion"]
        ),
        (status, true) => status.to_string(),
        (status, false) => format!("{status} {}", errors.join(", ")),
    }
}

/// Whether a racer sent a write to the engine (a transaction, or a single conditional write).
fn sent_a_write(racer: &Racer) -> bool {
    racer.operations.iter().any(|o| {
        matches!(
            o.operation.as_str(),
            "TransactWriteItems" | "PutItem" | "UpdateItem" | "DeleteItem"
        )
    })
}

/// The caption of a race's end, from what each racer's calls show.
fn what_happened(racers: &[Racer]) -> String {
    let won = |r: &&Racer| r.answer.as_ref().is_some_and(|a| a.status < 300);
    let losers: Vec<&Racer> = racers.iter().filter(|r| !won(r)).collect();
    let by_engine = losers.iter().filter(|r| sent_a_write(r)).count();
    let by_handler = losers.len() - by_engine;
    let clients = |n: usize| match n {
        1 => "1 client".to_owned(),
        n => format!("{n} clients"),
    };
    match (by_engine, by_handler) {
        (0, 0) => "No client lost.".to_owned(),
        (_, 0) => format!(
            "Every loser sent its write: the engine cancelled it on its condition ({}).",
            clients(by_engine)
        ),
        (0, _) => format!(
            "No loser sent a write: each one's read already saw the winner's change, so its handler refused it before writing ({}). Run the race again to see the engine refuse one.",
            clients(by_handler)
        ),
        _ => format!(
            "{} sent a write that the engine cancelled on its condition; {} read after the winner's change and were refused by the handler before writing.",
            clients(by_engine),
            clients(by_handler)
        ),
    }
}

async fn setup_call(
    api: &ApiClient,
    person: &str,
    log: &mut Vec<String>,
    sent: Sent,
) -> Result<Received, String> {
    let line = format!("{} {}", sent.method, sent.path);
    let answer = api.call(person, sent).await?;
    log.push(format!("{line} → {}", answer.status));
    if answer.status >= 300 {
        return Err(format!(
            "setting up the race: {line} answered {}",
            answer.status
        ));
    }
    Ok(answer)
}

/// The requests of a race, after whatever setup it needs.
async fn prepare(
    race: &str,
    api: &ApiClient,
    person: &str,
    log: &mut Vec<String>,
) -> Result<(String, Vec<(String, Sent)>), String> {
    let data = Data::read(&table::scan(&api.ctx).await?);
    match race {
        "plate" => {
            let plate = data.fresh_plate();
            let chassis = data.fresh_chassis();
            let lower = plate.to_lowercase();
            let forms = [
                plate.clone(),
                lower.clone(),
                format!(" {}  {} ", &plate[..4], &lower[5..]),
                plate.replace(' ', "  "),
            ];
            let requests = (0..16)
                .map(|i| {
                    let sent = Sent::new("POST", "/vehicles").json(json!({
                        "plate": forms[i % forms.len()],
                        "chassis": format!("{chassis}-{i:02}"),
                        "depot": DEPOTS[i % DEPOTS.len()],
                    }));
                    (person.to_owned(), sent)
                })
                .collect();
            let lock = Plate::parse(&plate)
                .map(|p| keys::plate_lock(&p).pk)
                .unwrap_or_default();
            Ok((
                format!(
                    "Each client registers a different vehicle with the plate {plate:?}, written four ways that normalise to one key, {lock}. Each transaction puts the vehicle and both locks on the condition that no lock of that key exists: the engine lets one through and cancels the rest, and each loser's cancellation reason on the plate lock becomes its 409."
                ),
                requests,
            ))
        }
        "email" => {
            let (email, username, _) = data.fresh_person();
            let requests = (0..16)
                .map(|i| {
                    let written = if i % 2 == 0 {
                        email.clone()
                    } else {
                        email.to_uppercase()
                    };
                    let sent = Sent::new("POST", "/accounts").json(json!({
                        "email": written,
                        "username": format!("{username}{i:02}"),
                        "displayName": format!("Sign-up {i}"),
                    }));
                    // Each sign-up is a person of its own: one account per subject.
                    (format!("{person}-{i:02}"), sent)
                })
                .collect();
            let lock = Email::parse(&email)
                .map(|e| keys::email_lock(&e).pk)
                .unwrap_or_default();
            Ok((
                format!(
                    "Sixteen sign-ups with the email {email} (some in capitals) and sixteen different usernames: the email lock {lock} admits one account."
                ),
                requests,
            ))
        }
        "version" => {
            let (resource_id, version) = match data.resources.first() {
                Some((id, _, version)) => (id.clone(), *version),
                None => {
                    let id = data.fresh_id("doc", keys::resource_current);
                    setup_call(
                        api,
                        person,
                        log,
                        Sent::new("POST", "/resources")
                            .json(json!({"resourceId": id, "status": "draft"})),
                    )
                    .await?;
                    (id, 1)
                }
            };
            // Each reviewer is a person of their own: the API takes the actor from the token.
            let change = |status: &str, action: &str, reviewer: &str| {
                let sent = Sent::new("PATCH", format!("/resources/{resource_id}"))
                    .json(json!({"status": status, "action": action}))
                    .header("if-match", &format!("\"{version}\""));
                (reviewer.to_owned(), sent)
            };
            let (current, event) = match Id::parse(&resource_id) {
                Ok(id) => (
                    keys::resource_current(&id),
                    keys::resource_event(&id, version as u64 + 1),
                ),
                Err(_) => Default::default(),
            };
            Ok((
                format!(
                    "Two reviewers read {resource_id} at version {version} and both send if-match: \"{version}\". Both handlers read the state at version {version} (the console holds each one's transaction until the other has read too), and each sends one transaction: update {} only if {field} = {version}, and put {} only if it does not exist. The engine commits one and cancels the other on that condition, and the loser's 412 names the version that won.",
                    current.sk,
                    event.sk,
                    field = Resource::VERSION.name(),
                ),
                vec![
                    change("approved", "approve", "reviewer-a"),
                    change("rejected", "reject", "reviewer-b"),
                ],
            ))
        }
        "copy" => {
            let (copy_id, branch_id) = match data.copies.iter().find(|c| c.2) {
                Some((copy, branch, _)) => (copy.clone(), branch.clone()),
                None => {
                    let branch = match data.branches.first() {
                        Some(branch) => branch.clone(),
                        None => {
                            let id = data.fresh_id("branch", keys::branch);
                            setup_call(api, person, log, Sent::new("POST", "/branches").json(json!({
                                "branchId": id, "name": "Race Library", "address": "1 Contention Row",
                                "city": "Springfield", "phone": "+44 20 7946 0999", "openingHours": "Always",
                            }))).await?;
                            id
                        }
                    };
                    let isbn = match data.books.first() {
                        Some(isbn) => isbn.clone(),
                        None => {
                            let isbn = data.fresh_isbn();
                            setup_call(api, person, log, Sent::new("POST", "/books").json(json!({
                                "isbn": isbn, "title": "The Art of Multiprocessor Programming",
                                "author": "Maurice Herlihy", "publisher": "Morgan Kaufmann",
                                "publishYear": 2008, "genre": "Computer science",
                                "description": "Locks, consensus and contention.", "pageCount": 508,
                            }))).await?;
                            isbn
                        }
                    };
                    let copy = setup_call(
                        api,
                        person,
                        log,
                        Sent::new("POST", format!("/branches/{branch}/copies"))
                            .json(json!({"isbn": isbn, "condition": "new"})),
                    )
                    .await?;
                    (
                        copy.body["copyId"].as_str().unwrap_or_default().to_owned(),
                        branch,
                    )
                }
            };
            let mut patrons: Vec<String> = data
                .patrons
                .iter()
                .filter(|p| p.2)
                .map(|p| p.0.clone())
                .collect();
            if patrons.is_empty() {
                let card = data.fresh_card();
                let patron = setup_call(
                    api,
                    person,
                    log,
                    Sent::new("POST", format!("/branches/{branch_id}/patrons")).json(json!({
                        "cardNumber": card, "firstName": "Leslie", "lastName": "Lamport",
                        "email": "leslie.lamport@example.com", "membershipTier": "premium",
                    })),
                )
                .await?;
                patrons.push(
                    patron.body["patronId"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned(),
                );
            }
            patrons.truncate(32);
            let requests = (0..32)
                .map(|i| {
                    let sent = Sent::new("POST", "/checkouts").json(json!({
                        "patronId": patrons[i % patrons.len()],
                        "branchId": branch_id,
                        "copyId": copy_id,
                    }));
                    (person.to_owned(), sent)
                })
                .collect();
            Ok((
                format!(
                    "{} patrons ask for copy {copy_id} at {branch_id} at once. Each checkout is one transaction whose copy part requires the copy to be {}: the first to commit makes it {}, and every other one is cancelled on that part, a 409 saying the copy is unavailable.",
                    patrons.len(),
                    CopyStatus::Available.as_str(),
                    CopyStatus::CheckedOut.as_str(),
                ),
                requests,
            ))
        }
        other => Err(format!("no race named {other:?}")),
    }
}

/// Runs a race: its setup, then every request at once; the table is compared with the table as
/// it was after the setup.
pub async fn run(race: &str, api: &ApiClient, person: &str) -> Result<RaceOutcome, String> {
    let title = RACES
        .iter()
        .find(|r| r.0 == race)
        .map(|r| r.1)
        .ok_or_else(|| format!("no race named {race:?}"))?;
    let mut setup = Vec::new();
    let (explanation, requests) = prepare(race, api, person, &mut setup).await?;
    let before = table::scan(&api.ctx).await?;
    let barrier = Arc::new(tokio::sync::Barrier::new(requests.len()));
    // The version race's reviewers both read before either writes (see `gate`), so that both
    // transactions reach the engine.
    let writes_wait =
        (race == "version").then(|| Arc::new(tokio::sync::Barrier::new(requests.len())));
    let tasks: Vec<_> = requests
        .into_iter()
        .map(|(person, sent)| {
            let api = api.clone();
            let barrier = barrier.clone();
            let writes_wait = writes_wait.clone();
            let sent = api.prepare(&person, sent);
            tokio::spawn(async move {
                barrier.wait().await;
                let sending = capture::recording(api.send(&sent));
                let (answer, calls) = match writes_wait {
                    Some(writes) => gate::before_first_write(writes, sending).await,
                    None => sending.await,
                };
                (sent, answer, calls)
            })
        })
        .collect();
    let mut racers = Vec::new();
    for (n, task) in tasks.into_iter().enumerate() {
        let (request, answer, calls) = task.await.map_err(|e| format!("a racer failed: {e}"))?;
        let mut operations: Vec<Operation> = calls.iter().map(|c| ops::read(c, false)).collect();
        let (answer, error) = match answer {
            Ok(answer) => (Some(answer), None),
            Err(error) => (None, Some(error)),
        };
        if let Some(answer) = &answer {
            ops::link_reasons(&mut operations, answer.status, &answer.body);
        }
        racers.push(Racer {
            n: n + 1,
            outcome: answer
                .as_ref()
                .map(outcome)
                .unwrap_or_else(|| "no answer".into()),
            request,
            answer,
            error,
            operations,
        });
    }
    let after = table::scan(&api.ctx).await?;
    let mut tally: BTreeMap<String, usize> = BTreeMap::new();
    for racer in &racers {
        *tally.entry(racer.outcome.clone()).or_default() += 1;
    }
    let winners = racers
        .iter()
        .filter(|r| r.answer.as_ref().is_some_and(|a| a.status < 300))
        .count();
    let table = table::partitions(&after, Some(&before));
    Ok(RaceOutcome {
        race: race.to_owned(),
        title: title.to_owned(),
        what_happened: what_happened(&racers),
        explanation,
        setup,
        changes: table::summary(&table),
        events: table::emitted(&after, &before),
        table,
        tally: tally.into_iter().collect(),
        winners,
        racers,
    })
}
