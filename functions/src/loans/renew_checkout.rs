//! `POST /patrons/{patronId}/checkouts/{checkoutId}/renew` → `200` checkout with a later
//! `dueDate` (by the loan period of the patron's tier) and `renewalCount` + 1.
//!
//! One item changes, so one conditional `UpdateItem` is atomic on its own (a transaction would
//! only double its cost): it moves the due date and the open-loans index sort key with it, on the
//! condition that the loan is still as read and still in the open index (not returned, not
//! marked overdue). `409` `checkoutId` `returned`, `overdue` (due before now, whether or not
//! `mark-overdue` has run yet) or `renewal_limit` (after 2 renewals); `404` for an unknown loan.

use super::{Checkout, MAX_ATTEMPTS, MAX_RENEWALS, load_active};
use crate::clock;
use crate::db::{Ctx, from_item, key_item, n, s};
use crate::error::{ApiError, Code, FieldError};
use crate::http::{AllValid, HandlerResult, ok, path_id};
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{ReturnConsumedCapacity, ReturnValue};
use lambda_http::Request;
use singlet_shared::keys;
use singlet_shared::schema::GSI1;

pub async fn handle(ctx: &Ctx, req: Request) -> HandlerResult {
    let (patron_id, checkout_id) =
        (path_id(&req, "patronId"), path_id(&req, "checkoutId")).all_valid()?;
    let refuse = |code| {
        Err(ApiError::conflict(vec![FieldError::new(
            "checkoutId",
            code,
        )]))
    };

    for _ in 0..MAX_ATTEMPTS {
        let loan = load_active(ctx, &patron_id, &checkout_id).await?;
        let now = clock::now();
        let due = clock::parse_iso(&loan.due_date).ok_or(ApiError::Internal)?;
        if due < now || loan.status == super::LoanStatus::Overdue {
            return refuse(Code::Overdue);
        }
        if loan.renewal_count >= MAX_RENEWALS {
            return refuse(Code::RenewalLimit);
        }
        let new_due = clock::iso(due + clock::days(loan.loan_period_days.into()));
        let open = keys::open_loan(&checkout_id, &new_due);

        let result = ctx
            .db
            .update_item()
            .table_name(&*ctx.table)
            .set_key(Some(key_item(&keys::checkout(&patron_id, &checkout_id))))
            .update_expression(
                "SET dueDate = :new, renewalCount = renewalCount + :one, #gsi1sk = :sk",
            )
            .condition_expression(
                "dueDate = :due AND renewalCount = :renewals AND attribute_exists(#gsi1pk)",
            )
            .expression_attribute_names("#gsi1pk", GSI1.pk)
            .expression_attribute_names("#gsi1sk", GSI1.sk)
            .expression_attribute_values(":new", s(&new_due))
            .expression_attribute_values(":one", n(1))
            .expression_attribute_values(":sk", s(open.sk))
            .expression_attribute_values(":due", s(&loan.due_date))
            .expression_attribute_values(":renewals", n(loan.renewal_count))
            .return_values(ReturnValue::AllNew)
            .return_consumed_capacity(ReturnConsumedCapacity::Total)
            .send()
            .await;
        match result {
            Ok(output) => {
                let renewed: Checkout = from_item(output.attributes().ok_or(ApiError::Internal)?)?;
                tracing::info!(%checkout_id, due_date = %renewed.due_date, renewals = renewed.renewal_count, "loan renewed");
                return Ok(ok(&renewed));
            }
            // Returned, renewed or marked overdue since we read it: read again.
            Err(err)
                if matches!(
                    err.as_service_error(),
                    Some(UpdateItemError::ConditionalCheckFailedException(_))
                ) => {}
            Err(err) => return Err(err.into()),
        }
    }
    Err(ApiError::Unavailable)
}
