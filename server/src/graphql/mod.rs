//! The GraphQL API over the store: schema construction and per-request snapshot injection.

pub mod applications;
mod brief_list;
pub mod documents;
mod folded;
pub mod generations;
pub mod history;
pub mod key_order;
mod least;
pub mod limits;
pub mod loaders;
pub mod mutation;
pub mod narrow;
mod page_cut;
pub mod paging;
pub mod parts;
pub mod past;
pub mod query;
pub mod root;
pub mod search;
pub mod selector;
pub mod subscription;
pub mod types;
mod volatile;

use async_graphql::{EmptyMutation, Schema};

pub use paging::Limits;
pub use query::DatacenterName;
pub use root::QueryRoot;
pub use volatile::{Volatile, mark_volatile};

/// The schema type served at `/graphql`.
pub type AppSchema = Schema<QueryRoot, mutation::MutationRoot, subscription::SubscriptionRoot>;

/// Settings that shape the schema.
#[derive(Clone, Debug)]
pub struct SchemaSettings {
    /// Largest `first`/`last`.
    pub max_page_size: usize,
    /// Deepest selection allowed.
    pub max_depth: usize,
    /// Tokens, aliases and complexity allowed.
    pub limits: limits::QueryLimits,
    /// Name of the Vitistack singleton.
    pub vitistack_name: String,
    /// Where the store's objects come from (served as `sources`).
    pub source: std::sync::Arc<crate::source::status::SourceStatus>,
    /// Overcommit factors for host allocation.
    pub overcommit: crate::domain::hosts::Overcommit,
    /// The live store (subscriptions read its change stream).
    pub store: std::sync::Arc<crate::store::Store>,
    /// Subscription metrics, when served.
    pub subscription_metrics: Option<subscription::SubscriptionMetrics>,
    /// The change fan-out subscriptions register with (None: subscriptions are refused).
    pub fanout: Option<std::sync::Arc<subscription::fanout::Fanout>>,
    /// The event log (None: history fields say it is not kept).
    pub history: Option<std::sync::Arc<crate::history::History>>,
    /// Answer introspection queries.
    pub introspection: bool,
    /// Where mutations write (None: they are refused as READ_ONLY).
    pub changer: Option<std::sync::Arc<crate::change::Changer>>,
    /// What the mutations check against.
    pub change: mutation::ChangeSettings,
    /// How the operators are judged (served as `operators`).
    pub operators: crate::domain::operators::Judge,
    /// The application inventory (None: `applications` says it is off).
    pub inventory: Option<std::sync::Arc<crate::inventory::Inventory>>,
}

impl Default for SchemaSettings {
    fn default() -> Self {
        SchemaSettings {
            max_page_size: 500,
            max_depth: 16,
            limits: limits::QueryLimits::default(),
            vitistack_name: "vitistack".into(),
            source: std::sync::Arc::new(crate::source::status::SourceStatus::embedded(
                &[Default::default()],
                None,
            )),
            overcommit: Default::default(),
            store: Default::default(),
            subscription_metrics: None,
            fanout: None,
            history: None,
            introspection: true,
            operators: Default::default(),
            changer: None,
            change: mutation::ChangeSettings {
                min_hosts_that_can_fail: 1,
            },
            inventory: None,
        }
    }
}

/// The data every resolver may read, on either schema.
pub(crate) fn with_data<Q, M, S>(
    builder: async_graphql::SchemaBuilder<Q, M, S>,
    settings: &SchemaSettings,
) -> async_graphql::SchemaBuilder<Q, M, S> {
    let mut builder = builder
        .data(Limits {
            max_page_size: settings.max_page_size,
        })
        .data(DatacenterName(settings.vitistack_name.clone()))
        .data(settings.source.clone())
        .data(settings.operators.clone())
        .data(settings.overcommit)
        .data(settings.store.clone())
        .data(settings.change)
        .limit_depth(settings.max_depth);
    if !settings.introspection {
        builder = builder.disable_introspection();
    }
    if let Some(m) = &settings.subscription_metrics {
        builder = builder.data(m.clone());
    }
    if let Some(f) = &settings.fanout {
        builder = builder.data(f.clone());
    }
    if let Some(h) = &settings.history {
        builder = builder.data(h.clone());
    }
    if let Some(c) = &settings.changer {
        builder = builder.data(c.clone());
    }
    if let Some(i) = &settings.inventory {
        builder = builder.data(i.clone());
    }
    builder
}

/// Build the schema. The store snapshot is added per request (see `http`).
///
/// Its requests go through [`documents::QueryDocuments`], which enforces the cost limits (tokens,
/// aliases, complexity) before anything runs; the depth limit is the schema's own. The limits are
/// not an async-graphql extension here: with any extension installed, async-graphql resolves
/// every field through the extension chain (a registry lookup by type and field name, and one
/// more future per field), which halved the speed of a 1,000-machine page.
pub fn build_schema(settings: &SchemaSettings) -> AppSchema {
    build_schema_validating(settings, async_graphql::ValidationMode::Strict)
}

/// The same schema validating only the limits: it runs requests that passed strict validation
/// before (see [`documents`]).
pub fn build_fast_schema(settings: &SchemaSettings) -> AppSchema {
    build_schema_validating(settings, async_graphql::ValidationMode::Fast)
}

fn build_schema_validating(
    settings: &SchemaSettings,
    mode: async_graphql::ValidationMode,
) -> AppSchema {
    with_data(
        Schema::build(
            QueryRoot::default(),
            mutation::MutationRoot,
            subscription::SubscriptionRoot,
        ),
        settings,
    )
    .validation_mode(mode)
    .finish()
}

/// Build the schemas our subscription executor runs documents against (see [`subscription::executor`]): one
/// validating strictly (a subscription is opened once), one for rendering its events, which
/// only checks the limits (the same document, already validated).
pub fn build_executor_schemas(
    settings: &SchemaSettings,
) -> subscription::executor::ExecutorSchemas {
    let build = |mode| {
        with_data(
            Schema::build(
                subscription::executor::ExecutorRoot,
                EmptyMutation,
                async_graphql::EmptySubscription,
            ),
            settings,
        )
        .validation_mode(mode)
    };
    subscription::executor::ExecutorSchemas {
        // Opening checks the limits once more (a subscription opens once); events render a
        // document already checked, without the per-field cost of an extension.
        open: build(async_graphql::ValidationMode::Strict)
            .extension(limits::Enforce(settings.limits))
            .finish(),
        render: build(async_graphql::ValidationMode::Fast).finish(),
        documents: Default::default(),
        history: settings.history.clone(),
        metrics: settings.subscription_metrics.clone(),
        hubs: std::sync::Arc::new(subscription::executor::Hubs::new(
            settings.fanout.as_ref().map_or(256, |f| f.capacity),
            settings.subscription_metrics.clone(),
        )),
    }
}

/// The SDL of the schema, as committed in `schema.graphql`.
/// What the caller of this request or subscription may see: the scope our subscription executor
/// gives, else the principal's; everything for work without a caller (the server's own).
pub(crate) fn scope_of(ctx: &async_graphql::Context<'_>) -> crate::store::Scope {
    match ctx.data_opt::<crate::store::Scope>() {
        Some(s) => s.clone(),
        None => ctx
            .data_opt::<crate::auth::Principal>()
            .map(|p| p.scope.clone())
            .unwrap_or_default(),
    }
}

pub fn sdl() -> String {
    build_schema(&SchemaSettings::default()).sdl()
}

/// True when a response is a request that failed before it ran (parse, validation, variables,
/// limits): no data, and only errors without a path.
pub fn rejected(response: &async_graphql::Response) -> bool {
    response.data == async_graphql::Value::Null
        && !response.errors.is_empty()
        && response.errors.iter().all(|e| e.path.is_empty())
}

/// The operators judged once per request: a page of clusters asks for each cluster's operators,
/// and judging reads every object an operator acts on. It depends on the clock and the probes,
/// not only on the snapshot, so the answer is volatile.
#[derive(Default)]
pub struct OperatorsJudged(
    std::sync::OnceLock<std::sync::Arc<Vec<crate::domain::operators::OperatorHealth>>>,
);

/// Every operator, judged on this request's snapshot (once per request where the request
/// carries an [`OperatorsJudged`]).
pub fn operators_now(
    ctx: &async_graphql::Context<'_>,
) -> std::sync::Arc<Vec<crate::domain::operators::OperatorHealth>> {
    mark_volatile(ctx);
    let judge = || {
        let j = ctx.data_unchecked::<crate::domain::operators::Judge>();
        let s = types::snap(ctx);
        let lag = ctx
            .data_unchecked::<std::sync::Arc<crate::source::status::SourceStatus>>()
            .lag(&s);
        std::sync::Arc::new(crate::domain::operators::judge(
            &s, &lag, &j.probes, j.stall,
        ))
    };
    match ctx.data_opt::<OperatorsJudged>() {
        Some(once) => once.0.get_or_init(judge).clone(),
        None => judge(),
    }
}
