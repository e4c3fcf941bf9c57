//! Who may reach the API from where: the caller's principal (from `Authorization`), rate limits,
//! the operation timeout, CORS and WebSocket origins, and the switches for GraphiQL and
//! `/metrics`. Every route asks here, so HTTP, WebSocket and SSE treat a caller alike.

use crate::error::ErrorCode;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};

use super::graphql_http::{self, Media};
use super::rate::{Limited, RateLimits};
use crate::auth::{Auth, Principal, Refusal};

/// The access settings and state of a running server.
pub struct Access {
    /// Authentication.
    pub auth: Arc<Auth>,
    /// Rate limits per role.
    pub rate: RateLimits,
    /// Longest an operation may run.
    pub timeout: Duration,
    /// GraphiQL on a bare GET.
    pub graphiql: bool,
    /// `/metrics` needs a key.
    pub metrics_require_key: bool,
    /// Origins allowed besides the page's own.
    pub origins: Vec<String>,
}

impl Access {
    /// Anyone may do anything (a server assembled without settings, in tests).
    pub fn open() -> Self {
        Access {
            auth: Auth::open(),
            rate: RateLimits::new(&[]),
            timeout: Duration::from_secs(30),
            graphiql: true,
            metrics_require_key: false,
            origins: Vec::new(),
        }
    }

    /// The client's address (the peer's, or from `X-Forwarded-For` sent by a trusted proxy).
    pub fn client(&self, peer: IpAddr, headers: &HeaderMap) -> IpAddr {
        let forwarded = headers.get("x-forwarded-for").and_then(|v| v.to_str().ok());
        self.auth.client_address(peer, forwarded)
    }

    /// Who sends these headers from `peer`: the `Authorization` credential, else the sign-in
    /// session's cookie (only from this server's own pages), else anonymous.
    pub async fn principal(&self, peer: IpAddr, headers: &HeaderMap) -> Result<Principal, Refusal> {
        let token = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .map(|v| crate::auth::bearer(v).unwrap_or("\u{0}invalid"));
        if token.is_none()
            && let Some(session) = cookie_value(headers, SESSION_COOKIE)
            && self.auth.provider().is_some()
        {
            if !same_origin(headers) {
                return Err(Refusal::CrossSite);
            }
            let client = self.client(peer, headers);
            return tokio::time::timeout(
                self.timeout,
                self.auth.authenticate_session(session, client),
            )
            .await
            .unwrap_or(Err(Refusal::TimedOut(self.timeout)));
        }
        self.auth
            .authenticate_within(token, self.client(peer, headers), self.timeout)
            .await
    }

    /// The principal, or the answer refusing the request as a GraphQL error in `media`.
    pub async fn admit(
        &self,
        peer: IpAddr,
        headers: &HeaderMap,
        media: Media,
    ) -> Result<Principal, Response> {
        self.admit_as(peer, headers, graphql_body(media)).await
    }

    /// The caller of a request, from its parts (its address: axum's connect info), admitted as
    /// [`Access::admit_as`] does.
    pub async fn admit_parts(
        &self,
        parts: &axum::http::request::Parts,
        body: impl Fn(ErrorCode, String) -> Response,
    ) -> Result<Principal, Response> {
        let Some(peer) = peer(parts) else {
            return Err(unknown_peer(body));
        };
        self.admit_as(peer, &parts.headers, body).await
    }

    /// As [`Access::admit_parts`], except that a caller sending no credential is let in as an
    /// anonymous reader from any address (the routes `HUB_OPEN_READ` opens), within the
    /// anonymous rate limit. A credential sent is checked as everywhere.
    pub async fn admit_parts_openly(
        &self,
        parts: &axum::http::request::Parts,
        body: impl Fn(ErrorCode, String) -> Response,
    ) -> Result<Principal, Response> {
        if parts.headers.contains_key(header::AUTHORIZATION) {
            return self.admit_parts(parts, body).await;
        }
        let Some(peer) = peer(parts) else {
            return Err(unknown_peer(body));
        };
        let principal = Principal::anonymous(self.client(peer, &parts.headers));
        self.rate
            .check(&principal, 1)
            .map_err(|l| limited_as(&l, &body))?;
        Ok(principal)
    }

    /// The principal, or the answer refusing the request: its body written by `body` (the
    /// route's error shape), with `WWW-Authenticate` on 401 and `Retry-After` on 429.
    pub async fn admit_as(
        &self,
        peer: IpAddr,
        headers: &HeaderMap,
        body: impl Fn(ErrorCode, String) -> Response,
    ) -> Result<Principal, Response> {
        let principal = self
            .principal(peer, headers)
            .await
            .map_err(|r| refused_as(&r, &body))?;
        self.rate
            .check(&principal, 1)
            .map_err(|l| limited_as(&l, &body))?;
        Ok(principal)
    }

    /// True when a browser page from `origin` may open a WebSocket here: no `Origin` (not a
    /// browser), the page's own origin (same host), or an allowed one.
    pub fn origin_allowed(&self, headers: &HeaderMap) -> bool {
        let Some(origin) = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()) else {
            return true;
        };
        let origin = origin.trim_end_matches('/');
        if self.origins.iter().any(|o| o.eq_ignore_ascii_case(origin)) {
            return true;
        }
        origin_is_host(origin, headers)
    }

    /// The CORS layer: only the allowed origins, with the headers a GraphQL client sends.
    pub fn cors(&self) -> Option<tower_http::cors::CorsLayer> {
        if self.origins.is_empty() {
            return None;
        }
        let origins: Vec<HeaderValue> = self
            .origins
            .iter()
            .filter_map(|o| HeaderValue::from_str(o).ok())
            .collect();
        Some(
            tower_http::cors::CorsLayer::new()
                .allow_origin(origins)
                .allow_methods([axum::http::Method::GET, axum::http::Method::POST])
                .allow_headers([header::AUTHORIZATION, header::CONTENT_TYPE, header::ACCEPT])
                // The REST lists' count (`/api/v1/…`, `/v1/…`).
                .expose_headers([
                    header::HeaderName::from_static("x-total-count"),
                    header::HeaderName::from_static(super::observe::REQUEST_ID),
                ])
                .max_age(Duration::from_secs(600)),
        )
    }
}

/// True when a request carrying the session cookie comes from this server's own pages: a
/// browser says so (`Sec-Fetch-Site: same-origin`, or `none` for what the person typed), and an
/// `Origin` sent names this host. A POST from another site (a form, a fetch) is refused even
/// before SameSite would keep its cookie back. Under this server's `Referrer-Policy: no-referrer`
/// a form's POST says `Origin: null`: then the browser's `Sec-Fetch-Site` must vouch for it.
pub fn same_origin(headers: &HeaderMap) -> bool {
    let text = |name| {
        headers
            .get(name)
            .and_then(|v: &HeaderValue| v.to_str().ok())
    };
    let site = text(header::HeaderName::from_static("sec-fetch-site"));
    let site_ok = site
        .is_none_or(|s| s.eq_ignore_ascii_case("same-origin") || s.eq_ignore_ascii_case("none"));
    let origin_ok = match text(header::ORIGIN) {
        None => true,
        Some("null") => site.is_some(),
        Some(origin) => origin_is_host(origin.trim_end_matches('/'), headers),
    };
    site_ok && origin_ok
}

/// True when `origin` (without a trailing slash) names the host the request was sent to: the
/// page's own origin.
fn origin_is_host(origin: &str, headers: &HeaderMap) -> bool {
    let host = headers.get(header::HOST).and_then(|v| v.to_str().ok());
    let origin_host = origin.split_once("://").map(|(_, h)| h);
    matches!((host, origin_host), (Some(h), Some(o)) if h.eq_ignore_ascii_case(o))
}

/// The sign-in session cookie's name (set by `/auth/callback`).
pub const SESSION_COOKIE: &str = "vitistack_session";

/// The value of cookie `name` in the request.
pub fn cookie_value<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(n, _)| *n == name)
        .map(|(_, v)| v.trim())
        .filter(|v| !v.is_empty())
}

/// A GraphQL error body in `media`.
pub fn graphql_body(media: Media) -> impl Fn(ErrorCode, String) -> Response {
    move |code, message| graphql_http::refuse(media, code, message).into_response()
}

/// The answer to a refused credential: 401 (with `WWW-Authenticate`), 403 or 503.
pub fn refused(r: &Refusal, media: Media) -> Response {
    refused_as(r, &graphql_body(media))
}

fn refused_as(r: &Refusal, body: &impl Fn(ErrorCode, String) -> Response) -> Response {
    let mut response = body(r.code(), r.message());
    if r.code() == ErrorCode::Unauthenticated {
        response.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Bearer realm=\"vitistack\""),
        );
    }
    response
}

/// The answer to an operation over the rate limit: 429 with `Retry-After`.
fn limited_as(l: &Limited, body: &impl Fn(ErrorCode, String) -> Response) -> Response {
    let mut response = body(ErrorCode::RateLimited, l.message.clone());
    if let Ok(v) = HeaderValue::from_str(&l.retry_after.to_string()) {
        response.headers_mut().insert(header::RETRY_AFTER, v);
    }
    response
}

pub use crate::error::timeout_message;

/// The address a request came from (axum's connect info).
fn peer(parts: &axum::http::request::Parts) -> Option<IpAddr> {
    parts
        .extensions
        .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
        .map(|c| c.0.ip())
}

/// The answer to a request whose address is unknown (a server wired without connect info).
fn unknown_peer(body: impl Fn(ErrorCode, String) -> Response) -> Response {
    body(
        ErrorCode::Internal,
        "the caller's address is unknown".to_string(),
    )
}
