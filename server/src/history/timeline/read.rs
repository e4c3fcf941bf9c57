//! Reading the timeline: the graph at a moment, rebuilt from the newest checkpoint at or before
//! it and the versions after that checkpoint up to the moment; the oldest moment kept; trimming.
//!
//! Rebuilt graphs are kept, shared by every request that asks for a moment with the same last
//! change, in a cache bounded in bytes (`HISTORY_CACHE_MB`); concurrent requests for one moment
//! rebuild it once.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;
use serde_json::Value;

use super::{Body, ROW_OVERHEAD, decode_checkpoint};
use crate::db::{Db, DbError, statement, with_pool};
use crate::history::writer::HistorySettings;
use crate::model::merge_patch;
use crate::model::{Datacenter, Kind, Resource};
use crate::store::{Snapshot, Store};

/// Why a moment could not be rebuilt.
#[derive(Debug, thiserror::Error)]
pub enum PastError {
    /// The moment is before the oldest one kept (None: nothing is kept yet).
    #[error("{}", trimmed_message(*asked, *oldest))]
    Trimmed {
        /// The moment asked for (ms).
        asked: i64,
        /// The oldest moment kept (ms).
        oldest: Option<i64>,
    },
    /// The database failed.
    #[error(transparent)]
    Db(#[from] DbError),
    /// A stored row does not read back (never written by this server?).
    #[error("the timeline holds a row that does not read back: {0}")]
    Damaged(String),
}

impl From<sqlx::Error> for PastError {
    fn from(e: sqlx::Error) -> Self {
        PastError::Db(e.into())
    }
}

fn trimmed_message(asked: i64, oldest: Option<i64>) -> String {
    let asked = crate::history::rfc3339(asked);
    match oldest {
        Some(o) => format!(
            "{asked} is before the oldest moment the history keeps ({}): older moments were trimmed (HISTORY_MAX_BYTES, HISTORY_RETENTION_DAYS)",
            crate::history::rfc3339(o)
        ),
        None => format!("{asked}: the history keeps no moment yet"),
    }
}

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

/// A rebuilt graph.
#[derive(Clone)]
struct Built {
    moment: Moment,
    bytes: usize,
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
    /// An empty cache holding at most `bound` bytes of rebuilt graphs.
    pub fn new(bound: usize) -> Self {
        Past {
            cache: Mutex::new(Cache::default()),
            bound,
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
        let cell = {
            let mut c = self.cache.lock();
            c.clock += 1;
            let clock = c.clock;
            let e = c.entries.entry(key).or_insert_with(|| Entry {
                cell: Arc::default(),
                bytes: 0,
                used: clock,
            });
            e.used = clock;
            e.cell.clone()
        };
        let built = cell
            .get_or_try_init(|| self.build(db, store, cp, key.1))
            .await;
        let built = match built {
            Ok(b) => b.clone(),
            Err(e) => {
                self.cache.lock().entries.remove(&key);
                return Err(e);
            }
        };
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
        let versions: Vec<(i64, Option<Vec<u8>>)> = statement!(db, p => {
            sqlx::query_as(
                "SELECT object, body FROM timeline_versions WHERE id > $1 AND id <= $2 ORDER BY id",
            )
            .bind(cp.after)
            .bind(last)
            .fetch_all(p)
            .await?
        });
        let (resources, applications, bytes) =
            tokio::task::spawn_blocking(move || typed(replay(&body, versions)?))
                .await
                .map_err(|e| PastError::Damaged(e.to_string()))??;
        Ok(Built {
            moment: Moment {
                graph: store.past(resources),
                applications: Arc::new(applications),
            },
            bytes,
        })
    }
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

/// A checkpoint with the versions after it applied: each object by its timeline id.
///
/// The checkpoint and the versions are decoded at once, on two threads (each is inflated JSON).
fn replay(
    checkpoint: &[u8],
    versions: Vec<(i64, Option<Vec<u8>>)>,
) -> Result<(HashMap<i64, Value>, usize), PastError> {
    let (decoded, versions) = std::thread::scope(|s| {
        let bodies = s.spawn(move || {
            versions
                .into_iter()
                .map(|(object, body)| {
                    let len = body.as_ref().map_or(0, Vec::len);
                    let decoded = body.map(|b| Body::decode(&b)).transpose();
                    decoded.map(|d| (object, len, d))
                })
                .collect::<Result<Vec<_>, String>>()
        });
        let decoded = decode_checkpoint(checkpoint);
        let versions = bodies
            .join()
            .unwrap_or_else(|_| Err("decoding the versions failed".into()));
        (decoded, versions)
    });
    let (decoded, mut json_bytes) = decoded.map_err(PastError::Damaged)?;
    let versions = versions.map_err(PastError::Damaged)?;
    let mut objects: HashMap<i64, Value> = decoded.into_iter().collect();
    for (object, len, body) in versions {
        json_bytes += len;
        match body {
            None => {
                objects.remove(&object);
            }
            Some(body) => match body {
                Body::Full(v) => {
                    objects.insert(object, v);
                }
                Body::Patch(p) => {
                    let Some(target) = objects.get_mut(&object) else {
                        return Err(PastError::Damaged(format!(
                            "a change of object {object} the timeline does not hold"
                        )));
                    };
                    merge_patch::apply(target, &p);
                }
            },
        }
    }
    Ok((objects, json_bytes))
}

/// The objects typed (each read as the kind and version its JSON names, in the datacenter the
/// timeline noted), the application inventory its records say, and an estimate of the bytes they
/// take in memory with their indexes (a few times their JSON: typed fields, indexes, derived
/// state).
fn typed(
    (objects, json_bytes): (HashMap<i64, Value>, usize),
) -> Result<(Vec<Resource>, crate::inventory::Snapshot, usize), PastError> {
    let mut out = Vec::with_capacity(objects.len());
    let bytes = 4 * json_bytes + 512 * objects.len();
    type Rows = Vec<(i64, Value)>;
    let (mut records, objects): (Rows, Rows) = objects
        .into_iter()
        .partition(|(_, v)| super::applications::is_record(v));
    // In the order they were first kept: a later record of one application wins.
    records.sort_by_key(|(id, _)| *id);
    let applications =
        super::applications::inventory(records.into_iter().map(|(_, v)| v).collect())
            .map_err(PastError::Damaged)?;
    // Typed on two threads, half each.
    let mut objects = objects;
    let second = objects.split_off(objects.len() / 2);
    let (first, second) = std::thread::scope(|s| {
        let other = s.spawn(move || type_all(second));
        let first = type_all(objects);
        let second = other
            .join()
            .unwrap_or_else(|_| Err(PastError::Damaged("typing the objects failed".into())));
        (first, second)
    });
    out.extend(first?);
    out.extend(second?);
    Ok((out, applications, bytes))
}

/// Each object read as the kind and version its JSON names, in the datacenter it was kept with.
fn type_all(objects: Vec<(i64, Value)>) -> Result<Vec<Resource>, PastError> {
    let mut out = Vec::with_capacity(objects.len());
    for (id, mut value) in objects {
        let damaged = |why: String| PastError::Damaged(format!("object {id}: {why}"));
        let datacenter = match &mut value {
            Value::Object(m) => match m.remove("datacenter") {
                Some(Value::String(d)) => Datacenter::new(&d),
                _ => Datacenter::default(),
            },
            _ => return Err(damaged("not an object".into())),
        };
        let kind: Kind = value["kind"]
            .as_str()
            .and_then(|k| k.parse().ok())
            .ok_or_else(|| damaged(format!("kind {}", value["kind"])))?;
        let version = value["apiVersion"]
            .as_str()
            .and_then(|v| v.rsplit('/').next())
            .ok_or_else(|| damaged("no apiVersion".into()))?
            .to_string();
        let r = Resource::from_value(kind, &version, value)
            .map_err(|e| damaged(e.to_string()))?
            .in_datacenter(&datacenter);
        out.push(r);
    }
    Ok(out)
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
