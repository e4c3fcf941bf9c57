//! The object writer: the embedded source's objects go to the `objects` table from the change
//! stream, in batches, so a restart keeps what was imported or changed.
//!
//! Writes are coalesced per object (only the latest state of each object is written), so the
//! pending set is bounded by the number of objects and nothing is lost while the database is
//! away: the writer retries with backoff and writes the latest state when it returns. If the
//! change stream overflows, the writer rewrites the whole table from the current snapshot.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::sync::{broadcast, watch};
use tokio::time::Instant;

use super::health::DbHealth;
use super::merge::merge_plan;
use super::objects::{load_logged, max_sequence, rewrite_all, write};
use super::{Db, Start};
use crate::model::Resource;
use crate::store::{Change, ChangeType, ObjectKey, Store};

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
    lagged: prometheus::IntCounter,
) -> tokio::task::JoinHandle<Option<Db>> {
    tokio::spawn(run_writer(start, store, rx, health, stop, settings, lagged))
}

/// Keep only the latest state of each object.
pub fn note(pending: &mut BTreeMap<ObjectKey, Option<Arc<Resource>>>, c: &Change) {
    let latest = (c.change != ChangeType::Deleted).then(|| c.object.clone());
    pending.insert(ObjectKey::of(&c.object), latest);
}

/// How long shutdown keeps retrying a database that is down before giving up.
const STOP_GRACE: Duration = Duration::from_secs(5);

/// The writer's end of the change stream: what it read and not yet wrote.
struct Intake {
    rx: broadcast::Receiver<Arc<Change>>,
    /// Latest state per object (None = deleted) not written yet.
    pending: BTreeMap<ObjectKey, Option<Arc<Resource>>>,
    /// The ring overflowed behind the writer: the table must be rewritten from the graph.
    rewrite: bool,
    /// While the database has never been reached: objects deleted meanwhile, so that merging
    /// what it holds does not bring them back.
    tombstones: Option<HashSet<ObjectKey>>,
    open: bool,
    lagged: prometheus::IntCounter,
}

impl Intake {
    fn take(&mut self, r: Result<Arc<Change>, broadcast::error::RecvError>) {
        match r {
            Ok(c) => {
                if let Some(t) = &mut self.tombstones {
                    let key = ObjectKey::of(&c.object);
                    if c.change == ChangeType::Deleted {
                        t.insert(key);
                    } else {
                        t.remove(&key);
                    }
                }
                note(&mut self.pending, &c);
            }
            Err(broadcast::error::RecvError::Lagged(missed)) => {
                self.lagged.inc_by(missed);
                tracing::warn!(
                    missed,
                    "object writer fell behind the change stream; rewriting the objects table"
                );
                self.pending.clear();
                self.rewrite = true;
            }
            Err(broadcast::error::RecvError::Closed) => self.open = false,
        }
    }

    /// Whatever is already in the ring.
    fn drain(&mut self) {
        loop {
            match self.rx.try_recv() {
                Ok(c) => self.take(Ok(c)),
                Err(broadcast::error::TryRecvError::Lagged(n)) => {
                    self.take(Err(broadcast::error::RecvError::Lagged(n)))
                }
                Err(_) => return,
            }
        }
    }

    /// Run `work` while reading the change stream on: a slow database (connecting, reading,
    /// writing) never makes the writer fall behind the ring.
    async fn during<F: std::future::Future>(&mut self, work: F) -> F::Output {
        tokio::pin!(work);
        loop {
            tokio::select! {
                r = &mut work => return r,
                c = self.rx.recv(), if self.open => self.take(c),
            }
        }
    }
}

/// The database answered for the first time: advance the sequence past every version it
/// recorded (so no resourceVersion is used twice for an object), then merge in the objects it
/// holds that the graph lacks and that were not deleted meanwhile. Reads the change stream
/// throughout.
async fn connect_and_merge(db: &Db, store: &Store, intake: &mut Intake) {
    match intake.during(max_sequence(db)).await {
        Ok(seq) => store.advance_to(seq),
        Err(e) => tracing::warn!(error = %e, "reading the stored sequence failed"),
    }
    let objects = match intake.during(load_logged(db)).await {
        Ok(objects) => objects,
        Err(e) => {
            tracing::warn!(error = %e, "reading stored objects failed");
            return;
        }
    };
    let tombstones = intake.tombstones.take().unwrap_or_default();
    let missing = merge_plan(objects, &store.snapshot(), &tombstones);
    let n = intake.during(store.load(missing)).await;
    tracing::info!(
        restored = n,
        deleted_meanwhile = tombstones.len(),
        "database reachable again; stored objects merged"
    );
}

async fn run_writer(
    start: Start,
    store: Arc<Store>,
    rx: broadcast::Receiver<Arc<Change>>,
    health: Arc<DbHealth>,
    mut stop: watch::Receiver<bool>,
    settings: WriterSettings,
    lagged: prometheus::IntCounter,
) -> Option<Db> {
    let (mut db, target) = match start {
        Start::Connected(db) => (Some(db), None),
        Start::Retry { url, pool } => (None, Some((url, pool))),
    };

    let mut intake = Intake {
        rx,
        pending: BTreeMap::new(),
        rewrite: db.is_none(),
        tombstones: db.is_none().then(HashSet::new),
        open: true,
        lagged,
    };
    let mut due = intake.rewrite.then(Instant::now);
    let mut backoff = crate::retry::Backoff::new(
        settings.flush_interval.max(Duration::from_millis(50)),
        MAX_BACKOFF,
    );
    let mut stop_deadline: Option<Instant> = None;
    loop {
        if stop_deadline.is_none() {
            let wake = due.unwrap_or_else(|| Instant::now() + Duration::from_secs(3600));
            tokio::select! {
                r = intake.rx.recv() => {
                    let lag = matches!(r, Err(broadcast::error::RecvError::Lagged(_)));
                    intake.take(r);
                    if !intake.open {
                        stop_deadline = Some(Instant::now() + STOP_GRACE);
                    }
                    let now = Instant::now();
                    if lag || intake.pending.len() >= settings.batch_size {
                        due = Some(now);
                    } else if due.is_none() {
                        due = Some(now + settings.flush_interval);
                    }
                },
                _ = tokio::time::sleep_until(wake), if due.is_some() => {}
                _ = stop.changed() => stop_deadline = Some(Instant::now() + STOP_GRACE),
            }
            health
                .pending
                .store(intake.pending.len(), Ordering::Relaxed);
            if stop_deadline.is_none() && due.is_none_or(|d| Instant::now() < d) {
                continue;
            }
        }
        if stop_deadline.is_some() {
            intake.open = false;
            intake.drain();
            if intake.pending.is_empty() && !intake.rewrite {
                return db;
            }
        }
        if db.is_none()
            && let Some((url, pool)) = &target
        {
            match intake.during(Db::open(url, pool)).await {
                Ok(d) => {
                    connect_and_merge(&d, &store, &mut intake).await;
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
        let batch = std::mem::take(&mut intake.pending);
        let was_rewrite = std::mem::take(&mut intake.rewrite);
        let result = intake
            .during(async {
                match &db {
                    None => Err(None),
                    Some(d) if was_rewrite => rewrite_all(d, &store).await.map_err(Some),
                    Some(d) => write(d, &batch).await.map(|()| batch.len()).map_err(Some),
                }
            })
            .await;
        match result {
            Ok(n) => {
                health.wrote(n);
                due = (!intake.pending.is_empty() || intake.rewrite)
                    .then(|| Instant::now() + settings.flush_interval);
                backoff.reset();
            }
            Err(e) => {
                if let Some(e) = e {
                    tracing::warn!(error = %e, pending = batch.len() + intake.pending.len(), "writing objects failed; retrying");
                    health.failed(&e);
                }
                // Newer states read meanwhile win over the batch's.
                for (k, v) in batch {
                    intake.pending.entry(k).or_insert(v);
                }
                intake.rewrite |= was_rewrite;
                due = Some(Instant::now() + backoff.delay());
            }
        }
        health
            .pending
            .store(intake.pending.len(), Ordering::Relaxed);
        if let Some(deadline) = stop_deadline {
            if intake.pending.is_empty() && !intake.rewrite {
                return db;
            }
            if Instant::now() >= deadline {
                tracing::error!(
                    pending = intake.pending.len(),
                    "stopping with object writes the database did not take"
                );
                return db;
            }
            tokio::time::sleep(backoff.upcoming().min(Duration::from_millis(500))).await;
        }
    }
}
