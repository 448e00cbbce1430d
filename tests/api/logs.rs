//! No personal data in any log line (the brief; docs/API.md, "Conventions"): every line the
//! functions log in this test binary is captured, as JSON, as Lambda would ship it; each is
//! checked for an email address as it is written, whichever test logs it, and this test searches
//! them for the plates, emails and card numbers it sent.

use crate::fixtures;
use crate::harness::{Api, Mode};
use aws_sdk_dynamodb::types::AttributeValue;
use serde_json::json;
use std::io::Write;
use std::sync::Mutex;

/// Every log line of this test binary since the first API started.
static LINES: Mutex<Vec<u8>> = Mutex::new(Vec::new());

struct Capture;

impl Write for Capture {
    /// Checks each line as it is written, whichever test logs it: an email address in any log
    /// line of the whole binary fails the test that logged it, whatever order tests run in.
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        let text = String::from_utf8_lossy(bytes);
        if let Some(line) = text.lines().find(|line| holds_an_address(line)) {
            panic!("an email address in a log line: {line}");
        }
        LINES.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Sends every log line of the process to [`LINES`], formatted as the Lambda formats them (the
/// first call only; `Api::start` calls it).
pub fn capture() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| singlet_functions::lambda::init_tracing_to(|| Capture, "info"));
}

/// Whether `line` holds a word that looks like an email address.
fn holds_an_address(line: &str) -> bool {
    line.split(|c: char| c == '"' || c.is_whitespace())
        .any(|word| word.contains('@') && word.contains('.') && !word.starts_with('@'))
}

pub fn captured() -> String {
    String::from_utf8_lossy(&LINES.lock().unwrap()).into_owned()
}

const PLATE: &str = "PII-PLATE-77";
const CHASSIS: &str = "PII-CHASSIS-77";
const EMAIL: &str = "pii.person@pii-example.org";
const CARD: &str = "pii-card-77";
const OTHER_CARD: &str = "pii-card-78";

/// Representative requests (creates, conflicts, look-ups, a cancelled transaction that hands
/// back the item as it stood, an item that does not decode), in both modes; then no captured
/// line holds what they sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_log_line_holds_a_plate_an_email_or_a_card_number() {
    for mode in [Mode::Direct, Mode::Http] {
        let api = Api::start(mode).await;
        let vehicle = json!({"plate": PLATE, "chassis": CHASSIS, "depot": "north"});
        assert_eq!(api.post("/vehicles", vehicle.clone()).await.status, 201);
        assert_eq!(api.post("/vehicles", vehicle).await.status, 409);
        assert_eq!(api.get(format!("/plates/{PLATE}")).await.status, 200);
        assert_eq!(api.get("/plates/PII-NONE-1").await.status, 404);

        let account = json!({"email": EMAIL, "username": "piiperson"});
        assert_eq!(api.post("/accounts", account.clone()).await.status, 201);
        assert_eq!(api.post("/accounts", account).await.status, 409);
        assert_eq!(api.get(format!("/emails/{EMAIL}")).await.status, 200);

        fixtures::library(&api).await;
        let mut patron = fixtures::patron_body(CARD, "standard");
        patron["email"] = EMAIL.into();
        let patron = api.post("/branches/central/patrons", patron).await;
        assert_eq!(patron.status, 201, "{patron:?}");
        let patron_id = patron.body["patronId"].as_str().unwrap();
        let other = fixtures::patron(&api, "central", OTHER_CARD, "standard").await;
        // A card held by another patron: the transaction is cancelled with the lock as it stood.
        let taken = api
            .put(
                format!("/patrons/{other}/card"),
                json!({"cardNumber": CARD}),
            )
            .await;
        assert_eq!(taken.status, 409, "{taken:?}");
        assert_eq!(api.get(format!("/cards/{CARD}")).await.status, 200);
        let loan = fixtures::lend(&api, patron_id, "central").await;
        let ret = format!(
            "/patrons/{patron_id}/checkouts/{}/return",
            loan["checkoutId"].as_str().unwrap()
        );
        assert_eq!(api.post(ret.clone(), json!({})).await.status, 200);
        assert_eq!(api.post(ret, json!({})).await.status, 409);

        // A plate lock that no longer decodes: a 500, and a log line naming it.
        api.ctx
            .db
            .put_item()
            .table_name(&*api.ctx.table)
            .item("PK", AttributeValue::S("PLATE#piibroken9".into()))
            .item("SK", AttributeValue::S("PLATE#piibroken9".into()))
            .item("vehicleId", AttributeValue::N("7".into()))
            .send()
            .await
            .unwrap();
        assert_eq!(api.get("/plates/PII-BROKEN-9").await.status, 500);
    }

    let lines = captured();
    assert!(
        lines.contains("a stored item does not decode") && lines.contains("plate-lock "),
        "the undecodable lock is logged, by its type: {lines}"
    );
    let folded = lines.to_lowercase();
    for sent in [
        PLATE,
        CHASSIS,
        EMAIL,
        CARD,
        OTHER_CARD,
        "piibroken9",
        "pii-broken-9",
    ] {
        let sent = sent.to_lowercase();
        let compact = sent.replace('-', "");
        for form in [&sent, &compact] {
            let found: Vec<&str> = folded
                .lines()
                .filter(|l| l.contains(form.as_str()))
                .collect();
            assert!(found.is_empty(), "{form} is logged: {found:#?}");
        }
    }
    // Nor any other address: `Capture` fails whichever test logs one, as it is written.
    assert!(!lines.lines().any(holds_an_address));
}

/// The check is live: a test that logs an address fails, in the line that logged it.
#[test]
#[should_panic(expected = "an email address in a log line")]
fn a_test_that_logs_an_address_fails() {
    capture();
    tracing::info!(
        email = "someone@example.org",
        "a line no function may write"
    );
}
