//! Dashboard sign-in through the OpenID provider: `/auth/info` (what the sign-in page offers),
//! `/auth/login` (to the provider, with PKCE), `/auth/callback` (back from it: the session
//! begins, its cookie is set), `/auth/logout` (POST only, same origin: the session ends, and the
//! provider's too where it has an end-session endpoint).

use axum::Router;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Deserialize;

use super::state::AppState;

use super::access::{SESSION_COOKIE, cookie_value};

/// The cookie carrying a sign-in to the provider and back.
const FLOW_COOKIE: &str = "vitistack_signin";

/// The sign-in routes.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/auth/info", get(info))
        .route("/auth/login", get(login))
        .route("/auth/callback", get(callback))
        .route("/auth/logout", post(logout))
}

/// What the sign-in page offers.
async fn info(State(app): State<AppState>) -> Response {
    let auth = &app.access.auth;
    let oidc = auth.provider().map(|p| {
        serde_json::json!({
            "provider": p.settings().provider_name,
            "signIn": auth.sessions().is_some().then_some("/auth/login"),
            "signOut": "/auth/logout",
        })
    });
    axum::Json(serde_json::json!({ "oidc": oidc })).into_response()
}

#[derive(Deserialize)]
struct LoginQuery {
    to: Option<String>,
}

/// To the provider's sign-in page.
async fn login(
    State(app): State<AppState>,
    headers: HeaderMap,
    Query(q): Query<LoginQuery>,
) -> Response {
    let Some(sessions) = app.access.auth.sessions() else {
        return page(
            StatusCode::NOT_FOUND,
            "Sign-in is not set up",
            "This server has no OpenID provider with a client secret and a database for sessions (OIDC_ISSUER_URL, OIDC_CLIENT_ID, OIDC_CLIENT_SECRET_FILE).",
        );
    };
    let to = local_path(q.to.as_deref());
    let redirect = redirect_url(&app, &headers);
    match sessions.begin(&to, &redirect).await {
        Ok((url, flow)) => {
            let mut r = see_other(&url);
            let cookie = cookie(
                FLOW_COOKIE,
                &flow,
                "/auth",
                Some(crate::auth::session::FLOW_LIFETIME.as_secs() as i64),
                secure(&redirect),
            );
            set_cookie(&mut r, &cookie);
            r
        }
        Err(e) => page(
            StatusCode::SERVICE_UNAVAILABLE,
            "Sign-in is unavailable",
            &e.to_string(),
        ),
    }
}

#[derive(Deserialize)]
struct CallbackQuery {
    code: Option<String>,
    state: Option<String>,
    error: Option<String>,
    error_description: Option<String>,
}

/// Back from the provider: the session begins.
async fn callback(
    State(app): State<AppState>,
    headers: HeaderMap,
    Query(q): Query<CallbackQuery>,
) -> Response {
    let Some(sessions) = app.access.auth.sessions() else {
        return page(StatusCode::NOT_FOUND, "Sign-in is not set up", "");
    };
    if let Some(error) = q.error {
        return page(
            StatusCode::FORBIDDEN,
            "The provider did not sign you in",
            &format!("{error}: {}", q.error_description.unwrap_or_default()),
        );
    }
    let (Some(code), Some(state), Some(flow)) =
        (q.code, q.state, cookie_value(&headers, FLOW_COOKIE))
    else {
        return page(
            StatusCode::BAD_REQUEST,
            "Sign-in could not finish",
            "the provider's answer or this browser's sign-in cookie is missing: sign in again",
        );
    };
    let redirect = redirect_url(&app, &headers);
    let finished = match sessions.finish(flow, &state, &code, &redirect).await {
        Ok(done) => done,
        Err(e) => {
            tracing::info!(error = %e, "a sign-in did not finish");
            return page(
                StatusCode::BAD_REQUEST,
                "Sign-in could not finish",
                &e.to_string(),
            );
        }
    };
    // Someone the provider knows but RBAC and the role map give nothing: said now, not as an
    // empty dashboard.
    let person = &finished.person;
    if let Err(refusal) = app.access.auth.admits(person).await {
        return page(
            StatusCode::FORBIDDEN,
            "Signed in, but nothing to see",
            &refusal.message(),
        );
    }
    let token = match sessions.open(&finished).await {
        Ok(token) => token,
        Err(e) => {
            tracing::warn!(error = %e, "a session could not be kept");
            return page(
                StatusCode::SERVICE_UNAVAILABLE,
                "Sign-in could not finish",
                &e.to_string(),
            );
        }
    };
    tracing::info!(user = %person.user, groups = ?person.groups, "signed in");
    let mut r = see_other(&finished.to);
    let max_age = (app
        .access
        .auth
        .provider()
        .map_or(0, |p| p.settings().session_max.as_secs())) as i64;
    set_cookie(
        &mut r,
        &cookie(
            SESSION_COOKIE,
            &token,
            "/",
            Some(max_age),
            secure(&redirect),
        ),
    );
    set_cookie(
        &mut r,
        &cookie(FLOW_COOKIE, "", "/auth", Some(0), secure(&redirect)),
    );
    r
}

/// Sign out: the session ends here, then at the provider when it can.
async fn logout(State(app): State<AppState>, headers: HeaderMap) -> Response {
    if !super::access::same_origin(&headers) {
        return page(
            StatusCode::FORBIDDEN,
            "Sign-out refused",
            "the request came from another site",
        );
    }
    let redirect = redirect_url(&app, &headers);
    let base = redirect.trim_end_matches("/auth/callback").to_string();
    let mut id_token = None;
    if let (Some(sessions), Some(token)) = (
        app.access.auth.sessions(),
        cookie_value(&headers, SESSION_COOKIE),
    ) {
        id_token = sessions.end(token).await;
    }
    let back = format!("{base}/");
    let to = match app.access.auth.provider() {
        Some(p) => p
            .end_session_url(id_token.as_deref(), &back)
            .await
            .unwrap_or_else(|| "/".to_string()),
        None => "/".to_string(),
    };
    let mut r = see_other(&to);
    set_cookie(
        &mut r,
        &cookie(SESSION_COOKIE, "", "/", Some(0), secure(&redirect)),
    );
    r
}

/// Where the provider sends the browser back: `OIDC_REDIRECT_URL`, or this host's
/// `/auth/callback`.
fn redirect_url(app: &AppState, headers: &HeaderMap) -> String {
    if let Some(url) = app
        .access
        .auth
        .provider()
        .and_then(|p| p.settings().redirect_url.clone())
    {
        return url;
    }
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("localhost");
    let https = headers
        .get("x-forwarded-proto")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|p| p.eq_ignore_ascii_case("https"));
    format!(
        "{}://{host}/auth/callback",
        if https { "https" } else { "http" }
    )
}

/// A path on this server to return to (anything else, another site included, is `/`).
fn local_path(to: Option<&str>) -> String {
    match to {
        Some(t) if t.starts_with('/') && !t.starts_with("//") && !t.contains('\\') => t.to_string(),
        _ => "/".to_string(),
    }
}

fn secure(redirect: &str) -> bool {
    redirect.starts_with("https://")
}

/// A `Set-Cookie` value: HttpOnly, SameSite=Lax (it must come back with the provider's
/// redirect), Secure when served over HTTPS.
fn cookie(name: &str, value: &str, path: &str, max_age: Option<i64>, secure: bool) -> String {
    let mut c = format!("{name}={value}; Path={path}; HttpOnly; SameSite=Lax");
    if let Some(age) = max_age {
        c.push_str(&format!("; Max-Age={age}"));
    }
    if secure {
        c.push_str("; Secure");
    }
    c
}

fn set_cookie(r: &mut Response, value: &str) {
    if let Ok(v) = HeaderValue::from_str(value) {
        r.headers_mut().append(header::SET_COOKIE, v);
    }
}

fn see_other(to: &str) -> Response {
    let mut r = StatusCode::SEE_OTHER.into_response();
    if let Ok(v) = HeaderValue::from_str(to) {
        r.headers_mut().insert(header::LOCATION, v);
    }
    r.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

/// A small page saying what happened, with a way back.
fn page(status: StatusCode, title: &str, text: &str) -> Response {
    let escape = |s: &str| {
        s.replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;")
            .replace('"', "&quot;")
    };
    let body = format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{t}</title></head>\
         <body style=\"font-family:system-ui;max-width:40rem;margin:4rem auto\"><h1>{t}</h1>\
         <p role=\"alert\">{x}</p><p><a href=\"/\">Back to the dashboard</a></p></body></html>",
        t = escape(title),
        x = escape(text)
    );
    (
        status,
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        body,
    )
        .into_response()
}

/// The dashboard's pages may send a form to the provider: sign-out is a POST here that
/// redirects there, and the page's `form-action` covers redirects. Adds the provider's origin
/// (nothing else); the router adds this layer only when a provider is configured.
pub async fn allow_provider_forms(State(app): State<AppState>, mut r: Response) -> Response {
    // Only pages carry a CSP: every other response passes untouched, nothing formatted.
    let (Some(provider), Some(csp)) = (
        app.access.auth.provider(),
        r.headers()
            .get(header::CONTENT_SECURITY_POLICY)
            .and_then(|v| v.to_str().ok()),
    ) else {
        return r;
    };
    let Some((scheme, rest)) = provider.settings().issuer.split_once("://") else {
        return r;
    };
    let origin = format!("{scheme}://{}", rest.split('/').next().unwrap_or_default());
    let csp = csp.replace(
        "form-action 'self'",
        &format!("form-action 'self' {origin}"),
    );
    if let Ok(v) = HeaderValue::from_str(&csp) {
        r.headers_mut().insert(header::CONTENT_SECURITY_POLICY, v);
    }
    r
}
