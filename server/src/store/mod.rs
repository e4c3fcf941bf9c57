//! The indexed in-memory graph: immutable snapshots (cheap to clone, consistent for a whole query),
//! secondary indexes for every relationship, and one sequence-numbered change stream.

mod counts;
mod hashed;
pub mod held;
mod index;
pub mod list_page;
mod loading;
mod members;
mod past;
pub mod reads;
pub mod scope;
pub mod search;
mod search_fields;
pub mod search_page;
mod settle;
mod snapshot;

use std::sync::Arc;

use crate::model::packed::{OptInt, OptTime};
use arc_swap::ArcSwap;
use parking_lot::Mutex;
use tokio::sync::broadcast;

pub use counts::ChangeCounts;
pub use index::{Idx, index_entries, scoped};
pub use loading::Loading;
pub use scope::{Grants, KindGrants, Namespaces, Scope, ScopedStore};
pub use snapshot::{DerivedState, Deriver, Snapshot};

use crate::model::{Datacenter, Kind, Resource, Str};

/// Identity of an object: kind, datacenter, namespace (empty when cluster-scoped) and name.
/// Ordered in that order: a kind is one range, a namespace of one datacenter another.
///
/// One allocation shared by every copy: a Machine's key is held by the ordered and the hashed
/// maps, the uid index and five relationship indexes, and as two owned strings each copy took
/// two allocations of its own (the store added about 1,120 bytes per object, most of them these; `cargo
/// bench --bench fleet_memory`).
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey(Arc<KeyParts>);

/// What an [`ObjectKey`] names (read through the key: `key.name`).
#[derive(Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KeyParts {
    /// The kind.
    pub kind: Kind,
    /// The datacenter it was read from.
    pub datacenter: Datacenter,
    /// Namespace, empty for cluster-scoped kinds.
    pub namespace: Str,
    /// `metadata.name`.
    pub name: Str,
}

impl std::ops::Deref for ObjectKey {
    type Target = KeyParts;

    fn deref(&self) -> &KeyParts {
        &self.0
    }
}

impl std::fmt::Debug for ObjectKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl ObjectKey {
    /// Build a key.
    pub fn new(datacenter: &Datacenter, kind: Kind, namespace: &str, name: &str) -> Self {
        ObjectKey(Arc::new(KeyParts {
            kind,
            datacenter: datacenter.clone(),
            namespace: namespace.into(),
            name: name.into(),
        }))
    }

    /// The key of an object.
    pub fn of(r: &Resource) -> Self {
        ObjectKey::new(r.datacenter(), r.kind(), r.namespace(), r.name())
    }

    /// The keys that the objects of a kind in one datacenter's namespace lie between: the
    /// first of them, and the smallest past them (a longer namespace that starts with `ns`
    /// comes after `ns` and a zero byte).
    pub fn namespace_span(datacenter: &Datacenter, kind: Kind, ns: &str) -> (Self, Self) {
        (
            ObjectKey::new(datacenter, kind, ns, ""),
            ObjectKey::new(datacenter, kind, &format!("{ns}\0"), ""),
        )
    }

    /// The keys that the objects of a kind in one datacenter lie between, as
    /// [`ObjectKey::namespace_span`]'s.
    pub fn datacenter_span(datacenter: &Datacenter, kind: Kind) -> (Self, Self) {
        let past = Datacenter::new(&format!("{}\0", datacenter.key()));
        (
            ObjectKey::new(datacenter, kind, "", ""),
            ObjectKey::new(&past, kind, "", ""),
        )
    }
}

impl std::fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.namespace.is_empty() {
            write!(f, "{} {}", self.kind, self.name)?;
        } else {
            write!(f, "{} {}/{}", self.kind, self.namespace, self.name)?;
        }
        if !self.datacenter.is_single() {
            write!(f, " in datacenter {}", self.datacenter)?;
        }
        Ok(())
    }
}

/// What happened to an object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChangeType {
    /// The object appeared.
    Added,
    /// The object changed.
    Modified,
    /// The object went away; `object` is its last state.
    Deleted,
}

/// One entry of the change stream.
#[derive(Clone, Debug)]
pub struct Change {
    /// Strictly increasing, gap-free sequence number.
    pub seq: u64,
    /// Added, modified or deleted.
    pub change: ChangeType,
    /// The object after the change (its last state for deletions).
    pub object: Arc<Resource>,
    /// The object before the change, for modifications and deletions.
    pub previous: Option<Arc<Resource>>,
    /// Part of loading state that already existed (a source's first list, the demo fleet), not
    /// something that just happened: live views apply it, the event log leaves it out.
    pub loaded: bool,
    /// Who asked for it through this server (a mutation's principal), when someone did.
    pub actor: Option<Arc<str>>,
    /// When the store published it (ms since the epoch): from then on readers saw it.
    pub at_ms: i64,
}

/// What a change a writer waits for must look like (see [`Store::expect`]).
pub type Intent = Box<dyn Fn(&Change) -> bool + Send + Sync>;

/// An expectation and the change that fulfilled it.
type Fulfilled = (Expected, Arc<Change>);

/// A change someone wrote and waits to see: the first change of `key` that fulfils `intent` is
/// attributed to `actor` and handed over.
struct Expected {
    key: ObjectKey,
    actor: Option<Arc<str>>,
    intent: Intent,
    done: tokio::sync::oneshot::Sender<Arc<Change>>,
}

/// A write to the store.
#[derive(Clone, Debug)]
pub enum Op {
    /// Create or replace an object; the store stamps uid, creation time, resourceVersion and
    /// generation as an API server would (the embedded source).
    Upsert(Resource),
    /// Create or replace an object exactly as given, metadata included (the object comes from an
    /// API server that already stamped it).
    Mirror(Resource),
    /// Remove an object if present.
    Delete(ObjectKey),
}

/// Default capacity of the change stream; a receiver further behind than this is told it lagged
/// (subscriptions then send RESYNC). The ring keeps its changes' objects alive, so it is also a
/// bound on memory held for slow subscribers.
pub const CHANGE_BUFFER: usize = 4_096;

/// How long [`Store::load`] waits for a change stream reader that makes no progress at all.
pub const STALLED_READER: std::time::Duration = std::time::Duration::from_secs(2);

/// How a write's changes arrive: as news (the event log records them) or as state being loaded
/// (a source's first list, the demo fleet: marked `loaded`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Arrival {
    News,
    Loaded,
}

/// The store: the current snapshot plus the change stream. Writers are serialized.
pub struct Store {
    current: ArcSwap<Snapshot>,
    writer: Mutex<()>,
    deriver: Option<Deriver>,
    changes: broadcast::Sender<Arc<Change>>,
    capacity: usize,
    /// Writes made through this server that their writers wait to see.
    expected: Mutex<Vec<Expected>>,
    /// Changes applied since start, by kind and type.
    applied: ChangeCounts,
    /// First syncs and loads in progress (see [`Store::loading`]).
    loads: Arc<std::sync::atomic::AtomicUsize>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let snap = self.snapshot();
        f.debug_struct("Store")
            .field("seq", &snap.seq())
            .field("objects", &snap.len())
            .finish()
    }
}

impl Default for Store {
    fn default() -> Self {
        Store::new()
    }
}

impl Store {
    /// An empty store.
    pub fn new() -> Self {
        Store::with_change_buffer(CHANGE_BUFFER)
    }

    /// An empty store whose change stream holds `capacity` changes (at least 1).
    pub fn with_change_buffer(capacity: usize) -> Self {
        let (changes, _) = broadcast::channel(capacity.max(1));
        Store {
            current: ArcSwap::from_pointee(Snapshot::searchable()),
            writer: Mutex::new(()),
            deriver: None,
            changes,
            capacity: capacity.max(1),
            expected: Mutex::new(Vec::new()),
            applied: Default::default(),
            loads: Default::default(),
        }
    }

    /// How many changes of each kind and type the store has applied since start.
    pub fn applied(&self) -> &ChangeCounts {
        &self.applied
    }

    /// Keep derived state with every snapshot from now on (derived at once from what is held).
    pub fn derive_with(mut self, deriver: Deriver) -> Self {
        let mut snap = self.current.load_full().successor();
        snap.derived = Some(deriver(None, &snap, &[]));
        self.current.store(Arc::new(snap));
        self.deriver = Some(deriver);
        self
    }

    /// The current snapshot; it never changes under the caller.
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.current.load_full()
    }

    /// What `scope` sees of `snap`: the snapshot itself for everything, else a snapshot of only
    /// the objects it sees, with its own indexes and derived state, made once per snapshot and
    /// scope and shared by every reader with that scope.
    pub fn view(&self, snap: &Arc<Snapshot>, scope: &Scope) -> Arc<Snapshot> {
        let Scope::Only(limited) = scope else {
            return snap.clone();
        };
        snap.memo_keyed(scope.id(), |s| {
            let mut view = s.restricted(limited);
            if let Some(derive) = &self.deriver {
                view.derived = Some(derive(None, &view, &[]));
            }
            Arc::new(view)
        })
    }

    /// The current snapshot once no write is half done: every change it holds has been handed
    /// to the writers expecting it (see [`Store::expect`]).
    pub fn settled(&self) -> Arc<Snapshot> {
        let _guard = self.writer.lock();
        self.current.load_full()
    }

    /// Changes in the stream not yet read by every reader (the slowest reader's backlog).
    pub fn queued(&self) -> usize {
        self.changes.len()
    }

    /// Receive every change applied after this call.
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<Change>> {
        self.changes.subscribe()
    }

    /// Put back objects saved earlier (the embedded source's database), keeping their uid,
    /// creation time and resourceVersion, and continue the sequence after the highest
    /// resourceVersion seen. Objects already present are left alone. No change is published:
    /// these objects are not new, they were recorded when they first changed.
    pub fn restore(&self, objects: Vec<Resource>) -> usize {
        let _guard = self.writer.lock();
        let mut snap = self.current.load_full().successor();
        let mut restored = 0;
        for r in objects {
            let key = ObjectKey::of(&r);
            if snap.by_key.get(&key).is_some() {
                continue;
            }
            snap.seq = snap.seq.max(version_seq(&r));
            snap.insert(key, Arc::new(r));
            restored += 1;
        }
        snap.settle();
        if restored > 0 {
            if let Some(derive) = &self.deriver {
                // No changes describe a restore: derive from scratch.
                snap.derived = Some(derive(None, &snap, &[]));
            }
            self.current.store(Arc::new(snap));
        }
        restored
    }

    /// Continue the sequence after `seq` (when it is ahead): versions recorded elsewhere (the
    /// database's history) are never given out again. No change is published.
    pub fn advance_to(&self, seq: u64) {
        let _guard = self.writer.lock();
        let current = self.current.load_full();
        if current.seq < seq {
            let mut snap = current.successor();
            snap.seq = seq;
            self.current.store(Arc::new(snap));
        }
    }

    /// Wait for a change of `key` that fulfils `intent` (a write just sent to the source, which
    /// comes back through its watch, or applied here): that change carries `actor` and is sent
    /// on the returned channel. Dropping the receiver withdraws the expectation. Call it before
    /// the write, so that a change arriving at once is not missed.
    pub fn expect(
        &self,
        key: ObjectKey,
        actor: Option<Arc<str>>,
        intent: Intent,
    ) -> tokio::sync::oneshot::Receiver<Arc<Change>> {
        let (done, rx) = tokio::sync::oneshot::channel();
        let mut expected = self.expected.lock();
        expected.retain(|e| !e.done.is_closed());
        expected.push(Expected {
            key,
            actor,
            intent,
            done,
        });
        rx
    }

    /// Apply writes atomically: readers see all of them or none. Returns the changes made
    /// (writes that change nothing produce no change and no sequence number).
    pub fn apply(&self, ops: Vec<Op>) -> Vec<Arc<Change>> {
        self.apply_marked(ops, Arrival::News, None)
    }

    /// [`Store::apply`] on behalf of `actor` (a mutation's principal): its changes carry it.
    pub fn apply_as(&self, ops: Vec<Op>, actor: &Arc<str>) -> Vec<Arc<Change>> {
        self.apply_marked(ops, Arrival::News, Some(actor))
    }

    /// [`Store::apply`] for state being loaded (a source's first list, the demo fleet): its
    /// changes are marked `loaded`, so the event log does not record them as news.
    pub fn apply_loaded(&self, ops: Vec<Op>) -> Vec<Arc<Change>> {
        self.apply_marked(ops, Arrival::Loaded, None)
    }

    fn apply_marked(
        &self,
        ops: Vec<Op>,
        arrival: Arrival,
        actor: Option<&Arc<str>>,
    ) -> Vec<Arc<Change>> {
        let loaded = arrival == Arrival::Loaded;
        let _guard = self.writer.lock();
        let mut snap = self.current.load_full().successor();
        let mut out = Vec::new();
        for op in ops {
            match op {
                Op::Upsert(_) | Op::Mirror(_) => {
                    let (mut r, mirror) = match op {
                        Op::Upsert(r) => (r, false),
                        Op::Mirror(r) => (r, true),
                        Op::Delete(_) => continue,
                    };
                    let key = ObjectKey::of(&r);
                    let previous = snap.by_key.get(&key).cloned();
                    if let Some(prev) = &previous
                        && (if mirror {
                            **prev == r
                        } else {
                            same_content(prev, &r)
                        })
                    {
                        continue;
                    }
                    snap.seq += 1;
                    if !mirror {
                        stamp(&mut r, previous.as_deref(), snap.seq);
                    }
                    let object = Arc::new(r);
                    snap.insert(key, object.clone());
                    let change = if previous.is_some() {
                        ChangeType::Modified
                    } else {
                        ChangeType::Added
                    };
                    out.push(Change {
                        seq: snap.seq,
                        change,
                        object,
                        previous,
                        loaded,
                        actor: None,
                        at_ms: 0,
                    });
                }
                Op::Delete(key) => {
                    let Some(prev) = snap.remove(&key) else {
                        continue;
                    };
                    snap.seq += 1;
                    out.push(Change {
                        seq: snap.seq,
                        change: ChangeType::Deleted,
                        object: prev.clone(),
                        previous: Some(prev),
                        loaded,
                        actor: None,
                        at_ms: 0,
                    });
                }
            }
        }
        snap.settle();
        if out.is_empty() {
            return Vec::new();
        }
        let out = match &self.deriver {
            Some(derive) => {
                let made: Vec<Arc<Change>> = out.into_iter().map(Arc::new).collect();
                let before = snap.derived.take();
                snap.derived = Some(derive(before.as_ref(), &snap, &made));
                made.into_iter()
                    .map(|c| Arc::try_unwrap(c).unwrap_or_else(|c| (*c).clone()))
                    .collect()
            }
            None => out,
        };
        // The moment readers see the changes: after the derived state (which takes a while on a
        // large graph), just before the snapshot is published.
        debug_assert!(snap.unsettled.is_empty(), "a snapshot is read settled");
        let at_ms = crate::clock::now_ms();
        let out = out.into_iter().map(|c| Change { at_ms, ..c }).collect();
        let (out, fulfilled) = self.attribute(out, actor);
        self.current.store(Arc::new(snap));
        for c in &out {
            self.applied.add(c.object.kind(), c.change);
            // No receivers is fine: nobody is listening yet.
            let _ = self.changes.send(c.clone());
        }
        for (e, c) in fulfilled {
            let _ = e.done.send(c);
        }
        out
    }

    /// Give each change its actor, and take the expectation it fulfils (each is evaluated once,
    /// under the writer lock): the writer is handed the change once the snapshot holds it.
    fn attribute(
        &self,
        changes: Vec<Change>,
        actor: Option<&Arc<str>>,
    ) -> (Vec<Arc<Change>>, Vec<Fulfilled>) {
        let mut expected = self.expected.lock();
        let mut fulfilled = Vec::new();
        let changes = changes
            .into_iter()
            .map(|mut c| {
                // (Nothing expected, the usual case: no key is built.)
                let found = (!expected.is_empty())
                    .then(|| {
                        let key = ObjectKey::of(&c.object);
                        expected
                            .iter()
                            .position(|e| e.key == key && !e.done.is_closed() && (e.intent)(&c))
                    })
                    .flatten();
                let e = found.map(|i| expected.swap_remove(i));
                c.actor = actor
                    .cloned()
                    .or_else(|| e.as_ref().and_then(|e| e.actor.clone()));
                let c = Arc::new(c);
                if let Some(e) = e {
                    fulfilled.push((e, c.clone()));
                }
                c
            })
            .collect();
        (changes, fulfilled)
    }
}

/// The sequence number a kept object's resourceVersion stands for (0 when it is not a number):
/// the store continues after the highest.
fn version_seq(r: &Resource) -> u64 {
    r.meta()
        .resource_version
        .as_deref()
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(0)
}

/// Equal apart from the fields the store itself maintains (an upsert of such an object changes
/// nothing).
pub fn same_content(prev: &Resource, next: &Resource) -> bool {
    let mut a = prev.clone();
    let mut b = next.clone();
    for m in [a.meta_mut(), b.meta_mut()] {
        m.resource_version = None;
        m.uid = None;
        m.creation_timestamp = OptTime::NONE;
        m.generation = OptInt::NONE;
    }
    a == b
}

/// Fill in what the API server would: uid, creation time, resourceVersion, generation.
fn stamp(r: &mut Resource, previous: Option<&Resource>, seq: u64) {
    let spec_changed = previous.is_none_or(|p| spec_differs(p, r));
    let meta = r.meta_mut();
    if let Some(p) = previous {
        let pm = p.meta();
        meta.uid = meta.uid.take().or_else(|| pm.uid.clone());
        if meta.creation_timestamp.is_none() {
            meta.creation_timestamp = pm.creation_timestamp;
        }
        let gen_before = pm.generation.get().unwrap_or(1);
        meta.generation = OptInt::from(if spec_changed {
            gen_before.saturating_add(1)
        } else {
            gen_before
        });
    } else {
        meta.generation = OptInt::from(meta.generation.get().unwrap_or(1));
    }
    if meta.uid.is_none() {
        meta.uid = Some(crate::model::Uid::random());
    }
    if meta.creation_timestamp.is_none() {
        // Whole seconds, as the API server stores it (and as it reads back after a restart).
        let now = jiff::Timestamp::now().as_second();
        meta.creation_timestamp = OptTime::from(
            jiff::Timestamp::from_second(now).unwrap_or_else(|_| jiff::Timestamp::now()),
        );
    }
    meta.resource_version = Some(seq.to_string().into());
}

fn spec_differs(a: &Resource, b: &Resource) -> bool {
    let strip = |r: &Resource| {
        let mut v = r.to_value();
        if let Some(m) = v.as_object_mut() {
            m.remove("status");
            m.remove("metadata");
        }
        v
    };
    strip(a) != strip(b)
}

#[cfg(test)]
mod search_tests;
#[cfg(test)]
mod tests;
