//! The timeline's writer: reads the store's change stream (state being loaded included: a past
//! moment needs it as much as news) and writes each change as a version row, and now and then the
//! whole graph as a checkpoint, in the order the store applied them.
//!
//! Patches chain: each is computed against the object as the change found it, which is what the
//! rows before it rebuild as long as no change was missed since the last checkpoint. So a
//! checkpoint is written first whenever the chain may be broken: when the writer starts (the
//! store may hold objects no row describes, and objects may have gone while the server was down),
//! when it missed changes (the stream overran it, or the database was away too long), and when
//! this replica starts to lead (only the leader writes the timeline). Between those, a checkpoint
//! is written once the versions since the last one take twice its bytes.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{broadcast, watch};
use tokio::time::Instant;

use super::applications::{self as apps, Record};
use super::ident::Ident;
use super::rows::{Checkpoint, next_object, write};
pub use super::stored_value;
use super::{Body, ROW_OVERHEAD, encode_checkpoint_from, written};
use crate::db::DbError;
use crate::history::{History, now_ms};
use crate::inventory::Snapshot as Applications;
use crate::model::merge_patch;
use crate::store::{Change, ChangeType, Snapshot, Store};

#[path = "states.rs"]
mod states;

/// A change waiting to be written: an object's (from the store's stream) or an application
/// record's (from the inventory's snapshots, with when it was seen).
enum Item {
    Object(Arc<Change>),
    Record {
        before: Option<Record>,
        after: Option<Record>,
        at_ms: i64,
    },
}

impl Item {
    fn ident(&self) -> Ident {
        match self {
            Item::Object(c) => Ident::of(&c.object),
            Item::Record { before, after, .. } => match after.as_ref().or(before.as_ref()) {
                Some(r) => Ident::of_record(r),
                None => Ident::digest([""; 6]),
            },
        }
    }

    fn deleted(&self) -> bool {
        match self {
            Item::Object(c) => c.change == ChangeType::Deleted,
            Item::Record { after, .. } => after.is_none(),
        }
    }

    /// When it happened (ms since the epoch).
    fn at_ms(&self) -> i64 {
        match self {
            Item::Object(c) => c.at_ms,
            Item::Record { at_ms, .. } => *at_ms,
        }
    }

    /// Part of a checkpoint taken at store sequence `seq` (application records always are: the
    /// checkpoint holds the inventory as last seen, after every record taken).
    fn within(&self, seq: u64) -> bool {
        match self {
            Item::Object(c) => c.seq <= seq,
            Item::Record { .. } => true,
        }
    }
}

/// A checkpoint once the versions since the last one take this many times its bytes: a moment is
/// rebuilt from one checkpoint and at most about its size in versions (at 2, twice: cold moments
/// 40 % slower in `cargo bench --bench timeline_query`); checkpoints take about half of what the
/// timeline keeps at most (less: a whole graph deflates better than its objects one by one).
pub const CHECKPOINT_RATIO: u64 = 1;
/// And at least this many bytes.
pub const CHECKPOINT_FLOOR: u64 = 256 * 1024;
/// The ratio while a first sync runs ([`Store::is_loading`]): each checkpoint of a graph still
/// being loaded is outdated at once. At 1 a sync of a million objects wrote the growing graph
/// about four times over and spent half its CPU on it (`cargo bench --bench kube_sync`); the
/// first checkpoint after the sync comes at the usual ratio.
pub const CHECKPOINT_RATIO_LOADING: u64 = 8;

/// One change as it will be stored.
struct Version {
    object: i64,
    at_ms: i64,
    body: Option<Vec<u8>>,
}

/// The writer's state between batches.
struct Writer {
    history: Arc<History>,
    store: Arc<Store>,
    /// Each object's number (from the last checkpoint on), and the next number to give (None:
    /// not read from the database yet).
    ids: HashMap<Ident, i64>,
    next_id: Option<i64>,
    /// Changes not yet written, in order.
    pending: Vec<Item>,
    /// The application inventory's snapshots (None: the inventory is off), and the last one
    /// recorded.
    applications: Option<watch::Receiver<Arc<Applications>>>,
    applications_seen: Arc<Applications>,
    /// The chain may be broken: the next batch starts with a checkpoint.
    broken: bool,
    /// Changes were missed while a batch was written (after what it holds): the chain breaks
    /// once it is written.
    lagged: bool,
    /// Bytes of versions written since the last checkpoint, and that checkpoint's bytes.
    since_checkpoint: u64,
    last_checkpoint: u64,
    /// The latest time written (a checkpoint is never earlier than the versions it holds).
    last_at: i64,
    /// Each datacenter's state as last recorded (empty after a start: all are recorded again).
    states: HashMap<String, (String, Option<String>)>,
    /// How far the timeline is written, as the database last heard it (ms).
    db_mark: i64,
}

/// Write the timeline from `rx` (and the application inventory's snapshots, when it is on)
/// until `stop` turns true.
pub fn spawn(
    history: Arc<History>,
    store: Arc<Store>,
    rx: broadcast::Receiver<Arc<Change>>,
    applications: Option<watch::Receiver<Arc<Applications>>>,
    stop: watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(run(history, store, rx, applications, stop))
}

/// The next change of the inventory's snapshots (never, when the inventory is off).
async fn next_applications(
    rx: &mut Option<watch::Receiver<Arc<Applications>>>,
) -> Result<(), watch::error::RecvError> {
    match rx {
        Some(rx) => rx.changed().await,
        None => std::future::pending().await,
    }
}

async fn run(
    history: Arc<History>,
    store: Arc<Store>,
    mut rx: broadcast::Receiver<Arc<Change>>,
    applications: Option<watch::Receiver<Arc<Applications>>>,
    mut stop: watch::Receiver<bool>,
) {
    let settings = history.settings.clone();
    let mut leading = history.leader.watch();
    let mut w = Writer {
        history,
        store,
        ids: HashMap::new(),
        next_id: None,
        pending: Vec::new(),
        applications,
        applications_seen: Arc::default(),
        broken: true,
        lagged: false,
        since_checkpoint: 0,
        last_checkpoint: 0,
        last_at: 0,
        states: HashMap::new(),
        db_mark: 0,
    };
    let history = w.history.clone();
    let mut look = tokio::time::interval(Duration::from_secs(1));
    look.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // The first checkpoint at once: the store holds what the database restored.
    let mut due = Some(Instant::now());
    let mut backoff =
        crate::retry::Backoff::new(Duration::from_millis(100), Duration::from_secs(10));
    loop {
        let wake = due.unwrap_or_else(|| Instant::now() + Duration::from_secs(3600));
        tokio::select! {
            r = rx.recv() => match r {
                Ok(c) => {
                    w.pending.push(Item::Object(c));
                    due.get_or_insert_with(|| Instant::now() + settings.flush_interval);
                }
                Err(broadcast::error::RecvError::Lagged(_)) => {
                    w.broken = true;
                    due = Some(Instant::now());
                }
                Err(broadcast::error::RecvError::Closed) => {
                    let _ = w.flush(&mut rx).await;
                    return;
                }
            },
            _ = tokio::time::sleep_until(wake), if due.is_some() => {
                match w.flush(&mut rx).await {
                    Ok(()) => {
                        backoff.reset();
                        due = None;
                    }
                    Err(e) => {
                        if let Some(e) = e {
                            tracing::warn!(error = %e, "writing the timeline failed; retrying");
                        }
                        due = Some(Instant::now() + backoff.delay());
                    }
                }
            }
            r = next_applications(&mut w.applications) => {
                if r.is_err() {
                    w.applications = None;
                } else if w.see_applications() {
                    due.get_or_insert_with(|| Instant::now() + settings.flush_interval);
                }
            }
            _ = look.tick() => {
                w.record_states().await;
                if due.is_none() {
                    // Nothing waits to be written: the mark moves on (`flush` writes no row).
                    let _ = w.flush(&mut rx).await;
                }
            }
            _ = history.written.wanted.notified() => due = Some(Instant::now()),
            r = leading.changed() => {
                if r.is_err() || !*leading.borrow() {
                    continue;
                }
                // Leading from now on: what the previous leader wrote last is not known here.
                w.broken = true;
                w.states.clear();
                due = Some(Instant::now());
            }
            _ = stop.changed() => {
                let _ = tokio::time::timeout(Duration::from_secs(5), w.flush(&mut rx)).await;
                return;
            }
        }
        if w.pending.len() >= settings.batch_size {
            due = Some(Instant::now());
        }
        // While a first sync runs, its changes may all wait behind a checkpoint of the growing
        // graph (seconds at a million objects): up to the graph's size they are not the database
        // being away (each holds an object the store holds too). Past that bound, the database
        // has been away too long: start again from a checkpoint.
        if w.pending.len() > settings.buffer.max(2)
            && !(w.store.is_loading() && w.pending.len() <= w.store.snapshot().len())
        {
            w.pending.clear();
            w.broken = true;
        }
    }
}

impl Writer {
    /// Take what changed in the application inventory since it was last seen as records to
    /// write; true when something did.
    fn see_applications(&mut self) -> bool {
        let Some(rx) = &mut self.applications else {
            return false;
        };
        let now = rx.borrow_and_update().clone();
        let before = std::mem::replace(&mut self.applications_seen, now.clone());
        // When the inventory joined them (what a live query saw from then on).
        let at_ms = now.reconciled_ms.unwrap_or_else(now_ms);
        let changed = apps::differences(&before, &now);
        let any = !changed.is_empty();
        self.pending
            .extend(changed.into_iter().map(|(before, after)| Item::Record {
                before,
                after,
                at_ms,
            }));
        any
    }

    /// Write what is pending (after a checkpoint when one is due). `Err(None)`: no database yet.
    async fn flush(
        &mut self,
        rx: &mut broadcast::Receiver<Arc<Change>>,
    ) -> Result<(), Option<DbError>> {
        if !self.history.leader.leading() {
            self.pending.clear();
            self.broken = true;
            return Ok(());
        }
        let Some(db) = self.history.db() else {
            return Err(None);
        };
        // A change gets its time and is sent under the store's writer lock: once the settled
        // snapshot is had, every change before `through` (and every change it holds) is in the
        // stream. Take them, so that this write holds them all (and a checkpoint goes exactly
        // after the last of them).
        let through = now_ms() - 1;
        let settled = (self.store.settled(), now_ms());
        loop {
            match rx.try_recv() {
                Ok(c) => self.pending.push(Item::Object(c)),
                Err(broadcast::error::TryRecvError::Lagged(_)) => self.broken = true,
                Err(_) => break,
            }
        }
        let ratio = match self.store.is_loading() {
            true => CHECKPOINT_RATIO_LOADING,
            false => CHECKPOINT_RATIO,
        };
        let checkpoint = (self.broken
            || self.since_checkpoint >= (ratio * self.last_checkpoint).max(CHECKPOINT_FLOOR))
        .then_some(settled);
        if checkpoint.is_none() && self.pending.is_empty() && !self.see_applications() {
            // Nothing to write: every change before `through` is written.
            self.mark(&db, through, false).await;
            return Ok(());
        }
        // The inventory as the checkpoint holds it: every record before it is taken.
        let applications = checkpoint.as_ref().map(|_| {
            self.see_applications();
            self.applications_seen.clone()
        });
        let mut pending = std::mem::take(&mut self.pending);
        // What the checkpoint holds goes before it, the rest after, each in its order.
        let split = match &checkpoint {
            Some((snap, _)) => {
                let seq = snap.seq();
                let (within, after): (Vec<Item>, Vec<Item>) =
                    pending.into_iter().partition(|i| i.within(seq));
                let split = within.len();
                pending = within;
                pending.extend(after);
                split
            }
            None => pending.len(),
        };
        // Rows in time order on each side of the checkpoint (the reader takes a moment's rows
        // by their ids); each object's and record's own changes stay in their order.
        pending[..split].sort_by_key(Item::at_ms);
        pending[split..].sort_by_key(Item::at_ms);
        if self.next_id.is_none() {
            self.next_id = Some(next_object(&db).await.map_err(Some)?);
        }
        // Number the objects in order (a checkpoint's objects as of its place among them).
        let mut next = self.next_id.unwrap_or(1);
        let mut numbered: Vec<i64> = Vec::with_capacity(pending.len());
        let mut cp_objects: Option<Contents> = None;
        let taken = checkpoint.as_ref().zip(applications.as_ref());
        for (i, item) in pending.iter().enumerate() {
            if i == split
                && let Some(((snap, _), applications)) = taken
            {
                cp_objects = Some(contents(snap, applications, &mut self.ids, &mut next));
            }
            let ident = item.ident();
            if item.deleted() {
                numbered.push(number(&mut self.ids, &mut next, ident));
                self.ids.remove(&ident);
            } else {
                numbered.push(number(&mut self.ids, &mut next, ident));
            }
        }
        if split == pending.len()
            && let Some(((snap, _), applications)) = taken
        {
            cp_objects = Some(contents(snap, applications, &mut self.ids, &mut next));
        }
        let max_object = next - 1;
        self.next_id = Some(next);
        let taken = checkpoint.map(|c| c.1);
        let work = tokio::task::spawn_blocking(move || {
            let rows: Vec<(i64, i64, Option<Vec<u8>>)> = pending
                .iter()
                .zip(numbered)
                .map(|(item, object)| {
                    let v = version_of(item, object);
                    (v.object, v.at_ms, v.body)
                })
                .collect();
            let cp = cp_objects.map(|(objects, records)| {
                let count = (objects.len() + records.len()) as i64;
                let values = objects
                    .iter()
                    .map(|(id, r)| (*id, Cow::Owned(stored_value(r))))
                    .chain(records.iter().map(|(id, r)| (*id, Cow::Owned(r.value()))));
                (count, encode_checkpoint_from(values))
            });
            (rows, cp)
        });
        let Ok((rows, cp_body)) = self.reading(rx, work).await else {
            // The chain breaks anyway: a lag seen meanwhile is part of it.
            self.break_chain();
            return Ok(());
        };
        let bytes = |rows: &[(i64, i64, Option<Vec<u8>>)]| {
            rows.iter()
                .map(|r| r.2.as_ref().map_or(0, Vec::len) as u64 + ROW_OVERHEAD)
                .sum::<u64>()
        };
        let before_bytes = bytes(&rows[..split]);
        let after_bytes = bytes(&rows[split..]);
        let latest = rows.iter().map(|r| r.1).max().unwrap_or(0);
        let cp = match (cp_body, taken) {
            (Some((count, body)), Some(taken)) => {
                // Never earlier than a version it holds, never later than one after it (those
                // arrived after it was taken).
                let at = rows[..split]
                    .iter()
                    .map(|r| r.1)
                    .fold(taken.max(self.last_at), i64::max);
                Some(Checkpoint {
                    at_ms: at,
                    objects: count,
                    max_object,
                    before_bytes: self.since_checkpoint + before_bytes,
                    body,
                    continues: !self.broken,
                })
            }
            _ => None,
        };
        let written = self
            .reading(rx, write(&db, &rows, split, cp.as_ref()))
            .await;
        if let Err(e) = written {
            // Nothing of the batch was kept: the chain would be broken without it.
            self.break_chain();
            return Err(Some(e));
        }
        self.last_at = self.last_at.max(latest);
        let counted = &self.history.metrics.timeline;
        counted
            .with_label_values(&["version"])
            .inc_by(rows.len() as u64);
        if cp.is_some() {
            counted.with_label_values(&["checkpoint"]).inc();
            if self.broken {
                counted.with_label_values(&["restart"]).inc();
            }
        }
        match cp {
            Some(cp) => {
                self.last_at = self.last_at.max(cp.at_ms);
                self.last_checkpoint = cp.body.len() as u64 + ROW_OVERHEAD;
                self.since_checkpoint = after_bytes;
                self.broken = false;
                let settings = self.history.settings.clone();
                if let Err(e) = self
                    .reading(rx, super::read::trim(&db, &settings, now_ms()))
                    .await
                {
                    tracing::warn!(error = %e, "trimming the timeline failed");
                }
            }
            None => self.since_checkpoint += before_bytes,
        }
        self.broken |= std::mem::take(&mut self.lagged);
        self.mark(&db, through, true).await;
        Ok(())
    }

    /// The chain of versions is broken (the next checkpoint starts again); a lag seen meanwhile
    /// is part of the same break.
    fn break_chain(&mut self) {
        self.broken = true;
        self.lagged = false;
    }

    /// Await `work` while taking what the stream sends meanwhile: a long write (a whole graph's
    /// checkpoint takes seconds at a million objects) must not leave the stream to overrun this
    /// reader, as a load goes on without a reader stalled for long: the chain broke, and each
    /// checkpoint written to mend it broke it again (53 of 58 checkpoints during a sync of a
    /// million objects, `cargo bench --bench kube_sync`).
    async fn reading<F: std::future::Future>(
        &mut self,
        rx: &mut broadcast::Receiver<Arc<Change>>,
        work: F,
    ) -> F::Output {
        tokio::pin!(work);
        let mut open = true;
        loop {
            tokio::select! {
                out = &mut work => return out,
                r = rx.recv(), if open => match r {
                    Ok(c) => self.pending.push(Item::Object(c)),
                    Err(broadcast::error::RecvError::Lagged(_)) => self.lagged = true,
                    Err(broadcast::error::RecvError::Closed) => open = false,
                },
            }
        }
    }

    /// Every change before `through` is written: say so in this process and, when replicas take
    /// turns by a Lease (the others read it there), in the database: at each write, and at most
    /// once a second while nothing changes.
    async fn mark(&mut self, db: &crate::db::Db, through: i64, wrote: bool) {
        self.history.written.advance(through);
        if !self.history.leader.elected()
            || (!wrote && through < self.db_mark + written::IDLE_EVERY_MS)
        {
            return;
        }
        match written::store(db, through).await {
            Ok(()) => self.db_mark = through,
            Err(e) => tracing::warn!(error = %e, "keeping how far the timeline is written failed"),
        }
    }
}

/// A change as a version row: the whole object when it appears (or when no merge patch can say
/// the change), a merge patch against the object as the change found it, nothing for a deletion.
fn version_of(item: &Item, object: i64) -> Version {
    let c = match item {
        Item::Object(c) => c,
        Item::Record {
            before,
            after,
            at_ms,
        } => {
            let body = after.as_ref().map(|a| {
                let after = a.value();
                let patch = before
                    .as_ref()
                    .and_then(|b| merge_patch::diff(&b.value(), &after));
                match patch {
                    Some(p) => Body::Patch(p),
                    None => Body::Full(after),
                }
                .encode()
            });
            return Version {
                object,
                at_ms: *at_ms,
                body,
            };
        }
    };
    let at_ms = c.at_ms;
    let body = match (c.change, c.previous.as_deref()) {
        (ChangeType::Deleted, _) => None,
        (ChangeType::Modified, Some(prev)) if Ident::of(prev) == Ident::of(&c.object) => {
            let after = stored_value(&c.object);
            let body = match merge_patch::diff(&stored_value(prev), &after) {
                Some(patch) => Body::Patch(patch),
                None => Body::Full(after),
            };
            Some(body.encode())
        }
        _ => Some(Body::Full(stored_value(&c.object)).encode()),
    };
    Version {
        object,
        at_ms,
        body,
    }
}

/// An object's number: the one it has, or the next one.
fn number(ids: &mut HashMap<Ident, i64>, next: &mut i64, ident: Ident) -> i64 {
    *ids.entry(ident).or_insert_with(|| {
        *next += 1;
        *next - 1
    })
}

/// What a checkpoint holds, numbered: every object of the graph, every application record.
type Contents = (Vec<(i64, Arc<crate::model::Resource>)>, Vec<(i64, Record)>);

/// Every object of a snapshot and every record of the inventory, with their numbers.
fn contents(
    s: &Snapshot,
    applications: &Applications,
    ids: &mut HashMap<Ident, i64>,
    next: &mut i64,
) -> Contents {
    let objects = crate::model::Kind::ALL
        .iter()
        .flat_map(|k| s.list(*k))
        .map(|r| (number(ids, next, Ident::of(r)), r.clone()))
        .collect();
    let records = apps::every(applications)
        .into_iter()
        .map(|r| (number(ids, next, Ident::of_record(&r)), r))
        .collect();
    (objects, records)
}
