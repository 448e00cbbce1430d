//! `GET /cards/{cardNumber}` → `200` `{cardNumber, patronId}`, or `404`. One `GetItem` on the
//! card's lock: a card is valid exactly when its lock exists.

use super::PatronCard;
use crate::context::Ctx;
use crate::error::ApiError;
use crate::http::{AllValid, HandlerResult, ok, path_id};
use lambda_http::Request;
use singlet_shared::keys;

pub async fn handle(ctx: &Ctx, req: Request) -> HandlerResult {
    let (card_number,) = (path_id(&req, "cardNumber"),).all_valid()?;
    let card: PatronCard = ctx
        .get(&keys::card_lock(&card_number))
        .await?
        .ok_or_else(|| ApiError::not_found("card"))?;
    Ok(ok(&card))
}
