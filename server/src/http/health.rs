//! Health and readiness, in the old aggregator's documented contract: `/health` (overall, with
//! `checks.database`, `checks.cache` and `checks.operators`), `/health/live`, `/ready`,
//! `/health/operators`, `/health/database` and `/health/cache`.

use std::sync::atomic::Ordering;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::json;

use super::AppState;
use crate::domain::operators::{self, OperatorHealth, OperatorState};

/// The overall state: `healthy`, `degraded` (serving, but the database is away or an operator
/// is not healthy) or `unhealthy` (the graph is not current: loading, a watch is behind, or
/// the server is stopping).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, async_graphql::Enum)]
#[serde(rename_all = "lowercase")]
pub enum ServiceState {
    /// Everything answers.
    Healthy,
    /// Serving current data, with a dependency not healthy.
    Degraded,
    /// Not serving current data.
    Unhealthy,
}

/// A dependency's state in `checks`.
fn check(ok: bool) -> &'static str {
    if ok { "healthy" } else { "unhealthy" }
}

/// The body of `/health`, as documented: status, timestamp and checks.
#[derive(Serialize)]
struct Health {
    status: ServiceState,
    timestamp: String,
    checks: Checks,
}

#[derive(Serialize)]
struct Checks {
    database: &'static str,
    cache: &'static str,
    operators: std::collections::BTreeMap<String, OperatorState>,
    /// Several datacenters: each one's state (one cluster: left out, as before).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    datacenters: Vec<crate::source::datacenters::DatacenterReport>,
    /// With LEADER_ELECTION: whether this replica holds the Lease (left out otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    leader: Option<crate::leader::LeaderReport>,
}

impl AppState {
    /// Every operator, judged now.
    pub fn operators(&self) -> Vec<OperatorHealth> {
        let snap = self.store.snapshot();
        let lag = self.source.lag(&snap);
        operators::judge(&snap, &lag, &self.probes, self.operator_stall)
    }

    /// True once SIGTERM has come.
    pub fn is_stopping(&self) -> bool {
        *self.going_away.borrow()
    }

    /// True once loaded, while every kind is current and the server is not stopping.
    fn current(&self) -> bool {
        self.ready.load(Ordering::Acquire) && !self.is_stopping() && self.source.ready()
    }
}

/// `/health`: 200 when healthy or degraded, 503 when unhealthy.
pub async fn health(State(app): State<AppState>) -> Response {
    let ops = app.operators();
    let database = app.db_health.is_up();
    let datacenters = app.source.datacenter_reports();
    let some_away = datacenters.iter().any(|d| d.state.unavailable());
    let status = if !app.current() {
        ServiceState::Unhealthy
    } else if !database || some_away || operators::worst(&ops) != OperatorState::Healthy {
        ServiceState::Degraded
    } else {
        ServiceState::Healthy
    };
    let body = Health {
        status,
        timestamp: jiff::Timestamp::now().to_string(),
        checks: Checks {
            database: check(database),
            // In-process: it cannot be unreachable; its figures are on /health/cache.
            cache: check(true),
            operators: ops.into_iter().map(|o| (o.operator, o.status)).collect(),
            datacenters,
            leader: app
                .history
                .as_ref()
                .map(|h| h.leader.report())
                .filter(|r| r.election),
        },
    };
    let code = if status == ServiceState::Unhealthy {
        StatusCode::SERVICE_UNAVAILABLE
    } else {
        StatusCode::OK
    };
    (code, axum::Json(body)).into_response()
}

/// `/health/live`: the process serves requests (503 once it is stopping).
pub async fn live(State(app): State<AppState>) -> Response {
    if app.is_stopping() {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            axum::Json(json!({"status": "unhealthy", "reason": "stopping"})),
        )
            .into_response();
    }
    axum::Json(json!({"status": "healthy"})).into_response()
}

/// The database's truth: 200 when the last attempt to use it worked, 503 (with the error,
/// password-free) when it did not. The live API does not depend on it, so `/ready` ignores it.
pub async fn database(State(app): State<AppState>) -> Response {
    let h = &app.metrics.history;
    let report = app.db_health.report(crate::db::health::HistoryFigures {
        pending: usize::try_from(h.pending.get()).unwrap_or(0),
        written: h.written.get(),
        dropped: h.dropped.get(),
    });
    let code = if app.db_health.is_up() {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (code, axum::Json(report)).into_response()
}

/// `/health/cache`: the response cache (in process, so always reachable) with its figures.
pub async fn cache(State(app): State<AppState>) -> Response {
    let (entries, bytes, max_bytes) = app.cache.figures();
    let m = &app.metrics;
    axum::Json(json!({
        "status": "healthy",
        "response": {
            "entries": entries,
            "bytes": bytes,
            "maxBytes": max_bytes,
            "hits": m.cache_hits.get(),
            "misses": m.cache_misses.get(),
        },
        "parts": {"hits": m.part_hits.get(), "misses": m.part_misses.get()},
        "documents": {"hits": m.document_hits.get(), "misses": m.document_misses.get()},
    }))
    .into_response()
}

/// `/health/operators`: each operator's state (200 when all are healthy and every kind is
/// current, else 503), with every watched kind's state.
pub async fn operators(State(app): State<AppState>) -> Response {
    let ops = app.operators();
    let worst = operators::worst(&ops);
    let report = app.source.report(&app.store.snapshot());
    let ok = report.ready && worst == OperatorState::Healthy;
    let body = json!({
        "status": worst,
        "operators": ops.into_iter().map(|o| (o.operator.clone(), o)).collect::<std::collections::BTreeMap<_, _>>(),
        "mode": report.mode,
        "ready": report.ready,
        "kinds": report.kinds,
    });
    let code = if ok {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (code, axum::Json(body)).into_response()
}

/// 200 once everything is loaded and every kind is current; 503 while loading, while a kind is
/// stale (its API server does not answer: watches fail or hang), naming the kinds, and once the
/// server is stopping.
pub async fn ready(State(app): State<AppState>) -> Response {
    let unavailable = |body: serde_json::Value| {
        (StatusCode::SERVICE_UNAVAILABLE, axum::Json(body)).into_response()
    };
    if app.is_stopping() {
        return unavailable(json!({"status": "stopping"}));
    }
    if app.source.datacenters.is_some() {
        // Several datacenters: ready once every one has synced once (or READY_TIMEOUT_SECONDS
        // passed); one that is stale or away is served as last seen, and said to be.
        let datacenters = app.source.datacenter_reports();
        if !(app.ready.load(Ordering::Acquire) && app.source.ready()) {
            return unavailable(json!({"status": "loading", "datacenters": datacenters}));
        }
        return (
            StatusCode::OK,
            axum::Json(
                json!({"status": "ready", "sequence": app.store.snapshot().seq(),
                              "datacenters": datacenters}),
            ),
        )
            .into_response();
    }
    if !(app.ready.load(Ordering::Acquire) && app.source.synced()) {
        return unavailable(json!({"status": "loading"}));
    }
    let stale = app.source.stale_kinds();
    if !stale.is_empty() {
        return unavailable(json!({"status": "stale", "staleKinds": stale}));
    }
    (
        StatusCode::OK,
        axum::Json(json!({"status": "ready", "sequence": app.store.snapshot().seq()})),
    )
        .into_response()
}
