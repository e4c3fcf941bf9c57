//! Embedded-mode persistence: the objects of the embedded source are kept in the `objects` table,
//! written from the change stream in batches and read back at start-up, so a restart keeps what
//! was imported or changed.
//!
//! Writes are coalesced per object (only the latest state of each object is written), so the
//! pending set is bounded by the number of objects and nothing is lost while the database is
//! away: the writer retries with backoff and writes the latest state when it returns. If the
//! change stream overflows, the writer rewrites the whole table from the current snapshot.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use serde::Serialize;
use tokio::sync::{broadcast, watch};
use tokio::time::Instant;

use super::{Db, DbError, Engine, PoolSettings, with_pool};
use crate::model::{Kind, Resource};
use crate::store::{Change, ChangeType, Key, Op, Store};

/// Per-engine statements (parameter syntax, JSON column type and clock differ).
struct Sql {
    upsert: &'static str,
    delete: &'static str,
    select: &'static str,
}

const SQLITE: Sql = Sql {
    upsert: "INSERT INTO objects (kind, namespace, name, api_version, uid, resource_version, body) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) \
             ON CONFLICT (kind, namespace, name) DO UPDATE SET api_version = excluded.api_version, \
             uid = excluded.uid, resource_version = excluded.resource_version, body = excluded.body, \
             updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now')",
    delete: "DELETE FROM objects WHERE kind = ?1 AND namespace = ?2 AND name = ?3",
    select: "SELECT kind, api_version, body FROM objects ORDER BY kind, namespace, name",
};

const POSTGRES: Sql = Sql {
    upsert: "INSERT INTO objects (kind, namespace, name, api_version, uid, resource_version, body) \
             VALUES ($1, $2, $3, $4, $5, $6, $7::jsonb) \
             ON CONFLICT (kind, namespace, name) DO UPDATE SET api_version = excluded.api_version, \
             uid = excluded.uid, resource_version = excluded.resource_version, body = excluded.body, \
             updated_at = now()",
    delete: "DELETE FROM objects WHERE kind = $1 AND namespace = $2 AND name = $3",
    select: "SELECT kind, api_version, body::text FROM objects ORDER BY kind, namespace, name",
};

fn sql(engine: Engine) -> &'static Sql {
    match engine {
        Engine::Sqlite => &SQLITE,
        Engine::Postgres => &POSTGRES,
    }
}

/// A stored row that could not be turned back into an object (e.g. written by a newer version).
#[derive(Debug, Clone)]
pub struct SkippedRow {
    /// Kind column.
    pub kind: String,
    /// Why it was skipped.
    pub reason: String,
}

/// Every stored object, plus the rows that no longer decode.
pub async fn load(db: &Db) -> Result<(Vec<Resource>, Vec<SkippedRow>), DbError> {
    let q = sql(db.engine()).select;
    let rows: Vec<(String, String, String)> =
        with_pool!(db, p => sqlx::query_as(q).fetch_all(p).await?);
    let mut objects = Vec::with_capacity(rows.len());
    let mut skipped = Vec::new();
    for (kind, api_version, body) in rows {
        let decoded = kind.parse::<Kind>().and_then(|k| {
            let version = api_version
                .rsplit('/')
                .next()
                .unwrap_or_default()
                .to_string();
            let value = serde_json::from_str(&body).map_err(|e| e.to_string())?;
            Resource::from_value(k, &version, value).map_err(|e| e.to_string())
        });
        match decoded {
            Ok(r) => objects.push(r),
            Err(reason) => skipped.push(SkippedRow { kind, reason }),
        }
    }
    Ok((objects, skipped))
}

/// Every stored object; rows that no longer decode are logged and left out.
pub async fn load_logged(db: &Db) -> Result<Vec<Resource>, DbError> {
    let (objects, skipped) = load(db).await?;
    for s in &skipped {
        tracing::warn!(kind = %s.kind, reason = %s.reason, "stored object skipped");
    }
    Ok(objects)
}

/// The row values of an object.
fn row(r: &Resource) -> (String, String, i64, String) {
    let api_version = r.kind().api_version(r.version());
    let rv = r
        .meta()
        .resource_version
        .as_deref()
        .and_then(|v| v.parse::<i64>().ok())
        .unwrap_or(0);
    (
        api_version,
        r.uid().to_string(),
        rv,
        r.to_value().to_string(),
    )
}

/// Write the latest state of some objects (None = deleted) in one transaction.
pub async fn write(db: &Db, batch: &BTreeMap<Key, Option<Arc<Resource>>>) -> Result<(), DbError> {
    write_in_tx(db, batch).await
}

/// Replace the whole table with the store's current objects, in one transaction.
pub async fn rewrite_all(db: &Db, store: &Store) -> Result<usize, DbError> {
    let snap = store.snapshot();
    let mut all: BTreeMap<Key, Option<Arc<Resource>>> = Kind::ALL
        .iter()
        .flat_map(|k| snap.list(*k))
        .map(|r| (Key::of(r), Some(r.clone())))
        .collect();
    // Stored objects the graph no longer has are deleted; rows this version cannot read (e.g.
    // written by a newer one) are left as they are: a rewrite must not lose what it cannot see.
    let (stored, _) = load(db).await?;
    for r in stored {
        let key = Key::of(&r);
        if snap.get_key(&key).is_none() {
            all.insert(key, None);
        }
    }
    let n = all.len();
    write_in_tx(db, &all).await?;
    Ok(n)
}

async fn write_in_tx(db: &Db, batch: &BTreeMap<Key, Option<Arc<Resource>>>) -> Result<(), DbError> {
    let s = sql(db.engine());
    with_pool!(db, p => {
        let mut tx = p.begin().await?;
        for (key, object) in batch {
            match object {
                Some(r) => {
                    let (api_version, uid, rv, body) = row(r);
                    sqlx::query(s.upsert)
                        .bind(key.kind.name())
                        .bind(&key.namespace)
                        .bind(&key.name)
                        .bind(api_version)
                        .bind(uid)
                        .bind(rv)
                        .bind(body)
                        .execute(&mut *tx)
                        .await?;
                }
                None => {
                    sqlx::query(s.delete)
                        .bind(key.kind.name())
                        .bind(&key.namespace)
                        .bind(&key.name)
                        .execute(&mut *tx)
                        .await?;
                }
            }
        }
        tx.commit().await?;
    });
    Ok(())
}

/// What `/health/database` and `/metrics` report about the database.
#[derive(Debug)]
pub struct DbHealth {
    engine: Engine,
    url: String,
    up: AtomicBool,
    last_error: Mutex<Option<String>>,
    last_write: Mutex<Option<jiff::Timestamp>>,
    pending: AtomicUsize,
    written: AtomicU64,
    failures: AtomicU64,
}

/// `/health/database` body.
#[derive(Debug, Serialize)]
pub struct DbHealthReport {
    /// `up` or `down`.
    pub status: &'static str,
    /// `sqlite` or `postgres`.
    pub engine: &'static str,
    /// The URL with its password blanked.
    pub url: String,
    /// Objects waiting to be written.
    pub pending_writes: usize,
    /// Objects written since start.
    pub written: u64,
    /// Failed write or connect attempts since start.
    pub failures: u64,
    /// When the last write succeeded.
    pub last_write_at: Option<String>,
    /// The last error, while the database is down.
    pub error: Option<String>,
    /// History events waiting to be written.
    pub history_pending: usize,
    /// History events written since start.
    pub history_written: u64,
    /// History events dropped since start because the buffer was full (marked as gaps).
    pub history_dropped: u64,
}

impl DbHealth {
    /// Health of a database not connected yet.
    pub fn new(engine: Engine, url: &str) -> Self {
        DbHealth {
            engine,
            url: crate::config::redact_url(url),
            up: AtomicBool::new(false),
            last_error: Mutex::new(Some("not connected yet".into())),
            last_write: Mutex::new(None),
            pending: AtomicUsize::new(0),
            written: AtomicU64::new(0),
            failures: AtomicU64::new(0),
        }
    }

    /// True when the last attempt succeeded.
    pub fn is_up(&self) -> bool {
        self.up.load(Ordering::Acquire)
    }

    /// Objects waiting to be written.
    pub fn pending(&self) -> usize {
        self.pending.load(Ordering::Relaxed)
    }

    /// Failed attempts since start.
    pub fn failures(&self) -> u64 {
        self.failures.load(Ordering::Relaxed)
    }

    /// Record a success.
    pub fn ok(&self) {
        self.up.store(true, Ordering::Release);
        *self.last_error.lock() = None;
    }

    /// Record a failure.
    pub fn failed(&self, e: &DbError) {
        self.up.store(false, Ordering::Release);
        self.failures.fetch_add(1, Ordering::Relaxed);
        *self.last_error.lock() = Some(e.to_string());
    }

    fn wrote(&self, n: usize) {
        self.written.fetch_add(n as u64, Ordering::Relaxed);
        *self.last_write.lock() = Some(jiff::Timestamp::now());
        self.ok();
    }

    /// The report `/health/database` serves, with the history writer's figures from its metrics.
    pub fn report(&self, history: &crate::history::HistoryMetrics) -> DbHealthReport {
        DbHealthReport {
            status: if self.is_up() { "up" } else { "down" },
            engine: self.engine.name(),
            url: self.url.clone(),
            pending_writes: self.pending(),
            written: self.written.load(Ordering::Relaxed),
            failures: self.failures(),
            last_write_at: self.last_write.lock().map(|t| t.to_string()),
            error: self.last_error.lock().clone(),
            history_pending: usize::try_from(history.pending.get()).unwrap_or(0),
            history_written: history.written.get(),
            history_dropped: history.dropped.get(),
        }
    }
}

/// How the object writer batches.
#[derive(Clone, Debug)]
pub struct WriterSettings {
    /// Write at most this long after the first pending change (`DB_FLUSH_INTERVAL_MS`).
    pub flush_interval: Duration,
    /// Write at once when this many objects are pending (`DB_BATCH_SIZE`).
    pub batch_size: usize,
}

impl Default for WriterSettings {
    fn default() -> Self {
        WriterSettings {
            flush_interval: Duration::from_millis(200),
            batch_size: 1000,
        }
    }
}

/// Connection state the writer starts with.
#[derive(Clone)]
pub enum Start {
    /// Connected and restored at start-up; only changes from now on need writing.
    Connected(Db),
    /// Not reachable at start-up: keep trying; when it answers, merge its objects into the store
    /// (those the store does not have) and rewrite the table from the store.
    Retry {
        /// `DATABASE_URL`.
        url: String,
        /// Pool settings.
        pool: PoolSettings,
    },
}

const MAX_BACKOFF: Duration = Duration::from_secs(10);

/// Write the embedded source's objects from the change stream until `stop` turns true, then
/// write what is pending and return the database (if it was ever reached).
pub fn spawn_writer(
    start: Start,
    store: Arc<Store>,
    rx: broadcast::Receiver<Arc<Change>>,
    health: Arc<DbHealth>,
    stop: watch::Receiver<bool>,
    settings: WriterSettings,
) -> tokio::task::JoinHandle<Option<Db>> {
    tokio::spawn(run_writer(start, store, rx, health, stop, settings))
}

/// Keep only the latest state of each object.
fn note(pending: &mut BTreeMap<Key, Option<Arc<Resource>>>, c: &Change) {
    let latest = (c.change != ChangeType::Deleted).then(|| c.object.clone());
    pending.insert(Key::of(&c.object), latest);
}

/// How long shutdown keeps retrying a database that is down before giving up.
const STOP_GRACE: Duration = Duration::from_secs(5);

async fn run_writer(
    start: Start,
    store: Arc<Store>,
    mut rx: broadcast::Receiver<Arc<Change>>,
    health: Arc<DbHealth>,
    mut stop: watch::Receiver<bool>,
    settings: WriterSettings,
) -> Option<Db> {
    let (mut db, target) = match start {
        Start::Connected(db) => (Some(db), None),
        Start::Retry { url, pool } => (None, Some((url, pool))),
    };
    let first_backoff = settings.flush_interval.max(Duration::from_millis(50));
    let mut rewrite = db.is_none();
    let mut pending: BTreeMap<Key, Option<Arc<Resource>>> = BTreeMap::new();
    let mut due = rewrite.then(Instant::now);
    let mut backoff = first_backoff;
    let mut stop_deadline: Option<Instant> = None;
    loop {
        if stop_deadline.is_none() {
            let wake = due.unwrap_or_else(|| Instant::now() + Duration::from_secs(3600));
            tokio::select! {
                r = rx.recv() => match r {
                    Ok(c) => {
                        note(&mut pending, &c);
                        let now = Instant::now();
                        if pending.len() >= settings.batch_size {
                            due = Some(now);
                        } else if due.is_none() {
                            due = Some(now + settings.flush_interval);
                        }
                    }
                    Err(broadcast::error::RecvError::Lagged(missed)) => {
                        tracing::warn!(missed, "object writer fell behind the change stream; rewriting the objects table");
                        pending.clear();
                        rewrite = true;
                        due = Some(Instant::now());
                    }
                    Err(broadcast::error::RecvError::Closed) => stop_deadline = Some(Instant::now() + STOP_GRACE),
                },
                _ = tokio::time::sleep_until(wake), if due.is_some() => {}
                _ = stop.changed() => stop_deadline = Some(Instant::now() + STOP_GRACE),
            }
            health.pending.store(pending.len(), Ordering::Relaxed);
            if stop_deadline.is_none() && due.is_none_or(|d| Instant::now() < d) {
                continue;
            }
        }
        if stop_deadline.is_some() {
            loop {
                match rx.try_recv() {
                    Ok(c) => note(&mut pending, &c),
                    Err(broadcast::error::TryRecvError::Lagged(_)) => rewrite = true,
                    Err(_) => break,
                }
            }
            if pending.is_empty() && !rewrite {
                return db;
            }
        }
        if db.is_none()
            && let Some((url, pool)) = &target
        {
            match Db::open(url, pool).await {
                Ok(d) => {
                    merge(&d, &store).await;
                    db = Some(d);
                }
                Err(e) => {
                    tracing::warn!(error = %e, "database unreachable; objects are kept in memory and written when it answers");
                    health.failed(&e);
                }
            }
        }
        // Write what is pending while the change stream keeps being read: a slow database must
        // not make the writer fall behind the ring (that would force a full rewrite).
        let batch = std::mem::take(&mut pending);
        let was_rewrite = std::mem::take(&mut rewrite);
        let result = {
            let work = async {
                match &db {
                    None => Err(None),
                    Some(d) if was_rewrite => rewrite_all(d, &store).await.map_err(Some),
                    Some(d) => write(d, &batch).await.map(|()| batch.len()).map_err(Some),
                }
            };
            tokio::pin!(work);
            let mut open = stop_deadline.is_none();
            loop {
                tokio::select! {
                    r = &mut work => break r,
                    c = rx.recv(), if open => match c {
                        Ok(c) => note(&mut pending, &c),
                        Err(broadcast::error::RecvError::Lagged(missed)) => {
                            tracing::warn!(missed, "object writer fell behind the change stream; rewriting the objects table");
                            pending.clear();
                            rewrite = true;
                        }
                        Err(broadcast::error::RecvError::Closed) => open = false,
                    },
                }
            }
        };
        match result {
            Ok(n) => {
                health.wrote(n);
                due = (!pending.is_empty() || rewrite)
                    .then(|| Instant::now() + settings.flush_interval);
                backoff = first_backoff;
            }
            Err(e) => {
                if let Some(e) = e {
                    tracing::warn!(error = %e, pending = batch.len() + pending.len(), "writing objects failed; retrying");
                    health.failed(&e);
                }
                // Newer states read meanwhile win over the batch's.
                for (k, v) in batch {
                    pending.entry(k).or_insert(v);
                }
                rewrite |= was_rewrite;
                due = Some(Instant::now() + backoff);
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
        }
        health.pending.store(pending.len(), Ordering::Relaxed);
        if let Some(deadline) = stop_deadline {
            if pending.is_empty() && !rewrite {
                return db;
            }
            if Instant::now() >= deadline {
                tracing::error!(
                    pending = pending.len(),
                    "stopping with object writes the database did not take"
                );
                return db;
            }
            tokio::time::sleep(backoff.min(Duration::from_millis(500))).await;
        }
    }
}

/// The database came back after start-up: objects it holds that the store does not are added
/// (as changes, so live clients see them); the table is then rewritten from the store.
async fn merge(db: &Db, store: &Store) {
    match load_logged(db).await {
        Ok(objects) => {
            let snap = store.snapshot();
            let missing: Vec<Op> = objects
                .into_iter()
                .filter(|r| snap.get_key(&Key::of(r)).is_none())
                .map(Op::Upsert)
                .collect();
            let n = store.apply(missing).len();
            tracing::info!(
                restored = n,
                "database reachable again; stored objects merged"
            );
        }
        Err(e) => tracing::warn!(error = %e, "reading stored objects failed"),
    }
}

/// `vitistack import`: apply manifest files to the stored objects (each file atomically, refused
/// files change nothing) and write the result in one transaction.
pub async fn import(
    db: &Db,
    paths: &[std::path::PathBuf],
) -> Result<crate::source::ImportSummary, anyhow::Error> {
    let store = Store::new();
    let stored = load_logged(db).await?;
    store.restore(stored);
    let before = store.snapshot();
    let mut rx = store.subscribe();
    let mut summary = crate::source::import_paths(&store, paths)?;
    let mut batch = BTreeMap::new();
    let mut overflowed = false;
    loop {
        match rx.try_recv() {
            Ok(c) => note(&mut batch, &c),
            Err(broadcast::error::TryRecvError::Lagged(_)) => overflowed = true,
            Err(_) => break,
        }
    }
    // Files may define the same object differently; count (and write) only net changes.
    let read = summary.changed + summary.unchanged;
    batch.retain(|key, after| !same_stored(before.get_key(key), after.as_ref()));
    summary.changed = batch.len();
    summary.unchanged = read.saturating_sub(batch.len());
    if overflowed {
        rewrite_all(db, &store).await?;
    } else {
        write(db, &batch).await?;
    }
    Ok(summary)
}

/// Equal as stored, apart from the bookkeeping a round of changes bumps.
fn same_stored(before: Option<&Arc<Resource>>, after: Option<&Arc<Resource>>) -> bool {
    let plain = |r: &Resource| {
        let mut v = r.to_value();
        if let Some(meta) = v.get_mut("metadata").and_then(|m| m.as_object_mut()) {
            meta.remove("resourceVersion");
            meta.remove("generation");
        }
        v
    };
    match (before, after) {
        (None, None) => true,
        (Some(a), Some(b)) => plain(a) == plain(b),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_rewrite_keeps_rows_it_cannot_read_and_deletes_objects_that_are_gone() {
        let path =
            std::env::temp_dir().join(format!("vitistack-rewrite-{}.db", uuid::Uuid::new_v4()));
        let url = format!("sqlite://{}", path.display());
        let db = Db::open(&url, &crate::db::PoolSettings::default())
            .await
            .expect("open");
        let machine = |name: &str| {
            Resource::from_value(
                Kind::Machine,
                "v1alpha1",
                serde_json::json!({"metadata": {"name": name, "namespace": "ns"}, "spec": {}}),
            )
            .expect("machine")
        };
        let store = Store::new();
        store.apply(vec![
            crate::store::Op::Upsert(machine("kept")),
            crate::store::Op::Upsert(machine("gone")),
        ]);
        rewrite_all(&db, &store).await.expect("rewrite");
        // A row from a newer version this one cannot decode.
        let Db::Sqlite(pool) = &db else {
            panic!("sqlite")
        };
        sqlx::query(
            "INSERT INTO objects (kind, namespace, name, api_version, uid, resource_version, body) \
             VALUES ('FutureKind', 'ns', 'f', 'vitistack.io/v9', 'u', 1, '{}')",
        )
        .execute(pool)
        .await
        .expect("insert");
        store.apply(vec![crate::store::Op::Delete(Key::new(
            Kind::Machine,
            "ns",
            "gone",
        ))]);
        rewrite_all(&db, &store).await.expect("rewrite");
        let (objects, skipped) = load(&db).await.expect("load");
        let names: Vec<&str> = objects.iter().map(|r| r.name()).collect();
        assert_eq!(names, ["kept"]);
        assert_eq!(skipped.len(), 1, "the unreadable row is still there");
        assert_eq!(skipped[0].kind, "FutureKind");
        db.close().await;
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
        }
    }
}
