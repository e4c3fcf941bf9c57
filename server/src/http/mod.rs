//! The HTTP surface: GraphQL (POST, and GraphiQL on GET), health, readiness, metrics, and the page.

pub mod access;
pub mod admin;
pub mod assets;
pub mod cache;
pub mod checker;
mod graphql_http;
pub mod health;
mod hub;
mod metrics;
pub mod observe;
pub mod operator_metrics;
mod pipeline;
pub mod rate;
pub mod rest;
pub mod serve;
pub mod signin;
mod state;
pub mod streams;
pub mod tls;
mod upgrade;
pub mod ws;
pub mod ws_message;

use crate::error::ErrorCode;

use axum::Router;
use axum::extract::{ConnectInfo, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use std::net::SocketAddr;

pub use metrics::Metrics;
use pipeline::{graphql, graphql_get, graphql_sse_get, graphql_sse_post};
pub use state::{AppState, ServerState};

/// Largest request body accepted on `/graphql`, and largest WebSocket frame and message (bytes).
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

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
        .merge(hub::routes())
        .merge(admin::routes())
        .merge(signin::routes())
        .fallback(assets::serve);
    // Pages may send a form to the OpenID provider (sign-out): only with one configured, so
    // that nothing is added to a request's path without it.
    let router = if state.access.auth.provider().is_some() {
        router.layer(axum::middleware::map_response_with_state(
            state.clone(),
            signin::allow_provider_forms,
        ))
    } else {
        router
    };
    let router = router
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

/// The largest body a route takes: [`MAX_BODY_BYTES`], and the old hub's limit for agents'
/// reports.
pub(crate) fn body_limit(path: &str) -> usize {
    if path == hub::REPORT_PATH {
        crate::source::hub::MAX_REPORT_BYTES
    } else {
        MAX_BODY_BYTES
    }
}

/// The answer to a body over its route's limit: which limit, as JSON.
pub(crate) fn body_too_large(limit: usize) -> Response {
    let name = if limit == MAX_BODY_BYTES {
        "MAX_BODY_BYTES"
    } else {
        "the old hub's report limit"
    };
    graphql_http::refuse(
        graphql_http::Media::Json,
        ErrorCode::BodyLimit,
        format!("the request body is larger than the limit of {limit} bytes ({name})"),
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

/// GraphQL over WebSocket: `graphql-transport-ws` and the legacy `graphql-ws` subprotocol.
async fn graphql_ws(
    State(app): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    mut request: axum::extract::Request,
) -> Response {
    let upgrade = match upgrade::Upgrade::of(&mut request, &ws_message::PROTOCOLS) {
        Ok(u) => u,
        Err(refused) => return refused,
    };
    let headers = request.headers();
    // A browser page from another origin may not ride on a user's network position.
    if !app.access.origin_allowed(headers) {
        return (
            StatusCode::FORBIDDEN,
            "WebSocket refused: this Origin is not allowed (CORS_ALLOWED_ORIGINS)",
        )
            .into_response();
    }
    let client = app.access.client(peer.ip(), headers);
    // Non-browser clients may authenticate the upgrade itself; connection_init may still.
    let authorization = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .map(String::from);
    // A browser page of this server may ride on its sign-in session (the Origin was checked).
    let session = (headers.contains_key(header::ORIGIN) && access::same_origin(headers))
        .then(|| access::cookie_value(headers, access::SESSION_COOKIE).map(String::from))
        .flatten();
    let context = crate::logging::current_request();
    let protocol = upgrade.protocol();
    let config = tokio_tungstenite::tungstenite::protocol::WebSocketConfig::default()
        // Small buffers: most sockets are idle subscribers (tungstenite's default is 128 KiB).
        // Client messages are small (a larger one grows the buffer to its size); what the
        // server has ready is written in one flush.
        .read_buffer_size(512)
        .write_buffer_size(ws::WRITE_BUFFER_BYTES)
        // The same bound as an HTTP body: larger frames and messages are refused with 1009.
        .max_frame_size(Some(MAX_BODY_BYTES))
        .max_message_size(Some(MAX_BODY_BYTES));
    // The socket's lines carry the upgrade request's id (taken here: the socket is served on a
    // task of its own).
    upgrade.serve(config, move |socket| {
        let serve = ws::serve(socket, protocol, app, client, authorization, session);
        match context {
            Some(context) => futures::FutureExt::boxed(crate::logging::scoped(context, serve)),
            None => serve,
        }
    })
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
            Ok(p) if !p.scope.is_all() => {
                return graphql_http::refuse(
                    graphql_http::Media::Json,
                    ErrorCode::Forbidden,
                    format!(
                        "{} sees only its own namespaces; /metrics shows the whole fleet",
                        p.name
                    ),
                )
                .into_response();
            }
            Ok(p) if !p.is_anonymous() => {}
            Ok(_) => {
                return access::refused(&crate::auth::Refusal::Missing, graphql_http::Media::Json);
            }
            Err(r) => return access::refused(&r, graphql_http::Media::Json),
        }
    }
    let snap = app.store.snapshot();
    let operators = app.operators();
    let scrape = operator_metrics::Scrape {
        operators: &operators,
        applied: app.store.applied(),
        undecodable: &app.source.undecodable,
        connections: app
            .history
            .as_ref()
            .and_then(|h| h.db())
            .map(|db| db.connections()),
        operator_changes: app.checks.announced(),
        health_checks: app.checks.made(),
    };
    let body = app.metrics.render(
        &snap,
        &app.db_health,
        &app.source.report(&snap),
        &app.source.datacenter_reports(),
        &scrape,
    );
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        body,
    )
        .into_response()
}
