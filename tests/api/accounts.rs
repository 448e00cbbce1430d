//! Accounts unique on email and username: docs/API.md, "Accounts".

use crate::both;
use crate::harness::{Api, Mode, Reply, s};
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};

async fn sign_up(api: &Api, email: &str, username: &str) -> Reply {
    api.post("/accounts", json!({"email": email, "username": username}))
        .await
}

fn id(reply: &Reply) -> String {
    reply.body["accountId"]
        .as_str()
        .unwrap_or_else(|| panic!("{reply:?}"))
        .to_owned()
}

both!(
    create_normalises_and_writes_the_account_and_two_locks,
    create_names_every_bad_field,
    create_names_every_taken_value_whatever_the_spelling,
    reads_of_missing_accounts_are_404,
    change_email_frees_the_old_email_at_once,
    change_username_frees_the_old_username_at_once,
    changes_to_a_taken_value_are_409,
    delete_removes_the_account_and_both_locks,
    availability_checks_read_the_normalised_lock,
    look_alike_emails_are_refused_or_one_address,
    an_account_stored_with_a_quoted_address_is_still_read_and_deleted,
    a_subject_owns_one_account_unless_admin,
);

/// An address accepted before RFC 5322's specials were refused (`"ada"@example.com`) is still in
/// some tables: its account reads, and deletes with its lock, though no request can make another.
async fn an_account_stored_with_a_quoted_address_is_still_read_and_deleted(api: Api) {
    let account_id = id(&sign_up(&api, "ada@example.com", "ada").await);
    let quoted = "\"ada\"@example.com";
    let stored = singlet_shared::Email::parse_stored(quoted).unwrap();
    let mut row = api
        .item(&format!("ACCT#{account_id}"), "PROFILE")
        .await
        .unwrap();
    row.insert("email".into(), singlet_functions::store::s(quoted));
    let mut lock = api
        .item(&email_lock("ada@example.com"), "LOCK")
        .await
        .unwrap();
    crate::harness::delete_raw(&api.ctx, &email_lock("ada@example.com"), "LOCK").await;
    lock.insert(
        "PK".into(),
        singlet_functions::store::s(singlet_shared::keys::email_lock(&stored).pk),
    );
    lock.insert("value".into(), singlet_functions::store::s(quoted));
    crate::harness::put_raw_all(&api.ctx, vec![row, lock]).await;

    let read = api.get(format!("/accounts/{account_id}")).await;
    assert_eq!(read.status, 200, "{read:?}");
    assert_eq!(read.body["email"], quoted);
    assert_eq!(
        api.delete(format!("/accounts/{account_id}")).await.status,
        204
    );
    assert!(api.items().await.is_empty(), "{:?}", api.items().await);
}

/// Invisible characters, and a quoted local part or a comment (both reach the mailbox of the
/// address without them), are `400`; the domain is mapped by IDNA; a look-alike of a taken
/// address (Cyrillic letters in the local part or the domain) is `409` and reported unavailable.
async fn look_alike_emails_are_refused_or_one_address(api: Api) {
    for disguised in [
        "ad\u{200B}a@example.com",
        "ad\u{00AD}a@example.com",
        "ad\u{2060}a@example.com",
        "ad\u{180E}a@example.com",
        "\"ada\"@example.com",
        "ada(x)@example.com",
    ] {
        sign_up(&api, disguised, "someone")
            .await
            .assert_problem(400, &[("email", "invalid")]);
    }
    // 140 characters, each spelled out in the skeleton as five: a lock key past DynamoDB's
    // limit, once a `500`.
    let spelled_out = format!("{}@example.com", "\u{102A}".repeat(140));
    sign_up(&api, &spelled_out, "someone")
        .await
        .assert_problem(400, &[("email", "too_long")]);
    let encoded: String = spelled_out.bytes().map(|b| format!("%{b:02X}")).collect();
    let check = api.get(format!("/emails/{encoded}")).await;
    assert_eq!(check.status, 400, "{check:?}");
    assert!(api.items().await.is_empty(), "nothing is written");
    let ada = sign_up(&api, "ada@example.com", "ada").await;
    assert_eq!(ada.status, 201, "{ada:?}");
    for (i, look_alike) in ["\u{0430}da@example.com", "ada@ex\u{0430}mple.com"]
        .into_iter()
        .enumerate()
    {
        sign_up(&api, look_alike, &format!("mallory{i}"))
            .await
            .assert_problem(409, &[("email", "taken")]);
        let encoded: String = look_alike.bytes().map(|b| format!("%{b:02X}")).collect();
        let check = api.get(format!("/emails/{encoded}")).await;
        assert_eq!(check.status, 200, "{check:?}");
        assert_eq!(check.body["available"], false, "{look_alike}: {check:?}");
    }
    // The holder may change to a look-alike of its own address: the lock stays where it is.
    let own = api
        .put(
            format!("/accounts/{}/email", id(&ada)),
            json!({"email": "\u{0430}da@example.com"}),
        )
        .await;
    assert_eq!(own.status, 200, "{own:?}");
    let locks = api.items_with_pk_prefix("UNIQ#EMAIL#").await;
    assert_eq!(locks.len(), 1);
    // The lock names the address as the account now spells it.
    assert_eq!(s(&locks[0], "value"), "\u{0430}da@example.com", "{locks:?}");
    // A lock lost (a bug, a torn restore) is put back by the next respelling; one another
    // account holds makes the address taken.
    let (lock_pk, lock_sk) = (s(&locks[0], "PK"), s(&locks[0], "SK"));
    crate::harness::delete_raw(&api.ctx, lock_pk, lock_sk).await;
    let back = api
        .put(
            format!("/accounts/{}/email", id(&ada)),
            json!({"email": "ada@example.com"}),
        )
        .await;
    assert_eq!(back.status, 200, "{back:?}");
    let locks = api.items_with_pk_prefix("UNIQ#EMAIL#").await;
    assert_eq!(
        (s(&locks[0], "value"), s(&locks[0], "accountId")),
        ("ada@example.com", id(&ada).as_str())
    );
    crate::harness::update_raw(
        &api.ctx,
        lock_pk,
        lock_sk,
        "SET accountId = :other",
        &[(":other", crate::harness::str_attr("someone-else"))],
    )
    .await;
    api.put(
        format!("/accounts/{}/email", id(&ada)),
        json!({"email": "\u{0430}da@example.com"}),
    )
    .await
    .assert_problem(409, &[("email", "taken")]);
    let idna = sign_up(&api, "Grace@B\u{00FC}cher.Example", "grace").await;
    assert_eq!(idna.status, 201, "{idna:?}");
    assert_eq!(idna.body["email"], "grace@xn--bcher-kva.example");
    assert_eq!(api.items_with_pk_prefix("ACCT#").await.len(), 2);
}

/// `accounts:self` creates one account per subject (`409` `owner` `limit_reached` for a second),
/// and another once it is deleted; `accounts:admin` creates any number.
async fn a_subject_owns_one_account_unless_admin(api: Api) {
    let squatter = api.as_token(crate::harness::token("squatter", "accounts:self", &[]));
    let first = sign_up(&squatter, "one@example.com", "one").await;
    assert_eq!(first.status, 201, "{first:?}");
    let second = sign_up(&squatter, "two@example.com", "two").await;
    second.assert_problem(409, &[("owner", "limit_reached")]);
    assert!(
        api.item(&email_lock("two@example.com"), "LOCK")
            .await
            .is_none()
    );
    // Both limits at once: a taken email and a second account.
    sign_up(&squatter, "one@example.com", "three")
        .await
        .assert_problem(409, &[("email", "taken"), ("owner", "limit_reached")]);
    assert_eq!(
        squatter
            .delete(format!("/accounts/{}", id(&first)))
            .await
            .status,
        204
    );
    assert_eq!(api.items_with_pk_prefix("UNIQ#OWNER#").await.len(), 0);
    let again = sign_up(&squatter, "two@example.com", "two").await;
    assert_eq!(again.status, 201, "after deleting its account: {again:?}");
    let owner_locks = api.items_with_pk_prefix("UNIQ#OWNER#").await;
    assert_eq!(owner_locks.len(), 1);
    assert!(
        !s(&owner_locks[0], "PK").contains("squatter"),
        "the subject stays out of the key"
    );
    // An admin creates any number, and claims no owner lock.
    for i in 0..3 {
        let made = sign_up(&api, &format!("staff{i}@example.com"), &format!("staff{i}")).await;
        assert_eq!(made.status, 201, "{made:?}");
    }
    assert_eq!(api.items_with_pk_prefix("UNIQ#OWNER#").await.len(), 1);
}

/// `GET /emails/{email}` and `GET /usernames/{username}`: normalised as sign-up normalises,
/// `available` exactly while no lock holds the value, reading the lock only.
async fn availability_checks_read_the_normalised_lock(api: Api) {
    let free = api.get("/emails/%20Ada@%EF%BC%A5xample.COM").await;
    assert_eq!(free.status, 200, "{free:?}");
    assert_eq!(free.header("content-type"), Some("application/json"));
    assert_eq!(
        free.body,
        json!({"email": "ada@example.com", "available": true})
    );
    assert_eq!(
        api.get("/usernames/Ada.Lovelace").await.body,
        json!({"username": "ada.lovelace", "available": true})
    );
    let account = sign_up(&api, "ada@example.com", "ada.lovelace").await;
    assert_eq!(account.status, 201);
    for (path, expected) in [
        (
            "/emails/ADA@example.com",
            json!({"email": "ada@example.com", "available": false}),
        ),
        (
            "/usernames/%EF%BC%A1da.Lovelace",
            json!({"username": "ada.lovelace", "available": false}),
        ),
        (
            "/emails/grace@example.com",
            json!({"email": "grace@example.com", "available": true}),
        ),
        (
            "/usernames/grace",
            json!({"username": "grace", "available": true}),
        ),
    ] {
        let reply = api.get(path).await;
        assert_eq!(reply.status, 200, "{path}: {reply:?}");
        assert_eq!(reply.body, expected, "{path}");
    }
    for path in ["/emails/not-an-email", "/emails/ada%23x@example.com"] {
        api.get(path)
            .await
            .assert_problem(400, &[("email", "invalid")]);
    }
    for path in [
        "/usernames/ab",
        "/usernames/ada%20lovelace",
        "/usernames/stra%C3%9Fe",
    ] {
        api.get(path)
            .await
            .assert_problem(400, &[("username", "invalid")]);
    }
    // A changed email frees the old one at once, and the check says so.
    let account_id = id(&account);
    api.put(
        format!("/accounts/{account_id}/email"),
        json!({"email": "countess@example.com"}),
    )
    .await;
    assert_eq!(
        api.get("/emails/ada@example.com").await.body["available"],
        true
    );
    assert_eq!(
        api.get("/emails/countess@example.com").await.body["available"],
        false
    );
    let read = api.get("/usernames/ada.lovelace").await;
    if crate::harness::capacity_as_dynamodb() {
        assert_eq!(
            read.consumed(),
            (1.0, 0.0),
            "one strongly consistent GetItem of the lock, and no write"
        );
    }
    assert_eq!(api.items().await.len(), 3, "a check writes nothing");
}

async fn create_normalises_and_writes_the_account_and_two_locks(api: Api) {
    let reply = api
        .post("/accounts", json!({"email": " Ada@ＥＸＡＭＰＬＥ.com ", "username": "Ada.Lovelace", "displayName": " Ada "}))
        .await;
    assert_eq!(reply.status, 201, "{reply:?}");
    let account_id = id(&reply);
    assert_eq!(
        reply.header("location"),
        Some(format!("/accounts/{account_id}").as_str())
    );
    assert_eq!(reply.body["email"], "ada@example.com");
    assert_eq!(reply.body["username"], "ada.lovelace");
    // Free text is stored exactly as sent; only values that become keys are normalised.
    assert_eq!(reply.body["displayName"], " Ada ");
    assert!(reply.body["createdAt"].as_i64().unwrap() > 1_700_000_000_000);

    let account = api
        .item(&format!("ACCT#{account_id}"), "PROFILE")
        .await
        .unwrap();
    assert_eq!(s(&account, "email"), "ada@example.com");
    let email = api
        .item(&email_lock("ada@example.com"), "LOCK")
        .await
        .unwrap();
    assert_eq!(s(&email, "accountId"), account_id);
    let handle = api.item("UNIQ#HANDLE#ada.lovelace", "LOCK").await.unwrap();
    assert_eq!(s(&handle, "accountId"), account_id);
    assert_eq!(api.items().await.len(), 3);
    assert_eq!(
        api.get(format!("/accounts/{account_id}")).await.body,
        reply.body
    );

    let bare = sign_up(&api, "grace@example.com", "grace").await;
    assert_eq!(bare.status, 201);
    assert_eq!(bare.body["displayName"], serde_json::Value::Null);
}

async fn create_names_every_bad_field(api: Api) {
    api.post("/accounts", json!({}))
        .await
        .assert_problem(400, &[("email", "required"), ("username", "required")]);
    api.post(
        "/accounts",
        json!({"email": "nope", "username": "ab", "displayName": "x".repeat(101)}),
    )
    .await
    .assert_problem(
        400,
        &[
            ("displayName", "too_long"),
            ("email", "invalid"),
            ("username", "invalid"),
        ],
    );
    api.post(
        "/accounts",
        json!({"email": "a@b.co", "username": "straße"}),
    )
    .await
    .assert_problem(400, &[("username", "invalid")]);
    api.post("/accounts", json!({"email": ["a@b.co"], "username": 5}))
        .await
        .assert_problem(400, &[("email", "invalid"), ("username", "invalid")]);
    assert!(api.items().await.is_empty());
}

async fn create_names_every_taken_value_whatever_the_spelling(api: Api) {
    assert_eq!(
        sign_up(&api, "kelvin@example.com", "kelvin").await.status,
        201
    );
    // Full-width letters and the Kelvin sign fold to the same values.
    sign_up(&api, "ＫＥＬＶＩＮ@example.com", "other")
        .await
        .assert_problem(409, &[("email", "taken")]);
    sign_up(&api, "other@example.com", "\u{212A}elvin")
        .await
        .assert_problem(409, &[("username", "taken")]);
    sign_up(&api, " Kelvin@Example.COM", "KELVIN")
        .await
        .assert_problem(409, &[("email", "taken"), ("username", "taken")]);
    assert_eq!(api.items().await.len(), 3);
}

async fn reads_of_missing_accounts_are_404(api: Api) {
    api.get("/accounts/nope").await.assert_problem(404, &[]);
    api.delete("/accounts/nope").await.assert_problem(404, &[]);
    api.put("/accounts/nope/email", json!({"email": "a@b.co"}))
        .await
        .assert_problem(404, &[]);
    api.put("/accounts/nope/username", json!({"username": "abc"}))
        .await
        .assert_problem(404, &[]);
    api.get("/accounts/a%20b")
        .await
        .assert_problem(400, &[("accountId", "invalid")]);
}

async fn change_email_frees_the_old_email_at_once(api: Api) {
    let account_id = id(&sign_up(&api, "old@example.com", "ada").await);
    let changed = api
        .put(
            format!("/accounts/{account_id}/email"),
            json!({"email": "NEW@example.com"}),
        )
        .await;
    assert_eq!(changed.status, 200, "{changed:?}");
    assert_eq!(changed.body["email"], "new@example.com");
    assert_eq!(changed.body["username"], "ada");
    assert_eq!(
        api.get(format!("/accounts/{account_id}")).await.body,
        changed.body
    );
    assert!(
        api.item(&email_lock("old@example.com"), "LOCK")
            .await
            .is_none()
    );
    assert_eq!(
        s(
            &api.item(&email_lock("new@example.com"), "LOCK")
                .await
                .unwrap(),
            "accountId"
        ),
        account_id
    );
    assert_eq!(
        sign_up(&api, "old@example.com", "grace").await.status,
        201,
        "the old email is free at once"
    );
    assert_eq!(
        api.put(
            format!("/accounts/{account_id}/email"),
            json!({"email": "new@example.com"})
        )
        .await
        .status,
        200
    );
    api.put(
        format!("/accounts/{account_id}/email"),
        json!({"email": "x"}),
    )
    .await
    .assert_problem(400, &[("email", "invalid")]);
    assert_eq!(api.items_with_pk_prefix("UNIQ#EMAIL#").await.len(), 2);
}

async fn change_username_frees_the_old_username_at_once(api: Api) {
    let account_id = id(&sign_up(&api, "ada@example.com", "ada").await);
    let changed = api
        .put(
            format!("/accounts/{account_id}/username"),
            json!({"username": "Countess"}),
        )
        .await;
    assert_eq!(changed.status, 200, "{changed:?}");
    assert_eq!(changed.body["username"], "countess");
    assert!(api.item("UNIQ#HANDLE#ada", "LOCK").await.is_none());
    assert_eq!(
        s(
            &api.item("UNIQ#HANDLE#countess", "LOCK").await.unwrap(),
            "accountId"
        ),
        account_id
    );
    assert_eq!(
        s(
            &api.item(&format!("ACCT#{account_id}"), "PROFILE")
                .await
                .unwrap(),
            "username"
        ),
        "countess"
    );
    assert_eq!(sign_up(&api, "grace@example.com", "ada").await.status, 201);
    assert_eq!(api.items_with_pk_prefix("UNIQ#HANDLE#").await.len(), 2);
}

async fn changes_to_a_taken_value_are_409(api: Api) {
    let ada = sign_up(&api, "ada@example.com", "ada").await;
    sign_up(&api, "grace@example.com", "grace").await;
    let ada_id = id(&ada);
    api.put(
        format!("/accounts/{ada_id}/email"),
        json!({"email": "Grace@example.com"}),
    )
    .await
    .assert_problem(409, &[("email", "taken")]);
    api.put(
        format!("/accounts/{ada_id}/username"),
        json!({"username": "GRACE"}),
    )
    .await
    .assert_problem(409, &[("username", "taken")]);
    assert_eq!(
        api.get(format!("/accounts/{ada_id}")).await.body,
        ada.body,
        "nothing changed"
    );
    assert_eq!(
        s(
            &api.item(&email_lock("ada@example.com"), "LOCK")
                .await
                .unwrap(),
            "accountId"
        ),
        ada_id
    );
    assert_eq!(api.items().await.len(), 6);
}

async fn delete_removes_the_account_and_both_locks(api: Api) {
    let account_id = id(&sign_up(&api, "ada@example.com", "ada").await);
    sign_up(&api, "grace@example.com", "grace").await;
    let changed = api
        .put(
            format!("/accounts/{account_id}/email"),
            json!({"email": "countess@example.com"}),
        )
        .await;
    assert_eq!(changed.status, 200, "{changed:?}");
    assert_eq!(api.outbox_of("account", &account_id).await.len(), 2);
    let reply = api.delete(format!("/accounts/{account_id}")).await;
    assert_eq!(reply.status, 204);
    // Its outbox items (their events published from the stream already) go with it, but the
    // deletion's own, which names its id alone: none keeps its emails.
    let left = api.outbox_of("account", &account_id).await;
    assert_eq!(left.len(), 1, "{left:?}");
    let text = format!("{left:?}");
    assert!(text.contains("AccountDeleted"), "{text}");
    assert!(!text.contains("@example.com"), "{text}");
    assert!(
        api.item(&format!("ACCT#{account_id}"), "PROFILE")
            .await
            .is_none()
    );
    assert!(
        api.item(&email_lock("ada@example.com"), "LOCK")
            .await
            .is_none()
    );
    assert!(api.item("UNIQ#HANDLE#ada", "LOCK").await.is_none());
    assert_eq!(api.items().await.len(), 3);
    api.delete(format!("/accounts/{account_id}"))
        .await
        .assert_problem(404, &[]);
    assert_eq!(sign_up(&api, "ada@example.com", "ada").await.status, 201);
}

/// Every lock names an account that holds exactly that value, and every account holds both
/// of its locks: no orphans, no value with two holders.
async fn assert_consistent(api: &Api) -> usize {
    let items = api.items().await;
    let accounts: BTreeMap<String, (String, String)> = items
        .iter()
        .filter(|i| s(i, "SK") == "PROFILE")
        .map(|i| {
            (
                s(i, "accountId").to_owned(),
                (s(i, "email").to_owned(), s(i, "username").to_owned()),
            )
        })
        .collect();
    let mut locks = BTreeSet::new();
    for lock in items.iter().filter(|i| s(i, "SK") == "LOCK") {
        let holder = accounts
            .get(s(lock, "accountId"))
            .unwrap_or_else(|| panic!("an orphan lock {lock:?}"));
        let pk = s(lock, "PK");
        let expected = if pk.starts_with("UNIQ#EMAIL#") {
            &holder.0
        } else {
            &holder.1
        };
        assert_eq!(
            s(lock, "value"),
            expected,
            "{pk} names an account holding another value"
        );
        if pk.starts_with("UNIQ#EMAIL#") {
            assert_eq!(pk, email_lock(expected), "keyed by the email's skeleton");
        } else {
            assert!(pk.ends_with(expected.as_str()));
        }
        locks.insert(pk.to_owned());
    }
    assert_eq!(
        locks.len(),
        accounts.len() * 2,
        "every account holds both of its locks"
    );
    accounts.len()
}

/// 64 sign-ups with one email, spelled eight ways, each with its own username.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_email_raced_by_64_sign_ups_has_one_holder() {
    let api = Api::start(Mode::Http).await;
    let spellings = [
        "ada@example.com",
        "ADA@example.com",
        " Ada@Example.Com",
        "ＡＤＡ@ｅｘａｍｐｌｅ.ｃｏｍ",
        "ada@EXAMPLE.com ",
        "aDa@example.cOm",
        "Ada@example.com",
        "\tada@example.com",
    ];
    let replies = futures::future::join_all((0..64).map(|i| {
        let api = api.clone();
        async move { sign_up(&api, spellings[i % spellings.len()], &format!("user{i}")).await }
    }))
    .await;
    assert_eq!(
        replies.iter().filter(|r| r.status == 201).count(),
        1,
        "{replies:?}"
    );
    for reply in replies.iter().filter(|r| r.status != 201) {
        reply.assert_problem(409, &[("email", "taken")]);
    }
    assert_eq!(assert_consistent(&api).await, 1);
    assert_eq!(api.items_with_pk_prefix("UNIQ#EMAIL#").await.len(), 1);
}

/// 32 pairs of cross-claims: `(email A, user B)` against `(email B, user A)`, racing the straight
/// claims `(email A, user A)` and `(email B, user B)` too (the cross pair alone shares no lock).
/// Whatever wins, no value has two holders and no lock outlives its account.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cross_claims_never_leave_two_holders_or_an_orphan() {
    if crate::harness::skip_on_external_engine(crate::harness::NO_RETRIED_TRANSACTIONS) {
        return;
    }
    let api = Api::start(Mode::Http).await;
    let mut claims = Vec::new();
    for pair in 0..32 {
        let (a, b) = (format!("alpha{pair}"), format!("beta{pair}"));
        for (email, user) in [(&a, &b), (&b, &a), (&a, &a), (&b, &b)] {
            claims.push((format!("{email}@example.com"), user.clone()));
        }
    }
    let replies = futures::future::join_all(claims.iter().map(|(email, user)| {
        let api = api.clone();
        async move { sign_up(&api, email, user).await }
    }))
    .await;
    let created = replies.iter().filter(|r| r.status == 201).count();
    for reply in &replies {
        assert!(reply.status == 201 || reply.status == 409, "{reply:?}");
        if reply.status == 409 {
            assert!(
                !reply.field_errors().is_empty(),
                "a 409 names what was taken"
            );
        }
    }
    assert!(created >= 32, "every pair has a winner: {created}");
    assert_eq!(assert_consistent(&api).await, created);
}

/// A change of email races eight sign-ups with that email: one holder, no orphan.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_of_email_racing_sign_ups_has_one_holder() {
    let api = Api::start(Mode::Http).await;
    let account_id = id(&sign_up(&api, "old@example.com", "changer").await);
    let change = {
        let api = api.clone();
        let path = format!("/accounts/{account_id}/email");
        async move { api.put(path, json!({"email": "Wanted@Example.com"})).await }
    };
    let sign_ups = futures::future::join_all((0..8).map(|i| {
        let api = api.clone();
        async move { sign_up(&api, "wanted@example.com", &format!("racer{i}")).await }
    }));
    let (changed, signed) = tokio::join!(change, sign_ups);
    let winners =
        signed.iter().filter(|r| r.status == 201).count() + usize::from(changed.status == 200);
    assert_eq!(winners, 1, "{changed:?} {signed:?}");
    for reply in signed
        .iter()
        .filter(|r| r.status != 201)
        .chain((changed.status != 200).then_some(&changed))
    {
        reply.assert_problem(409, &[("email", "taken")]);
    }
    assert_consistent(&api).await;
    assert_eq!(
        api.items_with_pk_prefix(&email_lock("wanted@example.com"))
            .await
            .len(),
        1
    );
}

/// The lock key of an email: `UNIQ#EMAIL#<confusable skeleton>` (shared/src/keys.rs).
fn email_lock(email: &str) -> String {
    singlet_shared::keys::email_lock(&singlet_shared::Email::parse(email).unwrap()).pk
}

/// Rotating the server secret as the guide says (`docs/guide/deploy.md`, "The server secret":
/// the new key current, the old one previous for open cursors, and kept as `OWNER_KEY` for good)
/// leaves each subject's one-account lock where its account's creation put it: the subject still
/// holds one account, can still delete it, and `fsck` finds nothing. (Without `OWNER_KEY` the rotated API would look for every lock under the
/// new key: a second account `201`, the delete `500`.)
#[tokio::test]
async fn a_rotated_secret_keeps_each_subjects_one_account() {
    use singlet_functions::Ctx;
    use singlet_functions::cursor::CursorKeys;
    let (old, new) = ("o".repeat(40), "n".repeat(40));
    let (client, _) = singlet::serve::engine::start_in_memory("singlet").await;
    let before = Api::start_on(
        Mode::Direct,
        Ctx::new(client.clone(), "singlet", CursorKeys::new(old.clone())),
    )
    .await;
    let token = |api: &Api| api.as_token(crate::harness::token("carol", "accounts:self", &[]));
    let created = token(&before)
        .post(
            "/accounts",
            json!({"email": "carol@example.com", "username": "carol"}),
        )
        .await;
    assert_eq!(created.status, 201, "{created:?}");
    let path = format!("/accounts/{}", created.body["accountId"].as_str().unwrap());

    let until = time::OffsetDateTime::now_utc() + time::Duration::days(30);
    let rotated = Ctx::new(
        client,
        "singlet",
        CursorKeys::new(new).with_previous(old.clone(), until),
    )
    .with_owner_key(&old)
    .unwrap();
    let after = Api::start_on(Mode::Http, rotated).await;
    let carol = token(&after);
    carol
        .post(
            "/accounts",
            json!({"email": "carol2@example.com", "username": "carol2"}),
        )
        .await
        .assert_problem(409, &[("owner", "limit_reached")]);
    let report = singlet_tools::fsck::fsck(&after.ctx, singlet_tools::fsck::Options::default())
        .await
        .unwrap();
    assert!(report.findings.is_empty(), "{:#?}", report.findings);
    assert_eq!(carol.delete(&path).await.status, 204);
    assert!(after.items_with_pk_prefix("UNIQ#OWNER#").await.is_empty());
    let again = carol
        .post(
            "/accounts",
            json!({"email": "carol2@example.com", "username": "carol2"}),
        )
        .await;
    assert_eq!(again.status, 201, "{again:?}");
}
