//! `GET /patrons/{patronId}` → `200` patron, or `404`.
//!
//! The patron lives in its branch's partition, which the path does not name: one `Query` on
//! GSI1 (`PATRON#<patronId>`, projecting the whole row) finds it. Index reads are eventually
//! consistent: on AWS a patron registered a moment ago can briefly be `404` here.

use crate::context::Ctx;
use crate::http::{AllValid, HandlerResult, ok, path_id};
use lambda_http::Request;

pub async fn handle(ctx: &Ctx, req: Request) -> HandlerResult {
    let (patron_id,) = (path_id(&req, "patronId"),).all_valid()?;
    Ok(ok(&super::find_patron(ctx, &patron_id).await?))
}
