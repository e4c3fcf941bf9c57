//! The old status page's routes, for its agents and the programs that read it: `POST /api/report`
//! (an agent's report, see [`crate::source::hub`]), `GET /api/status` (the old `StatusData` on one
//! cluster, `HubData` with several datacenters) and `GET /events` with
//! `Accept: text/event-stream` (the same JSON as a stream; a browser's `/events` is the
//! dashboard's page).

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures::StreamExt;
use tokio::sync::broadcast::error::{RecvError, TryRecvError};
use tokio::time::Instant;

use super::rest::{Admitted, error};
use super::{AppState, assets, streams};
use crate::domain::status_page::{hub_data, status_data};
use crate::error::ErrorCode;
use crate::model::{Datacenter, Kind};
use crate::source::hub::{MAX_REPORT_BYTES, Refusal};
use crate::store::Change;

/// Where agents POST their reports.
pub(super) const REPORT_PATH: &str = "/api/report";

/// A stream sends a frame at least this often (the old page's cadence: its badge says "Live"
/// while frames arrive)...
const CADENCE: std::time::Duration = std::time::Duration::from_secs(5);
/// ...and at most one in this long, however fast hosts and VMs change.
const MIN_GAP: std::time::Duration = std::time::Duration::from_secs(1);

/// The old page's routes.
pub(super) fn routes() -> Router<AppState> {
    Router::new()
        .route(
            REPORT_PATH,
            post(report).layer(DefaultBodyLimit::max(MAX_REPORT_BYTES)),
        )
        .route("/api/status", get(status))
        .route("/events", get(events))
}

fn refusal(r: &Refusal) -> Response {
    let code = match r {
        Refusal::Off | Refusal::NoToken | Refusal::UnknownToken => ErrorCode::Unauthenticated,
        Refusal::OtherDatacenter { .. } => ErrorCode::Forbidden,
        Refusal::BadJson(_) | Refusal::Invalid { .. } => ErrorCode::BadRequest,
        Refusal::Watched(_) => ErrorCode::Conflict,
    };
    let mut response = error(code, r.to_string());
    if code == ErrorCode::Unauthenticated {
        // The challenge every other route sends (`access::refused`).
        response.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Bearer realm=\"vitistack\""),
        );
    }
    response
}

/// An agent's report: 204 when taken (applied at once), or the refusal (nothing applied).
async fn report(State(app): State<AppState>, headers: HeaderMap, body: Bytes) -> Response {
    let Some(hub) = app.hub.clone() else {
        return refusal(&Refusal::Off);
    };
    let authorization = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .map(String::from);
    // Decoding up to 10 MiB and writing the graph is work for a blocking thread.
    let taken =
        tokio::task::spawn_blocking(move || hub.report(authorization.as_deref(), &body)).await;
    match taken {
        Ok(Ok(accepted)) => {
            tracing::debug!(datacenter = %accepted.datacenter, changes = accepted.changes, "report taken");
            // Kept for the other replicas and for after a restart (best effort: it is in this
            // replica's graph already, and the agent reports again within seconds).
            if let Some(db) = app.history.as_ref().and_then(|h| h.db())
                && let Err(e) = crate::db::hub_reports::save(&db, &accepted.stored).await
            {
                tracing::warn!(datacenter = %accepted.datacenter, error = %e, "report not kept in the database");
            }
            StatusCode::NO_CONTENT.into_response()
        }
        Ok(Err(r)) => {
            tracing::warn!(reason = %r, "report refused");
            refusal(&r)
        }
        Err(_) => super::panicked(),
    }
}

/// The name the one datacenter of a single-cluster server goes by in the old shapes: its
/// Vitistack's name.
fn single_name(app: &AppState, snap: &crate::store::Snapshot) -> String {
    crate::domain::summary::datacenter(snap, &app.vitistack_name)
        .map(|v| v.name().to_string())
        .unwrap_or_else(|| "local".into())
}

/// `/api/status`'s JSON now, of what `scope` sees (the hosts are cluster-scoped: a reader
/// limited to namespaces sees its VMs without them).
fn payload(app: &AppState, scope: &crate::store::Scope) -> String {
    let snap = app.store.view(&app.store.snapshot(), scope);
    let updated = jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string();
    let json = if app.source.datacenters.is_some() {
        let mut datacenters: Vec<(Datacenter, bool)> = app
            .source
            .datacenter_reports()
            .into_iter()
            .map(|r| (r.key, r.state.unavailable()))
            .collect();
        // Objects of a datacenter nobody has said anything about since the start (an agent's
        // last report, read back from the database) may be behind.
        for dc in snap.datacenters() {
            if !datacenters.iter().any(|(d, _)| d == dc) {
                datacenters.push((dc.clone(), true));
            }
        }
        serde_json::to_string(&hub_data(
            &snap,
            &datacenters,
            &single_name(app, &snap),
            &updated,
        ))
    } else {
        serde_json::to_string(&status_data(&snap, &Datacenter::default(), "", &updated))
    };
    json.unwrap_or_default()
}

/// A reader of the old page's JSON: admitted as on every route, or, with `HUB_OPEN_READ`, also
/// without a credential from any address (as the old hub served it).
struct Reader(Admitted);

impl axum::extract::FromRequestParts<AppState> for Reader {
    type Rejection = Response;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        app: &AppState,
    ) -> Result<Self, Response> {
        let principal = if app.hub_open_read {
            app.access.admit_parts_openly(parts, error).await?
        } else {
            app.access.admit_parts(parts, error).await?
        };
        Ok(Reader(Admitted {
            app: app.clone(),
            principal,
        }))
    }
}

async fn status(Reader(Admitted { app, principal }): Reader) -> Response {
    let json = payload(&app, &principal.scope);
    ([(header::CONTENT_TYPE, "application/json")], json).into_response()
}

/// `/events`: the old page's stream for a client that asks for one, the dashboard otherwise.
async fn events(
    admitted: Result<Reader, Response>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    let wants_stream = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.contains("text/event-stream"));
    if !wants_stream {
        return assets::serve(method, uri, headers).await;
    }
    let Admitted { app, principal } = match admitted {
        Ok(Reader(a)) => a,
        Err(refused) => return refused,
    };
    let admission = match app.gate.admit(principal.address) {
        Ok(a) => a,
        Err(reason) => return error(ErrorCode::ConnectionLimit, reason.to_string()),
    };
    let follow = Follow {
        changes: app.store.subscribe(),
        last: None,
        app: app.clone(),
        scope: principal.scope.clone(),
    };
    let mut going_away = app.going_away.clone();
    let frames = futures::stream::unfold(follow, next_frame)
        .map(move |data| {
            // Held while the stream is open.
            let _held = &admission;
            Ok::<_, std::convert::Infallible>(Event::default().data(data))
        })
        .take_until(async move { streams::gone(&mut going_away).await });
    let mut response = Sse::new(frames).into_response();
    // As the old page sent it: any page may read it.
    response.headers_mut().insert(
        header::ACCESS_CONTROL_ALLOW_ORIGIN,
        HeaderValue::from_static("*"),
    );
    response
}

/// A stream's place: the change stream it watches and when it last sent.
struct Follow {
    app: AppState,
    changes: tokio::sync::broadcast::Receiver<Arc<Change>>,
    last: Option<Instant>,
    /// What the reader sees.
    scope: crate::store::Scope,
}

/// True for a change the old shapes show.
fn shown(change: &Change) -> bool {
    matches!(
        change.object.kind(),
        Kind::Node | Kind::VirtualMachineInstance | Kind::Machine
    )
}

/// The next frame: at once for a new stream, then after a change of hosts or VMs (at most one a
/// second) or after [`CADENCE`] without one.
async fn next_frame(mut f: Follow) -> Option<(String, Follow)> {
    if let Some(last) = f.last {
        let deadline = last + CADENCE;
        loop {
            tokio::select! {
                _ = tokio::time::sleep_until(deadline) => break,
                c = f.changes.recv() => match c {
                    Ok(c) if shown(&c) => break,
                    Ok(_) => {}
                    Err(RecvError::Lagged(_)) => break,
                    Err(RecvError::Closed) => return None,
                },
            }
        }
        tokio::time::sleep_until(last + MIN_GAP).await;
        // What arrived meanwhile is in the snapshot this frame reads.
        loop {
            match f.changes.try_recv() {
                Ok(_) | Err(TryRecvError::Lagged(_)) => {}
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Closed) => return None,
            }
        }
    }
    f.last = Some(Instant::now());
    let data = payload(&f.app, &f.scope);
    Some((data, f))
}
