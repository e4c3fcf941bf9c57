//! The old aggregator's REST routes, answered from the store: `/api/v1/clusters`,
//! `/api/v1/infrastructure` (vitistack-operator's documented API) and `/v1/...` (the routes it
//! served), with the OpenAPI document describing them at `/api/v1/openapi.json`.
//!
//! Fixed on the way (see the parity notes): lists are sorted and never fail when empty, every
//! error is JSON `{"error", "code"}`, credentials are blanked as everywhere else, and callers
//! authenticate as on `/graphql` (API keys, Kubernetes tokens, anonymous networks).

use crate::error::ErrorCode;
use crate::model::vocab::PhaseState;
use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::Path;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::{Value, json};

use super::AppState;
use crate::domain::aggregates::ClusterState;
use crate::domain::operators::{self, Operator, OperatorResources, OperatorState};
use crate::model::{Kind, Resource};
use crate::store::Snapshot;

/// The OpenAPI 3.1 document of these routes (kept in step with the router by a test).
pub const OPENAPI: &str = include_str!("openapi.json");

/// The routes, for the router. What a request may wait on is its caller's admission (a
/// TokenReview): past the operation limit (`OPERATION_TIMEOUT_SECONDS` / `API_TIMEOUT`) it is
/// answered TIMEOUT (504), as on GraphQL; the answers themselves are read from a snapshot.
pub fn routes() -> axum::Router<AppState> {
    use axum::routing::get;
    axum::Router::new()
        .route("/api/v1/openapi.json", get(openapi))
        // The old base URL answers the probes and the metrics too.
        .route("/api/v1/health", get(super::health::health))
        .route("/api/v1/ready", get(super::health::ready))
        .route("/api/v1/metrics", get(super::metrics))
        .route("/api/v1/clusters", get(clusters))
        .route("/api/v1/infrastructure", get(infrastructure))
        .route("/v1/info/version", get(version))
        .route("/v1/vitistack/name", get(vitistack_name))
        .route(
            "/v1/machineproviders",
            get(|a: Admitted| list_route(a, Kind::MachineProvider)),
        )
        .route(
            "/v1/machineproviders/{uid}",
            get(|a: Admitted, Path(uid): Path<String>| one_route(a, Kind::MachineProvider, uid)),
        )
        .route(
            "/v1/kubernetesproviders",
            get(|a: Admitted| list_route(a, Kind::KubernetesProvider)),
        )
        .route(
            "/v1/kubernetesproviders/{uid}",
            get(|a: Admitted, Path(uid): Path<String>| one_route(a, Kind::KubernetesProvider, uid)),
        )
}

/// A JSON error `{"error": message, "code": code}`, with the code's status.
pub fn error(code: ErrorCode, message: impl Into<String>) -> Response {
    (
        code.status(),
        axum::Json(json!({"error": message.into(), "code": code})),
    )
        .into_response()
}

/// A caller that may read (authenticated, within its rate limit), with the server's state; as an
/// extractor, a caller that may not is answered the refusal before the handler runs (JSON
/// `{error, code}`, with `WWW-Authenticate` on 401 and `Retry-After` on 429).
pub(crate) struct Admitted {
    /// The server's state.
    pub app: AppState,
    /// Who called.
    pub principal: crate::auth::Principal,
}

impl Admitted {
    /// The graph now, as much of it as the caller may see.
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.app
            .store
            .view(&self.app.store.snapshot(), &self.principal.scope)
    }
}

impl axum::extract::FromRequestParts<AppState> for Admitted {
    type Rejection = Response;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        app: &AppState,
    ) -> Result<Self, Response> {
        let principal = app.access.admit_parts(parts, error).await?;
        Ok(Admitted {
            app: app.clone(),
            principal,
        })
    }
}

/// A JSON answer with `X-Total-Count`.
fn counted(body: impl Serialize, total: usize) -> Response {
    let mut response = axum::Json(body).into_response();
    response
        .headers_mut()
        .insert("x-total-count", HeaderValue::from(total));
    response
}

async fn openapi() -> Response {
    ([(header::CONTENT_TYPE, "application/json")], OPENAPI).into_response()
}

async fn version() -> Response {
    axum::Json(json!({"version": crate::VERSION, "commit": crate::COMMIT})).into_response()
}

async fn vitistack_name(admitted: Admitted) -> Response {
    let (snap, app) = (admitted.snapshot(), admitted.app);
    match crate::domain::summary::datacenter(&snap, &app.vitistack_name) {
        Some(v) => axum::Json(json!({"name": v.name()})).into_response(),
        None => error(ErrorCode::NotFound, "no Vitistack object exists yet"),
    }
}

/// Every object of a cluster-scoped kind, sorted by name, credentials blanked.
fn list(snap: &Snapshot, kind: Kind) -> Vec<Value> {
    let mut objects: Vec<&Arc<Resource>> = snap.list(kind).collect();
    objects.sort_by(|a, b| a.name().cmp(b.name()));
    objects.into_iter().map(|o| full(o)).collect()
}

fn full(o: &Resource) -> Value {
    let mut v = o.to_value();
    crate::model::redact::redact_value(o.kind(), o.version(), &mut v);
    v
}

async fn list_route(admitted: Admitted, kind: Kind) -> Response {
    let items = list(&admitted.snapshot(), kind);
    let total = items.len();
    counted(items, total)
}

async fn one_route(admitted: Admitted, kind: Kind, uid: String) -> Response {
    if uuid::Uuid::parse_str(&uid).is_err() {
        return error(ErrorCode::InvalidUuid, "Invalid UUID format");
    }
    let snap = admitted.snapshot();
    match snap.by_uid(&uid).filter(|o| o.kind() == kind) {
        Some(o) => axum::Json(full(o)).into_response(),
        None => {
            let what = match kind {
                Kind::MachineProvider => "Machine provider",
                _ => "Kubernetes provider",
            };
            error(ErrorCode::NotFound, format!("{what} not found"))
        }
    }
}

/// One entry of `/api/v1/clusters`, as vitistack-operator documents it.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ClusterEntry {
    id: String,
    name: String,
    namespace: String,
    /// `active` (Ready, possibly degraded), `failed` (a terminal blocker) or `inactive`
    /// (still being provisioned, paused or deleted).
    status: &'static str,
    nodes: Nodes,
    operators: ClusterOperators,
    last_updated: String,
}

#[derive(Serialize)]
struct Nodes {
    total: usize,
    ready: usize,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ClusterOperators {
    proxmox: bool,
    talos: bool,
    kea: bool,
    kube_virt: bool,
}

fn cluster_entry(snap: &Snapshot, c: &Resource) -> Option<ClusterEntry> {
    let Resource::KubernetesCluster(kc) = c else {
        return None;
    };
    let pipeline = crate::domain::pipeline::evaluate(snap, kc);
    let machines: Vec<&Arc<Resource>> = snap.cluster_machines(c);
    let serving = operators::serving(snap, c);
    Some(ClusterEntry {
        id: if c.uid().is_empty() {
            format!("{}/{}", c.namespace(), c.name())
        } else {
            c.uid().to_string()
        },
        name: c.name().to_string(),
        namespace: c.namespace().to_string(),
        status: super::operator_metrics::cluster_status(ClusterState::of(&pipeline)),
        nodes: Nodes {
            total: machines.len(),
            ready: machines
                .iter()
                .filter(|m| m.phase() == Some("Running"))
                .count(),
        },
        operators: ClusterOperators {
            proxmox: serving.contains(&Operator::Proxmox),
            talos: serving.contains(&Operator::Talos),
            kea: serving.contains(&Operator::Kea),
            kube_virt: serving.contains(&Operator::Kubevirt),
        },
        last_updated: crate::domain::summary::last_updated(c),
    })
}

async fn clusters(admitted: Admitted) -> Response {
    let snap = admitted.snapshot();
    let mut clusters: Vec<&Arc<Resource>> = snap.list(Kind::KubernetesCluster).collect();
    clusters.sort_by(|a, b| (a.namespace(), a.name()).cmp(&(b.namespace(), b.name())));
    let entries: Vec<ClusterEntry> = clusters
        .into_iter()
        .filter_map(|c| cluster_entry(&snap, c))
        .collect();
    let total = entries.len();
    counted(json!({ "clusters": entries }), total)
}

#[derive(Serialize)]
struct OperatorEntry {
    status: OperatorState,
    version: String,
    resources: OperatorResources,
}

async fn infrastructure(admitted: Admitted) -> Response {
    let (snap, app) = (admitted.snapshot(), admitted.app);
    let s = crate::domain::summary::infrastructure_summary(&snap);
    // Pending as the machines metric counts it: no phase yet, or on its way.
    let pending = s
        .machines
        .by_phase
        .iter()
        .filter(|c| PhaseState::of(Some(&c.value)) == PhaseState::Pending)
        .map(|c| c.count)
        .sum::<usize>();
    let storages: Vec<&Arc<Resource>> = snap.list(Kind::ClusterStorage).collect();
    let available = storages.iter().filter(|c| c.readiness().ready).count();
    let operators: BTreeMap<String, OperatorEntry> = app
        .operators()
        .into_iter()
        .map(|o| {
            (
                o.operator,
                OperatorEntry {
                    status: o.status,
                    version: o.version,
                    resources: o.resources,
                },
            )
        })
        .collect();
    axum::Json(json!({
        "summary": {
            "machines": {
                "total": s.machines.total,
                "running": s.machines.running,
                "pending": pending,
                "failed": s.machines.failed,
            },
            "networks": {
                "total": s.networks.namespaces,
                "active": s.networks.ready_namespaces,
            },
            "storage": {
                "total": storages.len(),
                "available": available,
            },
        },
        "operators": operators,
    }))
    .into_response()
}
