//! Subscriptions backed by the store's change stream (one stream in process, fanned out).
//!
//! Snapshot-then-stream: the subscription listens to the change stream *before* reading the
//! snapshot, sends the snapshot's matching objects, a `SYNCED` marker carrying the snapshot's
//! sequence number, then every later change with a greater sequence number: no gap and no
//! duplicate across the boundary. A subscriber that falls further behind than the change stream
//! holds gets `RESYNC` followed by a fresh snapshot (and `SYNCED`), never unbounded memory.

pub mod executor;
pub mod fanout;

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
        })
    }
}

/// Counts one active subscription while it lives (also when the socket drops without `complete`).
struct Active {
    metrics: Option<SubscriptionMetrics>,
    field: &'static str,
}

impl Active {
    fn new(metrics: Option<SubscriptionMetrics>, field: &'static str) -> Self {
        if let Some(m) = &metrics {
            m.active.with_label_values(&[field]).inc();
        }
        Active { metrics, field }
    }

    fn event(&self, resync: bool) {
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
    sub: Subscriber,
    interest: Arc<Interest>,
    /// Changes up to here are already reflected (the snapshot's sequence).
    after: u64,
    /// The snapshot being sent, then SYNCED.
    cursor: Option<SnapshotCursor>,
    active: Active,
}

/// The fan-out a subscription registers with (served by the app; absent when printing the SDL).
fn fanout(ctx: &Context<'_>) -> async_graphql::Result<Arc<Fanout>> {
    ctx.data_opt::<Arc<Fanout>>()
        .cloned()
        .ok_or_else(|| async_graphql::Error::new("subscriptions are not served by this schema"))
}

/// Snapshot (optional) then every matching change, with RESYNC on overflow.
fn changes(
    store: Arc<Store>,
    fanout: &Fanout,
    interest: Interest,
    snapshot: bool,
    active: Active,
) -> impl Stream<Item = ResourceEvent> + use<> {
    let interest = Arc::new(interest);
    let wants = interest.clone();
    // Register first, then read: nothing between the two can be missed.
    let sub = fanout.register(
        interest.kinds.as_deref(),
        interest.filter.namespace(),
        move |c| wants.event_type(c).is_some(),
    );
    let snap = store.snapshot();
    let state = State {
        after: snap.seq(),
        cursor: snapshot.then(|| SnapshotCursor::new(snap, &interest)),
        store,
        sub,
        interest,
        active,
    };
    futures::stream::unfold(state, |mut st| async move {
        loop {
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
                return Some((ev, st));
            }
            if st.sub.overflowed.swap(false, Ordering::AcqRel) {
                // Changes were dropped for this subscriber: start over from a fresh snapshot.
                while st.sub.rx.try_recv().is_ok() {}
                let snap = st.store.snapshot();
                st.after = snap.seq();
                st.cursor = Some(SnapshotCursor::new(snap.clone(), &st.interest));
                st.active.event(true);
                return Some((
                    ResourceEvent::marker(ResourceEventType::Resync, snap.seq()),
                    st,
                ));
            }
            match st.sub.rx.recv().await {
                Some(Some(c)) => {
                    if c.seq <= st.after {
                        continue;
                    }
                    let Some(t) = st.interest.event_type(&c) else {
                        continue;
                    };
                    st.active.event(false);
                    return Some((ResourceEvent::of(t, c.seq, &c.object), st));
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
/// and only when its value changed.
fn aggregate<T, F>(
    store: Arc<Store>,
    debounce: std::time::Duration,
    active: Active,
    compute: F,
) -> impl Stream<Item = T>
where
    T: PartialEq + Clone + Send + 'static,
    F: Fn(&Snapshot) -> T + Send + 'static,
{
    let rx = store.subscribe();
    let first = compute(&store.snapshot());
    active.event(false);
    let state = (rx, store, active, compute, first.clone());
    futures::stream::once(async move { first }).chain(futures::stream::unfold(
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
                let now = compute(&store.snapshot());
                if now != last {
                    active.event(false);
                    return Some((now.clone(), (rx, store, active, compute, now)));
                }
            }
        },
    ))
}

fn debounce_of(ms: u32) -> async_graphql::Result<std::time::Duration> {
    if !(10..=60_000).contains(&ms) {
        return Err(bad_input(
            "BAD_DEBOUNCE",
            format!("debounceMs must be between 10 and 60000, not {ms}"),
        ));
    }
    Ok(std::time::Duration::from_millis(u64::from(ms)))
}

/// `clusterChanged`: the cluster now, then again on every change to it or its objects.
fn cluster_changed(
    ctx: &Context<'_>,
    id: async_graphql::ID,
) -> async_graphql::Result<impl Stream<Item = ClusterEvent> + use<>> {
    let key = crate::graphql::types::decode_id(&id).map_err(|e| bad_input("BAD_ID", e))?;
    if key.kind != Kind::KubernetesCluster {
        return Err(bad_input(
            "BAD_ID",
            format!("{id:?} is a {}, not a KubernetesCluster", key.kind),
        ));
    }
    let store = ctx.data_unchecked::<Arc<Store>>().clone();
    let active = Active::new(
        ctx.data_opt::<SubscriptionMetrics>().cloned(),
        "clusterChanged",
    );
    let rx = store.subscribe();
    let snap = store.snapshot();
    let current = snap.get_key(&key).cloned();
    let Some(Resource::KubernetesCluster(kc)) = current.as_deref() else {
        return Err(bad_input(
            "NOT_FOUND",
            format!("no KubernetesCluster {key}"),
        ));
    };
    let refs = ClusterRefs::of(kc);
    let first = ClusterEvent {
        sequence: snap.seq(),
        cluster: current
            .clone()
            .and_then(crate::graphql::types::ClusterObj::new),
        changed: None,
    };
    let after = snap.seq();
    active.event(false);
    let first = futures::stream::once(async move { first });
    Ok(first.chain(futures::stream::unfold(
        (rx, store, active, after, refs),
        move |(mut rx, store, active, after, mut refs)| {
            let key = key.clone();
            async move {
                loop {
                    match rx.recv().await {
                        Ok(c) if c.seq > after => {
                            let snap = store.snapshot();
                            // The cluster's references as of this change (followed through the
                            // stream, in order): a renamed NetworkNamespace reference is followed
                            // from the change that renames it on.
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
                            let ev = ClusterEvent {
                                sequence: c.seq,
                                cluster: snap
                                    .get_key(&key)
                                    .cloned()
                                    .and_then(crate::graphql::types::ClusterObj::new),
                                changed: Some(ResourceEvent::of(t, c.seq, &c.object)),
                            };
                            return Some((ev, (rx, store, active, after, refs)));
                        }
                        Ok(_) => continue,
                        Err(broadcast::error::RecvError::Lagged(_)) => {
                            // Missed some changes: send the cluster as it is now.
                            active.event(true);
                            let snap = store.snapshot();
                            let ev = ClusterEvent {
                                sequence: snap.seq(),
                                cluster: snap
                                    .get_key(&key)
                                    .cloned()
                                    .and_then(crate::graphql::types::ClusterObj::new),
                                changed: Some(ResourceEvent::marker(
                                    ResourceEventType::Resync,
                                    snap.seq(),
                                )),
                            };
                            return Some((ev, (rx, store, active, snap.seq(), refs)));
                        }
                        Err(broadcast::error::RecvError::Closed) => return None,
                    }
                }
            }
        },
    )))
}

/// The streams behind the `Subscription` fields: one constructor per field, shared by the served
/// `Subscription` type (its SDL and introspection) and by our executor (`executor`), so the
/// two cannot drift apart.
pub(crate) mod open {
    use super::*;
    use futures::stream::BoxStream;

    type Opened<T> = async_graphql::Result<BoxStream<'static, T>>;

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
            .map_err(|e| bad_input("BAD_KIND", e))?;
        let filter = CompiledFilter::new(&Filter {
            namespace,
            label_selector,
            ..Default::default()
        })?;
        let store = ctx.data_unchecked::<Arc<Store>>().clone();
        let active = Active::new(
            ctx.data_opt::<SubscriptionMetrics>().cloned(),
            "resourceChanged",
        );
        let fanout = fanout(ctx)?;
        Ok(changes(store, &fanout, Interest { kinds, filter }, snapshot, active).boxed())
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
        let active = Active::new(
            ctx.data_opt::<SubscriptionMetrics>().cloned(),
            "machineChanged",
        );
        Ok(changes(
            store,
            &fanout,
            Interest {
                kinds: Some(vec![Kind::Machine]),
                filter,
            },
            snapshot,
            active,
        )
        .boxed())
    }

    pub(crate) fn infrastructure_summary(
        ctx: &Context<'_>,
        debounce_ms: u32,
    ) -> Opened<crate::graphql::query::InfrastructureSummary> {
        let debounce = debounce_of(debounce_ms)?;
        let store = ctx.data_unchecked::<Arc<Store>>().clone();
        let active = Active::new(
            ctx.data_opt::<SubscriptionMetrics>().cloned(),
            "infrastructureSummary",
        );
        Ok(aggregate(
            store,
            debounce,
            active,
            crate::graphql::query::infrastructure_summary,
        )
        .boxed())
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
        let active = Active::new(
            ctx.data_opt::<SubscriptionMetrics>().cloned(),
            "hostsChanged",
        );
        Ok(aggregate(store, debounce, active, move |s| {
            crate::graphql::types::host_capacity(s, o)
        })
        .boxed())
    }

    pub(crate) fn cluster_changed(
        ctx: &Context<'_>,
        id: async_graphql::ID,
    ) -> Opened<ClusterEvent> {
        super::cluster_changed(ctx, id).map(StreamExt::boxed)
    }
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
        open::resource_changed(ctx, kinds, namespace, label_selector, snapshot)
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
        open::machine_changed(ctx, filter, cluster_id, snapshot)
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
        open::infrastructure_summary(ctx, debounce_ms)
    }

    /// `hostCapacity` (hosts, usage against limits, how many hosts can fail): sent first, then
    /// after each burst of changes settles and only when it changed.
    async fn hosts_changed(
        &self,
        ctx: &Context<'_>,
        #[graphql(default = 250)] debounce_ms: u32,
    ) -> async_graphql::Result<impl Stream<Item = crate::graphql::types::HostCapacity> + use<>>
    {
        open::hosts_changed(ctx, debounce_ms)
    }

    /// A cluster and everything that decides its state: sent first as it is now, then again
    /// whenever the cluster, its NetworkNamespace, Machines, NetworkConfigurations, VIP, storage
    /// or backups change (pipeline and diagnosis included). `id` is the cluster's global id.
    async fn cluster_changed(
        &self,
        ctx: &Context<'_>,
        id: async_graphql::ID,
    ) -> async_graphql::Result<impl Stream<Item = ClusterEvent> + use<>> {
        open::cluster_changed(ctx, id)
    }
}
