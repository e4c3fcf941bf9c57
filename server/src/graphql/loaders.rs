//! The history DataLoaders of one request, and the prefetch that fills them for a whole page of
//! objects before its items resolve (one statement per loader, not one per object).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use async_graphql::Context;
use async_graphql::dataloader::{DataLoader, HashMapCache, Loader};

use crate::history::History;
use crate::history::query::{self, StoredEvent};

/// Reads the recent events of many objects at once: (uid, how many) → newest first.
pub struct RecentLoader(Arc<History>);

/// Reads the phase changes of many objects at once: uid → oldest first.
pub struct PhaseLoader(Arc<History>);

/// The history DataLoaders of one request (each query, each rendered subscription event), with
/// a cache that lives as long as the request: a page resolver fills them for all its items at
/// once ([`prefetch`]) before they resolve, so a page costs one statement per loader by
/// construction, not by timing.
pub struct Loaders {
    /// Recent events per object.
    pub recent: DataLoader<RecentLoader, HashMapCache>,
    /// Phase changes per object.
    pub phases: DataLoader<PhaseLoader, HashMapCache>,
}

/// How long a loader collects keys before it reads. Only an optimisation for shapes the page
/// resolvers do not prefetch (e.g. `nodes(ids)`); nothing depends on it for correctness.
const BATCH_WINDOW: std::time::Duration = std::time::Duration::from_millis(5);

/// Loaders for one request.
pub fn request_loaders(history: Arc<History>) -> Loaders {
    Loaders {
        recent: DataLoader::with_cache(
            RecentLoader(history.clone()),
            tokio::spawn,
            HashMapCache::default(),
        )
        .delay(BATCH_WINDOW),
        phases: DataLoader::with_cache(PhaseLoader(history), tokio::spawn, HashMapCache::default())
            .delay(BATCH_WINDOW),
    }
}

/// Default of `history(first:)`.
pub(crate) const DEFAULT_HISTORY: i32 = 20;

/// Load, for every object of a page at once, the history the page's selection asks for (looked
/// ahead: `nodes { … }` or `edges { node { … } }` selecting `history`, `phaseTimeline` or a
/// time-to figure): one statement per loader (and per distinct `history(first:)`), whose results
/// the items then read from the request's loaders. Does nothing outside a request with loaders.
pub async fn prefetch(ctx: &Context<'_>, uids: &[&str]) {
    let Some(loaders) = ctx.data_opt::<Loaders>() else {
        return;
    };
    if uids.is_empty() {
        return;
    }
    let look = ctx.look_ahead();
    let items = [look.field("nodes"), look.field("edges").field("node")];
    let mut firsts: Vec<usize> = Vec::new();
    let mut phases = false;
    for item in &items {
        for f in item.field("history").selection_fields() {
            let first = f
                .arguments()
                .ok()
                .and_then(|args| {
                    args.into_iter()
                        .find(|(n, _)| n.as_str() == "first")
                        .and_then(|(_, v)| match v {
                            async_graphql::Value::Number(n) => n.as_i64(),
                            _ => None,
                        })
                })
                .unwrap_or(i64::from(DEFAULT_HISTORY));
            let max = super::paging::max_page_size(ctx);
            if let Ok(n) = usize::try_from(first)
                && (1..=max).contains(&n)
                && !firsts.contains(&n)
            {
                firsts.push(n);
            }
        }
        phases |= [
            "phaseTimeline",
            "timeToRunningSeconds",
            "timeToReadySeconds",
        ]
        .iter()
        .any(|f| item.field(f).exists());
    }
    for n in firsts {
        // Errors surface where the items read (the database may be away).
        let _ = loaders
            .recent
            .load_many(uids.iter().map(|u| (u.to_string(), n)))
            .await;
    }
    if phases {
        let _ = loaders
            .phases
            .load_many(uids.iter().map(|u| u.to_string()))
            .await;
    }
}

/// Why history could not be read (the database's own words stay in the log).
#[derive(Clone, Copy, Debug, thiserror::Error)]
pub enum ReadError {
    #[error("history is unavailable: the database is not reachable (see /health/database)")]
    Unreachable,
    #[error(
        "reading history failed: the database did not answer (the server's log has the details)"
    )]
    Failed,
}

pub(crate) fn db_of(history: &History) -> Result<crate::db::Db, ReadError> {
    history.db().ok_or(ReadError::Unreachable)
}

impl Loader<(String, usize)> for RecentLoader {
    type Value = Vec<StoredEvent>;
    type Error = ReadError;

    async fn load(
        &self,
        keys: &[(String, usize)],
    ) -> Result<HashMap<(String, usize), Vec<StoredEvent>>, ReadError> {
        let db = db_of(&self.0)?;
        let most = keys.iter().map(|k| k.1).max().unwrap_or(0);
        let uids: Vec<String> = keys
            .iter()
            .map(|k| k.0.clone())
            .collect::<HashSet<_>>()
            .into_iter()
            .collect();
        let found = query::recent_by_uid(&db, &uids, most)
            .await
            .map_err(read_failed)?;
        Ok(keys
            .iter()
            .map(|(uid, n)| {
                let mut events = found.get(uid).cloned().unwrap_or_default();
                events.truncate(*n);
                ((uid.clone(), *n), events)
            })
            .collect())
    }
}

impl Loader<String> for PhaseLoader {
    type Value = Vec<StoredEvent>;
    type Error = ReadError;

    async fn load(&self, keys: &[String]) -> Result<HashMap<String, Vec<StoredEvent>>, ReadError> {
        let db = db_of(&self.0)?;
        let mut found = query::phase_changes_by_uid(&db, keys)
            .await
            .map_err(read_failed)?;
        Ok(keys
            .iter()
            .map(|k| (k.clone(), found.remove(k).unwrap_or_default()))
            .collect())
    }
}

/// A failed read, logged: the database's own words (SQL, addresses) stay in the log.
pub(crate) fn read_failed(e: crate::db::DbError) -> ReadError {
    tracing::warn!(error = %e, "reading history failed");
    ReadError::Failed
}
