//! `?limit=` and `?cursor=`, written once for every list route.
//!
//! A cursor ([`crate::cursor`]) carries DynamoDB's `LastEvaluatedKey`, signed for the route
//! being served and the partition listed: any edit, truncation, or use on another route or
//! partition is `400`, so a cursor can never steer a query outside the partition it came from.

use crate::context::Ctx;
use crate::error::{ApiError, Code};
use crate::http::{HandlerResult, ok, served_route};
use crate::model::Entity;
use crate::store::{Item, Query, decode};
use lambda_http::{Request, RequestExt};
use serde::Serialize;
use std::future::Future;

pub const DEFAULT_LIMIT: i32 = 25;
pub const MAX_LIMIT: i32 = 100;

/// One page's request: how many items, and where to start.
#[derive(Debug)]
pub struct Page {
    pub limit: i32,
    pub start: Option<Item>,
    scope: String,
}

/// One page of a list response.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Paged<T> {
    pub items: Vec<T>,
    pub next_cursor: Option<String>,
}

impl Page {
    /// Reads `limit` (1..=100, default 25) and `cursor`, bound to the route being served and
    /// `partition`.
    pub fn from_request(ctx: &Ctx, req: &Request, partition: &str) -> Result<Self, ApiError> {
        let route = served_route(req);
        // A route not declared `paged` is not granted the server's keys on AWS: it would sign
        // with a key of its own instance, and its cursors would fail on every other one.
        if !route.paged {
            tracing::error!(
                function = route.function,
                "a route that pages is not declared `paged: true` in the route table"
            );
            return Err(ApiError::Internal);
        }
        let query = req.query_string_parameters();
        let scope = format!("{}\n{partition}", route.function);
        let limit = match query.first("limit") {
            None => DEFAULT_LIMIT,
            Some(raw) => raw
                .parse::<i32>()
                .ok()
                .filter(|l| (1..=MAX_LIMIT).contains(l))
                .ok_or(ApiError::field("limit", Code::Invalid))?,
        };
        let start = match query.first("cursor") {
            None => None,
            Some(cursor) => Some(
                ctx.cursors
                    .decode(&scope, cursor)
                    .ok_or(ApiError::field("cursor", Code::Invalid))?,
            ),
        };
        Ok(Self {
            limit,
            start,
            scope,
        })
    }

    /// Runs one page of `query` and answers `{items, nextCursor}`. The partition's owner (a
    /// branch, a patron) is only looked up when the first page comes back empty: `missing` then
    /// tells an empty list (`200`) from an owner that does not exist (`404`), so a list costs one
    /// `Query` whenever it has items.
    pub async fn query<T, M>(self, ctx: &Ctx, query: Query, missing: M) -> HandlerResult
    where
        T: Entity + Serialize,
        M: Future<Output = Result<(), ApiError>>,
    {
        Ok(ok(&self
            .read_or_missing::<T, M>(ctx, query, missing)
            .await?))
    }

    /// One page of `query`, decoded, as [`Page::query`] reads it (`missing` run only on an empty
    /// first page), for a route that adds to the page or changes its items before answering.
    pub async fn read_or_missing<T, M>(
        &self,
        ctx: &Ctx,
        query: Query,
        missing: M,
    ) -> Result<Paged<T>, ApiError>
    where
        T: Entity,
        M: Future<Output = Result<(), ApiError>>,
    {
        let page = self.read::<T>(ctx, query).await?;
        if page.items.is_empty() && self.start.is_none() {
            missing.await?;
        }
        Ok(page)
    }

    /// One page of `query`, decoded, with its cursor.
    pub async fn read<T: Entity>(&self, ctx: &Ctx, query: Query) -> Result<Paged<T>, ApiError> {
        let output = ctx
            .query(query.limit(self.limit).start_after(self.start.clone()))
            .await?;
        let items = output
            .items
            .iter()
            .map(decode::<T>)
            .collect::<Result<Vec<_>, _>>()?;
        Ok(self.reply(ctx, items, output.last_key.as_ref()))
    }

    /// The response page: `items` and the cursor for `last_evaluated_key`, if any.
    pub fn reply<T>(
        &self,
        ctx: &Ctx,
        items: Vec<T>,
        last_evaluated_key: Option<&Item>,
    ) -> Paged<T> {
        Paged {
            items,
            next_cursor: last_evaluated_key.map(|key| ctx.cursors.encode(&self.scope, key)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cursor::CursorKeys;
    use crate::http::ServedRoute;

    fn served_as(paged: bool) -> Request {
        let mut req = Request::default();
        req.extensions_mut().insert(ServedRoute {
            function: "list-branches",
            idempotent: false,
            paged,
            tombstones: None,
        });
        req
    }

    /// Only a route declared `paged` signs cursors: one that is not is not granted the server's
    /// keys on AWS, so paging there is a `500` and a log line naming it, in every test that
    /// reaches it, never cursors that fail on the next instance.
    #[test]
    fn only_a_route_declared_paged_may_page() {
        let config = aws_sdk_dynamodb::Config::builder()
            .behavior_version(aws_sdk_dynamodb::config::BehaviorVersion::latest())
            .build();
        let ctx = Ctx::new(
            aws_sdk_dynamodb::Client::from_conf(config),
            "singlet",
            CursorKeys::random(),
        );
        assert!(matches!(
            Page::from_request(&ctx, &served_as(false), "BRANCHES"),
            Err(ApiError::Internal)
        ));
        let page = Page::from_request(&ctx, &served_as(true), "BRANCHES").unwrap();
        assert_eq!(page.limit, DEFAULT_LIMIT);
    }
}
