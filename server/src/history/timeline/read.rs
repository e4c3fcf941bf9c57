//! Reading the timeline: the graph at a moment, rebuilt from the newest checkpoint at or before
//! it and the versions after that checkpoint up to the moment; the oldest moment kept; trimming.
//!
//! Rebuilt graphs are kept, shared by every request that asks for a moment with the same last
//! change, in a cache bounded in bytes (`HISTORY_CACHE_MB`); concurrent requests for one moment
//! rebuild it once.

use std::collections::HashMap;
use std::sync::Arc;

use super::ROW_OVERHEAD;
pub use super::rebuild::PastError;
use super::rebuild::{Ids, Records, forward, rebuilt};
use crate::db::{Db, DbError, statement, with_pool};
use crate::history::writer::HistorySettings;
use crate::store::{Snapshot, Store};
use parking_lot::Mutex;

/// A checkpoint's place.
#[derive(Clone, Copy, Debug)]
struct Located {
    id: i64,
    after: i64,
}

/// Which rebuilt graph a moment is: its checkpoint and the last version it holds.
type Key = (i64, i64);

struct Entry {
    cell: Arc<tokio::sync::OnceCell<Built>>,
    bytes: usize,
    used: u64,
}

/// A rebuilt graph, and what a later moment is rebuilt from.
#[derive(Clone)]
struct Built {
    moment: Moment,
    bytes: usize,
    /// The last version it holds.
    version: i64,
    /// How it was built: `forward` (from an earlier built moment) or `checkpoint`.
    how: &'static str,
    /// The checkpoint its moment is after (the newest at or before it).
    checkpoint: i64,
    /// Each object's key by its timeline id.
    ids: Ids,
    /// Each application record's JSON by its timeline id.
    records: Records,
}

/// The fleet at a past moment: the graph and the applications.
#[derive(Clone)]
pub struct Moment {
    pub graph: Arc<Snapshot>,
    /// The application inventory then (empty when it was off, or kept nothing).
    pub applications: Arc<crate::inventory::Snapshot>,
}

/// Rebuilt past graphs, kept within a byte bound.
pub struct Past {
    cache: Mutex<Cache>,
    bound: usize,
    /// Moments asked, by how their graph was had (`cached`, `forward`, `checkpoint`).
    moments: prometheus::IntCounterVec,
}

#[derive(Default)]
struct Cache {
    entries: HashMap<Key, Entry>,
    clock: u64,
    bytes: usize,
}

impl std::fmt::Debug for Past {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let c = self.cache.lock();
        f.debug_struct("Past")
            .field("graphs", &c.entries.len())
            .field("bytes", &c.bytes)
            .finish()
    }
}

impl Past {
    /// An empty cache holding at most `bound` bytes of rebuilt graphs; each moment asked is
    /// counted in `moments` by how its graph was had.
    pub fn new(bound: usize, moments: prometheus::IntCounterVec) -> Self {
        Past {
            cache: Mutex::new(Cache::default()),
            bound,
            moments,
        }
    }

    /// Rebuilt graphs held now, and their estimated bytes.
    pub fn held(&self) -> (usize, usize) {
        let c = self.cache.lock();
        (c.entries.len(), c.bytes)
    }

    /// The whole graph as it was at `at_ms` (with `store`'s derived state) and the applications
    /// then, rebuilt or shared.
    pub async fn at(&self, db: &Db, store: &Store, at_ms: i64) -> Result<Moment, PastError> {
        let (cp, bound) = locate(db, at_ms).await?;
        let last: Option<i64> = statement!(db, p => {
            let mut b = sqlx::QueryBuilder::new("SELECT max(id) FROM timeline_versions WHERE id > ");
            b.push_bind(cp.after).push(" AND at_ms <= ").push_bind(at_ms);
            if let Some(bound) = bound {
                b.push(" AND id <= ").push_bind(bound);
            }
            b.build_query_scalar().fetch_one(p).await?
        });
        let key = (cp.id, last.unwrap_or(cp.after));
        let (cell, base) = {
            let mut c = self.cache.lock();
            c.clock += 1;
            let clock = c.clock;
            let base = match c.entries.contains_key(&key) {
                true => None,
                false => nearest(&c, cp, key.1),
            };
            let e = c.entries.entry(key).or_insert_with(|| Entry {
                cell: Arc::default(),
                bytes: 0,
                used: clock,
            });
            e.used = clock;
            (e.cell.clone(), base)
        };
        let fresh = std::sync::atomic::AtomicBool::new(false);
        let built = cell
            .get_or_try_init(|| {
                let fresh = &fresh;
                async move {
                    fresh.store(true, std::sync::atomic::Ordering::Relaxed);
                    if let Some(base) = base {
                        match self.build_from(db, store, base, cp.id, key.1).await {
                            Ok(Some(built)) => return Ok(built),
                            Ok(None) => {}
                            // From its checkpoint instead: that answers or says what is damaged.
                            Err(PastError::Damaged(why)) => {
                                tracing::warn!(error = %why, "carrying a past moment forward failed")
                            }
                            Err(e) => return Err(e),
                        }
                    }
                    self.build(db, store, cp, key.1).await
                }
            })
            .await;
        let built = match built {
            Ok(b) => b.clone(),
            Err(e) => {
                self.cache.lock().entries.remove(&key);
                return Err(e);
            }
        };
        let how = match fresh.load(std::sync::atomic::Ordering::Relaxed) {
            true => built.how,
            false => "cached",
        };
        self.moments.with_label_values(&[how]).inc();
        self.account(key, built.bytes);
        Ok(built.moment)
    }

    /// Count a graph's bytes once it is built, and drop the least recently asked ones beyond
    /// the bound (never the one just asked for), off the request's path: freeing a whole graph
    /// takes a while.
    fn account(&self, key: Key, bytes: usize) {
        let mut evicted = Vec::new();
        let mut c = self.cache.lock();
        if let Some(e) = c.entries.get_mut(&key)
            && e.bytes == 0
        {
            e.bytes = bytes;
            c.bytes += bytes;
        }
        while c.bytes > self.bound {
            let oldest = c
                .entries
                .iter()
                .filter(|(k, e)| **k != key && e.cell.initialized())
                .min_by_key(|(_, e)| e.used)
                .map(|(k, _)| *k);
            let Some(k) = oldest else { break };
            if let Some(e) = c.entries.remove(&k) {
                c.bytes -= e.bytes;
                evicted.push(e);
            }
        }
        drop(c);
        if !evicted.is_empty() {
            drop(tokio::task::spawn_blocking(move || drop(evicted)));
        }
    }

    async fn build(
        &self,
        db: &Db,
        store: &Store,
        cp: Located,
        last: i64,
    ) -> Result<Built, PastError> {
        let body: Vec<u8> = statement!(db, p => {
            sqlx::query_scalar("SELECT body FROM timeline_checkpoints WHERE id = $1")
                .bind(cp.id)
                .fetch_one(p)
                .await?
        });
        let versions = versions_between(db, cp.after, last).await?;
        let t = tokio::task::spawn_blocking(move || rebuilt(&body, versions))
            .await
            .map_err(|e| PastError::Damaged(e.to_string()))??;
        Ok(Built {
            moment: Moment {
                graph: store.past(t.resources),
                applications: Arc::new(t.applications),
            },
            bytes: t.bytes,
            version: last,
            how: "checkpoint",
            checkpoint: cp.id,
            ids: t.ids,
            records: t.records,
        })
    }

    /// The graph with the last version `last` (after checkpoint `cp`), from `base` (an earlier
    /// one) and the versions after it: only the objects that changed are read and typed. None
    /// when the versions after `base` are no longer all kept (trimmed since it was built), or a
    /// checkpoint between them does not continue the one before (the objects were numbered
    /// afresh, or changes were missed).
    async fn build_from(
        &self,
        db: &Db,
        store: &Store,
        base: Built,
        cp: i64,
        last: i64,
    ) -> Result<Option<Built>, PastError> {
        if base.checkpoint != cp {
            let breaks: i64 = statement!(db, p => {
                sqlx::query_scalar(
                    "SELECT count(*) FROM timeline_checkpoints WHERE id > $1 AND id <= $2 \
                     AND NOT continues",
                )
                .bind(base.checkpoint)
                .bind(cp)
                .fetch_one(p)
                .await?
            });
            if breaks > 0 {
                return Ok(None);
            }
        }
        let versions = versions_between(db, base.version, last).await?;
        // Read after the versions: a trim that began before them shows here.
        let kept_after: Option<i64> = statement!(db, p => {
            sqlx::query_scalar("SELECT min(after_version) FROM timeline_checkpoints")
                .fetch_one(p)
                .await?
        });
        if kept_after.is_none_or(|k| k > base.version) {
            return Ok(None);
        }
        let (f, base) = tokio::task::spawn_blocking(move || {
            let f = forward(&base.moment.graph, &base.ids, &base.records, versions);
            (f, base)
        })
        .await
        .map_err(|e| PastError::Damaged(e.to_string()))?;
        let f = f?;
        Ok(Some(Built {
            moment: Moment {
                graph: store.past_from(&base.moment.graph, f.removed, f.upserted),
                applications: f.applications.map_or(base.moment.applications, Arc::new),
            },
            // Counted whole: it shares most of its objects with its base, which may go first.
            bytes: base.bytes,
            version: last,
            how: "forward",
            checkpoint: cp,
            ids: f.ids,
            records: f.records,
        }))
    }
}

/// The built graph to rebuild the moment whose last version is `last` (after checkpoint `cp`)
/// from: the latest one at or before it, when applying the versions since costs less than a
/// rebuild from the checkpoint. Measured (release, `cargo bench --bench timeline_query`): a
/// change carried forward costs about 46 µs (read, patched, typed, indexed, its dependents'
/// derived state again), an object rebuilt from a checkpoint 18 µs and a version replayed
/// after it a few; so forward when the changes since it are under a third of its objects and an
/// eighth of the versions since the checkpoint.
fn nearest(c: &Cache, cp: Located, last: i64) -> Option<Built> {
    c.entries
        .values()
        .filter_map(|e| e.cell.get())
        .filter(|b| b.version <= last && b.checkpoint <= cp.id)
        .filter(|b| last - b.version <= b.ids.len() as i64 / 3 + (last - cp.after) / 8)
        .max_by_key(|b| b.version)
        .cloned()
}

/// The versions after `after` up to `last`, in order: (object, body).
async fn versions_between(
    db: &Db,
    after: i64,
    last: i64,
) -> Result<Vec<(i64, Option<Vec<u8>>)>, PastError> {
    Ok(statement!(db, p => {
        sqlx::query_as(
            "SELECT object, body FROM timeline_versions WHERE id > $1 AND id <= $2 ORDER BY id",
        )
        .bind(after)
        .bind(last)
        .fetch_all(p)
        .await?
    }))
}

/// The newest checkpoint at or before `at_ms`, and the last version before the next one.
async fn locate(db: &Db, at_ms: i64) -> Result<(Located, Option<i64>), PastError> {
    let found: Option<(i64, i64)> = statement!(db, p => {
        sqlx::query_as(
            "SELECT id, after_version FROM timeline_checkpoints WHERE at_ms <= $1 \
             ORDER BY id DESC LIMIT 1",
        )
        .bind(at_ms)
        .fetch_optional(p)
        .await?
    });
    let Some((id, after)) = found else {
        return Err(PastError::Trimmed {
            asked: at_ms,
            oldest: oldest(db).await?,
        });
    };
    let bound: Option<i64> = statement!(db, p => {
        sqlx::query_scalar("SELECT min(after_version) FROM timeline_checkpoints WHERE id > $1")
            .bind(id)
            .fetch_one(p)
            .await?
    });
    Ok((Located { id, after }, bound))
}

/// Each datacenter's state at `at_ms`: its last recorded change at or before then (key, state,
/// error).
pub async fn datacenter_states(
    db: &Db,
    at_ms: i64,
) -> Result<Vec<(String, String, Option<String>)>, DbError> {
    Ok(statement!(db, p => {
        sqlx::query_as(
            "SELECT datacenter, state, error FROM datacenter_states WHERE id IN \
             (SELECT max(id) FROM datacenter_states WHERE at_ms <= $1 GROUP BY datacenter) \
             ORDER BY datacenter",
        )
        .bind(at_ms)
        .fetch_all(p)
        .await?
    }))
}

/// The oldest moment the timeline can rebuild (None: none yet).
pub async fn oldest(db: &Db) -> Result<Option<i64>, DbError> {
    Ok(statement!(db, p => {
        sqlx::query_scalar("SELECT min(at_ms) FROM timeline_checkpoints")
            .fetch_one(p)
            .await?
    }))
}

/// Trim the timeline to its bounds: whole checkpoints go, oldest first, with the versions before
/// the next one (which becomes the oldest moment), while the oldest is older than the retention or
/// the rest takes more than `HISTORY_MAX_BYTES`; the newest checkpoint always stays. The event
/// log's rows older than the oldest moment left go too. Returns the oldest moment now.
pub async fn trim(
    db: &Db,
    settings: &HistorySettings,
    now_ms: i64,
) -> Result<Option<i64>, DbError> {
    let cps: Vec<(i64, i64, i64, i64, i64)> = with_pool!(db, p => {
        sqlx::query_as(
            "SELECT id, at_ms, after_version, CAST(length(body) AS BIGINT), before_bytes \
             FROM timeline_checkpoints ORDER BY id",
        )
        .fetch_all(p)
        .await?
    });
    if cps.len() < 2 {
        return Ok(cps.first().map(|c| c.1));
    }
    let cutoff = now_ms.saturating_sub(settings.retention.as_millis() as i64);
    // Age: the newest checkpoint at or before the cutoff stays (moments from it on are answered).
    let mut first = cps.iter().rposition(|c| c.1 <= cutoff).unwrap_or(0);
    if settings.max_bytes > 0 {
        // What is kept from checkpoint i on: its body and every later one's, and the versions
        // between them.
        let mut from = vec![0u64; cps.len() + 1];
        for i in (0..cps.len()).rev() {
            let versions_after = cps.get(i + 1).map_or(0, |n| n.4 as u64);
            from[i] = from[i + 1] + cps[i].3 as u64 + ROW_OVERHEAD + versions_after;
        }
        while first + 1 < cps.len() && from[first] > settings.max_bytes {
            first += 1;
        }
    }
    if first == 0 {
        return Ok(Some(cps[0].1));
    }
    let keep = cps[first];
    let _turn = db.write_turn().await;
    with_pool!(db, p => {
        let mut tx = p.begin().await?;
        sqlx::query("DELETE FROM timeline_versions WHERE id <= $1")
            .bind(keep.2)
            .execute(&mut *tx)
            .await?;
        sqlx::query("DELETE FROM timeline_checkpoints WHERE id < $1")
            .bind(keep.0)
            .execute(&mut *tx)
            .await?;
        // Each datacenter's state at the oldest moment stays (its last change before it).
        sqlx::query(
            "DELETE FROM datacenter_states WHERE at_ms < $1 AND id NOT IN \
             (SELECT max(id) FROM datacenter_states WHERE at_ms < $1 GROUP BY datacenter)",
        )
        .bind(keep.1)
        .execute(&mut *tx)
        .await?;
        sqlx::query("DELETE FROM events WHERE at_ms < $1")
            .bind(keep.1)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
    });
    tracing::info!(
        oldest = %crate::history::rfc3339(keep.1),
        checkpoints = first,
        "history trimmed"
    );
    Ok(Some(keep.1))
}
