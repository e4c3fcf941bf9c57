//! The dashboard's files, embedded at build time (`server/build.rs` reads `web/dist`): served with
//! their content type, gzip-compressed when the browser accepts it (compressed once, at build
//! time), cached forever under `/assets/` (the names carry a content hash) and revalidated for
//! the page itself. Every other path that looks like a page loads the dashboard, which reads the
//! URL (deep links).

use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{Html, IntoResponse, Response};
use sha2::{Digest, Sha256};

/// One embedded file.
pub struct Asset {
    /// URL path.
    pub path: &'static str,
    /// `Content-Type`.
    pub content_type: &'static str,
    /// The file.
    pub body: &'static [u8],
    /// Its gzip copy, when the build made one.
    pub gzip: Option<&'static [u8]>,
}

static ASSETS: &[Asset] = include!(concat!(env!("OUT_DIR"), "/web_assets.rs"));

/// What the page may load: only this origin (no CDN, no fonts elsewhere); WebAssembly allowed.
const CSP: &str = "default-src 'self'; script-src 'self' 'wasm-unsafe-eval'; \
    style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; \
    frame-ancestors 'none'; base-uri 'none'; form-action 'self'";

const NOT_BUILT: &str = "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
<title>vitistack</title></head><body><h1>vitistack</h1><p>This binary was built without the \
dashboard: run <code>scripts/build-web.sh</code>, then build the server again (the README's \
commands do both). The GraphQL API works: <a href=\"/graphql\">GraphiQL</a>.</p></body></html>";

/// Paths the dashboard never owns: an unknown one is a 404, not the app.
const RESERVED: &[&str] = &[
    "/api/", "/v1/", "/graphql", "/health", "/metrics", "/ready", "/assets/", "/auth/",
];

/// True when the binary carries the dashboard.
pub fn embedded() -> bool {
    find("/index.html").is_some()
}

fn find(path: &str) -> Option<&'static Asset> {
    ASSETS.iter().find(|a| a.path == path)
}

/// The dashboard for `/`, its files, and its pages' deep links.
pub async fn serve(method: Method, uri: Uri, headers: HeaderMap) -> Response {
    if method != Method::GET && method != Method::HEAD {
        return (
            StatusCode::METHOD_NOT_ALLOWED,
            [(header::ALLOW, "GET, HEAD")],
            "method not allowed\n",
        )
            .into_response();
    }
    let path = uri.path();
    if path != "/index.html"
        && let Some(asset) = find(path)
    {
        return respond(asset, &headers, true);
    }
    let last = path.rsplit('/').next().unwrap_or_default();
    if RESERVED.iter().any(|r| path.starts_with(r)) || last.contains('.') {
        return (StatusCode::NOT_FOUND, "not found\n").into_response();
    }
    match find("/index.html") {
        Some(index) => respond(index, &headers, false),
        None => Html(NOT_BUILT).into_response(),
    }
}

fn accepts_gzip(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT_ENCODING)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|coding| {
            let mut parts = coding.split(';').map(str::trim);
            let name = parts.next().unwrap_or_default();
            let refused = parts
                .any(|p| p.strip_prefix("q=").and_then(|q| q.parse::<f32>().ok()) == Some(0.0));
            (name.eq_ignore_ascii_case("gzip") || name == "*") && !refused
        })
}

fn respond(asset: &'static Asset, headers: &HeaderMap, immutable: bool) -> Response {
    let etag = format!("\"{}\"", &hex(&Sha256::digest(asset.body))[..20]);
    let mut response = if !immutable
        && headers
            .get(header::IF_NONE_MATCH)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.split(',').any(|t| t.trim() == etag || t.trim() == "*"))
    {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        match asset.gzip.filter(|_| accepts_gzip(headers)) {
            Some(gz) => {
                let mut r = Body::from(gz).into_response();
                r.headers_mut()
                    .insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
                r
            }
            None => Body::from(asset.body).into_response(),
        }
    };
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(asset.content_type),
    );
    h.insert(header::VARY, HeaderValue::from_static("Accept-Encoding"));
    h.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static(if immutable {
            "public, max-age=31536000, immutable"
        } else {
            "no-cache"
        }),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    if let Ok(v) = HeaderValue::from_str(&etag) {
        h.insert(header::ETAG, v);
    }
    if asset.content_type.starts_with("text/html") {
        h.insert(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(CSP),
        );
        h.insert(
            header::REFERRER_POLICY,
            HeaderValue::from_static("no-referrer"),
        );
    }
    response
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
