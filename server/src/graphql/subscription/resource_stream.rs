//! The stream of one subscription to objects: which objects it wants, its snapshot sent one
//! object at a time, then the changes after it from the fan-out (RESYNC when it falls behind).

use std::sync::Arc;
use std::sync::atomic::Ordering;

use async_graphql::Context;
use futures::Stream;

use super::events::{After, Mode, ResourceEvent, ResourceEventType, Seq};
use super::fanout::{Fanout, Subscriber};
use super::metrics::Active;
use crate::graphql::paging::CompiledFilter;
use crate::model::{Kind, Resource};
use crate::store::{Change, ChangeType, ScopedStore, Snapshot};

/// What a subscription sends before the changes: nothing, `SYNCED` alone (the sequence number its
/// changes come after: a client that reads with queries reads once more on it and misses
/// nothing), or the matching objects and then `SYNCED`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum First {
    Nothing,
    Synced,
    Snapshot,
}

impl First {
    /// The arguments `snapshot` and `synced`.
    pub(crate) fn of(snapshot: bool, synced: bool) -> First {
        match (snapshot, synced) {
            (true, _) => First::Snapshot,
            (false, true) => First::Synced,
            (false, false) => First::Nothing,
        }
    }
}

/// Which objects a subscription wants.
#[derive(Clone, Default)]
pub(super) struct Interest {
    pub(super) kinds: Option<Vec<Kind>>,
    pub(super) filter: CompiledFilter,
    /// What the subscriber may see (an object leaving it is DELETED to it): the scope of the
    /// store the stream reads.
    pub(super) scope: crate::store::Scope,
}

impl Interest {
    fn matches(&self, r: &Resource) -> bool {
        self.kinds.as_ref().is_none_or(|ks| ks.contains(&r.kind()))
            && self.scope.sees_object(r)
            && self.filter.matches(r)
    }

    /// What a change means to a subscriber holding the matching objects: an object that starts
    /// matching is ADDED, one that stops matching is DELETED, others are as they happened.
    fn event_type(&self, c: &Change) -> Option<ResourceEventType> {
        let now = self.matches(&c.object);
        let was = c.previous.as_ref().is_some_and(|p| self.matches(p));
        match (c.change, was, now) {
            (ChangeType::Deleted, _, true) | (ChangeType::Deleted, true, _) => {
                Some(ResourceEventType::Deleted)
            }
            (ChangeType::Added, _, true) | (ChangeType::Modified, false, true) => {
                Some(ResourceEventType::Added)
            }
            (ChangeType::Modified, true, true) => Some(ResourceEventType::Modified),
            (ChangeType::Modified, true, false) => Some(ResourceEventType::Deleted),
            _ => None,
        }
    }
}

/// Where a subscription is in sending a snapshot: the snapshot itself (immutable, shared with
/// every reader of that version) and the last object sent. Objects are read from the snapshot
/// one event at a time, so a subscription holds no copy of the objects it has still to send.
pub(super) struct SnapshotCursor {
    snap: Arc<Snapshot>,
    kinds: Vec<Kind>,
    kind: usize,
    after: Option<crate::store::ObjectKey>,
}

impl SnapshotCursor {
    /// A cursor over the objects `interest` wants (with `objects`; else over none: SYNCED alone).
    fn new(snap: Arc<Snapshot>, interest: &Interest, objects: bool) -> Self {
        SnapshotCursor {
            snap,
            kinds: match &interest.kinds {
                _ if !objects => Vec::new(),
                Some(kinds) => kinds.clone(),
                None => Kind::ALL.to_vec(),
            },
            kind: 0,
            after: None,
        }
    }

    /// The next matching object as an ADDED event; None once the snapshot is through.
    fn next(&mut self, interest: &Interest) -> Option<ResourceEvent> {
        while let Some(kind) = self.kinds.get(self.kind).copied() {
            let found = self
                .snap
                .list_after(kind, interest.filter.namespace(), self.after.as_ref())
                .find(|r| interest.matches(r))
                .cloned();
            match found {
                Some(r) => {
                    self.after = Some(crate::store::ObjectKey::of(&r));
                    return Some(ResourceEvent::of(
                        ResourceEventType::Added,
                        self.snap.seq(),
                        &r,
                    ));
                }
                None => {
                    self.kind += 1;
                    self.after = None;
                }
            }
        }
        None
    }
}

pub(super) struct State {
    store: ScopedStore,
    /// The fan-out's queue (none for an opening, which reads only a snapshot).
    sub: Option<Subscriber>,
    interest: Arc<Interest>,
    /// Changes up to here are already reflected (the snapshot's sequence).
    after: u64,
    /// The snapshot being sent (or none of it), then SYNCED.
    cursor: Option<SnapshotCursor>,
    /// RESYNC to send first ([`Mode::Resync`]).
    resync: Option<u64>,
    mode: Mode,
    active: Active,
}

/// The fan-out a subscription registers with (served by the app; absent when printing the SDL).
pub(super) fn fanout_of(ctx: &Context<'_>) -> async_graphql::Result<Arc<Fanout>> {
    ctx.data_opt::<Arc<Fanout>>()
        .cloned()
        .ok_or_else(|| async_graphql::Error::new("subscriptions are not served by this schema"))
}

/// `first` (nothing, SYNCED, or the snapshot and SYNCED) then every matching change, with RESYNC
/// on overflow; `mode` picks the part (see [`Mode`]).
pub(super) fn changes(
    store: ScopedStore,
    fanout: &Fanout,
    interest: Interest,
    first: First,
    active: Active,
    mode: Mode,
    after: Option<&Arc<After>>,
) -> impl Stream<Item = Seq<ResourceEvent>> + use<> {
    let interest = Arc::new(interest);
    let wants = interest.clone();
    // Register first, then read: nothing between the two can be missed.
    let sub = matches!(mode, Mode::Whole | Mode::Live).then(|| {
        fanout.register(
            interest.kinds.as_deref(),
            interest.filter.namespace(),
            move |c| wants.event_type(c).is_some(),
        )
    });
    let snap = store.snapshot();
    After::note(after, snap.seq());
    let first = match mode {
        Mode::Whole | Mode::Opening => first,
        Mode::Live => First::Nothing,
        Mode::Resync => First::Snapshot,
    };
    let state = State {
        after: snap.seq(),
        resync: (mode == Mode::Resync).then(|| snap.seq()),
        cursor: (first != First::Nothing)
            .then(|| SnapshotCursor::new(snap, &interest, first == First::Snapshot)),
        store,
        sub,
        interest,
        mode,
        active,
    };
    futures::stream::unfold(state, |mut st| async move {
        loop {
            if let Some(seq) = st.resync.take() {
                st.active.event(true);
                let ev = ResourceEvent::marker(ResourceEventType::Resync, seq);
                return Some((Seq::new(seq, ev), st));
            }
            if let Some(cursor) = &mut st.cursor {
                st.active.event(false);
                let ev = match cursor.next(&st.interest) {
                    Some(ev) => ev,
                    None => {
                        let seq = cursor.snap.seq();
                        // Idle subscriptions hold no snapshot.
                        st.cursor = None;
                        ResourceEvent::marker(ResourceEventType::Synced, seq)
                    }
                };
                return Some((Seq::new(ev.sequence, ev), st));
            }
            let sub = st.sub.as_mut()?;
            if sub.overflowed.swap(false, Ordering::AcqRel) {
                // Changes were dropped for this subscriber: start over from a fresh snapshot
                // (a shared stream only says so: each of its subscribers reads its own).
                while sub.rx.try_recv().is_ok() {}
                let snap = st.store.snapshot();
                st.after = snap.seq();
                if st.mode == Mode::Whole {
                    st.cursor = Some(SnapshotCursor::new(snap.clone(), &st.interest, true));
                }
                st.active.event(true);
                return Some((
                    Seq::new(
                        snap.seq(),
                        ResourceEvent::marker(ResourceEventType::Resync, snap.seq()),
                    ),
                    st,
                ));
            }
            match sub.rx.recv().await {
                Some(Some(c)) => {
                    if c.seq <= st.after {
                        continue;
                    }
                    let Some(t) = st.interest.event_type(&c) else {
                        continue;
                    };
                    st.active.event(false);
                    return Some((Seq::new(c.seq, ResourceEvent::of(t, c.seq, &c.object)), st));
                }
                Some(None) => continue, // look at the overflow flag
                None => return None,
            }
        }
    })
}
