//! The Query root: the lookups and summaries (`query.rs`), one connection per kind, the
//! applications, what changed between two moments (`past.rs`), and `at`: all of it at a past
//! moment.

use async_graphql::{Context, Object};

use super::past::{PastMoment, PastRefused, parse_time};
use crate::error::ErrorCode;

/// The Query root: lookups and summaries plus one connection per kind.
#[derive(async_graphql::MergedObject, Default)]
#[graphql(name = "Query")]
pub struct QueryRoot(
    super::query::Query,
    super::query::ListQuery,
    super::applications::ApplicationQuery,
    super::past::PastQuery,
    super::search::SearchQuery,
    AtQuery,
);

/// `at`: the whole root again, at a past moment.
#[derive(Default)]
pub struct AtQuery;

#[Object]
impl AtQuery {
    /// The whole graph as it was at `time` (RFC 3339): every field of `Query` answered from the
    /// history, as a live query answered it then: objects and their relationships, pipeline and
    /// diagnosis, capacity and counts, seen as the caller may see them now. Fields defined
    /// relative to now (ages) count from now. Must be the operation's only root field; a time
    /// before the oldest moment kept is refused with `HISTORY_TRIMMED`, naming that moment.
    async fn at(&self, ctx: &Context<'_>, time: String) -> async_graphql::Result<QueryRoot> {
        if let Some(PastRefused(e)) = ctx.data_opt::<PastRefused>() {
            return Err(e.clone());
        }
        let asked = parse_time("time", &time)?;
        match ctx.data_opt::<PastMoment>() {
            Some(PastMoment(at)) if *at == asked => {
                // The timeline's newest moments are still being written: never kept.
                super::mark_volatile(ctx);
                Ok(QueryRoot::default())
            }
            _ => Err(ErrorCode::BadRequest.graphql(
                "`at` answers only as the root field of a query (not in a subscription or a mutation)",
            )),
        }
    }
}
