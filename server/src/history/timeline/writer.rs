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
//! is written once the versions since the last one take as many bytes as it did, so a moment is
//! rebuilt from at most one checkpoint and about its size in versions, and checkpoints take about
//! half of what the timeline keeps.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::{broadcast, watch};
use tokio::time::Instant;

use super::{Body, encode_checkpoint, merge_diff};
use crate::db::{Db, DbError, with_pool};
use crate::history::{History, now_ms};
use crate::store::{Change, ChangeType, Snapshot, Store};

/// How an object is named in `timeline_objects`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Ident {
    /// The datacenter's key.
    pub datacenter: String,
    /// Kind name.
    pub kind: String,
    /// API version (`v1alpha1`, …).
    pub version: String,
    /// Namespace ("" for cluster-scoped kinds).
    pub namespace: String,
    /// Name.
    pub name: String,
    /// metadata.uid.
    pub uid: String,
}

impl Ident {
    fn of(r: &crate::model::Resource) -> Self {
        Ident {
            datacenter: r.datacenter().key().to_string(),
            kind: r.kind().name().to_string(),
            version: r.version().to_string(),
            namespace: r.namespace().to_string(),
            name: r.name().to_string(),
            uid: r.uid().to_string(),
        }
    }
}

/// A checkpoint once the versions since the last one take this many bytes at least.
const CHECKPOINT_FLOOR: u64 = 64 * 1024;
/// Keys per statement when naming objects (7 parameters each).
const IDENTS_PER_STATEMENT: usize = 100;
/// Versions per INSERT statement (3 parameters each).
const VERSIONS_PER_STATEMENT: usize = 300;
/// Bytes counted per stored row besides its body (ids, time, the row's own bookkeeping).
pub const ROW_OVERHEAD: u64 = 24;

/// One change as it will be stored.
struct Version {
    ident: Ident,
    at_ms: i64,
    body: Option<Vec<u8>>,
}

/// The writer's state between batches.
struct Writer {
    history: Arc<History>,
    store: Arc<Store>,
    /// Object ids known to be in `timeline_objects`.
    ids: HashMap<Ident, i64>,
    /// Changes not yet written, in order, with the time they arrived.
    pending: Vec<(Arc<Change>, i64)>,
    /// The chain may be broken: the next batch starts with a checkpoint.
    broken: bool,
    /// Bytes of versions written since the last checkpoint, and that checkpoint's bytes.
    since_checkpoint: u64,
    last_checkpoint: u64,
    /// The latest time written (a checkpoint is never earlier than the versions it holds).
    last_at: i64,
}

/// Write the timeline from `rx` until `stop` turns true.
pub fn spawn(
    history: Arc<History>,
    store: Arc<Store>,
    rx: broadcast::Receiver<Arc<Change>>,
    stop: watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(run(history, store, rx, stop))
}

async fn run(
    history: Arc<History>,
    store: Arc<Store>,
    mut rx: broadcast::Receiver<Arc<Change>>,
    mut stop: watch::Receiver<bool>,
) {
    let settings = history.settings.clone();
    let mut leading = history.leader.watch();
    let mut w = Writer {
        history,
        store,
        ids: HashMap::new(),
        pending: Vec::new(),
        broken: true,
        since_checkpoint: 0,
        last_checkpoint: 0,
        last_at: 0,
    };
    // The first checkpoint at once: the store holds what the database restored.
    let mut due = Some(Instant::now());
    let mut backoff = crate::retry::Backoff::new(Duration::from_millis(100), Duration::from_secs(10));
    loop {
        let wake = due.unwrap_or_else(|| Instant::now() + Duration::from_secs(3600));
        tokio::select! {
            r = rx.recv() => match r {
                Ok(c) => {
                    let at = c.at_ms;
                    w.pending.push((c, at));
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
            r = leading.changed() => {
                if r.is_err() || !*leading.borrow() {
                    continue;
                }
                // Leading from now on: what the previous leader wrote last is not known here.
                w.broken = true;
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
        if w.pending.len() > settings.buffer.max(2) {
            // The database has been away too long: start again from a checkpoint.
            w.pending.clear();
            w.broken = true;
        }
    }
}

impl Writer {
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
        let checkpoint = (self.broken
            || self.since_checkpoint >= self.last_checkpoint.max(CHECKPOINT_FLOOR))
        .then(|| {
            // Every change the settled snapshot holds is in the stream by now: take them, so the
            // checkpoint goes exactly after the last of them.
            let snap = (self.store.settled(), now_ms());
            loop {
                match rx.try_recv() {
                    Ok(c) => {
                        let at = c.at_ms;
                        self.pending.push((c, at));
                    }
                    Err(broadcast::error::TryRecvError::Lagged(_)) => self.broken = true,
                    Err(_) => break,
                }
            }
            snap
        });
        let pending = std::mem::take(&mut self.pending);
        let split = checkpoint.as_ref().map_or(pending.len(), |s| {
            pending.partition_point(|(c, _)| c.seq <= s.0.seq())
        });
        let cp_snap = checkpoint.clone();
        let work = tokio::task::spawn_blocking(move || {
            let versions: Vec<Version> = pending.iter().map(|(c, at)| version_of(c, *at)).collect();
            let objects = cp_snap.map(|(s, taken)| (graph_of(&s), taken));
            (versions, objects)
        });
        let Ok((versions, objects)) = work.await else {
            self.broken = true;
            return Ok(());
        };
        let mut idents: Vec<&Ident> = versions.iter().map(|v| &v.ident).collect();
        if let Some(objects) = &objects {
            idents.extend(objects.0.iter().map(|(i, _)| i));
        }
        self.name(&db, idents).await.map_err(Some)?;
        let ids = &self.ids;
        let rows: Vec<(i64, i64, Option<Vec<u8>>)> = versions
            .into_iter()
            .map(|v| (ids.get(&v.ident).copied().unwrap_or(0), v.at_ms, v.body))
            .collect();
        let before_bytes = rows[..split]
            .iter()
            .map(|r| r.2.as_ref().map_or(0, Vec::len) as u64 + ROW_OVERHEAD)
            .sum::<u64>();
        let after_bytes = rows[split..]
            .iter()
            .map(|r| r.2.as_ref().map_or(0, Vec::len) as u64 + ROW_OVERHEAD)
            .sum::<u64>();
        let latest = rows.iter().map(|r| r.1).max().unwrap_or(0);
        let cp = match objects {
            Some((objects, taken)) => {
                let with_ids: Vec<(i64, Value)> = objects
                    .into_iter()
                    .filter_map(|(i, v)| Some((*ids.get(&i)?, v)))
                    .collect();
                let count = with_ids.len() as i64;
                let body = tokio::task::spawn_blocking(move || encode_checkpoint(&with_ids))
                    .await
                    .unwrap_or_default();
                // Never earlier than a version it holds, never later than one after it (those
                // arrived after it was taken).
                let at = rows[..split]
                    .iter()
                    .map(|r| r.1)
                    .fold(taken.max(self.last_at), i64::max);
                Some(Checkpoint {
                    at_ms: at,
                    objects: count,
                    before_bytes: self.since_checkpoint + before_bytes,
                    body,
                })
            }
            None => None,
        };
        let written = write(&db, &rows, split, cp.as_ref()).await;
        if let Err(e) = written {
            // Nothing of the batch was kept: the chain would be broken without it.
            self.broken = true;
            return Err(Some(e));
        }
        self.last_at = self.last_at.max(latest);
        match cp {
            Some(cp) => {
                self.last_at = self.last_at.max(cp.at_ms);
                self.last_checkpoint = cp.body.len() as u64 + ROW_OVERHEAD;
                self.since_checkpoint = after_bytes;
                self.broken = false;
                if let Err(e) = super::read::trim(&db, &self.history.settings, now_ms()).await
                {
                    tracing::warn!(error = %e, "trimming the timeline failed");
                }
            }
            None => self.since_checkpoint += before_bytes,
        }
        Ok(())
    }

    /// Make sure every object of `idents` has its row and its id is known.
    async fn name(&mut self, db: &Db, idents: Vec<&Ident>) -> Result<(), DbError> {
        let mut missing: Vec<Ident> = idents
            .into_iter()
            .filter(|i| !self.ids.contains_key(*i))
            .cloned()
            .collect();
        missing.sort_by(|a, b| {
            (&a.datacenter, &a.kind, &a.namespace, &a.name, &a.uid).cmp(&(
                &b.datacenter,
                &b.kind,
                &b.namespace,
                &b.name,
                &b.uid,
            ))
        });
        missing.dedup();
        for chunk in missing.chunks(IDENTS_PER_STATEMENT) {
            let found: Vec<(i64, String, String, String, String, String, String)> =
                with_pool!(db, p => {
                    let mut b = sqlx::QueryBuilder::new(
                        "INSERT INTO timeline_objects (datacenter, kind, version, namespace, name, uid) ",
                    );
                    b.push_values(chunk, |mut b, i| {
                        b.push_bind(i.datacenter.clone())
                            .push_bind(i.kind.clone())
                            .push_bind(i.version.clone())
                            .push_bind(i.namespace.clone())
                            .push_bind(i.name.clone())
                            .push_bind(i.uid.clone());
                    });
                    // DO UPDATE (to the same value) so that rows already there are returned too.
                    b.push(
                        " ON CONFLICT (datacenter, kind, version, namespace, name, uid) \
                         DO UPDATE SET uid = excluded.uid \
                         RETURNING id, datacenter, kind, version, namespace, name, uid",
                    );
                    b.build_query_as().fetch_all(p).await?
                });
            for (id, datacenter, kind, version, namespace, name, uid) in found {
                self.ids.insert(
                    Ident {
                        datacenter,
                        kind,
                        version,
                        namespace,
                        name,
                        uid,
                    },
                    id,
                );
            }
        }
        Ok(())
    }
}

/// A checkpoint about to be written.
struct Checkpoint {
    at_ms: i64,
    objects: i64,
    /// Bytes of the versions between the previous checkpoint and this one.
    before_bytes: u64,
    body: Vec<u8>,
}

/// A change as a version row: the whole object when it appears (or when no merge patch can say
/// the change), a merge patch against the object as the change found it, nothing for a deletion.
fn version_of(c: &Change, at_ms: i64) -> Version {
    let ident = Ident::of(&c.object);
    let body = match (c.change, c.previous.as_deref()) {
        (ChangeType::Deleted, _) => None,
        (ChangeType::Modified, Some(prev)) if Ident::of(prev) == ident => {
            let after = c.object.to_value();
            let body = match merge_diff(&prev.to_value(), &after) {
                Some(patch) => Body::Patch(patch),
                None => Body::Full(after),
            };
            Some(body.encode())
        }
        _ => Some(Body::Full(c.object.to_value()).encode()),
    };
    Version {
        ident,
        at_ms,
        body,
    }
}

/// Every object of a snapshot as (its name in the timeline, its JSON).
fn graph_of(s: &Snapshot) -> Vec<(Ident, Value)> {
    crate::model::Kind::ALL
        .iter()
        .flat_map(|k| s.list(*k))
        .map(|r| (Ident::of(r), r.to_value()))
        .collect()
}

/// Insert the versions (those before `split` first), then the checkpoint after them, then the
/// rest, in one transaction.
async fn write(
    db: &Db,
    rows: &[(i64, i64, Option<Vec<u8>>)],
    split: usize,
    cp: Option<&Checkpoint>,
) -> Result<(), DbError> {
    let _turn = db.write_turn().await;
    with_pool!(db, p => {
        let mut tx = p.begin().await?;
        for (part, checkpoint) in [(&rows[..split], cp), (&rows[split..], None)] {
            for chunk in part.chunks(VERSIONS_PER_STATEMENT) {
                let mut b = sqlx::QueryBuilder::new("INSERT INTO timeline_versions (at_ms, object, body) ");
                b.push_values(chunk, |mut b, (object, at, body)| {
                    b.push_bind(*at).push_bind(*object).push_bind(body.clone());
                });
                b.build().execute(&mut *tx).await?;
            }
            if let Some(cp) = checkpoint {
                let after: Option<i64> = sqlx::query_scalar("SELECT max(id) FROM timeline_versions")
                    .fetch_one(&mut *tx)
                    .await?;
                sqlx::query(
                    "INSERT INTO timeline_checkpoints (at_ms, after_version, objects, before_bytes, body) \
                     VALUES ($1, $2, $3, $4, $5)",
                )
                .bind(cp.at_ms)
                .bind(after.unwrap_or(0))
                .bind(cp.objects)
                .bind(cp.before_bytes as i64)
                .bind(cp.body.as_slice())
                .execute(&mut *tx)
                .await?;
            }
        }
        tx.commit().await?;
    });
    Ok(())
}
