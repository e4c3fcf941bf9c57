//! The object writer: the embedded source's objects go to the `objects` table from the change
//! stream, in batches, so a restart keeps what was imported or changed.
//!
//! Writes are coalesced per object (only the latest state of each object is written), so the
//! pending set is bounded by the number of objects and nothing is lost while the database is
//! away: the writer retries with backoff and writes the latest state when it returns. If the
//! change stream overflows, the writer rewrites the whole table from the current snapshot.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::sync::{broadcast, watch};
use tokio::time::Instant;

use super::health::DbHealth;
use super::merge::merge;
use super::objects::{rewrite_all, write};
use super::{Db, Start};
use crate::model::Resource;
use crate::store::{Change, ChangeType, Key, Store};

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
pub fn note(pending: &mut BTreeMap<Key, Option<Arc<Resource>>>, c: &Change) {
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
