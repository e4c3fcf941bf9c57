//! The HTTP surface: GraphQL (POST, and GraphiQL on GET), health, readiness, metrics, and the page.

mod metrics;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use async_graphql::http::GraphiQLSource;
use async_graphql_axum::{GraphQLRequest, GraphQLResponse};
use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use serde_json::json;

pub use metrics::Metrics;

use crate::graphql::AppSchema;
use crate::store::Store;

/// Largest request body accepted on `/graphql` (bytes).
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

/// Everything a request handler needs.
#[derive(Clone)]
pub struct AppState {
    /// The graph.
    pub store: Arc<Store>,
    /// The GraphQL schema.
    pub schema: AppSchema,
    /// Set once every source has loaded.
    pub ready: Arc<AtomicBool>,
    /// Prometheus metrics.
    pub metrics: Arc<Metrics>,
}

/// The router with every route.
pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/", get(index))
        .route("/graphql", get(graphiql).post(graphql))
        .route("/health", get(health))
        .route("/health/live", get(health))
        .route("/ready", get(ready))
        .route("/metrics", get(metrics))
        .layer(tower_http::limit::RequestBodyLimitLayer::new(
            MAX_BODY_BYTES,
        ))
        .with_state(state)
}

async fn index() -> Html<&'static str> {
    Html(include_str!("../../../web/index.html"))
}

async fn graphiql() -> Html<String> {
    Html(
        GraphiQLSource::build()
            .endpoint("/graphql")
            .title("vitistack GraphQL")
            .finish(),
    )
}

async fn graphql(State(app): State<AppState>, req: GraphQLRequest) -> GraphQLResponse {
    let started = Instant::now();
    // One snapshot per request: every field of the answer reads the same version of the graph.
    let request = req.into_inner().data(app.store.snapshot());
    let response = app.schema.execute(request).await;
    app.metrics
        .observe_graphql(started.elapsed(), response.errors.is_empty());
    response.into()
}

async fn health() -> Response {
    (StatusCode::OK, axum::Json(json!({"status": "ok"}))).into_response()
}

async fn ready(State(app): State<AppState>) -> Response {
    if app.ready.load(Ordering::Acquire) {
        (
            StatusCode::OK,
            axum::Json(json!({"status": "ready", "sequence": app.store.snapshot().seq()})),
        )
            .into_response()
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            axum::Json(json!({"status": "loading"})),
        )
            .into_response()
    }
}

async fn metrics(State(app): State<AppState>) -> Response {
    let body = app.metrics.render(&app.store.snapshot());
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        body,
    )
        .into_response()
}
