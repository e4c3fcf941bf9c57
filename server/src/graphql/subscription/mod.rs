//! Subscriptions backed by the store's change stream (one stream in process, fanned out).
//!
//! Snapshot-then-stream: the subscription listens to the change stream *before* reading the
//! snapshot, sends the snapshot's matching objects, a `SYNCED` marker carrying the snapshot's
//! sequence number, then every later change with a greater sequence number: no gap and no
//! duplicate across the boundary. A subscriber that falls further behind than the change stream
//! holds gets `RESYNC` followed by a fresh snapshot (and `SYNCED`), never unbounded memory.

mod aggregates;
pub mod applications;
mod cluster;
mod events;
pub mod executor;
pub mod fanout;
mod metrics;
mod resource_stream;

use aggregates::{aggregate, debounce_of};
use cluster::cluster_changed;
use metrics::counted;
pub(crate) use resource_stream::First;
use resource_stream::{Interest, changes, fanout_of};

pub use events::{After, ClusterEvent, Mode, ResourceEvent, ResourceEventType, Seq};
pub(crate) use metrics::Active;
pub use metrics::SubscriptionMetrics;

use crate::error::ErrorCode;
use std::sync::Arc;

use async_graphql::{Context, Subscription};
use futures::{Stream, StreamExt};

use crate::graphql::paging::{CompiledFilter, Filter};
use crate::model::Kind;
use crate::store::Store;

/// The streams behind the `Subscription` fields: one constructor per field, shared by the served
/// `Subscription` type (its SDL and introspection) and by our executor (`executor`), so the
/// two cannot drift apart.
pub(crate) mod open {
    use super::*;
    use futures::stream::BoxStream;

    type Opened<T> = async_graphql::Result<BoxStream<'static, Seq<T>>>;

    /// The store as the subscriber sees it (its scope: given by our executor, else the
    /// principal's).
    pub(crate) fn scoped(ctx: &Context<'_>) -> crate::store::ScopedStore {
        let store = ctx.data_unchecked::<Arc<Store>>().clone();
        crate::store::ScopedStore::new(store, crate::graphql::scope_of(ctx))
    }

    /// The part asked for (the served root asks for the whole stream).
    fn mode(ctx: &Context<'_>) -> Mode {
        ctx.data_opt::<Mode>().copied().unwrap_or_default()
    }

    pub(crate) fn resource_changed(
        ctx: &Context<'_>,
        kinds: Option<Vec<String>>,
        namespace: Option<String>,
        label_selector: Option<String>,
        first: First,
    ) -> Opened<ResourceEvent> {
        let kinds = kinds
            .map(|ks| {
                ks.iter()
                    .map(|k| k.parse::<Kind>())
                    .collect::<Result<Vec<_>, _>>()
            })
            .transpose()
            .map_err(|e| ErrorCode::BadKind.graphql(e.to_string()))?;
        let filter = CompiledFilter::new(&Filter {
            namespace,
            label_selector,
            ..Default::default()
        })?;
        let store = scoped(ctx);
        let scope = store.scope().clone();
        let active = Active::new(counted(ctx), "resourceChanged");
        let fanout = fanout_of(ctx)?;
        Ok(changes(
            store,
            &fanout,
            Interest {
                kinds,
                filter,
                scope,
            },
            first,
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
        first: First,
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
        let store = scoped(ctx);
        let scope = store.scope().clone();
        let fanout = fanout_of(ctx)?;
        let active = Active::new(counted(ctx), "machineChanged");
        Ok(changes(
            store,
            &fanout,
            Interest {
                kinds: Some(vec![Kind::Machine]),
                filter,
                scope,
            },
            first,
            active,
            mode(ctx),
            ctx.data_opt::<Arc<After>>(),
        )
        .boxed())
    }

    pub(crate) fn infrastructure_summary(
        ctx: &Context<'_>,
        debounce_ms: u32,
        datacenter: Option<String>,
    ) -> Opened<crate::domain::summary::InfrastructureSummary> {
        let debounce = debounce_of(debounce_ms)?;
        let store = scoped(ctx);
        let active = Active::new(counted(ctx), "infrastructureSummary");
        let dc = datacenter.map(|d| crate::model::Datacenter::new(&d));
        let inventory = ctx.data_opt::<Arc<crate::inventory::Inventory>>().cloned();
        let also = inventory.as_ref().map(|i| i.watch());
        let scope = store.scope().clone();
        Ok(aggregate(
            store,
            debounce,
            active,
            move |s| {
                let mut summary = match &dc {
                    // One datacenter's, by walking its objects (the aggregates are the fleet's),
                    // once per snapshot for every subscriber filtered to it.
                    Some(dc) => s.memo_keyed(dc.clone(), |s| {
                        crate::domain::summary::infrastructure_summary_in(s, Some(dc))
                    }),
                    None => crate::domain::summary::infrastructure_summary(s),
                };
                // Its application counts belong to its value: a change of them alone sends it.
                summary.application_counts = inventory
                    .as_ref()
                    .map(|i| i.snapshot().visible(&scope).counts_in(dc.as_ref()));
                summary
            },
            mode(ctx),
            ctx.data_opt::<Arc<After>>(),
            also,
        ))
    }

    pub(crate) fn hosts_changed(
        ctx: &Context<'_>,
        debounce_ms: u32,
        datacenter: Option<String>,
    ) -> Opened<crate::graphql::types::HostCapacity> {
        let debounce = debounce_of(debounce_ms)?;
        let store = scoped(ctx);
        let o = crate::graphql::types::overcommit(ctx);
        let active = Active::new(counted(ctx), "hostsChanged");
        let dc = datacenter.map(|d| crate::model::Datacenter::new(&d));
        Ok(aggregate(
            store,
            debounce,
            active,
            move |s| crate::graphql::types::host_capacity(s, o, dc.as_ref()),
            mode(ctx),
            ctx.data_opt::<Arc<After>>(),
            None,
        ))
    }

    pub(crate) fn application_changed(
        ctx: &Context<'_>,
        filter: Option<crate::graphql::applications::ApplicationFilter>,
        snapshot: bool,
    ) -> Opened<applications::ApplicationEvent> {
        let active = Active::new(counted(ctx), "applicationChanged");
        applications::application_changed(
            ctx,
            filter,
            snapshot,
            mode(ctx),
            ctx.data_opt::<Arc<After>>(),
            active,
        )
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
    stream.map(|s| s.event)
}

/// The Subscription root as served: its SDL, introspection and validation. Operations are run by
/// our executor (`executor`), which opens the same streams through [`open`].
#[derive(Default)]
pub struct SubscriptionRoot;

#[Subscription(name = "Subscription")]
impl SubscriptionRoot {
    /// Changes to objects of the given kinds (all when omitted), in one namespace and/or
    /// matching a label selector. With `snapshot: true` the current matching objects come first
    /// (as ADDED), then `SYNCED`, then every later change; no gap and no duplicate. With
    /// `synced: true` (and no snapshot) `SYNCED` alone comes first: the changes come after its
    /// `sequence`, so a client that reads with queries, and reads again on it, misses none.
    async fn resource_changed(
        &self,
        ctx: &Context<'_>,
        kinds: Option<Vec<String>>,
        namespace: Option<String>,
        label_selector: Option<String>,
        #[graphql(default = false)] snapshot: bool,
        #[graphql(default = false)] synced: bool,
    ) -> async_graphql::Result<impl Stream<Item = ResourceEvent> + use<>> {
        let first = First::of(snapshot, synced);
        open::resource_changed(ctx, kinds, namespace, label_selector, first).map(events)
    }

    /// Changes to Machines passing `filter` (namespace, phases, label selector, name search),
    /// kept as a live view: a Machine that starts passing the filter (e.g. its phase became one
    /// asked for) arrives as ADDED, one that stops passing as DELETED. With `snapshot: true` the
    /// matching Machines come first, then `SYNCED`, then every later change; no gap and no
    /// duplicate. `clusterId` limits it to one cluster's Machines (`vitistack.io/clusterid`).
    /// `synced: true` (and no snapshot): `SYNCED` alone first, as in `resourceChanged`.
    async fn machine_changed(
        &self,
        ctx: &Context<'_>,
        filter: Option<Filter>,
        cluster_id: Option<String>,
        #[graphql(default = false)] snapshot: bool,
        #[graphql(default = false)] synced: bool,
    ) -> async_graphql::Result<impl Stream<Item = ResourceEvent> + use<>> {
        let first = First::of(snapshot, synced);
        open::machine_changed(ctx, filter, cluster_id, first).map(events)
    }

    /// The `infrastructure` summary: sent first, then after each burst of changes settles
    /// (`debounceMs`, default 250) and only when a number changed. `datacenter` (its key):
    /// that datacenter's objects only.
    async fn infrastructure_summary(
        &self,
        ctx: &Context<'_>,
        #[graphql(default = 250)] debounce_ms: u32,
        datacenter: Option<String>,
    ) -> async_graphql::Result<
        impl Stream<Item = crate::domain::summary::InfrastructureSummary> + use<>,
    > {
        open::infrastructure_summary(ctx, debounce_ms, datacenter).map(events)
    }

    /// `hostCapacity` (hosts, usage against limits, how many hosts can fail): sent first, then
    /// after each burst of changes settles and only when it changed. `datacenter` (its key):
    /// that datacenter's hosts and VMs only (as `Datacenter.hostCapacity`).
    async fn hosts_changed(
        &self,
        ctx: &Context<'_>,
        #[graphql(default = 250)] debounce_ms: u32,
        datacenter: Option<String>,
    ) -> async_graphql::Result<impl Stream<Item = crate::graphql::types::HostCapacity> + use<>>
    {
        open::hosts_changed(ctx, debounce_ms, datacenter).map(events)
    }

    /// Changes to the applications passing `filter`: one that starts passing arrives as ADDED,
    /// one that stops as REMOVED. With `snapshot: true` the passing applications come first,
    /// then `SYNCED`, then every later change; no gap and no duplicate.
    async fn application_changed(
        &self,
        ctx: &Context<'_>,
        filter: Option<crate::graphql::applications::ApplicationFilter>,
        #[graphql(default = false)] snapshot: bool,
    ) -> async_graphql::Result<impl Stream<Item = applications::ApplicationEvent> + use<>> {
        open::application_changed(ctx, filter, snapshot).map(events)
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
