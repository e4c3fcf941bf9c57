//! Operating the running server: `GET`/`PUT /admin/log-level` reads and changes the log level
//! without a restart (admin role).

use crate::error::ErrorCode;
use axum::Router;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::json;

use super::AppState;
use super::rest::{Admitted, error};
use crate::auth::Role;

/// The admin routes.
pub fn routes() -> Router<AppState> {
    Router::new().route("/admin/log-level", get(level).put(set_level))
}

/// The refusal when the caller does not hold the admin role.
fn not_admin(Admitted { principal, .. }: &Admitted) -> Option<Response> {
    if principal.role != Role::Admin {
        return Some(error(
            ErrorCode::Forbidden,
            format!(
                "the log level is the admin role's to change; {} has the {} role",
                principal.name,
                principal.role.as_str()
            ),
        ));
    }
    None
}

fn current() -> Response {
    match crate::logging::level() {
        Some(level) => axum::Json(json!({ "level": level })).into_response(),
        None => error(
            ErrorCode::NoLogger,
            "this server does not run the logger (embedded in another program)",
        ),
    }
}

async fn level(caller: Admitted) -> Response {
    if let Some(refused) = not_admin(&caller) {
        return refused;
    }
    current()
}

/// Body: `{"level": "debug"}` (or a filter such as `info,vitistack::source=debug`).
async fn set_level(caller: Admitted, body: bytes::Bytes) -> Response {
    if let Some(refused) = not_admin(&caller) {
        return refused;
    }
    let Some(level) = serde_json::from_slice::<serde_json::Value>(&body)
        .ok()
        .and_then(|v| v.get("level").and_then(|l| l.as_str()).map(String::from))
    else {
        return error(
            ErrorCode::BadRequest,
            "send a JSON body {\"level\": \"debug\"} (error, warn, info, debug, trace, or a filter)",
        );
    };
    match crate::logging::set_level(&level) {
        Ok(()) => current(),
        Err(e) if crate::logging::level().is_none() => error(ErrorCode::NoLogger, e.to_string()),
        Err(e) => error(ErrorCode::BadLevel, e.to_string()),
    }
}
