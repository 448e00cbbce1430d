//! The access patterns as the console lists them: every route of the route table, grouped by
//! domain, with its one-line purpose and a request that works against the data in the table now
//! (an existing vehicle to read, a plate nobody holds yet to register, the current version to
//! send in `if-match`), or the example of `events/` when the table has nothing to point at.

use super::table::{Domain, Snapshot};
use serde::Serialize;
use singlet_functions::loans::LoanStatus;
use singlet_functions::model::{TableEntity, decode};
use singlet_functions::routes::{ROUTES, Route};
use singlet_shared::keys::CopyStatus;
use singlet_shared::{CardNumber, Chassis, Email, Id, Isbn13, Key, Plate, Username, keys};
use std::collections::HashSet;

/// The contention a pattern is famous for, run by the race button on its card.
pub fn race_of(function: &str) -> Option<&'static str> {
    match function {
        "register-vehicle" => Some("plate"),
        "create-account" => Some("email"),
        "change-resource" => Some("version"),
        "checkout-book" => Some("copy"),
        _ => None,
    }
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Pattern {
    pub function: &'static str,
    pub domain: Domain,
    pub method: &'static str,
    /// The path template: `/vehicles/{vehicleId}`.
    pub path: &'static str,
    /// The route table's one-line purpose.
    pub summary: &'static str,
    /// The scopes any one of which grants the route.
    pub scopes: &'static [&'static str],
    /// Each path parameter with its example value.
    pub params: Vec<(String, String)>,
    /// The example's query string, without `?`.
    pub query: String,
    pub headers: Vec<(String, String)>,
    /// The example's JSON body, pretty-printed.
    pub body: Option<String>,
    pub race: Option<&'static str>,
    /// Whether the example points at data in the table (else it is `events/`'s, which may 404).
    pub live: bool,
}

/// What the examples can point at, read from the table.
#[derive(Default)]
pub(super) struct Data {
    pub(super) taken: HashSet<String>,
    /// (vehicleId, plate, chassis, depot)
    pub(super) vehicles: Vec<(String, String, String, String)>,
    pub(super) accounts: Vec<String>,
    pub(super) resources: Vec<(String, String, i64)>,
    pub(super) branches: Vec<String>,
    /// (patronId, cardNumber, whether the patron may borrow)
    pub(super) patrons: Vec<(String, String, bool)>,
    /// (copyId, branchId, available)
    pub(super) copies: Vec<(String, String, bool)>,
    pub(super) books: Vec<String>,
    /// (patronId, checkoutId, renewable)
    pub(super) loans: Vec<(String, String, bool)>,
}

impl Data {
    /// Every entity of `snapshot`, read through the model's registry; the rules (may this patron
    /// borrow, may this loan be renewed) are the model's own.
    pub(super) fn read(snapshot: &Snapshot) -> Data {
        let mut data = Data::default();
        let now = singlet_functions::clock::now();
        for ((pk, _), item) in snapshot {
            data.taken.insert(pk.clone());
            let Ok(decoded) = decode(item) else { continue };
            match decoded {
                TableEntity::Vehicle(v) => data.vehicles.push((
                    text(&v.vehicle_id),
                    text(&v.plate),
                    text(&v.chassis),
                    v.depot,
                )),
                TableEntity::Account(a) => data.accounts.push(text(&a.account.account_id)),
                TableEntity::Resource(r) => {
                    data.resources
                        .push((text(&r.resource_id), text(&r.status), r.version as i64))
                }
                TableEntity::Branch(b) => data.branches.push(text(&b.branch_id)),
                TableEntity::Patron(p) => {
                    data.patrons
                        .push((text(&p.patron_id), text(&p.card_number), p.may_borrow()))
                }
                TableEntity::Copy(c) => data.copies.push((
                    text(&c.copy_id),
                    text(&c.branch_id),
                    c.status == CopyStatus::Available,
                )),
                TableEntity::Book(b) => data.books.push(text(&b.isbn)),
                TableEntity::Loan(loan) if loan.status != LoanStatus::Returned => {
                    data.loans.push((
                        text(&loan.patron_id),
                        text(&loan.checkout_id),
                        loan.renewable(now),
                    ))
                }
                _ => {}
            }
        }
        data
    }

    /// The first candidate whose key (as `key` makes it from the value: a plate without
    /// separators, an email's skeleton) nobody holds.
    fn fresh_value(
        &self,
        candidates: impl Iterator<Item = String>,
        key: impl Fn(&str) -> Option<Key>,
    ) -> String {
        candidates
            .into_iter()
            .find(|raw| key(raw).is_none_or(|key| !self.taken.contains(&key.pk)))
            .unwrap_or_default()
    }

    pub(super) fn fresh_plate(&self) -> String {
        self.fresh_value(
            (0..).map(|n: u32| {
                format!(
                    "KA{:02} X{}{}",
                    19 + n / 676,
                    (b'A' + (n / 26 % 26) as u8) as char,
                    (b'A' + (n % 26) as u8) as char
                )
            }),
            |plate| Plate::parse(plate).ok().map(|p| keys::plate_lock(&p)),
        )
    }

    pub(super) fn fresh_chassis(&self) -> String {
        self.fresh_value(
            (1..).map(|n: u32| format!("WVWZZZ1JZXW{n:06}")),
            |chassis| Chassis::parse(chassis).ok().map(|c| keys::chassis_lock(&c)),
        )
    }

    /// An email and a username of one person, both free, and the person's name.
    pub(super) fn fresh_person(&self) -> (String, String, String) {
        names()
            .map(|(first, last)| {
                (
                    format!("{first}.{last}@example.com").to_lowercase(),
                    format!("{first}_{last}").to_lowercase(),
                    format!("{first} {last}"),
                )
            })
            .find(|(email, username, _)| {
                !Email::parse(email).is_ok_and(|e| self.taken.contains(&keys::email_lock(&e).pk))
                    && !Username::parse(username)
                        .is_ok_and(|u| self.taken.contains(&keys::handle_lock(&u).pk))
            })
            .unwrap_or_default()
    }

    pub(super) fn fresh_email(&self) -> String {
        self.fresh_value(
            names().map(|(first, last)| format!("{first}.{last}@example.com").to_lowercase()),
            |email| Email::parse(email).ok().map(|e| keys::email_lock(&e)),
        )
    }

    pub(super) fn fresh_username(&self) -> String {
        self.fresh_value(
            names().map(|(first, last)| format!("{first}_{last}").to_lowercase()),
            |username| {
                Username::parse(username)
                    .ok()
                    .map(|u| keys::handle_lock(&u))
            },
        )
    }

    /// `<stem>-1`, `<stem>-2`, ...: the first whose key (`key` of the id) is free.
    pub(super) fn fresh_id(&self, stem: &str, key: impl Fn(&Id) -> Key) -> String {
        self.fresh_value((1..).map(|n: u32| format!("{stem}-{n}")), |id| {
            Id::parse(id).ok().map(|id| key(&id))
        })
    }

    pub(super) fn fresh_card(&self) -> String {
        self.fresh_value((1..).map(|n: u32| format!("C-{n:06}")), |card| {
            CardNumber::parse(card).ok().map(|c| keys::card_lock(&c))
        })
    }

    pub(super) fn fresh_isbn(&self) -> String {
        self.fresh_value(
            (1..).map(|n: u64| isbn13(978_000_000_000 + n * 7)),
            |isbn| Isbn13::parse(isbn).ok().map(|i| keys::book(&i)),
        )
    }
}

/// A typed value as the string it is written as.
fn text(value: &impl Serialize) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(text)) => text,
        Ok(other) => other.to_string(),
        Err(_) => String::new(),
    }
}

/// First and last names, then numbered ones: realistic and endless.
pub fn names() -> impl Iterator<Item = (String, String)> {
    const NAMES: &[(&str, &str)] = &[
        ("Ada", "Lovelace"),
        ("Grace", "Hopper"),
        ("Alan", "Turing"),
        ("Edsger", "Dijkstra"),
        ("Barbara", "Liskov"),
        ("Donald", "Knuth"),
        ("Frances", "Allen"),
        ("Ken", "Thompson"),
        ("Margaret", "Hamilton"),
        ("Dennis", "Ritchie"),
        ("Radia", "Perlman"),
        ("Tim", "Berners-Lee"),
        ("Katherine", "Johnson"),
        ("John", "McCarthy"),
        ("Hedy", "Lamarr"),
        ("Leslie", "Lamport"),
    ];
    let named = NAMES
        .iter()
        .map(|(f, l)| ((*f).to_owned(), (*l).to_owned()));
    let numbered = (2..).flat_map(|n: u32| {
        NAMES
            .iter()
            .map(move |(f, l)| ((*f).to_owned(), format!("{l}{n}")))
    });
    named.chain(numbered)
}

/// The ISBN-13 of a 12-digit prefix, its check digit computed.
pub fn isbn13(prefix: u64) -> String {
    let digits = format!("{:012}", prefix % 1_000_000_000_000);
    let sum: u32 = digits
        .bytes()
        .enumerate()
        .map(|(i, d)| u32::from(d - b'0') * if i % 2 == 0 { 1 } else { 3 })
        .sum();
    format!("{digits}{}", (10 - sum % 10) % 10)
}

/// Every pattern of the route table, with an example that works on `snapshot`.
pub fn catalogue(snapshot: &Snapshot) -> Vec<Pattern> {
    let data = Data::read(snapshot);
    ROUTES.iter().map(|route| example(route, &data)).collect()
}

fn example(route: &'static Route, data: &Data) -> Pattern {
    use serde_json::json;
    let function = route.function;
    // Reads point at the first entity, destructive patterns at the last, so that running them
    // in turn keeps the readers' examples working.
    let destructive = matches!(route.method, "DELETE") || function == "return-book";
    let pick = |len: usize| {
        if destructive {
            len.saturating_sub(1)
        } else {
            0
        }
    };
    let vehicle = data.vehicles.get(pick(data.vehicles.len()));
    let account = data.accounts.get(pick(data.accounts.len()));
    let resource = data.resources.first();
    // A branch with copies, a patron who may borrow, a copy on the shelf, a loan to renew.
    let branch = data
        .copies
        .iter()
        .find(|c| c.2)
        .map(|c| c.1.clone())
        .or_else(|| data.branches.first().cloned());
    let patron = data.patrons.iter().find(|p| p.2).or(data.patrons.first());
    let copy = data.copies.iter().find(|c| c.2);
    let loan = if function == "renew-checkout" {
        data.loans.iter().find(|l| l.2)
    } else {
        data.loans.get(pick(data.loans.len()))
    };

    let mut live = true;
    let mut param = |name: &str| -> String {
        let found = match name {
            "vehicleId" => vehicle.map(|v| v.0.clone()),
            "plate" => vehicle.map(|v| v.1.to_uppercase()),
            "chassis" => vehicle.map(|v| v.2.to_uppercase()),
            "depot" => vehicle.map(|v| v.3.clone()),
            "accountId" => account.cloned(),
            "resourceId" => resource.map(|r| r.0.clone()),
            "branchId" => branch.clone(),
            "patronId" => match function {
                "active-checkouts" | "return-book" | "renew-checkout" | "get-checkout" => {
                    loan.map(|l| l.0.clone())
                }
                _ => patron.map(|p| p.0.clone()),
            },
            "checkoutId" => loan.map(|l| l.1.clone()),
            "cardNumber" => patron.map(|p| p.1.clone()),
            "isbn" => data.books.first().cloned(),
            // An availability check answers for any value: taken or free.
            "email" => Some("ada@example.com".to_owned()),
            "username" => Some("ada".to_owned()),
            _ => None,
        };
        found.unwrap_or_else(|| {
            live = false;
            fallback(name).to_owned()
        })
    };
    let params: Vec<(String, String)> = route
        .path
        .split('/')
        .filter_map(|part| part.strip_prefix('{')?.strip_suffix('}'))
        .map(|name| (name.to_owned(), param(name)))
        .collect();
    let query = match function {
        "list-patrons" | "list-copies" | "active-checkouts" | "resource-history"
        | "find-overdue" => "limit=10".to_owned(),
        _ => String::new(),
    };
    let mut headers = Vec::new();
    let body = match function {
        "register-vehicle" => Some(json!({
            "plate": data.fresh_plate(),
            "chassis": data.fresh_chassis(),
            "depot": "airport",
        })),
        "change-plate" => Some(json!({"plate": data.fresh_plate()})),
        "create-account" => {
            let (email, username, name) = data.fresh_person();
            Some(json!({"email": email, "username": username, "displayName": name}))
        }
        "change-email" => Some(json!({"email": data.fresh_email()})),
        "change-username" => Some(json!({"username": data.fresh_username()})),
        "create-resource" => Some(json!({
            "resourceId": data.fresh_id("doc", keys::resource_current),
            "status": "draft",
        })),
        "change-resource" => {
            let (status, version) = resource
                .map(|r| (r.1.as_str(), r.2))
                .unwrap_or(("closed", 1));
            headers.push(("if-match".to_owned(), format!("\"{version}\"")));
            let next = if status == "in_review" {
                "approved"
            } else {
                "in_review"
            };
            Some(json!({"status": next, "action": "review"}))
        }
        "create-branch" => Some(json!({
            "branchId": data.fresh_id("branch", keys::branch),
            "name": "Harbour Library",
            "address": "4 Quay Street",
            "city": "Springfield",
            "phone": "+44 20 7946 0400",
            "openingHours": "Tue-Sat 10:00-18:00",
        })),
        "register-patron" => Some(json!({
            "cardNumber": data.fresh_card(),
            "firstName": "Hedy",
            "lastName": "Lamarr",
            "email": "hedy.lamarr@example.com",
            "membershipTier": "standard",
        })),
        "create-book" => Some(json!({
            "isbn": data.fresh_isbn(),
            "title": "Designing Data-Intensive Applications",
            "author": "Martin Kleppmann",
            "publisher": "O'Reilly Media",
            "publishYear": 2017,
            "genre": "Computer science",
            "description": "Reliable, scalable and maintainable systems.",
            "pageCount": 616,
        })),
        "add-copy" => Some(json!({
            "isbn": data.books.first().cloned().unwrap_or_else(|| { live = false; fallback("isbn").to_owned() }),
            "condition": "new",
        })),
        "checkout-book" => {
            let (copy_id, branch_id) = match copy {
                Some(c) => (c.0.clone(), c.1.clone()),
                None => {
                    live = false;
                    (
                        fallback("copyId").to_owned(),
                        fallback("branchId").to_owned(),
                    )
                }
            };
            let patron_id = patron.map(|p| p.0.clone()).unwrap_or_else(|| {
                live = false;
                fallback("patronId").to_owned()
            });
            Some(json!({"patronId": patron_id, "branchId": branch_id, "copyId": copy_id}))
        }
        _ => None,
    };
    if body.is_some() {
        headers.insert(
            0,
            ("content-type".to_owned(), "application/json".to_owned()),
        );
    }
    Pattern {
        function,
        domain: Domain::of_route(route).unwrap_or(Domain::Library),
        method: route.method,
        path: route.path,
        summary: route.summary,
        scopes: route.scopes,
        params,
        query,
        headers,
        body: body.map(|b| serde_json::to_string_pretty(&b).expect("JSON")),
        race: race_of(function),
        live,
    }
}

/// `events/`'s value for a parameter: what the example uses when the table has none.
fn fallback(name: &str) -> &'static str {
    match name {
        "vehicleId" => "28ddc0627a475ed790f5b11aa0071fe7",
        "plate" => "KA19 XTR",
        "chassis" => "WVWZZZ1JZXW000001",
        "depot" => "north",
        "accountId" => "c28c8a3c640850a59440b94ad65c4ac9",
        "resourceId" => "door-7",
        "branchId" => "central",
        "patronId" => "977ea1622cb85b8fa7bc195869779a70",
        "checkoutId" => "1a98a649867a59fa9937a297cff4b043",
        "copyId" => "65a5364a5fa25aedae39bf4eefa6f31c",
        "cardNumber" => "C-000123",
        "isbn" => "9780306406157",
        "email" => "ada@example.com",
        "username" => "ada.lovelace",
        _ => "example",
    }
}
