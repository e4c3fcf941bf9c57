//! The long-lived parts `app::start` starts that belong to no one module: the database (open or
//! retried in the background), the leader, TLS, and the writers to Kubernetes (mutations, Events,
//! the Vitistack's status). Each starts from the configuration.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::config::ServeConfig;
use crate::db::health::DbHealth;
use crate::db::{Db, Engine, Start, redact_url};
use crate::http::Metrics;

/// The database as the start found it, and its health.
pub(super) struct Database {
    pub start: Start,
    pub health: Arc<DbHealth>,
}

impl Database {
    /// Connect (a database that does not answer does not stop the server: it is retried in the
    /// background); its health is what `/health` and the metrics say.
    pub(super) async fn open(cfg: &ServeConfig, metrics: &Metrics) -> anyhow::Result<Database> {
        let engine = Engine::of(&cfg.db.database_url)?;
        let health = Arc::new(DbHealth::new(engine, &cfg.db.database_url));
        let start = open(cfg, &health, metrics.history.queries.clone()).await;
        Ok(Database { start, health })
    }
}

/// Connect to the database. A database that does not answer does not stop the server: it is
/// retried in the background.
async fn open(
    cfg: &ServeConfig,
    health: &DbHealth,
    read_statements: prometheus::IntCounter,
) -> Start {
    let url = &cfg.db.database_url;
    let pool = crate::db::PoolSettings {
        read_statements,
        ..cfg.db.pool()
    };
    let limit = pool.acquire_timeout + Duration::from_secs(1);
    let opened = match tokio::time::timeout(limit, Db::open(url, &pool)).await {
        Ok(r) => r,
        Err(_) => Err(crate::db::DbError::Connect {
            url: redact_url(url),
            source: sqlx::Error::PoolTimedOut,
        }),
    };
    match opened {
        Ok(db) => {
            health.ok();
            tracing::info!(engine = db.engine().name(), database = %redact_url(url), "database ready");
            Start::Connected(db)
        }
        Err(e) => {
            tracing::error!(error = %e, "database unreachable; serving without it and retrying in the background");
            health.failed(&e);
            Start::Retry {
                url: url.to_string(),
                pool,
            }
        }
    }
}

/// Who does the once-only work: the Lease's holder with LEADER_ELECTION, else this process.
/// The Lease is in the cluster the replica runs in (or KUBECONFIG's); a cluster that cannot be
/// configured stops the start, one that does not answer yet only delays leading.
pub(super) async fn leader(
    cfg: &ServeConfig,
    stop: watch::Receiver<bool>,
    gauge: prometheus::IntGauge,
) -> anyhow::Result<crate::leader::Leader> {
    if !cfg.leader_election {
        return Ok(crate::leader::Leader::sole());
    }
    let mut config = crate::source::kube::config(&cfg.kube_settings())
        .await
        .map_err(|e| anyhow::anyhow!("LEADER_ELECTION: {e}"))?;
    let Some(lease) = cfg.lease_settings(&config.default_namespace) else {
        return Ok(crate::leader::Leader::sole());
    };
    // An API server that stops answering (a partition drops packets) must fail a renewal well
    // before the lease runs out, not after the client's default read timeout of minutes.
    let patience = lease.request_timeout();
    config.connect_timeout = Some(patience);
    config.read_timeout = Some(patience);
    config.write_timeout = Some(patience);
    let client = kube::Client::try_from(config)
        .map_err(|e| anyhow::anyhow!("LEADER_ELECTION: cannot build a Kubernetes client: {e}"))?;
    tracing::info!(lease = %lease.name, namespace = %lease.namespace, identity = %lease.identity, "leader election on: webhooks and history retention run on the Lease's holder");
    gauge.set(0);
    Ok(crate::leader::Leader::elect(client, lease, stop, gauge))
}

/// The event log (`HISTORY_*`) with its webhooks (`WEBHOOK_*`), led by `leader`, and its writer
/// (the timeline keeps `inventory`'s applications too).
pub(super) fn history(
    cfg: &ServeConfig,
    db: &Database,
    store: &Arc<crate::store::Store>,
    leader: &crate::leader::Leader,
    inventory: Option<&Arc<crate::inventory::Inventory>>,
    metrics: &Metrics,
    stop: &watch::Receiver<bool>,
) -> (Arc<crate::history::History>, tokio::task::JoinHandle<()>) {
    crate::history::History::start(
        cfg.history_settings(),
        &cfg.webhook_settings(),
        leader.clone(),
        metrics.history.clone(),
        metrics.lagged.with_label_values(&["history"]),
        &db.start,
        store,
        inventory.map(|i| i.watch()),
        db.health.clone(),
        stop.clone(),
    )
}

/// The timeline records each datacenter's state as `source` judges it.
pub(super) fn record_datacenters(
    history: &crate::history::History,
    source: Arc<crate::source::status::SourceStatus>,
) {
    let states: crate::history::DatacenterStates = Arc::new(move || {
        source
            .datacenters_now()
            .into_iter()
            .map(|d| {
                let state = serde_json::to_value(d.state)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default();
                (d.key.key().to_string(), state, d.last_error)
            })
            .collect()
    });
    let _ = history.datacenters.set(states);
}

/// The operators' judge: their endpoints probed (`*_OPERATOR_ENDPOINT`, `*_SYNC_INTERVAL`) and
/// the stall time (`OPERATOR_STALL_SECONDS`).
pub(super) fn judge(
    cfg: &ServeConfig,
    stop: &watch::Receiver<bool>,
) -> anyhow::Result<crate::domain::operators::Judge> {
    let targets = cfg.probe_targets().map_err(anyhow::Error::msg)?;
    Ok(crate::domain::operators::Judge {
        probes: crate::domain::operators::Probes::start(targets, stop.clone()),
        stall: Duration::from_secs(cfg.operator_stall_seconds),
    })
}

/// The TLS configuration (`TLS_CERT_FILE`, `TLS_KEY_FILE`, `TLS_CA_FILE`, `TLS_MIN_VERSION`);
/// None: plain HTTP. A file that cannot be read stops the start, naming it.
pub(super) fn tls(cfg: &ServeConfig) -> anyhow::Result<Option<Arc<rustls::ServerConfig>>> {
    let (Some(cert), Some(key)) = (&cfg.access.tls_cert_file, &cfg.access.tls_key_file) else {
        return Ok(None);
    };
    let config = crate::http::tls::server_config(&crate::http::tls::TlsFiles {
        cert,
        key,
        ca: cfg.access.tls_ca_file.as_deref(),
        min_version: cfg.access.tls_min_version().map_err(anyhow::Error::msg)?,
    })
    .map_err(anyhow::Error::msg)?;
    Ok(Some(config))
}

/// What this server writes to Kubernetes, through one set of clients: mutations (`MUTATIONS`),
/// the Events it announces, and the Vitistack's status (`WRITE_VITISTACK_STATUS`).
pub(super) struct Writers {
    pub changer: Option<Arc<crate::change::Changer>>,
    pub events: Option<crate::change::events::EventWriter>,
    pub status: Option<crate::change::vitistack_status::StatusWriter>,
}

impl Writers {
    pub(super) fn new(
        cfg: &ServeConfig,
        store: &Arc<crate::store::Store>,
        feed: &crate::source::Source,
        leader: &crate::leader::Leader,
        metrics: &Metrics,
    ) -> Writers {
        let target = crate::change::Target::of(feed);
        let changer = cfg.mutations.then(|| {
            Arc::new(
                crate::change::Changer::new(
                    store.clone(),
                    target.clone(),
                    Duration::from_secs(cfg.change_wait_seconds.max(1)),
                )
                .reporting_as(cfg.pod_name.clone()),
            )
        });
        let events = crate::change::events::EventWriter::of(&target, cfg.pod_name.clone());
        let status = match (cfg.write_vitistack_status, target) {
            (false, _) => None,
            (true, crate::change::Target::Embedded) => {
                tracing::warn!(
                    "WRITE_VITISTACK_STATUS is set, but this source is not Kubernetes: there is no Vitistack to write"
                );
                None
            }
            (true, crate::change::Target::Kube(clients)) => {
                Some(crate::change::vitistack_status::StatusWriter {
                    store: store.clone(),
                    clients,
                    leader: leader.clone(),
                    source: feed.status(),
                    name: cfg.vitistack_name.clone(),
                    writes: metrics.vitistack_status_writes.clone(),
                })
            }
        };
        Writers {
            changer,
            events,
            status,
        }
    }
}
