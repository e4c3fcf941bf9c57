//! The HTTP surface: GraphQL (POST, and GraphiQL on GET), health, readiness, metrics, and the page.

pub mod access;
pub mod admin;
pub mod assets;
pub mod cache;
mod graphql_http;
pub mod health;
mod metrics;
pub mod observe;
pub mod operator_metrics;
pub mod rate;
pub mod rest;
pub mod tls;
pub mod ws;
pub mod ws_message;

use crate::error::ErrorCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use async_graphql::http::GraphiQLSource;
use axum::Router;
use axum::extract::{ConnectInfo, State};
use axum::http::{StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use futures::StreamExt;
use serde_json::json;
use std::net::SocketAddr;

pub use metrics::Metrics;

use crate::db::health::DbHealth;
use crate::graphql::AppSchema;
use crate::source::status::SourceStatus;
use crate::store::Store;

/// Largest request body accepted on `/graphql`, and largest WebSocket frame and message (bytes).
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

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
    pub events: crate::graphql::subscription::executor::ExecutorSchemas,
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
    pub gate: Arc<ws::Gate>,
    /// The event log (each query gets its own history loaders).
    pub history: Option<Arc<crate::history::History>>,
    /// Who may call, how much, and from where.
    pub access: Arc<access::Access>,
    /// The latest probes of the operators' endpoints.
    pub probes: Arc<crate::domain::operators::Probes>,
    /// How long an operator's object may go without status before the operator is unhealthy.
    pub operator_stall: std::time::Duration,
    /// Turns true at SIGTERM: `/ready` and the health routes answer 503, WebSockets close with
    /// 1001, SSE streams end.
    pub going_away: tokio::sync::watch::Receiver<bool>,
    /// `/metrics` is served (METRICS_ENABLED).
    pub metrics_enabled: bool,
    /// Which Vitistack is "the" datacenter (VITISTACKCRDNAME).
    pub vitistack_name: String,
}

impl ServerState {
    /// What every query request carries besides the document: the snapshot it reads, the kept
    /// parts of earlier answers to the same request (`key`), and its own history loaders (a
    /// page's history is prefetched into them).
    pub fn query_data(
        &self,
        request: async_graphql::Request,
        snapshot: Arc<crate::store::Snapshot>,
        key: Option<&cache::Key>,
    ) -> async_graphql::Request {
        let parts = self.parts.for_request(key, snapshot.clone());
        let mut request = request.data(snapshot);
        if let Some(parts) = parts {
            request = request.data(parts);
        }
        match &self.history {
            Some(h) => request.data(crate::graphql::loaders::request_loaders(h.clone())),
            None => request,
        }
    }

    /// What a mutation request carries: no snapshot (its fields read the live graph, which holds
    /// its own write once it has been made) and its own history loaders.
    pub fn live_data(&self, request: async_graphql::Request) -> async_graphql::Request {
        match &self.history {
            Some(h) => request.data(crate::graphql::loaders::request_loaders(h.clone())),
            None => request,
        }
    }
}

/// The router with every route.
pub fn router(state: AppState) -> Router {
    let cors = state.access.cors();
    let router = Router::new()
        .route("/", get(assets::serve))
        .route("/graphql", get(graphql_get).post(graphql))
        .route("/graphql/ws", get(graphql_ws))
        .route(
            "/graphql/stream",
            get(graphql_sse_get).post(graphql_sse_post),
        )
        .route("/health", get(health::health))
        .route("/health/live", get(health::live))
        .route("/health/database", get(health::database))
        .route("/health/operators", get(health::operators))
        .route("/health/cache", get(health::cache))
        .route("/ready", get(health::ready))
        .route("/metrics", get(metrics))
        .merge(rest::routes())
        .merge(admin::routes())
        .fallback(assets::serve)
        // The layers every request passes, composed into one service: axum boxes each layer it
        // is given for every route, and a boxed layer cost a request an allocation and a move.
        // The observer also refuses bodies over the limit and answers panics (see `observe`).
        .layer(
            tower::ServiceBuilder::new()
                .layer(axum::middleware::from_fn_with_state(
                    state.clone(),
                    observe::observe,
                ))
                // Bodies read by extractors stop at the limit (413).
                .layer(axum::extract::DefaultBodyLimit::max(MAX_BODY_BYTES)),
        )
        .with_state(state);
    match cors {
        Some(cors) => router.layer(cors),
        None => router,
    }
}

/// The answer to a body over [`MAX_BODY_BYTES`]: which limit, as JSON.
pub(crate) fn body_too_large() -> Response {
    graphql_http::refuse(
        graphql_http::Media::Json,
        ErrorCode::BodyLimit,
        format!(
            "the request body is larger than the limit of {MAX_BODY_BYTES} bytes (MAX_BODY_BYTES)"
        ),
    )
    .into_response()
}

/// The answer to a request whose handler panicked: 500 with a fixed message (what panicked stays
/// in the log).
pub(crate) fn panicked() -> Response {
    tracing::error!("a request handler panicked");
    graphql_http::refuse(
        graphql_http::Media::Json,
        ErrorCode::Internal,
        "internal error",
    )
    .into_response()
}

/// GET with a `query` parameter executes a query (GraphQL over HTTP; mutations are refused with
/// 405); a bare GET opens GraphiQL.
async fn graphql_get(
    State(app): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: axum::http::HeaderMap,
    uri: axum::http::Uri,
) -> Response {
    let Some(query) = uri
        .query()
        .filter(|q| q.split('&').any(|p| p.starts_with("query=")))
    else {
        if !app.access.graphiql {
            return graphql_http::refuse(graphql_http::Media::Json,
                ErrorCode::GraphiqlOff,
                "GraphiQL is switched off here (GRAPHIQL=false); send queries with POST or GET ?query=",
            )
            .into_response();
        }
        let page = GraphiQLSource::build()
            .endpoint("/graphql")
            .subscription_endpoint("/graphql/ws")
            .title("vitistack GraphQL")
            .finish();
        return Html(page).into_response();
    };
    // Who is asking comes first: nothing else is said to a caller without a credential.
    let media = graphql_http::negotiate(&headers);
    let principal = match app
        .access
        .admit(
            peer.ip(),
            &headers,
            media.unwrap_or(graphql_http::Media::Json),
        )
        .await
    {
        Ok(p) => p,
        Err(refused) => return refused,
    };
    let Some(media) = media else {
        return graphql_http::not_acceptable();
    };
    let mut request = match graphql_http::parse_get(query, media) {
        Ok(r) => r,
        Err(refused) => return refused.into_response(),
    };
    let name = request.operation_name.clone();
    // Only a document not known to hold queries alone is parsed to find the operation's type.
    if !app.documents.known_queries(&request.query)
        && let Ok(doc) = request.parsed_query()
        && let Some(ty) = ws::operation_type(doc, name.as_deref())
        && ty != async_graphql::parser::types::OperationType::Query
    {
        return graphql_http::refuse(media,
            ErrorCode::MethodNotAllowed,
            format!(
                "a {ty} cannot run over GET: use POST (subscriptions: /graphql/ws or /graphql/stream)"
            ),
        )
        .into_response();
    }
    execute(&app, request, media, principal, None).await
}

/// GraphQL over WebSocket: `graphql-transport-ws` and the legacy `graphql-ws` subprotocol.
async fn graphql_ws(
    State(app): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: axum::http::HeaderMap,
    upgrade: axum::extract::WebSocketUpgrade,
) -> Response {
    // A browser page from another origin may not ride on a user's network position.
    if !app.access.origin_allowed(&headers) {
        return (
            StatusCode::FORBIDDEN,
            "WebSocket refused: this Origin is not allowed (CORS_ALLOWED_ORIGINS)",
        )
            .into_response();
    }
    let client = app.access.client(peer.ip(), &headers);
    // Non-browser clients may authenticate the upgrade itself; connection_init may still.
    let authorization = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .map(String::from);
    let context = crate::logging::current_request();
    upgrade
        .protocols(ws_message::PROTOCOLS)
        // Small buffers: most sockets are idle subscribers (tungstenite's default is 128 KiB;
        // client messages are small; what the server has ready is written in one flush).
        .read_buffer_size(1024)
        .write_buffer_size(ws::WRITE_BUFFER_BYTES)
        // The same bound as an HTTP body: larger frames and messages are refused with 1009.
        .max_frame_size(MAX_BODY_BYTES)
        .max_message_size(MAX_BODY_BYTES)
        // The socket's lines carry the upgrade request's id (taken here: the socket is served on
        // a task of its own).
        .on_upgrade(move |socket| async move {
            let serve = ws::serve(socket, app, client, authorization);
            match context {
                Some(context) => crate::logging::in_request(context, serve).await.0,
                None => serve.await,
            }
        })
}

/// GraphQL over SSE (GET with `query`, `variables`, `operationName` parameters).
async fn graphql_sse_get(
    State(app): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: axum::http::HeaderMap,
    uri: axum::http::Uri,
) -> Response {
    let principal = match app
        .access
        .admit(peer.ip(), &headers, graphql_http::Media::Json)
        .await
    {
        Ok(p) => p,
        Err(refused) => return refused,
    };
    match graphql_http::parse_get(uri.query().unwrap_or_default(), graphql_http::Media::Json) {
        Ok(req) => sse(app, principal, req),
        Err(refused) => refused.into_response(),
    }
}

/// GraphQL over SSE (POST with a JSON body, as on `/graphql`).
async fn graphql_sse_post(
    State(app): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: axum::http::HeaderMap,
    body: bytes::Bytes,
) -> Response {
    let principal = match app
        .access
        .admit(peer.ip(), &headers, graphql_http::Media::Json)
        .await
    {
        Ok(p) => p,
        Err(refused) => return refused,
    };
    match graphql_http::parse_post(&headers, &body, graphql_http::Media::Json) {
        Ok(req) => sse(app, principal, req),
        Err(refused) => refused.into_response(),
    }
}

/// One operation as an event stream: `next` events (each a GraphQL response), then `complete`.
/// Same semantics as a WebSocket operation; counts against the same connection caps.
fn sse(
    app: AppState,
    principal: crate::auth::Principal,
    request: async_graphql::Request,
) -> Response {
    use axum::response::sse::{Event, KeepAlive, Sse};
    let admission = match app.gate.admit(principal.address) {
        Ok(a) => a,
        Err(reason) => {
            return graphql_http::refuse(
                graphql_http::Media::Json,
                ErrorCode::ConnectionLimit,
                reason.to_string(),
            )
            .into_response();
        }
    };
    let open = Held::new(&app.metrics.sse_open);
    let keepalive = app.gate.settings.keepalive;
    // A stream whose key is revoked ends with a FORBIDDEN error, as a socket closes with 4403.
    let was_revoked = Arc::new(AtomicBool::new(false));
    let revoked = {
        let was_revoked = was_revoked.clone();
        let revoked = ws::revoked(app.access.auth.clone(), principal.clone());
        async move {
            revoked.await;
            was_revoked.store(true, Ordering::Release);
        }
    };
    let mut going_away = app.going_away.clone();
    let events = ws::execute_stream(&app, request, principal)
        .map(|payload| {
            Ok::<_, std::convert::Infallible>(Event::default().event("next").data(payload.json()))
        })
        .take_until(revoked)
        .take_until(async move { ws::gone(&mut going_away).await })
        .chain(
            futures::stream::once(async move { was_revoked.load(Ordering::Acquire) }).filter_map(
                |revoked| async move {
                    revoked.then(|| {
                        let body = json!({"errors": [{"message": ws::REVOKED, "extensions": {"code": ErrorCode::Forbidden}}]});
                        Ok(Event::default().event("next").data(body.to_string()))
                    })
                },
            ),
        )
        .chain(futures::stream::once(async move {
            // Held until the stream ends or the client goes away.
            drop((admission, open));
            Ok(Event::default().event("complete").data(""))
        }));
    Sse::new(events)
        .keep_alive(KeepAlive::new().interval(keepalive))
        .into_response()
}

/// Holds a gauge one higher while it lives (an open socket or stream), however it ends.
pub(crate) struct Held(prometheus::IntGauge);

impl Held {
    pub(crate) fn new(gauge: &prometheus::IntGauge) -> Self {
        gauge.inc();
        Held(gauge.clone())
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// A request's headers, taken from it rather than copied (axum's `HeaderMap` extractor clones
/// them); for a handler whose other extractors do not read headers.
struct Headers(axum::http::HeaderMap);

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for Headers {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        _: &S,
    ) -> Result<Self, Self::Rejection> {
        Ok(Headers(std::mem::take(&mut parts.headers)))
    }
}

/// POST: a JSON answer in the media type the client accepts, or an SSE stream when it accepts
/// only `text/event-stream`.
async fn graphql(
    State(app): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    Headers(headers): Headers,
    body: bytes::Bytes,
) -> Response {
    let wants_sse = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|a| a.contains("text/event-stream") && !a.contains("json"));
    let negotiated = graphql_http::negotiate(&headers);
    // Who is asking comes first: nothing else is said to a caller without a credential.
    let principal = match app
        .access
        .admit(
            peer.ip(),
            &headers,
            negotiated.unwrap_or(graphql_http::Media::Json),
        )
        .await
    {
        Ok(p) => p,
        Err(refused) => return refused,
    };
    let media = if wants_sse {
        graphql_http::Media::Json
    } else {
        match negotiated {
            Some(m) => m,
            None => return graphql_http::not_acceptable(),
        }
    };
    // A body asked before on this version of the graph is answered as it was.
    if !wants_sse
        && graphql_http::is_json(&headers)
        && let Some(answer) = app.cache.by_body(app.store.snapshot().seq(), &body)
    {
        return graphql_http::answer(media, answer.body, answer.rejected);
    }
    let request = match graphql_http::parse_post(&headers, &body, media) {
        Ok(r) => r,
        Err(refused) => return refused.into_response(),
    };
    if wants_sse {
        return sse(app, principal, request);
    }
    execute(&app, request, media, principal, Some(&body)).await
}

/// True when a response is a request that failed before it ran (parse, validation, variables,
/// limits): no data, and only errors without a path.
fn rejected(response: &async_graphql::Response) -> bool {
    response.data == async_graphql::Value::Null
        && !response.errors.is_empty()
        && response.errors.iter().all(|e| e.path.is_empty())
}

/// The answer to a request that did not finish within `API_TIMEOUT`.
fn timed_out(app: &AppState, media: graphql_http::Media) -> Response {
    graphql_http::refuse(
        media,
        ErrorCode::Timeout,
        access::timeout_message(app.access.timeout),
    )
    .into_response()
}

/// Execute a query or mutation within `API_TIMEOUT`. Only work that runs is timed: an answer
/// taken from the cache is not (a timer per request cost a cached request a twentieth of its
/// time), and a request that shares a concurrent identical one's execution shares its time limit.
async fn execute(
    app: &AppState,
    mut request: async_graphql::Request,
    media: graphql_http::Media,
    principal: crate::auth::Principal,
    body: Option<&[u8]>,
) -> Response {
    let started = Instant::now();
    request = request.data(principal);
    // One snapshot per request: every field of the answer reads the same version of the graph.
    let snapshot = app.store.snapshot();
    let seq = snapshot.seq();
    let key = cache::Key::of(&request);
    let key = key.as_ref();
    // A known document of shareable queries is parsed only when its answer is not cached; any
    // other document is parsed first, to find out whether its answer may be shared at all.
    let plan = if app.documents.known_shareable(&request.query) {
        None
    } else {
        Some(app.documents.prepare(&mut request, key))
    };
    let plan = match plan {
        // Mutations, and queries whose answer depends on the caller: never cached, never shared
        // with a concurrent identical request. A mutation reads the live graph, not this
        // snapshot: its answer shows the graph after its write.
        Some(plan) if !plan.shareable() => {
            // Boxed, as is the execution below: an executing request's state is large, and a
            // request answered from the cache would otherwise carry (and move) it too.
            let run = Box::pin(execute_unshared(
                app, request, &plan, snapshot, key, media, started,
            ));
            return match tokio::time::timeout(app.access.timeout, run).await {
                Ok(response) => response,
                Err(_) => timed_out(app, media),
            };
        }
        other => other,
    };
    let (answer, _) = app
        .cache
        .get_or_execute(seq, key, || {
            Box::pin(async move {
                let plan = match plan {
                    Some(p) => p,
                    None => app.documents.prepare(&mut request, key),
                };
                let is_query = plan.only_queries();
                let volatile = crate::graphql::Volatile::default();
                let request = app
                    .query_data(request, snapshot, key)
                    .data(volatile.clone());
                let run = app.documents.execute(&app.schema, &plan, key, request);
                let Ok(response) = tokio::time::timeout(app.access.timeout, run).await else {
                    return cache::Answer {
                        body: bytes::Bytes::new(),
                        cacheable: false,
                        rejected: false,
                        timed_out: true,
                    };
                };
                let ok = response.errors.is_empty();
                app.metrics.observe_graphql(started.elapsed(), ok);
                cache::Answer {
                    body: answer_body(&response),
                    cacheable: ok && is_query && !volatile.is_marked(),
                    rejected: rejected(&response),
                    timed_out: false,
                }
            })
        })
        .await;
    if answer.timed_out {
        return timed_out(app, media);
    }
    if let (true, Some(key), Some(body)) = (answer.cacheable, key, body) {
        app.cache.index_body(seq, key, body);
    }
    graphql_http::answer(media, answer.body, answer.rejected)
}

/// Run a request whose answer is not shared: with this snapshot for queries, on the live graph
/// for mutations.
async fn execute_unshared(
    app: &AppState,
    request: async_graphql::Request,
    plan: &crate::graphql::documents::Plan,
    snapshot: Arc<crate::store::Snapshot>,
    key: Option<&cache::Key>,
    media: graphql_http::Media,
    started: Instant,
) -> Response {
    let request = if plan.only_queries() {
        app.query_data(request, snapshot, key)
    } else {
        drop(snapshot);
        app.live_data(request)
    };
    let response = app.documents.execute(&app.schema, plan, key, request).await;
    app.metrics
        .observe_graphql(started.elapsed(), response.errors.is_empty());
    graphql_http::answer(media, answer_body(&response), rejected(&response))
}

/// The JSON body of a response (a request that never ran has no `data` entry at all).
fn answer_body(response: &async_graphql::Response) -> bytes::Bytes {
    let body = if rejected(response) {
        serde_json::to_vec(&json!({"errors": response.errors}))
    } else {
        serde_json::to_vec(response)
    };
    body.map(bytes::Bytes::from).unwrap_or_else(|e| {
        bytes::Bytes::from(
            json!({"errors": [{"message": format!("answer not serializable: {e}")}]}).to_string(),
        )
    })
}

async fn metrics(
    State(app): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: axum::http::HeaderMap,
) -> Response {
    if !app.metrics_enabled {
        return rest::error(
            ErrorCode::MetricsOff,
            "metrics are switched off here (METRICS_ENABLED=false)",
        );
    }
    if app.access.metrics_require_key {
        match app.access.principal(peer.ip(), &headers).await {
            Ok(p) if !p.is_anonymous() => {}
            Ok(_) => {
                return access::refused(&crate::auth::Refusal::Missing, graphql_http::Media::Json);
            }
            Err(r) => return access::refused(&r, graphql_http::Media::Json),
        }
    }
    let snap = app.store.snapshot();
    let operators = app.operators();
    let count =
        |a: &[std::sync::atomic::AtomicU64; 3]| a.each_ref().map(|c| c.load(Ordering::Relaxed));
    let scrape = operator_metrics::Scrape {
        operators: &operators,
        applied: [
            crate::store::ChangeType::Added,
            crate::store::ChangeType::Modified,
            crate::store::ChangeType::Deleted,
        ]
        .map(|c| app.store.applied(c)),
        undecodable: count(&app.source.undecodable),
        connections: app
            .history
            .as_ref()
            .and_then(|h| h.db())
            .map(|db| db.connections()),
    };
    let body = app
        .metrics
        .render(&snap, &app.db_health, &app.source.report(&snap), &scrape);
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        body,
    )
        .into_response()
}
