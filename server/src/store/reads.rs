//! Which objects a computation read from a snapshot, so that its result can be kept and reused on
//! a later snapshot exactly when every read would return the same objects there.
//!
//! A computation runs inside [`recording`]; while it runs, the snapshot's point reads (by key, by
//! uid, through an index) note what they returned. Reads that depend on a whole kind or on the
//! snapshot as such (listing a kind, counting, the derived aggregates, the sequence number) make
//! the recording inexact, and an inexact result is never reused. Objects are compared by
//! identity: an unchanged object is the same `Arc` in every later snapshot, and a changed one is
//! a new `Arc` (the recording keeps the old ones alive, so an address is never reused while it
//! is compared).
//!
//! The recording is per thread and lasts one synchronous call: a future records across its polls
//! by passing its [`Recording`] in each time (see [`recording`]), so other tasks on the thread
//! never write into it.

use std::cell::RefCell;
use std::sync::Arc;

use super::{Idx, ObjectKey, Snapshot};
use crate::model::{Datacenter, Resource};

/// One point read and what it returned.
#[derive(Debug)]
enum Read {
    Key(ObjectKey, Option<Arc<Resource>>),
    Uid(String, Option<Arc<Resource>>),
    Index(Idx, Datacenter, String, Vec<Arc<Resource>>),
}

fn same(a: Option<&Arc<Resource>>, b: Option<&Arc<Resource>>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => Arc::ptr_eq(a, b),
        (None, None) => true,
        _ => false,
    }
}

impl Read {
    /// True when the read returns the same objects in `snapshot`.
    fn holds(&self, snapshot: &Snapshot) -> bool {
        match self {
            Read::Key(key, seen) => same(snapshot.by_key.get(key), seen.as_ref()),
            Read::Uid(uid, seen) => same(snapshot.by_uid_untracked(uid), seen.as_ref()),
            Read::Index(idx, dc, value, seen) => {
                let mut now = snapshot.lookup_untracked(dc, *idx, value);
                seen.iter()
                    .all(|s| now.next().is_some_and(|n| Arc::ptr_eq(s, n)))
                    && now.next().is_none()
            }
        }
    }
}

/// The reads of a finished computation: its own and those of the computations it contained
/// (shared, not copied: a kept result's reads are part of every result that contains it).
#[derive(Debug, Default)]
pub struct ReadSet {
    own: Vec<Read>,
    nested: Vec<Arc<ReadSet>>,
}

impl ReadSet {
    /// True when every read returns the same objects in `snapshot`: a result computed from the
    /// reads is then what computing it on `snapshot` gives.
    pub fn holds(&self, snapshot: &Snapshot) -> bool {
        self.own.iter().all(|r| r.holds(snapshot)) && self.nested.iter().all(|n| n.holds(snapshot))
    }

    /// Number of reads, nested ones included.
    pub fn len(&self) -> usize {
        self.own.len() + self.nested.iter().map(|n| n.len()).sum::<usize>()
    }

    /// True when nothing was read.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A recording in progress.
#[derive(Debug, Default)]
pub struct Recording {
    reads: ReadSet,
    inexact: bool,
}

impl Recording {
    /// The reads, or None when something was read that point reads cannot describe.
    pub fn finish(self) -> Option<ReadSet> {
        (!self.inexact).then_some(self.reads)
    }

    /// Count a contained computation's reads as this one's (a result reused inside it).
    pub fn include(&mut self, reads: Arc<ReadSet>) {
        if !self.inexact {
            self.reads.nested.push(reads);
        }
    }

    /// Mark the recording inexact.
    pub fn spoil(&mut self) {
        self.inexact = true;
        self.reads = ReadSet::default();
    }
}

thread_local! {
    static ACTIVE: RefCell<Vec<Recording>> = const { RefCell::new(Vec::new()) };
}

/// Run `f` with `recording` active on this thread (nested inside any recording already active)
/// and give it back with what `f` read added.
pub fn recording<R>(recording: Recording, f: impl FnOnce() -> R) -> (R, Recording) {
    // Pops this recording even when `f` unwinds, so a panic cannot leave it on the thread.
    struct Unwind(usize);
    impl Drop for Unwind {
        fn drop(&mut self) {
            ACTIVE.with_borrow_mut(|stack| stack.truncate(self.0));
        }
    }
    let depth = ACTIVE.with_borrow_mut(|stack| {
        stack.push(recording);
        stack.len() - 1
    });
    let unwind = Unwind(depth);
    let r = f();
    let back = ACTIVE.with_borrow_mut(|stack| (stack.len() == depth + 1).then(|| stack.pop()));
    drop(unwind);
    let recording = back.flatten().unwrap_or_else(|| {
        let mut spoiled = Recording::default();
        spoiled.spoil();
        spoiled
    });
    (r, recording)
}

/// Count a finished computation's reads as the active recording's (a result reused, or computed
/// inside it).
pub fn include(reads: Arc<ReadSet>) {
    ACTIVE.with_borrow_mut(|stack| {
        if let Some(top) = stack.last_mut() {
            top.include(reads);
        }
    });
}

/// True when a recording is active on this thread (reads then cost a note).
fn active() -> bool {
    ACTIVE.with_borrow(|stack| !stack.is_empty())
}

fn note(read: impl FnOnce() -> Read) {
    if !active() {
        return;
    }
    let read = read();
    ACTIVE.with_borrow_mut(|stack| {
        if let Some(top) = stack.last_mut()
            && !top.inexact
        {
            top.reads.own.push(read);
        }
    });
}

/// Note a read by key (from [`Snapshot::get`]).
pub(super) fn note_key(key: impl FnOnce() -> ObjectKey, found: Option<&Arc<Resource>>) {
    note(|| Read::Key(key(), found.cloned()));
}

/// Note a read by uid.
pub(super) fn note_uid(uid: &str, found: Option<&Arc<Resource>>) {
    note(|| Read::Uid(uid.to_owned(), found.cloned()));
}

/// Note a read through an index.
pub(super) fn note_index(snapshot: &Snapshot, datacenter: &Datacenter, idx: Idx, value: &str) {
    note(|| {
        Read::Index(
            idx,
            datacenter.clone(),
            value.to_owned(),
            snapshot
                .lookup_untracked(datacenter, idx, value)
                .cloned()
                .collect(),
        )
    });
}

/// Note a read that point reads cannot describe (a whole kind, a count, derived state, the
/// clock): the active recording becomes inexact.
pub fn note_inexact() {
    if !active() {
        return;
    }
    ACTIVE.with_borrow_mut(|stack| {
        if let Some(top) = stack.last_mut() {
            top.spoil();
        }
    });
}
