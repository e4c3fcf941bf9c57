//! Every HTTP request: its request id (taken from `X-Request-Id` or made, returned, and carried
//! in the span its handler runs in), its log line and its request metrics.

use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::http::{HeaderMap, HeaderValue, header};
use axum::middleware::Next;
use axum::response::Response;
use tracing::Instrument;

use super::AppState;

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
    path == "/health" || path.starts_with("/health/") || path == "/ready"
}

/// The middleware: runs the request in a span carrying its id, then counts and logs it. Above
/// `info` (no request lines, and the span would be off anyway) a request costs no string: only
/// its id and its metrics. Probes run in their span but get no line.
pub async fn observe(State(app): State<AppState>, mut request: Request, next: Next) -> Response {
    let started = Instant::now();
    let id = request_id(request.headers());
    request.headers_mut().insert(REQUEST_ID, id.clone());
    let method = request.method().clone();
    let endpoint = request.extensions().get::<MatchedPath>().cloned();
    let (mut response, line) = if tracing::enabled!(tracing::Level::INFO) {
        let path = request.uri().path().to_string();
        let user_agent: String = request
            .headers()
            .get(header::USER_AGENT)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .chars()
            .take(256)
            .collect();
        let span = tracing::info_span!(
            "request",
            requestId = id.to_str().unwrap_or_default(),
            method = method.as_str(),
            path = path.as_str()
        );
        let response = next.run(request).instrument(span.clone()).await;
        (response, Some((span, path, user_agent)))
    } else {
        (next.run(request).await, None)
    };
    let took = started.elapsed();
    let status = response.status().as_u16();
    app.metrics.operator.observe_request(
        method.as_str(),
        endpoint.as_ref().map_or(FALLBACK, MatchedPath::as_str),
        status,
        took.as_secs_f64(),
    );
    if let Some((span, path, user_agent)) = line.filter(|(_, path, _)| !quiet(path)) {
        let _in = span.enter();
        tracing::info!(
            statusCode = status,
            duration = took.as_micros() as f64 / 1000.0,
            userAgent = user_agent.as_str(),
            "{method} {path} {status}"
        );
    }
    response.headers_mut().insert(REQUEST_ID, id);
    response
}
