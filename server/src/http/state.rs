//! What every request handler shares: the server's state behind one reference count, and what
//! each GraphQL request carries besides its document.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use super::{Metrics, access, cache, streams};
use crate::db::health::DbHealth;
use crate::graphql::AppSchema;
use crate::source::status::SourceStatus;
use crate::store::Store;

/// Everything a request handler needs, shared: a clone is one reference count. (axum clones the
/// state for every extractor and middleware of a request; as a struct of twenty `Arc`s, whose
/// counts bounced between the cores, that was a tenth of a cached request's time.)
#[derive(Clone)]
pub struct AppState(Arc<ServerState>);

impl AppState {
    /// Share `state` with every request.
    pub fn new(state: ServerState) -> Self {
        AppState(Arc::new(state))
    }
}

impl std::ops::Deref for AppState {
    type Target = ServerState;
    fn deref(&self) -> &ServerState {
        &self.0
    }
}

/// What the server's requests share (see [`AppState`]).
pub struct ServerState {
    /// The graph.
    pub store: Arc<Store>,
    /// The GraphQL schema.
    pub schema: AppSchema,
    /// The schema our subscription executor runs documents against.
    pub subscription_schemas: crate::graphql::subscription::executor::ExecutorSchemas,
    /// Set once every source has loaded.
    pub ready: Arc<AtomicBool>,
    /// Prometheus metrics.
    pub metrics: Arc<Metrics>,
    /// The database's state.
    pub db_health: Arc<DbHealth>,
    /// Where objects come from, and how current each kind is.
    pub source: Arc<SourceStatus>,
    /// Answers to repeated queries on an unchanged graph.
    pub cache: Arc<cache::ResponseCache>,
    /// Parts of answers kept across changes.
    pub parts: Arc<crate::graphql::parts::PartCache>,
    /// Query documents parsed once, and the requests they passed strict validation with.
    pub documents: Arc<crate::graphql::documents::QueryDocuments>,
    /// Admits WebSockets and SSE streams under the caps.
    pub gate: Arc<streams::Gate>,
    /// The event log (each query gets its own history loaders).
    pub history: Option<Arc<crate::history::History>>,
    /// Who may call, how much, and from where.
    pub access: Arc<access::Access>,
    /// The latest probes of the operators' endpoints.
    pub probes: Arc<crate::domain::operators::Probes>,
    /// How long an operator's object may go without status before the operator is unhealthy.
    pub operator_stall: std::time::Duration,
    /// The last health check's findings (`HEALTH_CHECK_INTERVAL`).
    pub checks: Arc<super::checker::Checks>,
    /// Turns true at SIGTERM: `/ready` and the health routes answer 503, WebSockets close with
    /// 1001, SSE streams end.
    pub going_away: tokio::sync::watch::Receiver<bool>,
    /// `/metrics` is served (METRICS_ENABLED).
    pub metrics_enabled: bool,
    /// Which Vitistack is "the" datacenter (VITISTACKCRDNAME).
    pub vitistack_name: String,
    /// The old status page's agents' reports (HUB_TOKENS_FILE), when taken.
    pub hub: Option<Arc<crate::source::hub::Hub>>,
    /// `/api/status` and the `/events` stream answer without a key (HUB_OPEN_READ).
    pub hub_open_read: bool,
}

impl ServerState {
    /// What every query request carries besides the document: the snapshot it reads, the kept
    /// parts of earlier answers to the same request (`key`), and its own history loaders (a
    /// page's history is prefetched into them). An operation asking for a past moment
    /// (`at(time:)` at its root) reads that moment's graph instead, as `scope` sees it.
    pub async fn query_data(
        &self,
        mut request: async_graphql::Request,
        snapshot: Arc<crate::store::Snapshot>,
        scope: &crate::store::Scope,
        key: Option<&cache::RequestKey>,
    ) -> async_graphql::Request {
        let name = request.operation_name.clone();
        let variables = std::mem::take(&mut request.variables);
        let moment = match request.parsed_query() {
            Ok(doc) => crate::graphql::past::moment(doc, name.as_deref(), &variables),
            Err(_) => Ok(None),
        };
        request.variables = variables;
        let (snapshot, past) = match moment {
            Ok(None) => (snapshot, None),
            Ok(Some(at)) => match crate::graphql::past::past_graph(
                self.history.as_ref(),
                &self.store,
                scope,
                at,
            )
            .await
            {
                Ok((s, apps)) => (s, Some(Ok((at, apps)))),
                Err(e) => (snapshot, Some(Err(e))),
            },
            Err(e) => (snapshot, Some(Err(e))),
        };
        let mut request = request.data(crate::graphql::OperatorsJudged::default());
        match past {
            None => {
                if let Some(parts) = self.parts.for_request(key, snapshot.clone()) {
                    request = request.data(parts);
                }
            }
            // A past graph's objects are not the live ones: no kept part would match them.
            Some(Ok((at, apps))) => {
                request = request
                    .data(crate::graphql::past::PastMoment(at))
                    .data(apps);
            }
            Some(Err(e)) => request = request.data(crate::graphql::past::PastRefused(e)),
        }
        let request = request.data(snapshot);
        match &self.history {
            Some(h) => request.data(crate::graphql::loaders::request_loaders(h.clone())),
            None => request,
        }
    }

    /// What a mutation request carries: no snapshot (its fields read the live graph, which holds
    /// its own write once it has been made) and its own history loaders.
    pub fn live_data(&self, request: async_graphql::Request) -> async_graphql::Request {
        // Mutations ask whether the caller may change their target.
        let request = request.data(self.access.auth.clone());
        match &self.history {
            Some(h) => request.data(crate::graphql::loaders::request_loaders(h.clone())),
            None => request,
        }
    }
}
