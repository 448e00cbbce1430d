//! Authentication and authorization (docs/API.md, "Authentication and authorization"): every
//! route refuses a missing or invalid token with API Gateway's `401`, a token without the
//! route's scope with its `403`, and the handlers keep accounts to their owners and patron tokens
//! to their own patron.

use crate::both;
use crate::fixtures::{lend, library, patron};
use crate::harness::{Api, Reply, token, tokens};
use serde_json::{Map, Value, json};
use singlet::serve::auth::{LOCAL_AUDIENCE, LOCAL_ISSUER};
use singlet_functions::routes::ROUTES;

both!(
    every_route_refuses_every_bad_token,
    every_route_checks_its_scopes,
    an_account_is_its_owners,
    a_patron_token_reaches_its_own_patron_only,
    the_audit_actor_is_the_tokens_subject,
    scopes_come_from_a_scope_string_or_an_scp_string_or_list,
    the_token_is_taken_alone_or_after_bearer,
    a_token_with_a_crit_header_is_refused,
);

/// `scp` (Entra ID, Okta) grants scopes as a space-separated string or a list; `scope` only as
/// the space-separated string RFC 8693 and RFC 9068 define: a `scope` list grants nothing.
async fn scopes_come_from_a_scope_string_or_an_scp_string_or_list(api: Api) {
    let forms: [(&str, Value); 3] = [
        ("scp", "fleet:read fleet:write".into()),
        ("scp", json!(["fleet:read", "fleet:write"])),
        ("scope", "fleet:write".into()),
    ];
    for (claim, value) in forms {
        let mut claims = claims(&[(claim, value.clone())]);
        if claim == "scp" {
            claims.remove("scope");
        }
        let bearer = tokens().1.sign(&claims);
        let reply = api.as_token(bearer).get("/vehicles/x1").await;
        assert_eq!(reply.status, 404, "{claim}={value} is let in: {reply:?}");
    }
    // A `scope` that is a list is no `scope` at all: `403`, whatever it lists, on every route.
    for listed in [
        json!(["fleet:read"]),
        json!(crate::harness::all_scopes().split(' ').collect::<Vec<_>>()),
    ] {
        let bearer = tokens().1.sign(&claims(&[("scope", listed.clone())]));
        for route in ROUTES {
            let path = sample_path(route.path);
            let reply = call(&api, route.method, &path, Some(&bearer)).await;
            assert_eq!(
                (reply.status, &reply.body),
                (403, &json!({"message": "Forbidden"})),
                "{} {path} with scope={listed}",
                route.method
            );
        }
    }
    // A scope string is split on spaces only: a tab is part of a scope, and grants nothing.
    let tabbed = claims(&[("scope", json!("fleet:write\tfleet:read"))]);
    let reply = api
        .as_token(tokens().1.sign(&tabbed))
        .get("/vehicles/x1")
        .await;
    assert_eq!(reply.status, 403, "{reply:?}");
    // A list's element is one scope whole, as the authorizer reads it: a space inside does
    // not make it two.
    let mut joined = claims(&[("scp", json!(["fleet:write fleet:read"]))]);
    joined.remove("scope");
    let reply = api
        .as_token(tokens().1.sign(&joined))
        .get("/vehicles/x1")
        .await;
    assert_eq!(reply.status, 403, "{reply:?}");
    // Neither claim: no scope, `403`.
    let mut claims = claims(&[]);
    claims.remove("scope");
    let reply = api
        .as_token(tokens().1.sign(&claims))
        .get("/vehicles/x1")
        .await;
    assert_eq!(reply.status, 403, "{reply:?}");
    // The runner's `token` makes such tokens: `--claim scope=` leaves `scope` out, and a
    // replaced default (`nbf`) is the value given.
    let mut extra = Map::new();
    extra.insert("scope".into(), "".into());
    extra.insert("scp".into(), "fleet:read".into());
    let scp_only = tokens().1.mint("tester", "fleet:write", &extra, 60);
    let payload = decoded_payload(&scp_only);
    assert!(payload.get("scope").is_none(), "{payload}");
    assert_eq!(api.as_token(scp_only).get("/vehicles/x1").await.status, 404);
    let mut extra = Map::new();
    extra.insert("nbf".into(), "soon".into());
    let malformed = tokens().1.mint("tester", "fleet:read", &extra, 60);
    assert_eq!(decoded_payload(&malformed)["nbf"], "soon");
    assert_eq!(
        api.as_token(malformed).get("/vehicles/x1").await.status,
        401
    );
}

/// A token signed with the runner's own key whose header is `header` exactly (the JWT library
/// writes no `crit`): tokens no issuer of ours makes.
fn signed_with_header(header: &Value) -> String {
    use base64::Engine;
    tokens();
    let pem = std::fs::read(
        std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("test-keys/token-signing-key.pem"),
    )
    .unwrap();
    let key = jsonwebtoken::EncodingKey::from_rsa_pem(&pem).unwrap();
    let b64 = |bytes: Vec<u8>| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes);
    let message = format!(
        "{}.{}",
        b64(header.to_string().into_bytes()),
        b64(Value::Object(claims(&[])).to_string().into_bytes())
    );
    let signature =
        jsonwebtoken::crypto::sign(message.as_bytes(), &key, jsonwebtoken::Algorithm::RS256)
            .unwrap();
    format!("{message}.{signature}")
}

/// RFC 7515 (section 4.1.11): a recipient must refuse a token whose `crit` names an extension it
/// does not understand. The authorizer understands none, so a token with any `crit` is `401` on
/// every route, whatever it names; the same token without `crit` passes (the control).
async fn a_token_with_a_crit_header_is_refused(api: Api) {
    let kid = tokens().1.jwks()["keys"][0]["kid"].clone();
    let plain = signed_with_header(&json!({"alg": "RS256", "typ": "JWT", "kid": kid}));
    let reply = api.as_token(plain).get("/vehicles/x1").await;
    assert_eq!(reply.status, 404, "the hand-made token passes: {reply:?}");
    for crit in [
        json!({"alg": "RS256", "typ": "JWT", "kid": kid, "crit": ["x-unknown"], "x-unknown": true}),
        json!({"alg": "RS256", "typ": "JWT", "kid": kid, "crit": ["exp"], "exp": 1}),
        json!({"alg": "RS256", "typ": "JWT", "kid": kid, "crit": []}),
        json!({"alg": "RS256", "kid": kid, "crit": ["b64"], "b64": true}),
    ] {
        let bearer = signed_with_header(&crit);
        for route in ROUTES {
            let path = sample_path(route.path);
            let reply = call(&api, route.method, &path, Some(&bearer)).await;
            assert_eq!(
                (reply.status, &reply.body),
                (401, &json!({"message": "Unauthorized"})),
                "{} {path} with header {crit}",
                route.method
            );
        }
    }
    assert!(
        api.items().await.is_empty(),
        "no refused request wrote anything"
    );
}

fn decoded_payload(token: &str) -> Value {
    use base64::Engine;
    let payload = token.split('.').nth(1).unwrap();
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload)
        .unwrap();
    serde_json::from_slice(&bytes).unwrap()
}

/// A path that fits `template`, with a plausible value for each parameter.
fn sample_path(template: &str) -> String {
    template
        .split('/')
        .map(|part| match part {
            "{isbn}" => "9780306406157",
            "{plate}" | "{chassis}" | "{cardNumber}" => "ka19",
            "{email}" => "ada@example.com",
            "{username}" => "ada",
            p if p.starts_with('{') => "x1",
            p => p,
        })
        .collect::<Vec<_>>()
        .join("/")
}

async fn call(api: &Api, method: &'static str, path: &str, bearer: Option<&str>) -> Reply {
    let mut call = api.call(method, path).anonymous();
    if let Some(bearer) = bearer {
        call = call.header("authorization", &format!("Bearer {bearer}"));
    }
    if method != "GET" && method != "DELETE" {
        call = call.json(json!({}));
    }
    call.send().await
}

fn claims(overrides: &[(&str, Value)]) -> Map<String, Value> {
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    let mut claims = Map::new();
    claims.insert("iss".into(), LOCAL_ISSUER.into());
    claims.insert("aud".into(), LOCAL_AUDIENCE.into());
    claims.insert("sub".into(), "mallory".into());
    claims.insert("scope".into(), crate::harness::all_scopes().into());
    claims.insert("nbf".into(), (now - 5).into());
    claims.insert("exp".into(), (now + 600).into());
    for (name, value) in overrides {
        claims.insert((*name).into(), value.clone());
    }
    claims
}

fn signed(overrides: &[(&str, Value)]) -> String {
    tokens().1.sign(&claims(overrides))
}

/// A token signed with the runner's own key, with `kid` in its header (or none): tokens the
/// runner's issuer never makes, to see that the authorizer refuses them as API Gateway does.
fn signed_with_kid(kid: Option<&str>) -> String {
    tokens();
    let pem = std::fs::read(
        std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("test-keys/token-signing-key.pem"),
    )
    .unwrap();
    let key = jsonwebtoken::EncodingKey::from_rsa_pem(&pem).unwrap();
    let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::RS256);
    header.kid = kid.map(str::to_owned);
    jsonwebtoken::encode(&header, &claims(&[]), &key).unwrap()
}

/// API Gateway's JWT authorizer takes the token alone in `authorization`, or after `Bearer `
/// ("Control access to HTTP APIs with JWT authorizers in API Gateway"): both reach the route
/// (`404`: no such vehicle); another scheme is no token it can decode (`401`). A token the
/// runner's own `token` command prints carries the `kid` of its key, and passes either way.
async fn the_token_is_taken_alone_or_after_bearer(api: Api) {
    /// A read of a vehicle that does not exist (`404` once the token passes) with `value` as
    /// the whole `authorization` header.
    async fn get_with_authorization(api: &Api, value: &str) -> Reply {
        api.call("GET", "/vehicles/x1")
            .anonymous()
            .header("authorization", value)
            .send()
            .await
    }

    let good = signed(&[]);
    for value in [
        good.clone(),
        format!("Bearer {good}"),
        format!("bearer {good}"),
    ] {
        let reply = get_with_authorization(&api, &value).await;
        assert_eq!(reply.status, 404, "{value}: {reply:?}");
    }
    for value in [format!("Basic {good}"), "Bearer".to_owned(), String::new()] {
        let reply = get_with_authorization(&api, &value).await;
        assert_eq!(reply.status, 401, "{value}: {reply:?}");
    }

    let printed = crate::process::singlet()
        .args(["token", "--scope", "fleet:read"])
        .output()
        .unwrap();
    assert!(printed.status.success());
    let printed = String::from_utf8(printed.stdout).unwrap().trim().to_owned();
    let header = jsonwebtoken::decode_header(&printed).unwrap();
    assert_eq!(
        header.kid.as_deref(),
        tokens().1.jwks()["keys"][0]["kid"].as_str(),
        "the printed token names its key"
    );
    for value in [printed.clone(), format!("Bearer {printed}")] {
        let reply = get_with_authorization(&api, &value).await;
        assert_eq!(reply.status, 404, "{reply:?}");
    }
}

async fn every_route_refuses_every_bad_token(api: Api) {
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    let good = signed(&[]);
    let (header, rest) = good.split_once('.').unwrap();
    let (payload, signature) = rest.split_once('.').unwrap();
    let mut tampered = signature.to_owned();
    tampered.replace_range(
        ..4,
        if &signature[..4] == "AAAA" {
            "BBBB"
        } else {
            "AAAA"
        },
    );
    use base64::Engine;
    let none_header =
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(br#"{"alg":"none","typ":"JWT"}"#);
    let bad: Vec<(&str, Option<String>)> = vec![
        ("no token", None),
        ("not a JWT", Some("not-a-token".into())),
        ("expired", Some(signed(&[("exp", (now - 1).into())]))),
        (
            "not yet valid",
            Some(signed(&[("nbf", (now + 600).into())])),
        ),
        ("malformed nbf", Some(signed(&[("nbf", "soon".into())]))),
        ("malformed iat", Some(signed(&[("iat", "today".into())]))),
        // API Gateway: `iat` "must be before the current time".
        ("issued later", Some(signed(&[("iat", (now + 600).into())]))),
        // API Gateway requires a `kid` that names a key of the issuer's JWKS.
        ("no kid", Some(signed_with_kid(None))),
        ("another kid", Some(signed_with_kid(Some("not-a-key")))),
        ("malformed exp", Some(signed(&[("exp", "tomorrow".into())]))),
        ("negative nbf", Some(signed(&[("nbf", (-1).into())]))),
        // Past the JWT library's integer type, which then skips the check.
        ("nbf far ahead", Some(signed(&[("nbf", json!(1e30))]))),
        (
            "wrong issuer",
            Some(signed(&[("iss", "https://evil.example".into())])),
        ),
        (
            "wrong audience",
            Some(signed(&[("aud", "another-api".into())])),
        ),
        (
            "bad signature",
            Some(format!("{header}.{payload}.{tampered}")),
        ),
        ("alg none", Some(format!("{none_header}.{payload}."))),
        (
            "alg none, no signature part",
            Some(format!("{none_header}.{payload}")),
        ),
    ];
    for route in ROUTES {
        let path = sample_path(route.path);
        for (why, bearer) in &bad {
            let reply = call(&api, route.method, &path, bearer.as_deref()).await;
            assert_eq!(
                reply.status, 401,
                "{} {path} with {why}: {reply:?}",
                route.method
            );
            assert_eq!(reply.body, json!({"message": "Unauthorized"}), "{why}");
        }
    }
    assert!(
        api.items().await.is_empty(),
        "no refused request wrote anything"
    );
}

async fn every_route_checks_its_scopes(api: Api) {
    let every_scope: Vec<&str> = crate::harness::all_scopes().leak().split(' ').collect();
    for route in ROUTES {
        let path = sample_path(route.path);
        let others: Vec<&str> = every_scope
            .iter()
            .copied()
            .filter(|s| !route.scopes.contains(s))
            .collect();
        let without = token("tester", &others.join(" "), &[]);
        let reply = call(&api, route.method, &path, Some(&without)).await;
        assert_eq!(
            reply.status, 403,
            "{} {path} without its scope: {reply:?}",
            route.method
        );
        assert_eq!(reply.body, json!({"message": "Forbidden"}));
        for scope in route.scopes {
            let with = token("tester", scope, &[("patron_id", "x1")]);
            let reply = call(&api, route.method, &path, Some(&with)).await;
            assert!(
                reply.status != 401 && reply.status != 403,
                "{} {path} with {scope}: {reply:?}",
                route.method
            );
        }
    }
}

async fn an_account_is_its_owners(api: Api) {
    let alice = api.as_token(token("alice", "accounts:self", &[]));
    let bob = api.as_token(token("bob", "accounts:self", &[]));
    let admin = api.as_token(token("root", "accounts:admin", &[]));
    let created = alice
        .post(
            "/accounts",
            json!({"email": "alice@example.com", "username": "alice"}),
        )
        .await;
    assert_eq!(created.status, 201, "{created:?}");
    let id = created.body["accountId"].as_str().unwrap().to_owned();
    let path = format!("/accounts/{id}");
    assert_eq!(alice.get(&path).await.status, 200);
    let before = api.items().await;

    bob.get(&path).await.assert_problem(404, &[]);
    bob.put(format!("{path}/email"), json!({"email": "bob@example.com"}))
        .await
        .assert_problem(404, &[]);
    bob.put(format!("{path}/username"), json!({"username": "bob"}))
        .await
        .assert_problem(404, &[]);
    bob.delete(&path).await.assert_problem(404, &[]);
    // A scope value with a comma in it is one scope, as API Gateway reads a space-separated
    // string: `accounts:self,accounts:admin` grants neither.
    let comma = api.as_token(token(
        "carol",
        "accounts:self accounts:self,accounts:admin",
        &[],
    ));
    comma.get(&path).await.assert_problem(404, &[]);
    comma.delete(&path).await.assert_problem(404, &[]);
    // Nor does a string that looks like a list: to the authorizer, `scp: "[accounts:admin]"` is
    // one unknown scope, and so it is to the function (API Gateway hands every claim over as a
    // string; the function reads the scopes the authorizer read, never the claims again).
    for scp in ["[accounts:admin]", "[\"x,accounts:admin\"]"] {
        let mut extra = Map::new();
        extra.insert("scp".into(), scp.into());
        let bracketed = api.as_token(tokens().1.mint("mallory", "accounts:self", &extra, 60));
        bracketed.get(&path).await.assert_problem(404, &[]);
        bracketed.delete(&path).await.assert_problem(404, &[]);
    }
    assert_eq!(api.items().await.len(), before.len(), "nothing changed");
    assert_eq!(alice.get(&path).await.body, created.body);

    let changed = admin
        .put(format!("{path}/username"), json!({"username": "alice2"}))
        .await;
    assert_eq!(changed.status, 200, "{changed:?}");
    assert_eq!(admin.delete(&path).await.status, 204);
    alice.get(&path).await.assert_problem(404, &[]);
}

async fn a_patron_token_reaches_its_own_patron_only(api: Api) {
    library(&api).await;
    let p1 = patron(&api, "central", "card-1", "standard").await;
    let p2 = patron(&api, "central", "card-2", "standard").await;
    let loan = lend(&api, &p2, "central").await;
    let checkout_id = loan["checkoutId"].as_str().unwrap();
    let as_p1 = api.as_token(token("p1", "library:patron", &[("patron_id", &p1)]));
    assert_eq!(as_p1.get(format!("/patrons/{p1}")).await.status, 200);
    assert_eq!(
        as_p1.get(format!("/patrons/{p1}/checkouts")).await.status,
        200
    );
    as_p1
        .get(format!("/patrons/{p2}"))
        .await
        .assert_problem(404, &[]);
    as_p1
        .get(format!("/patrons/{p2}/checkouts"))
        .await
        .assert_problem(404, &[]);
    let before = api.items().await;
    as_p1
        .call(
            "POST",
            format!("/patrons/{p2}/checkouts/{checkout_id}/renew"),
        )
        .send()
        .await
        .assert_problem(404, &[]);
    assert_eq!(api.items().await, before, "nothing renewed");
    // Nor another patron's history or one of its loans.
    as_p1
        .get(format!("/patrons/{p2}/history"))
        .await
        .assert_problem(404, &[]);
    as_p1
        .get(format!("/patrons/{p2}/checkouts/{checkout_id}"))
        .await
        .assert_problem(404, &[]);
    // Its own: one loan, renewing it, and its history once it is returned.
    let own = lend(&api, &p1, "central").await;
    let own_id = own["checkoutId"].as_str().unwrap();
    let one = as_p1.get(format!("/patrons/{p1}/checkouts/{own_id}")).await;
    assert_eq!(
        (one.status, &one.body["checkoutId"]),
        (200, &own["checkoutId"])
    );
    let renewed = as_p1
        .call("POST", format!("/patrons/{p1}/checkouts/{own_id}/renew"))
        .send()
        .await;
    assert_eq!(renewed.status, 200, "{renewed:?}");
    assert_eq!(renewed.body["renewalCount"], 1);
    let returned = api
        .call("POST", format!("/patrons/{p1}/checkouts/{own_id}/return"))
        .send()
        .await;
    assert_eq!(returned.status, 200, "{returned:?}");
    let history = as_p1.get(format!("/patrons/{p1}/history")).await;
    assert_eq!(history.status, 200, "{history:?}");
    assert_eq!(history.body["items"][0]["checkoutId"], own["checkoutId"]);
    // A bracketed string in `scp` is no list: `[library:staff]` grants nothing.
    let mut extra = Map::new();
    extra.insert("scp".into(), "[library:staff]".into());
    extra.insert("patron_id".into(), p1.clone().into());
    let bracketed = api.as_token(tokens().1.mint("p1", "library:patron", &extra, 60));
    bracketed
        .get(format!("/patrons/{p2}"))
        .await
        .assert_problem(404, &[]);
    // A patron token without a patron_id reaches no patron.
    let nobody = api.as_token(token("p0", "library:patron", &[]));
    nobody
        .get(format!("/patrons/{p1}"))
        .await
        .assert_problem(404, &[]);
}

async fn the_audit_actor_is_the_tokens_subject(api: Api) {
    let grace = api.as_token(token("grace", "audit:write", &[]));
    let created = grace
        .post(
            "/resources",
            json!({"resourceId": "door-1", "status": "closed", "actor": "mallory"}),
        )
        .await;
    assert_eq!(created.status, 201, "{created:?}");
    let changed = grace
        .call("PATCH", "/resources/door-1")
        .header("if-match", "\"1\"")
        .json(json!({"status": "open", "action": "unlock", "actor": "mallory"}))
        .send()
        .await;
    assert_eq!(changed.status, 200, "{changed:?}");
    let history = grace.get("/resources/door-1/history").await;
    let actors: Vec<&str> = history.body["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["actor"].as_str().unwrap())
        .collect();
    assert_eq!(actors, ["grace", "grace"]);
}

/// The runner trusting another issuer: its JWKS file, `iss` and `aud`. A token that issuer
/// signed passes; the same key under another `iss` or `aud`, or a key the JWKS does not hold,
/// does not.
#[test]
fn another_issuers_tokens_are_checked_against_its_jwks() {
    use axum::http::HeaderMap;
    use singlet::serve::auth::Authorizer;
    let issuer = &tokens().1;
    let file = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("other-issuer-jwks.json");
    std::fs::write(&file, issuer.jwks().to_string()).unwrap();
    let other = Authorizer::from_jwks(&file, "https://idp.example", "my-api").unwrap();
    let route = singlet_functions::routes::by_function("get-vehicle").unwrap();
    let bearer = |token: String| {
        let mut headers = HeaderMap::new();
        headers.insert("authorization", format!("Bearer {token}").parse().unwrap());
        headers
    };
    let own = |iss: &str, aud: &str| {
        signed(&[
            ("iss", iss.into()),
            ("aud", aud.into()),
            ("scope", "fleet:read".into()),
        ])
    };
    let claims = other
        .authorize(&bearer(own("https://idp.example", "my-api")), route)
        .unwrap();
    assert_eq!(claims["sub"], "mallory");
    for token in [
        own(LOCAL_ISSUER, "my-api"),
        own("https://idp.example", LOCAL_AUDIENCE),
    ] {
        let refused = other.authorize(&bearer(token), route).unwrap_err();
        assert_eq!(refused.0.as_u16(), 401);
    }
    // The JWKS holds no key for another kid.
    std::fs::write(&file, r#"{"keys": []}"#).unwrap();
    let empty = Authorizer::from_jwks(&file, "https://idp.example", "my-api").unwrap();
    let refused = empty
        .authorize(&bearer(own("https://idp.example", "my-api")), route)
        .unwrap_err();
    assert_eq!(refused.0.as_u16(), 401);
}
