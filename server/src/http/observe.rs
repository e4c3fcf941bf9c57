//! Every HTTP request: its request id (taken from `X-Request-Id` or made, returned, and carried
//! by the task that serves it into every line logged meanwhile), its log line and its request
//! metrics.

use std::panic::AssertUnwindSafe;
use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;
use futures::FutureExt;

use super::AppState;
use crate::logging::{self, RequestContext};

/// The request id header, read and answered.
pub const REQUEST_ID: &str = "x-request-id";

/// The endpoint label of a request no route matched (the dashboard's pages and assets).
const FALLBACK: &str = "/{*path}";

/// The caller's request id when it is a sensible token (1 to 128 of `A-Z a-z 0-9 - _ . :`),
/// else a new UUID. (tower-http's request-id layer keeps any incoming value, however long.)
pub fn request_id(headers: &HeaderMap) -> HeaderValue {
    headers
        .get(REQUEST_ID)
        .filter(|v| {
            let b = v.as_bytes();
            !b.is_empty()
                && b.len() <= 128
                && b.iter()
                    .all(|c| c.is_ascii_alphanumeric() || b"-_.:".contains(c))
        })
        .cloned()
        .unwrap_or_else(|| {
            let mut text = [0u8; uuid::fmt::Hyphenated::LENGTH];
            let text = uuid::Uuid::new_v4().hyphenated().encode_lower(&mut text);
            HeaderValue::from_str(text).unwrap_or(HeaderValue::from_static("unknown"))
        })
}

/// Health and readiness probes are answered without a log line (they come every few seconds).
fn quiet(path: &str) -> bool {
    let path = path
        .strip_prefix(super::operator_metrics::BASE_URL)
        .unwrap_or(path);
    path == "/health" || path.starts_with("/health/") || path == "/ready"
}

/// True when the request says its body is longer than `limit`.
fn declared_too_large(request: &Request, limit: usize) -> bool {
    request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok())
        .is_some_and(|n| n > limit as u64)
}

/// The middleware every request passes: serves it as a task carrying its context (lines logged
/// meanwhile carry its id), then counts it and writes its line. Probes get no line; above `info`
/// no line is made at all. It also refuses a body declared longer than the limit before anything
/// reads it, says which limit any 413 is about, and answers a handler's panic with 500. (One
/// middleware rather than a layer each: every layer cost a request a boxed future.)
pub async fn observe(State(app): State<AppState>, request: Request, next: Next) -> Response {
    let started = Instant::now();
    let id = request_id(request.headers());
    let endpoint = request.extensions().get::<MatchedPath>().cloned();
    // The line is decided before the request is served: its user agent is taken along.
    let user_agent = (tracing::enabled!(tracing::Level::INFO) && !quiet(request.uri().path()))
        .then(|| request.headers().get(header::USER_AGENT).cloned());
    let context = RequestContext {
        id,
        method: request.method().clone(),
        uri: request.uri().clone(),
    };
    let limit = super::body_limit(request.uri().path());
    let serve = async {
        if declared_too_large(&request, limit) {
            return super::body_too_large(limit);
        }
        match AssertUnwindSafe(next.run(request)).catch_unwind().await {
            Ok(response) if response.status() == StatusCode::PAYLOAD_TOO_LARGE => {
                super::body_too_large(limit)
            }
            Ok(response) => response,
            Err(_) => super::panicked(),
        }
    };
    let (mut response, context) = logging::in_request(context, serve).await;
    let took = started.elapsed();
    let status = response.status().as_u16();
    let Some(context) = context else {
        return response;
    };
    app.metrics.operator.observe_request(
        context.method.as_str(),
        endpoint.as_ref().map_or(FALLBACK, MatchedPath::as_str),
        status,
        took.as_secs_f64(),
    );
    if let Some(user_agent) = user_agent {
        logging::access(&logging::AccessLine {
            request: &context,
            status,
            took,
            user_agent: user_agent
                .as_ref()
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default(),
        });
    }
    response.headers_mut().insert(REQUEST_ID, context.id);
    response
}
