//! `POST /branches` `{branchId, name, address, city, phone, openingHours}` → `201` branch,
//! `location: /branches/{branchId}`; `409` `branchId` `taken`.
//!
//! The client names the branch, so its id is the collision: one `TransactWriteItems` putting
//! `BRANCH#<branchId>` guarded by `attribute_not_exists`, with GSI1 keys `BRANCHES` /
//! `<branchId>` so that it is listed by `GET /branches`. It is a transaction (rather than a
//! conditional `PutItem`) so that an `Idempotency-Key`'s record is written with the branch: a
//! retry gets the first response back instead of a `409` for its own branch.

use super::{Branch, MAX_ADDRESS_LEN, MAX_NAME_LEN, MAX_OPENING_HOURS_LEN, MAX_PHONE_LEN};
use crate::context::Ctx;
use crate::error::{ApiError, Code, FieldError};
use crate::events::{Event, EventType};
use crate::http::{AllValid, HandlerResult, JsonBody, created};
use crate::idempotency::{IdFrom, Idempotency, commit};
use crate::recording::outbox;
use crate::store::{Put, Transaction};
use lambda_http::Request;
use singlet_shared::Id;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    Branch,
    Event,
}

/// A branch from a `POST /branches` body, checked as the route checks it (every field at fault
/// in one `400`): what the route and `import` make every branch with.
pub fn branch_from(body: &JsonBody) -> Result<Branch, ApiError> {
    let (branch_id, name, address, city, phone, opening_hours) = (
        body.required("branchId", Id::parse),
        body.text("name", MAX_NAME_LEN),
        body.text("address", MAX_ADDRESS_LEN),
        body.text("city", MAX_NAME_LEN),
        body.text("phone", MAX_PHONE_LEN),
        body.text("openingHours", MAX_OPENING_HOURS_LEN),
    )
        .all_valid()?;
    Ok(Branch {
        branch_id,
        name,
        address,
        city,
        phone,
        opening_hours,
    })
}

pub async fn handle(ctx: &Ctx, req: Request) -> HandlerResult {
    let body = JsonBody::from_request(&req)?;
    let branch = branch_from(&body)?;
    let branch_id = branch.branch_id.clone();
    let idempotency = Idempotency::from_request(ctx, &req, &body.value())?;
    let response = created(format!("/branches/{branch_id}"), &branch);

    let transaction = Transaction::new()
        .put(Part::Branch, Put::new_only(&branch))
        .put(
            Part::Event,
            outbox(
                &req,
                Event::new(EventType::BranchCreated, &branch_id, &branch),
            ),
        );

    let done = commit(ctx, transaction, &idempotency, IdFrom::Request, response).await?;
    let response =
        done.answer(|_| ApiError::conflict(vec![FieldError::new("branchId", Code::Taken)]))?;
    tracing::info!(%branch_id, "branch created");
    Ok(response)
}
