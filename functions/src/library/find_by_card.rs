//! `GET /cards/{cardNumber}` → `200` `{cardNumber, patronId}`, or `404`. One `GetItem` on the
//! card's lock: a card is valid exactly when its lock exists. The card number is normalised as
//! at registration (`C-1` finds `c-1`); the answer carries it normalised.

use super::PatronCard;
use crate::context::Ctx;
use crate::error::ApiError;
use crate::http::{AllValid, HandlerResult, ok, path};
use lambda_http::Request;
use singlet_shared::CardNumber;

pub async fn handle(ctx: &Ctx, req: Request) -> HandlerResult {
    let (card_number,) = (path(&req, "cardNumber", CardNumber::parse),).all_valid()?;
    let card: PatronCard = ctx
        .get(&PatronCard::key_of(&card_number))
        .await?
        .ok_or_else(|| ApiError::not_found("card"))?;
    Ok(ok(&card))
}
