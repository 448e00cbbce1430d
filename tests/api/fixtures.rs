//! The test data every domain's tests build on, written once: a library (branches, a book), its
//! patrons, copies and loans, through the real routes.

use crate::harness::{Api, Reply};
use serde_json::{Value, json};

pub const ISBN: &str = "9780306406157";

pub async fn branch(api: &Api, branch_id: &str) {
    let body = json!({"branchId": branch_id, "name": "Central", "address": "1 Square", "city": "Springfield",
        "phone": "+44 20 7946 0000", "openingHours": "Mon-Sat 09:00-20:00"});
    assert_eq!(api.post("/branches", body).await.status, 201);
}

pub async fn library(api: &Api) {
    branch(api, "central").await;
    branch(api, "east").await;
    let book = json!({"isbn": ISBN, "title": "Fundamentals of Data Structures", "author": "Ellis Horowitz",
        "publisher": "Computer Science Press", "publishYear": 1976, "genre": "Computer science",
        "description": "Arrays, stacks, queues, lists, trees and graphs.", "pageCount": 564});
    assert_eq!(api.post("/books", book).await.status, 201);
}

pub async fn patron(api: &Api, branch_id: &str, card: &str, tier: &str) -> String {
    let body = json!({"cardNumber": card, "firstName": "Ada", "lastName": "Lovelace", "email": format!("{card}@example.com"), "membershipTier": tier});
    let reply = api
        .post(format!("/branches/{branch_id}/patrons"), body)
        .await;
    assert_eq!(reply.status, 201, "{reply:?}");
    reply.body["patronId"].as_str().unwrap().to_owned()
}

pub async fn copy(api: &Api, branch_id: &str) -> String {
    let reply = api
        .post(
            format!("/branches/{branch_id}/copies"),
            json!({"isbn": ISBN, "condition": "good"}),
        )
        .await;
    assert_eq!(reply.status, 201, "{reply:?}");
    reply.body["copyId"].as_str().unwrap().to_owned()
}

pub async fn checkout(api: &Api, patron_id: &str, branch_id: &str, copy_id: &str) -> Reply {
    api.post(
        "/checkouts",
        json!({"patronId": patron_id, "branchId": branch_id, "copyId": copy_id}),
    )
    .await
}

pub async fn lend(api: &Api, patron_id: &str, branch_id: &str) -> Value {
    let copy_id = copy(api, branch_id).await;
    let reply = checkout(api, patron_id, branch_id, &copy_id).await;
    assert_eq!(reply.status, 201, "{reply:?}");
    reply.body
}
