//! The event schema: a root type named `Subscription` with the served fields and arguments, whose
//! resolvers open a stream (first run) or return the event being rendered.

use std::sync::Arc;

use async_graphql::{Context, EmptyMutation, EmptySubscription, ID, Object, Schema};
use futures::StreamExt;
use futures::stream::BoxStream;
use parking_lot::Mutex;

use super::super::{ClusterEvent, First, ResourceEvent, ResourceEventType, Seq, open};
use super::{Hubs, SubscriptionDocuments};
use crate::domain::summary::InfrastructureSummary;
use crate::graphql::paging::Filter;
use crate::graphql::types::HostCapacity;

/// The schema our executor runs subscription documents against.
pub type ExecutorSchema = Schema<ExecutorRoot, EmptyMutation, EmptySubscription>;

/// The event schema twice: validating strictly (to open a subscription) and checking only the
/// limits (to render each event of a document already validated); and the parsed documents.
#[derive(Clone)]
pub struct ExecutorSchemas {
    /// Strict validation.
    pub open: ExecutorSchema,
    /// Limits only.
    pub render: ExecutorSchema,
    /// Documents parsed once, shared by the subscriptions that send the same text.
    pub documents: Arc<SubscriptionDocuments>,
    /// The event log (each rendered event gets its own history loaders).
    pub history: Option<Arc<crate::history::History>>,
    /// Shared renders of identical subscriptions.
    pub hubs: Arc<Hubs>,
    /// Where each subscriber is counted (absent when printing the SDL).
    pub metrics: Option<crate::graphql::subscription::SubscriptionMetrics>,
}

/// One event of any subscription field.
#[derive(Clone)]
pub enum Update {
    /// `resourceChanged`, `machineChanged`.
    Resource(ResourceEvent),
    /// `clusterChanged`.
    Cluster(ClusterEvent),
    /// `infrastructureSummary`.
    Infrastructure(Box<InfrastructureSummary>),
    /// `hostsChanged`.
    Hosts(HostCapacity),
    /// `applicationChanged`.
    Application(crate::graphql::subscription::applications::ApplicationEvent),
}

impl Update {
    /// The subscriber missed changes (RESYNC): each subscriber must read its own fresh opening.
    pub(super) fn resync(&self) -> bool {
        let is = |e: &ResourceEvent| e.type_ == ResourceEventType::Resync;
        match self {
            Update::Resource(e) => is(e),
            Update::Cluster(e) => e.changed.as_ref().is_some_and(is),
            Update::Application(e) => e.is_resync(),
            Update::Infrastructure(_) | Update::Hosts(_) => false,
        }
    }

    /// A value sent only when it changed (not a change event).
    pub(super) fn aggregate(&self) -> bool {
        matches!(self, Update::Infrastructure(_) | Update::Hosts(_))
    }
}

/// Present while a subscription is opened: the root field's resolver leaves its stream here.
#[derive(Default)]
pub(super) struct Opening(pub(super) Mutex<Vec<BoxStream<'static, Seq<Update>>>>);

/// What the root field answers once it has left its stream in the [`Opening`]: a typed marker
/// (the field is non-null like the served one, so it cannot answer null; the document's result
/// is not sent), told apart from real errors by its type, not its words.
#[derive(Debug)]
pub(super) struct Opened;

impl std::fmt::Display for Opened {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("subscription opened")
    }
}

/// The root field: open the stream (first run) or return the event being rendered.
pub(super) fn field<T: Clone + Send + 'static>(
    ctx: &Context<'_>,
    pick: fn(&Update) -> Option<&T>,
    wrap: fn(T) -> Update,
    open: impl FnOnce() -> async_graphql::Result<BoxStream<'static, Seq<T>>>,
) -> async_graphql::Result<T> {
    if let Some(ev) = ctx.data_opt::<Update>() {
        return pick(ev)
            .cloned()
            .ok_or_else(|| async_graphql::Error::new("an event of another field"));
    }
    let Some(opening) = ctx.data_opt::<Arc<Opening>>() else {
        return Err(async_graphql::Error::new("no subscription is being opened"));
    };
    let stream = open()?;
    opening
        .0
        .lock()
        .push(stream.map(move |s| s.map(wrap)).boxed());
    Err(async_graphql::Error::new_with_source(Opened))
}

/// The event schema's root: the `Subscription` fields with the same arguments, as query fields.
#[derive(Default)]
pub struct ExecutorRoot;

#[Object(name = "Subscription")]
impl ExecutorRoot {
    async fn resource_changed(
        &self,
        ctx: &Context<'_>,
        kinds: Option<Vec<String>>,
        namespace: Option<String>,
        label_selector: Option<String>,
        #[graphql(default = false)] snapshot: bool,
        #[graphql(default = false)] synced: bool,
    ) -> async_graphql::Result<ResourceEvent> {
        let first = First::of(snapshot, synced);
        field(ctx, pick_resource, Update::Resource, || {
            open::resource_changed(ctx, kinds, namespace, label_selector, first)
        })
    }

    async fn machine_changed(
        &self,
        ctx: &Context<'_>,
        filter: Option<Filter>,
        cluster_id: Option<String>,
        #[graphql(default = false)] snapshot: bool,
        #[graphql(default = false)] synced: bool,
    ) -> async_graphql::Result<ResourceEvent> {
        let first = First::of(snapshot, synced);
        field(ctx, pick_resource, Update::Resource, || {
            open::machine_changed(ctx, filter, cluster_id, first)
        })
    }

    async fn infrastructure_summary(
        &self,
        ctx: &Context<'_>,
        #[graphql(default = 250)] debounce_ms: u32,
        datacenter: Option<String>,
    ) -> async_graphql::Result<InfrastructureSummary> {
        field(
            ctx,
            |e| match e {
                Update::Infrastructure(x) => Some(&**x),
                _ => None,
            },
            |x| Update::Infrastructure(Box::new(x)),
            || open::infrastructure_summary(ctx, debounce_ms, datacenter.clone()),
        )
    }

    async fn hosts_changed(
        &self,
        ctx: &Context<'_>,
        #[graphql(default = 250)] debounce_ms: u32,
        datacenter: Option<String>,
    ) -> async_graphql::Result<HostCapacity> {
        field(
            ctx,
            |e| match e {
                Update::Hosts(x) => Some(x),
                _ => None,
            },
            Update::Hosts,
            || open::hosts_changed(ctx, debounce_ms, datacenter.clone()),
        )
    }

    async fn application_changed(
        &self,
        ctx: &Context<'_>,
        filter: Option<crate::graphql::applications::ApplicationFilter>,
        #[graphql(default = false)] snapshot: bool,
    ) -> async_graphql::Result<crate::graphql::subscription::applications::ApplicationEvent> {
        field(
            ctx,
            |e| match e {
                Update::Application(x) => Some(x),
                _ => None,
            },
            Update::Application,
            || open::application_changed(ctx, filter.clone(), snapshot),
        )
    }

    async fn cluster_changed(
        &self,
        ctx: &Context<'_>,
        id: ID,
    ) -> async_graphql::Result<ClusterEvent> {
        field(
            ctx,
            |e| match e {
                Update::Cluster(x) => Some(x),
                _ => None,
            },
            Update::Cluster,
            || open::cluster_changed(ctx, id),
        )
    }
}

pub(super) fn pick_resource(e: &Update) -> Option<&ResourceEvent> {
    match e {
        Update::Resource(x) => Some(x),
        _ => None,
    }
}
