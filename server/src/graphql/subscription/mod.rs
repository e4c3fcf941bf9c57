//! Subscriptions backed by the store's change stream (one stream in process, fanned out).
//!
//! Snapshot-then-stream: the subscription listens to the change stream *before* reading the
//! snapshot, sends the snapshot's matching objects, a `SYNCED` marker carrying the snapshot's
//! sequence number, then every later change with a greater sequence number: no gap and no
//! duplicate across the boundary. A subscriber that falls further behind than the change stream
//! holds gets `RESYNC` followed by a fresh snapshot (and `SYNCED`), never unbounded memory.

pub mod executor;
pub mod fanout;

use crate::error::ErrorCode;
use std::sync::Arc;

use async_graphql::{Context, Enum, SimpleObject, Subscription};
use futures::{Stream, StreamExt};
use tokio::sync::broadcast;

use std::sync::atomic::Ordering;

use crate::graphql::paging::{CompiledFilter, Filter, bad_input};
use crate::graphql::types::{Node, to_node};
use crate::model::{Kind, Resource};
use crate::store::{Change, ChangeType, Snapshot, Store};
use fanout::{Fanout, Subscriber};

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
    fn note(after: Option<&Arc<After>>, seq: u64) {
        if let Some(a) = after {
            a.0.store(seq, Ordering::Release);
        }
    }
}

/// An event with the store's sequence number it reflects (for an aggregate: of the snapshot it
/// was computed from).
pub type Seq<T> = (u64, T);

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
    fn marker(type_: ResourceEventType, sequence: u64) -> Self {
        ResourceEvent {
            type_,
            sequence,
            kind: None,
            namespace: None,
            name: None,
            object: None,
        }
    }

    fn of(type_: ResourceEventType, sequence: u64, r: &Arc<Resource>) -> Self {
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

/// Subscription metrics (registered by `http::Metrics`; absent when printing the SDL).
#[derive(Clone, Debug)]
pub struct SubscriptionMetrics {
    /// Active subscriptions by field.
    pub active: prometheus::IntGaugeVec,
    /// Events delivered by field.
    pub events: prometheus::IntCounterVec,
    /// RESYNCs sent by field.
    pub resyncs: prometheus::IntCounterVec,
    /// Subscriptions whose queue overflowed (they owe a RESYNC).
    pub overflows: prometheus::IntCounter,
    /// Shared streams open: one per distinct document and variables.
    pub shared: prometheus::IntGauge,
    /// Events rendered by shared streams (once per event, however many subscribers).
    pub renders: prometheus::IntCounter,
}

impl SubscriptionMetrics {
    /// Create (not yet registered).
    pub fn new() -> Result<Self, prometheus::Error> {
        use prometheus::Opts;
        Ok(SubscriptionMetrics {
            active: prometheus::IntGaugeVec::new(
                Opts::new(
                    "vitistack_subscriptions_active",
                    "Active GraphQL subscriptions by field",
                ),
                &["field"],
            )?,
            events: prometheus::IntCounterVec::new(
                Opts::new(
                    "vitistack_subscription_events_total",
                    "Subscription events delivered by field",
                ),
                &["field"],
            )?,
            resyncs: prometheus::IntCounterVec::new(
                Opts::new(
                    "vitistack_subscription_resyncs_total",
                    "RESYNC events sent to subscribers that fell behind, by field",
                ),
                &["field"],
            )?,
            overflows: prometheus::IntCounter::new(
                "vitistack_subscription_overflows_total",
                "Times a subscription's queue (SUBSCRIPTION_BUFFER) overflowed because its reader fell behind",
            )?,
            shared: prometheus::IntGauge::new(
                "vitistack_subscription_shared_streams",
                "Shared subscription streams open: one per distinct document and variables, rendering each event once for all its subscribers",
            )?,
            renders: prometheus::IntCounter::new(
                "vitistack_subscription_renders_total",
                "Events rendered by shared subscription streams (once per event, however many subscribers)",
            )?,
        })
    }
}

/// The metrics a stream counts in: only a whole stream's (our executor's subscribers count
/// their own: a shared stream is one for many of them).
fn counted(ctx: &Context<'_>) -> Option<SubscriptionMetrics> {
    if ctx.data_opt::<Mode>().copied().unwrap_or_default() == Mode::Whole {
        ctx.data_opt::<SubscriptionMetrics>().cloned()
    } else {
        None
    }
}

/// Counts one active subscription while it lives (also when the socket drops without `complete`).
pub(crate) struct Active {
    metrics: Option<SubscriptionMetrics>,
    field: &'static str,
}

impl Active {
    pub(crate) fn new(metrics: Option<SubscriptionMetrics>, field: &'static str) -> Self {
        if let Some(m) = &metrics {
            m.active.with_label_values(&[field]).inc();
        }
        Active { metrics, field }
    }

    pub(crate) fn event(&self, resync: bool) {
        if let Some(m) = &self.metrics {
            m.events.with_label_values(&[self.field]).inc();
            if resync {
                m.resyncs.with_label_values(&[self.field]).inc();
            }
        }
    }
}

impl Drop for Active {
    fn drop(&mut self) {
        if let Some(m) = &self.metrics {
            m.active.with_label_values(&[self.field]).dec();
        }
    }
}

/// Which objects a subscription wants.
#[derive(Clone, Default)]
struct Interest {
    kinds: Option<Vec<Kind>>,
    filter: CompiledFilter,
}

impl Interest {
    fn matches(&self, r: &Resource) -> bool {
        self.kinds.as_ref().is_none_or(|ks| ks.contains(&r.kind())) && self.filter.matches(r)
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
struct SnapshotCursor {
    snap: Arc<Snapshot>,
    kinds: Vec<Kind>,
    kind: usize,
    after: Option<crate::store::Key>,
}

impl SnapshotCursor {
    fn new(snap: Arc<Snapshot>, interest: &Interest) -> Self {
        SnapshotCursor {
            snap,
            kinds: interest.kinds.clone().unwrap_or_else(|| Kind::ALL.to_vec()),
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
                    self.after = Some(crate::store::Key::of(&r));
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

struct State {
    store: Arc<Store>,
    /// The fan-out's queue (none for an opening, which reads only a snapshot).
    sub: Option<Subscriber>,
    interest: Arc<Interest>,
    /// Changes up to here are already reflected (the snapshot's sequence).
    after: u64,
    /// The snapshot being sent, then SYNCED.
    cursor: Option<SnapshotCursor>,
    /// RESYNC to send first ([`Mode::Resync`]).
    resync: Option<u64>,
    mode: Mode,
    active: Active,
}

/// The fan-out a subscription registers with (served by the app; absent when printing the SDL).
fn fanout(ctx: &Context<'_>) -> async_graphql::Result<Arc<Fanout>> {
    ctx.data_opt::<Arc<Fanout>>()
        .cloned()
        .ok_or_else(|| async_graphql::Error::new("subscriptions are not served by this schema"))
}

/// Snapshot (optional) then every matching change, with RESYNC on overflow; `mode` picks the
/// part (see [`Mode`]).
fn changes(
    store: Arc<Store>,
    fanout: &Fanout,
    interest: Interest,
    snapshot: bool,
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
    let snapshot = match mode {
        Mode::Whole | Mode::Opening => snapshot,
        Mode::Live => false,
        Mode::Resync => true,
    };
    let state = State {
        after: snap.seq(),
        resync: (mode == Mode::Resync).then(|| snap.seq()),
        cursor: snapshot.then(|| SnapshotCursor::new(snap, &interest)),
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
                return Some(((seq, ev), st));
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
                return Some(((ev.sequence, ev), st));
            }
            let sub = st.sub.as_mut()?;
            if sub.overflowed.swap(false, Ordering::AcqRel) {
                // Changes were dropped for this subscriber: start over from a fresh snapshot
                // (a shared stream only says so: each of its subscribers reads its own).
                while sub.rx.try_recv().is_ok() {}
                let snap = st.store.snapshot();
                st.after = snap.seq();
                if st.mode == Mode::Whole {
                    st.cursor = Some(SnapshotCursor::new(snap.clone(), &st.interest));
                }
                st.active.event(true);
                return Some((
                    (
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
                    return Some(((c.seq, ResourceEvent::of(t, c.seq, &c.object)), st));
                }
                Some(None) => continue, // look at the overflow flag
                None => return None,
            }
        }
    })
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

/// What decides whether a change concerns a cluster: its identity and the references it has now
/// (read from the graph at each change, so a renamed NetworkNamespace reference is followed).
#[derive(Clone, Debug, PartialEq, Eq)]
struct ClusterRefs {
    namespace: String,
    name: String,
    cluster_id: String,
    network_namespace: String,
}

impl ClusterRefs {
    fn of(kc: &crate::model::KubernetesCluster) -> Self {
        ClusterRefs {
            namespace: kc.metadata.namespace.clone().unwrap_or_default(),
            name: kc.metadata.name.clone().unwrap_or_default(),
            cluster_id: kc.spec.data.cluster_id.clone(),
            network_namespace: kc.spec.data.network_namespace_name.clone(),
        }
    }
}

/// True when `r` is the cluster or one of its objects: matched by exact names and label values
/// (never by prefix: cluster `t-1` is not `t-10`). A NetworkConfiguration belongs to the cluster
/// through its clusterid label, or through the Machine it is for (same name, or its
/// `vitistack.io/source-machine` label) when that Machine is the cluster's in `snap`.
fn related(r: &Resource, refs: &ClusterRefs, snap: &Snapshot) -> bool {
    if r.namespace() != refs.namespace {
        return false;
    }
    let id = refs.cluster_id.as_str();
    let labelled = r.label(crate::model::LABEL_CLUSTER_ID) == Some(id);
    match r {
        Resource::KubernetesCluster(_) => r.name() == refs.name,
        Resource::NetworkNamespace(_) | Resource::NetworkNamespaceV2(_) => {
            r.name() == refs.network_namespace
        }
        Resource::ControlPlaneVirtualSharedIp(_) => r.name() == id || labelled,
        Resource::Machine(_) => labelled,
        Resource::NetworkConfiguration(_) => {
            labelled || {
                let machine = r
                    .label(crate::model::LABEL_SOURCE_MACHINE)
                    .unwrap_or(r.name());
                snap.get(Kind::Machine, &refs.namespace, machine)
                    .is_some_and(|m| m.label(crate::model::LABEL_CLUSTER_ID) == Some(id))
            }
        }
        Resource::EtcdBackup(b) => {
            labelled || b.spec.cluster_name == refs.name || b.spec.cluster_name == id
        }
        Resource::ClusterStorage(c) => labelled || c.spec.cluster_id == id,
        _ => false,
    }
}

/// An aggregate of the graph, sent first as it is, then again after changes settle (`debounce`)
/// and only when its value changed; `mode` picks the part (an opening is the first value only).
fn aggregate<T, F>(
    store: Arc<Store>,
    debounce: std::time::Duration,
    active: Active,
    compute: F,
    mode: Mode,
    after: Option<&Arc<After>>,
) -> futures::stream::BoxStream<'static, Seq<T>>
where
    T: PartialEq + Clone + Send + 'static,
    F: Fn(&Snapshot) -> T + Send + 'static,
{
    let rx = store.subscribe();
    let snap = store.snapshot();
    After::note(after, snap.seq());
    let first = (snap.seq(), compute(&snap));
    drop(snap);
    active.event(false);
    let state = (rx, store, active, compute, first.1.clone());
    let rest = futures::stream::unfold(
        state,
        move |(mut rx, store, active, compute, last)| async move {
            loop {
                // Wait for a change, then let the burst settle.
                match rx.recv().await {
                    Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
                    Err(broadcast::error::RecvError::Closed) => return None,
                }
                tokio::time::sleep(debounce).await;
                // Drain what arrived meanwhile: one recomputation covers it all.
                while let Ok(_) | Err(broadcast::error::TryRecvError::Lagged(_)) = rx.try_recv() {}
                let snap = store.snapshot();
                let now = compute(&snap);
                if now != last {
                    active.event(false);
                    return Some(((snap.seq(), now.clone()), (rx, store, active, compute, now)));
                }
            }
        },
    );
    let first = futures::stream::once(async move { first });
    match mode {
        Mode::Opening | Mode::Resync => first.boxed(),
        Mode::Whole | Mode::Live => first.chain(rest).boxed(),
    }
}

fn debounce_of(ms: u32) -> async_graphql::Result<std::time::Duration> {
    if !(10..=60_000).contains(&ms) {
        return Err(bad_input(
            ErrorCode::BadDebounce,
            format!("debounceMs must be between 10 and 60000, not {ms}"),
        ));
    }
    Ok(std::time::Duration::from_millis(u64::from(ms)))
}

/// The cluster `key` as it is in `snap`, as an event of `clusterChanged`.
fn cluster_now(
    snap: &Snapshot,
    key: &crate::store::Key,
    changed: Option<ResourceEvent>,
) -> Seq<ClusterEvent> {
    let ev = ClusterEvent {
        sequence: snap.seq(),
        cluster: snap
            .get_key(key)
            .cloned()
            .and_then(crate::graphql::types::ClusterObj::new),
        changed,
    };
    (snap.seq(), ev)
}

/// `clusterChanged`: the cluster now, then again on every change to it or its objects; `mode`
/// picks the part.
fn cluster_changed(
    ctx: &Context<'_>,
    id: async_graphql::ID,
    mode: Mode,
) -> async_graphql::Result<futures::stream::BoxStream<'static, Seq<ClusterEvent>>> {
    let key = crate::graphql::types::decode_id(&id)
        .map_err(|e| bad_input(ErrorCode::BadId, e.to_string()))?;
    if key.kind != Kind::KubernetesCluster {
        return Err(bad_input(
            ErrorCode::BadId,
            format!("{id:?} is a {}, not a KubernetesCluster", key.kind),
        ));
    }
    let store = ctx.data_unchecked::<Arc<Store>>().clone();
    let active = Active::new(counted(ctx), "clusterChanged");
    let rx = store.subscribe();
    let snap = store.snapshot();
    let current = snap.get_key(&key).cloned();
    let Some(Resource::KubernetesCluster(kc)) = current.as_deref() else {
        return Err(bad_input(
            ErrorCode::NotFound,
            format!("no KubernetesCluster {key}"),
        ));
    };
    let refs = ClusterRefs::of(kc);
    After::note(ctx.data_opt::<Arc<After>>(), snap.seq());
    let after = snap.seq();
    let first = match mode {
        Mode::Whole | Mode::Opening => Some(cluster_now(&snap, &key, None)),
        Mode::Resync => Some(cluster_now(
            &snap,
            &key,
            Some(ResourceEvent::marker(ResourceEventType::Resync, snap.seq())),
        )),
        Mode::Live => None,
    };
    drop(snap);
    if first.is_some() {
        active.event(mode == Mode::Resync);
    }
    let first = futures::stream::iter(first);
    if matches!(mode, Mode::Opening | Mode::Resync) {
        return Ok(first.boxed());
    }
    Ok(first
        .chain(futures::stream::unfold(
            (rx, store, active, after, refs),
            move |(mut rx, store, active, after, mut refs)| {
                let key = key.clone();
                async move {
                    loop {
                        match rx.recv().await {
                            Ok(c) if c.seq > after => {
                                let snap = store.snapshot();
                                // The cluster's references as of this change (followed through
                                // the stream, in order): a renamed NetworkNamespace reference is
                                // followed from the change that renames it on.
                                if let Resource::KubernetesCluster(kc) = c.object.as_ref()
                                    && crate::store::Key::of(&c.object) == key
                                    && c.change != ChangeType::Deleted
                                {
                                    refs = ClusterRefs::of(kc);
                                }
                                let concerns = related(&c.object, &refs, &snap)
                                    || c.previous
                                        .as_deref()
                                        .is_some_and(|p| related(p, &refs, &snap));
                                if !concerns {
                                    continue;
                                }
                                let t = match c.change {
                                    ChangeType::Added => ResourceEventType::Added,
                                    ChangeType::Modified => ResourceEventType::Modified,
                                    ChangeType::Deleted => ResourceEventType::Deleted,
                                };
                                active.event(false);
                                let changed = ResourceEvent::of(t, c.seq, &c.object);
                                let (_, mut ev) = cluster_now(&snap, &key, Some(changed));
                                ev.sequence = c.seq;
                                return Some(((c.seq, ev), (rx, store, active, after, refs)));
                            }
                            Ok(_) => continue,
                            Err(broadcast::error::RecvError::Lagged(_)) => {
                                // Missed some changes: send the cluster as it is now.
                                active.event(true);
                                let snap = store.snapshot();
                                let ev = cluster_now(
                                    &snap,
                                    &key,
                                    Some(ResourceEvent::marker(
                                        ResourceEventType::Resync,
                                        snap.seq(),
                                    )),
                                );
                                return Some((ev, (rx, store, active, snap.seq(), refs)));
                            }
                            Err(broadcast::error::RecvError::Closed) => return None,
                        }
                    }
                }
            },
        ))
        .boxed())
}

/// The streams behind the `Subscription` fields: one constructor per field, shared by the served
/// `Subscription` type (its SDL and introspection) and by our executor (`executor`), so the
/// two cannot drift apart.
pub(crate) mod open {
    use super::*;
    use futures::stream::BoxStream;

    type Opened<T> = async_graphql::Result<BoxStream<'static, Seq<T>>>;

    /// The part asked for (the served root asks for the whole stream).
    fn mode(ctx: &Context<'_>) -> Mode {
        ctx.data_opt::<Mode>().copied().unwrap_or_default()
    }

    pub(crate) fn resource_changed(
        ctx: &Context<'_>,
        kinds: Option<Vec<String>>,
        namespace: Option<String>,
        label_selector: Option<String>,
        snapshot: bool,
    ) -> Opened<ResourceEvent> {
        let kinds = kinds
            .map(|ks| {
                ks.iter()
                    .map(|k| k.parse::<Kind>())
                    .collect::<Result<Vec<_>, _>>()
            })
            .transpose()
            .map_err(|e| bad_input(ErrorCode::BadKind, e.to_string()))?;
        let filter = CompiledFilter::new(&Filter {
            namespace,
            label_selector,
            ..Default::default()
        })?;
        let store = ctx.data_unchecked::<Arc<Store>>().clone();
        let active = Active::new(counted(ctx), "resourceChanged");
        let fanout = fanout(ctx)?;
        Ok(changes(
            store,
            &fanout,
            Interest { kinds, filter },
            snapshot,
            active,
            mode(ctx),
            ctx.data_opt::<Arc<After>>(),
        )
        .boxed())
    }

    pub(crate) fn machine_changed(
        ctx: &Context<'_>,
        filter: Option<Filter>,
        cluster_id: Option<String>,
        snapshot: bool,
    ) -> Opened<ResourceEvent> {
        let mut filter = filter.unwrap_or_default();
        if let Some(id) = cluster_id {
            let by_cluster = format!("{}={id}", crate::model::LABEL_CLUSTER_ID);
            filter.label_selector = Some(match filter.label_selector.take() {
                Some(sel) if !sel.trim().is_empty() => format!("{sel},{by_cluster}"),
                _ => by_cluster,
            });
        }
        let filter = CompiledFilter::new(&filter)?;
        let store = ctx.data_unchecked::<Arc<Store>>().clone();
        let fanout = fanout(ctx)?;
        let active = Active::new(counted(ctx), "machineChanged");
        Ok(changes(
            store,
            &fanout,
            Interest {
                kinds: Some(vec![Kind::Machine]),
                filter,
            },
            snapshot,
            active,
            mode(ctx),
            ctx.data_opt::<Arc<After>>(),
        )
        .boxed())
    }

    pub(crate) fn infrastructure_summary(
        ctx: &Context<'_>,
        debounce_ms: u32,
    ) -> Opened<crate::graphql::query::InfrastructureSummary> {
        let debounce = debounce_of(debounce_ms)?;
        let store = ctx.data_unchecked::<Arc<Store>>().clone();
        let active = Active::new(counted(ctx), "infrastructureSummary");
        Ok(aggregate(
            store,
            debounce,
            active,
            crate::graphql::query::infrastructure_summary,
            mode(ctx),
            ctx.data_opt::<Arc<After>>(),
        ))
    }

    pub(crate) fn hosts_changed(
        ctx: &Context<'_>,
        debounce_ms: u32,
    ) -> Opened<crate::graphql::types::HostCapacity> {
        let debounce = debounce_of(debounce_ms)?;
        let store = ctx.data_unchecked::<Arc<Store>>().clone();
        let o = ctx
            .data_opt::<crate::domain::hosts::Overcommit>()
            .copied()
            .unwrap_or_default();
        let active = Active::new(counted(ctx), "hostsChanged");
        Ok(aggregate(
            store,
            debounce,
            active,
            move |s| crate::graphql::types::host_capacity(s, o),
            mode(ctx),
            ctx.data_opt::<Arc<After>>(),
        ))
    }

    pub(crate) fn cluster_changed(
        ctx: &Context<'_>,
        id: async_graphql::ID,
    ) -> Opened<ClusterEvent> {
        super::cluster_changed(ctx, id, mode(ctx))
    }
}

/// The events of a stream, without the sequence numbers our executor reads.
fn events<T: Send + 'static>(
    stream: futures::stream::BoxStream<'static, Seq<T>>,
) -> impl Stream<Item = T> + use<T> {
    stream.map(|(_, t)| t)
}

/// The Subscription root as served: its SDL, introspection and validation. Operations are run by
/// our executor (`executor`), which opens the same streams through [`open`].
#[derive(Default)]
pub struct SubscriptionRoot;

#[Subscription(name = "Subscription")]
impl SubscriptionRoot {
    /// Changes to objects of the given kinds (all when omitted), in one namespace and/or
    /// matching a label selector. With `snapshot: true` the current matching objects come first
    /// (as ADDED), then `SYNCED`, then every later change; no gap and no duplicate.
    async fn resource_changed(
        &self,
        ctx: &Context<'_>,
        kinds: Option<Vec<String>>,
        namespace: Option<String>,
        label_selector: Option<String>,
        #[graphql(default = false)] snapshot: bool,
    ) -> async_graphql::Result<impl Stream<Item = ResourceEvent> + use<>> {
        open::resource_changed(ctx, kinds, namespace, label_selector, snapshot).map(events)
    }

    /// Changes to Machines passing `filter` (namespace, phases, label selector, name search),
    /// kept as a live view: a Machine that starts passing the filter (e.g. its phase became one
    /// asked for) arrives as ADDED, one that stops passing as DELETED. With `snapshot: true` the
    /// matching Machines come first, then `SYNCED`, then every later change; no gap and no
    /// duplicate. `clusterId` limits it to one cluster's Machines (`vitistack.io/clusterid`).
    async fn machine_changed(
        &self,
        ctx: &Context<'_>,
        filter: Option<Filter>,
        cluster_id: Option<String>,
        #[graphql(default = false)] snapshot: bool,
    ) -> async_graphql::Result<impl Stream<Item = ResourceEvent> + use<>> {
        open::machine_changed(ctx, filter, cluster_id, snapshot).map(events)
    }

    /// The `infrastructure` summary: sent first, then after each burst of changes settles
    /// (`debounceMs`, default 250) and only when a number changed.
    async fn infrastructure_summary(
        &self,
        ctx: &Context<'_>,
        #[graphql(default = 250)] debounce_ms: u32,
    ) -> async_graphql::Result<
        impl Stream<Item = crate::graphql::query::InfrastructureSummary> + use<>,
    > {
        open::infrastructure_summary(ctx, debounce_ms).map(events)
    }

    /// `hostCapacity` (hosts, usage against limits, how many hosts can fail): sent first, then
    /// after each burst of changes settles and only when it changed.
    async fn hosts_changed(
        &self,
        ctx: &Context<'_>,
        #[graphql(default = 250)] debounce_ms: u32,
    ) -> async_graphql::Result<impl Stream<Item = crate::graphql::types::HostCapacity> + use<>>
    {
        open::hosts_changed(ctx, debounce_ms).map(events)
    }

    /// A cluster and everything that decides its state: sent first as it is now, then again
    /// whenever the cluster, its NetworkNamespace, Machines, NetworkConfigurations, VIP, storage
    /// or backups change (pipeline and diagnosis included). `id` is the cluster's global id.
    async fn cluster_changed(
        &self,
        ctx: &Context<'_>,
        id: async_graphql::ID,
    ) -> async_graphql::Result<impl Stream<Item = ClusterEvent> + use<>> {
        open::cluster_changed(ctx, id).map(events)
    }
}
