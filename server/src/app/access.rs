//! Who may call, and how much: API keys (their file watched), Kubernetes token reviews,
//! anonymous networks, rate limits (their idle principals forgotten every minute), CORS origins.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::config::ServeConfig;
use crate::source;

/// Authentication, rate limits and the other access settings; starts the keys file watcher.
pub(super) async fn start(
    cfg: &ServeConfig,
    stop: watch::Receiver<bool>,
) -> anyhow::Result<Arc<crate::http::access::Access>> {
    let a = &cfg.access;
    let settings = a.auth_settings().map_err(anyhow::Error::msg)?;
    // RBAC is asked for Kubernetes tokens, and for people the provider signs in when the fleet
    // is a Kubernetes one.
    let rbac = settings.kubernetes.is_some()
        || (settings.oidc.is_some() && cfg.resolve_source().0 == crate::config::SourceMode::Kube);
    let kube = if rbac {
        Some(
            source::kube::client(&cfg.kube_settings())
                .await
                .map_err(|e| anyhow::anyhow!("RBAC for AUTH_KUBERNETES or OIDC: {e}"))?,
        )
    } else {
        None
    };
    let auth = crate::auth::Auth::new(settings, kube).map_err(anyhow::Error::msg)?;
    let s = auth.settings();
    tracing::info!(
        keys = auth.key_count(),
        kubernetes = s.kubernetes.is_some(),
        oidc = s.oidc.as_ref().map(|o| o.issuer.as_str()),
        anonymous_read_from = ?s.anonymous_from.iter().map(ToString::to_string).collect::<Vec<_>>(),
        "authentication: {}",
        if auth.key_count() == 0 && s.kubernetes.is_none() && s.oidc.is_none() && s.anonymous_from.is_empty() {
            "no key, no Kubernetes review and no anonymous network: every GraphQL request is refused (set API_KEYS_FILE, AUTH_KUBERNETES or ANONYMOUS_READ_FROM)"
        } else {
            "on"
        }
    );
    // Runs until the server stops.
    drop(auth.spawn_watcher(stop.clone()));
    let rate = crate::http::rate::RateLimits::new(&a.rate_limits().map_err(anyhow::Error::msg)?);
    let access = Arc::new(crate::http::access::Access {
        auth,
        rate,
        timeout: a.operation_timeout().map_err(anyhow::Error::msg)?,
        graphiql: a.graphiql,
        metrics_require_key: a.metrics_require_key,
        origins: a.origins(),
    });
    // Principals back to a full allowance are forgotten: the limiter's memory stays bounded.
    let idle = access.clone();
    let mut stop = stop;
    tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_secs(60)) => idle.rate.forget_idle(),
                _ = stop.wait_for(|s| *s) => return,
            }
        }
    });
    Ok(access)
}

/// Where Kubernetes users' namespace-by-namespace access is asked: each watched datacenter's API
/// server (a client made for it as for writes), with the namespaces its objects are in.
pub(super) fn kubernetes_targets(
    access: &crate::http::access::Access,
    store: &Arc<crate::store::Store>,
    settings: Option<crate::source::kube::DatacenterSettings>,
) {
    let Some(settings) = settings else {
        return;
    };
    let store = store.clone();
    let clients = Arc::new(crate::change::apiserver::KubeClients::new(settings.clone()));
    access.auth.set_targets(Arc::new(move || {
        let (store, clients) = (store.clone(), clients.clone());
        let datacenters: Vec<crate::model::Datacenter> = settings.lock().keys().cloned().collect();
        Box::pin(async move {
            let snapshot = store.snapshot();
            let mut out = Vec::new();
            for dc in datacenters {
                // A datacenter that cannot be reached grants nothing until it can.
                let Ok(client) = clients.client(&dc).await else {
                    continue;
                };
                out.push(crate::auth::review::Target {
                    namespaces: snapshot.namespaces(&dc).into_iter().collect(),
                    datacenter: dc,
                    client: Some(client),
                });
            }
            out
        })
    }));
}

/// Keep sign-in sessions in the database (none while it is unreachable at start: sign-in then
/// says sessions cannot be kept).
pub(super) fn sessions(access: &crate::http::access::Access, start: &crate::db::Start) {
    if access.auth.provider().is_none() {
        return;
    }
    match start {
        crate::db::Start::Connected(db) => access
            .auth
            .set_session_store(Arc::new(crate::db::sessions::DbSessions(db.clone()))),
        crate::db::Start::Retry { .. } => tracing::warn!(
            "the database was not reachable at start: sign-in sessions cannot be kept until a restart"
        ),
    }
}
