//! What subscriptions send: resource and cluster events with the sequence number they reflect,
//! and which part of a stream is opened.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use async_graphql::{Enum, SimpleObject};

use crate::graphql::types::{Node, to_node};
use crate::model::Resource;

/// Which part of a subscription's stream is opened. Async-graphql's served root opens the whole
/// stream; our executor opens the parts apart, so that subscribers of the same document and
/// variables share one render of every change (`executor`'s hubs) and each renders only its own
/// beginning.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Mode {
    /// The opening, then every change.
    #[default]
    Whole,
    /// Only what happens from now on: the changes (an aggregate: its value now, then each new
    /// one). A subscriber that overflowed is told by a RESYNC event (the hub's, for all).
    Live,
    /// Only the opening: the snapshot and `SYNCED` (with `snapshot: true`), the cluster or the
    /// value as it is now; the stream ends there.
    Opening,
    /// What a subscriber that missed changes gets: `RESYNC`, the snapshot and `SYNCED` (a
    /// cluster: as it is now, marked RESYNC; an aggregate: its value now); then it ends.
    Resync,
}

/// Where an [`Mode::Opening`] or [`Mode::Resync`] stream leaves off: the sequence number of the
/// snapshot it read. Changes after it are the subscriber's; those up to it are in its opening.
#[derive(Default, Debug)]
pub struct After(pub std::sync::atomic::AtomicU64);

impl After {
    pub(crate) fn note(after: Option<&Arc<After>>, seq: u64) {
        if let Some(a) = after {
            a.0.store(seq, Ordering::Release);
        }
    }
}

/// An event with the store's sequence number it reflects (for an aggregate: of the snapshot it
/// was computed from).
#[derive(Clone, Debug, PartialEq)]
pub struct Seq<T> {
    /// The store's sequence number.
    pub seq: u64,
    /// The event.
    pub event: T,
}

impl<T> Seq<T> {
    /// `event` at sequence `seq`.
    pub fn new(seq: u64, event: T) -> Self {
        Seq { seq, event }
    }

    /// The same sequence number with the event changed by `f`.
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Seq<U> {
        Seq::new(self.seq, f(self.event))
    }
}

/// What an event says.
#[derive(Enum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResourceEventType {
    /// The object appeared, or started matching the subscription's filter (or is part of the
    /// initial snapshot).
    Added,
    /// The object changed and still matches.
    Modified,
    /// The object went away, or stopped matching the filter; `object` is its last state.
    Deleted,
    /// The snapshot is complete; later events are changes after `sequence`.
    Synced,
    /// The subscriber fell behind and missed changes: drop what you hold; a fresh snapshot
    /// (then `SYNCED`) follows.
    Resync,
}

/// One event of `resourceChanged`.
#[derive(SimpleObject, Clone)]
pub struct ResourceEvent {
    /// What happened.
    #[graphql(name = "type")]
    pub type_: ResourceEventType,
    /// The store's sequence number of the change (of the snapshot, for snapshot items and
    /// `SYNCED`).
    pub sequence: u64,
    /// The kind, namespace and name (null for `SYNCED`/`RESYNC`).
    pub kind: Option<String>,
    /// Namespace (empty for cluster-scoped kinds).
    pub namespace: Option<String>,
    /// Name.
    pub name: Option<String>,
    /// The object (its last state for `DELETED`).
    pub object: Option<Node>,
}

impl ResourceEvent {
    pub(super) fn marker(type_: ResourceEventType, sequence: u64) -> Self {
        ResourceEvent {
            type_,
            sequence,
            kind: None,
            namespace: None,
            name: None,
            object: None,
        }
    }

    pub(super) fn of(type_: ResourceEventType, sequence: u64, r: &Arc<Resource>) -> Self {
        ResourceEvent {
            type_,
            sequence,
            kind: Some(r.kind().name().to_string()),
            namespace: Some(r.namespace().to_string()),
            name: Some(r.name().to_string()),
            object: Some(to_node(r.clone())),
        }
    }
}

/// One event of `clusterChanged`: the cluster as it is now, and the change that triggered it.
#[derive(SimpleObject, Clone)]
pub struct ClusterEvent {
    /// Sequence number of the triggering change (of the snapshot for the first event).
    pub sequence: u64,
    /// The cluster now (its pipeline, diagnosis, machines, … resolve against the live graph);
    /// null once it is deleted.
    pub cluster: Option<crate::graphql::types::ClusterObj>,
    /// What changed: the cluster itself or a related object (null for the first event).
    pub changed: Option<ResourceEvent>,
}
