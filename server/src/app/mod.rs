//! Wiring: load sources into the store, build the schema, serve HTTP until shutdown.

pub mod import;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::config::ServeConfig;
use crate::db::Start;
use crate::db::health::DbHealth;
use crate::db::redact_url;
use crate::db::{Db, Engine};
use crate::graphql::{SchemaSettings, build_executor_schemas, build_schema};
use crate::http::{AppState, Metrics, ServerState, router};
use crate::source::Source;
use crate::source::status::SourceStatus;
use crate::source::{self, ImportSummary};
use crate::store::Store;

/// A running server.
pub struct Running {
    /// Where it listens.
    pub addr: SocketAddr,
    /// The store it serves.
    pub store: Arc<Store>,
    /// What start-up loading did.
    pub import: ImportSummary,
    /// Objects read back from the database at start-up.
    pub restored: usize,
    /// The database's state.
    pub db_health: Arc<DbHealth>,
    /// Where objects come from, and how current each kind is.
    pub source: Arc<SourceStatus>,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
    stop: watch::Sender<bool>,
    /// Turns true once the listener is closing (after a signal and `SHUTDOWN_DELAY_SECONDS`, or
    /// the stop channel): the shutdown timeout counts from then.
    closing: watch::Receiver<bool>,
    /// Where objects come from (it holds the database connection for closing).
    feed: Source,
    history_writer: tokio::task::JoinHandle<()>,
    /// The event log.
    pub history: Arc<crate::history::History>,
    /// The parsed subscription documents (shared by identical subscriptions).
    documents: Arc<crate::graphql::subscription::executor::SubscriptionDocuments>,
    /// The open WebSockets and SSE streams.
    gate: Arc<crate::http::streams::Gate>,
    /// The longest wait for requests in flight once the listener is closed.
    shutdown_timeout: Duration,
}

impl Running {
    /// The parsed subscription documents held now.
    pub fn executor_documents(
        &self,
    ) -> Arc<crate::graphql::subscription::executor::SubscriptionDocuments> {
        self.documents.clone()
    }

    /// Serve until SIGINT/SIGTERM, then drain, write what is pending and return.
    pub async fn wait(self) -> anyhow::Result<()> {
        self.shut_down(false).await
    }

    /// Stop serving, write what is pending to the database and close it.
    pub async fn stop(self) -> anyhow::Result<()> {
        self.shut_down(true).await
    }

    async fn shut_down(self, now: bool) -> anyhow::Result<()> {
        let Running {
            task,
            stop,
            mut closing,
            feed,
            history_writer,
            gate,
            shutdown_timeout,
            history,
            ..
        } = self;
        if now {
            let _ = stop.send(true);
        }
        let mut task = task;
        // Serve until the listener starts closing (a signal, or the stop channel just sent), or
        // until serving ends by itself; only then does the shutdown timeout start.
        let ended = tokio::select! {
            served = &mut task => Some(served),
            _ = closing.wait_for(|c| *c) => None,
        };
        let finished = match ended {
            Some(served) => Ok(served),
            None => tokio::time::timeout(shutdown_timeout, &mut task).await,
        };
        let served = match finished {
            Ok(served) => served,
            Err(_) => {
                tracing::warn!(
                    timeout = ?shutdown_timeout,
                    "requests still in flight at the shutdown timeout (SHUTDOWN_TIMEOUT_SECONDS); closing them"
                );
                task.abort();
                Ok(Ok(()))
            }
        };
        // Sockets and streams were told to go (1001): give them a moment to say so.
        let said = tokio::time::Instant::now() + Duration::from_secs(2);
        while gate.open() > 0 && tokio::time::Instant::now() < said {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        // The source runs until the server has stopped serving; then what it has pending is
        // written.
        let _ = stop.send(true);
        // The Lease is given up once the work in flight (a webhook being sent) is done, before
        // the database closes under it.
        history.leader.resigned().await;
        let db = feed.stop().await;
        let _ = history_writer.await;
        if let Some(db) = db {
            db.close().await;
        }
        served??;
        Ok(())
    }

    /// Stop at once, without waiting for pending writes (tests simulating a crash).
    pub fn abort(&self) {
        self.task.abort();
        self.feed.abort();
        self.history_writer.abort();
    }
}

/// Connect to the database. A database that does not answer does not stop the server: it is
/// retried in the background.
async fn open_database(
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
async fn leader(
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

/// Start the source and serve on `listener`.
pub async fn start(cfg: &ServeConfig, listener: TcpListener) -> anyhow::Result<Running> {
    cfg.validate().map_err(anyhow::Error::msg)?;
    if cfg.redis_url.is_some() {
        tracing::warn!(
            "REDIS_URL is set and not used: the caches are in-process and exact, and replicas share through the database"
        );
    }
    for (setting, value) in [
        (
            "PROXMOX_OPERATOR_NAMESPACE",
            &cfg.proxmox_operator_namespace,
        ),
        ("TALOS_OPERATOR_NAMESPACE", &cfg.talos_operator_namespace),
        ("KEA_OPERATOR_NAMESPACE", &cfg.kea_operator_namespace),
        (
            "KUBEVIRT_OPERATOR_NAMESPACE",
            &cfg.kubevirt_operator_namespace,
        ),
    ] {
        if value.is_some() {
            tracing::warn!(
                setting,
                "set and not used: the objects the operator writes are watched in every namespace (or WATCH_NAMESPACES), and its endpoint is a URL (*_OPERATOR_ENDPOINT)"
            );
        }
    }
    let store = Arc::new(
        Store::with_change_buffer(cfg.change_buffer)
            .derive_with(crate::domain::aggregates::deriver()),
    );
    let ready = Arc::new(AtomicBool::new(false));
    let (going, going_away) = watch::channel(false);
    let metrics = Arc::new(Metrics::new()?);
    let engine = Engine::of(&cfg.db.database_url)?;
    let db_health = Arc::new(DbHealth::new(engine, &cfg.db.database_url));
    let (stop, stop_rx) = watch::channel(false);
    // Access first: a bad keys file or certificate stops the start before anything has begun.
    let access = access(cfg, stop_rx.clone()).await?;
    let hub_tokens = cfg.hub_tokens()?;
    let tls = match (&cfg.access.tls_cert_file, &cfg.access.tls_key_file) {
        (Some(cert), Some(key)) => Some(
            crate::http::tls::server_config(&crate::http::tls::TlsFiles {
                cert,
                key,
                ca: cfg.access.tls_ca_file.as_deref(),
                min_version: cfg.access.tls_min_version().map_err(anyhow::Error::msg)?,
            })
            .map_err(anyhow::Error::msg)?,
        ),
        _ => None,
    };

    let (source_settings, why) = cfg.source_settings();
    tracing::info!(
        source = source_settings.name(),
        reason = why,
        database = %redact_url(&cfg.db.database_url),
        "source: {}",
        source_settings.describe()
    );

    // The database first: what the source kept in an earlier run comes back before anything
    // new (the kube source keeps nothing: the cluster is the truth).
    let db_start = open_database(cfg, &db_health, metrics.history.queries.clone()).await;
    let restored = source_settings.restore(&db_start, &store, &db_health).await;
    if restored > 0 {
        tracing::info!(restored, "objects read back from the database");
    }
    // The event log: its own writer on the change stream, its own connection when the database
    // was away at start-up.
    let leader = leader(cfg, stop_rx.clone(), metrics.leader.clone()).await?;
    let history = Arc::new(
        crate::history::History::new(cfg.history_settings(), metrics.history.clone())
            .led_by(leader.clone()),
    );
    if let Some(hooks) =
        crate::history::webhooks::Webhooks::start(&cfg.webhook_settings(), history.clone())
    {
        let _ = history.webhooks.set(hooks);
    }
    // Every change from now on is an event, except state being loaded (a source's first list,
    // the demo fleet), which is marked as such.
    let history_writer = crate::history::writer::spawn(
        db_start.clone(),
        history.clone(),
        store.subscribe(),
        db_health.clone(),
        stop_rx.clone(),
        metrics.lagged.with_label_values(&["history"]),
    );
    let inventory_settings = cfg.inventory_settings();
    let inventory = inventory_settings
        .enabled
        .then(|| crate::inventory::Inventory::new(inventory_settings));
    let mut feed = source_settings
        .with_inventory(inventory.clone())
        .start(
            &store,
            db_start,
            restored,
            db_health.clone(),
            stop_rx.clone(),
            metrics.lagged.with_label_values(&["object_writer"]),
        )
        .await
        .map_err(anyhow::Error::msg)?;
    let source_status = feed.status();
    if let (Some(inv), Source::Embedded(_)) = (&inventory, &feed) {
        tokio::spawn(keep_cluster_uuids(
            inv.clone(),
            history.clone(),
            stop_rx.clone(),
        ));
    }
    if let Some(inv) = &inventory {
        drop(crate::history::applications::spawn(
            inv.clone(),
            history.clone(),
            stop_rx.clone(),
        ));
        tokio::spawn(count_applications(
            inv.clone(),
            metrics.applications.clone(),
            stop_rx.clone(),
        ));
        if let Some(push) = cfg.push_settings() {
            let h = history.clone();
            let pusher = crate::inventory::push::Pusher {
                inventory: inv.clone(),
                leader: history.leader.clone(),
                db: Box::new(move || h.db()),
                counter: metrics.inventory_pushes.clone(),
            };
            tokio::spawn(pusher.run(push, stop_rx.clone()));
        }
    }

    // One set of clients for everything this server writes to Kubernetes (mutations, Events,
    // the Vitistack's status).
    let target = crate::change::Target::of(&feed);
    let changer = if !cfg.mutations {
        None
    } else {
        Some(Arc::new(
            crate::change::Changer::new(
                store.clone(),
                target.clone(),
                Duration::from_secs(cfg.change_wait_seconds.max(1)),
            )
            .reporting_as(cfg.pod_name.clone()),
        ))
    };
    let health_check_interval = cfg.health_check_interval().map_err(anyhow::Error::msg)?;
    let limits = cfg.connection_limits().map_err(anyhow::Error::msg)?;
    let operator_events = crate::change::events::EventWriter::of(&target, cfg.pod_name.clone());
    let status_writer = match (cfg.write_vitistack_status, target) {
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
                leader: history.leader.clone(),
                source: source_status.clone(),
                name: cfg.vitistack_name.clone(),
                writes: metrics.vitistack_status_writes.clone(),
            })
        }
    };
    let judge = crate::domain::operators::Judge {
        probes: crate::domain::operators::Probes::start(
            cfg.probe_targets().map_err(anyhow::Error::msg)?,
            stop_rx.clone(),
        ),
        stall: Duration::from_secs(cfg.operator_stall_seconds),
    };
    let settings = SchemaSettings {
        inventory,
        operators: judge.clone(),
        max_page_size: cfg.max_page_size,
        max_depth: cfg.max_query_depth,
        limits: cfg.query_limits(),
        vitistack_name: cfg.vitistack_name.clone(),
        source: source_status.clone(),
        overcommit: crate::domain::hosts::Overcommit {
            cpu: cfg.cpu_overcommit,
            memory: cfg.memory_overcommit,
        },
        store: store.clone(),
        subscription_metrics: Some(metrics.subscriptions.clone()),
        history: Some(history.clone()),
        introspection: cfg.access.introspection,
        changer,
        change: crate::graphql::mutation::ChangeSettings {
            min_hosts_that_can_fail: cfg.min_hosts_that_can_fail,
        },
        fanout: Some(crate::graphql::subscription::fanout::Fanout::start(
            &store,
            cfg.subscription_buffer,
            metrics.subscriptions.overflows.clone(),
            metrics.lagged.with_label_values(&["fanout"]),
        )),
    };
    let schema = build_schema(&settings);
    let subscription_schemas = build_executor_schemas(&settings);
    let documents = subscription_schemas.documents.clone();
    let cache = Arc::new(crate::http::cache::ResponseCache::new(
        cfg.response_cache_mb.saturating_mul(1024 * 1024),
        metrics.cache_hits.clone(),
        metrics.cache_misses.clone(),
    ));
    let parts = Arc::new(crate::graphql::parts::PartCache::new(
        cfg.part_cache_mb.saturating_mul(1024 * 1024),
        metrics.part_hits.clone(),
        metrics.part_misses.clone(),
    ));
    let query_documents = Arc::new(crate::graphql::documents::QueryDocuments::new(
        crate::graphql::build_fast_schema(&settings),
        cfg.query_limits(),
        cfg.document_cache_mb.saturating_mul(1024 * 1024),
        metrics.document_hits.clone(),
        metrics.document_misses.clone(),
    ));
    let gate = Arc::new(crate::http::streams::Gate::new(cfg.stream_settings()));
    let state = AppState::new(ServerState {
        going_away,
        access,
        cache,
        parts,
        documents: query_documents,
        gate: gate.clone(),
        store: store.clone(),
        schema,
        subscription_schemas,
        ready: ready.clone(),
        metrics,
        db_health: db_health.clone(),
        source: source_status.clone(),
        history: Some(history.clone()),
        probes: judge.probes.clone(),
        operator_stall: judge.stall,
        checks: Arc::default(),
        metrics_enabled: cfg.metrics_enabled,
        vitistack_name: cfg.vitistack_name.clone(),
        hub: hub_tokens.map(|tokens| {
            tracing::info!(
                datacenters = tokens.len(),
                "taking the old status page's agents' reports (HUB_TOKENS_FILE)"
            );
            let hub = Arc::new(crate::source::hub::Hub::new(
                tokens,
                store.clone(),
                source_status.clone(),
            ));
            // The reports other replicas take (and the last ones from before a restart).
            let h = history.clone();
            tokio::spawn(crate::source::hub::follow(
                hub.clone(),
                move || h.db(),
                stop_rx.clone(),
            ));
            hub
        }),
    });
    let addr = listener.local_addr()?;
    let mut http_stop = stop_rx.clone();
    let delay = Duration::from_secs(cfg.shutdown_delay_seconds);
    let (closing_tx, closing) = watch::channel(false);
    let stopped = async move {
        let signalled = tokio::select! {
            _ = shutdown() => true,
            _ = http_stop.wait_for(|s| *s) => false,
        };
        // From here `/ready` and `/health` answer 503, sockets close with 1001, streams end.
        going.send_replace(true);
        if signalled && !delay.is_zero() {
            tracing::info!(delay = ?delay, "not ready; serving on until load balancers have noticed (SHUTDOWN_DELAY_SECONDS)");
            tokio::time::sleep(delay).await;
        }
        tracing::info!("closing the listener; finishing requests in flight");
        closing_tx.send_replace(true);
    };
    let checked = state.clone();
    let connections = state.metrics.connections.clone();
    let app = router(state);
    let task = match &tls {
        None => tokio::spawn(crate::http::serve::serve(
            listener,
            app,
            limits,
            connections,
            stopped,
        )),
        Some(config) => {
            let listener = crate::http::tls::TlsListener::new(listener, config.clone())?;
            tokio::spawn(crate::http::serve::serve(
                listener,
                app,
                limits,
                connections,
                stopped,
            ))
        }
    };

    let import = feed.load(&store).await?;
    ready.store(true, Ordering::Release);
    // Checked from here on: before the load every operator would look unreachable, and its
    // recovery would be announced at every start.
    tokio::spawn(crate::http::checker::run(
        checked,
        health_check_interval,
        operator_events,
        stop_rx.clone(),
    ));
    if let Some(writer) = status_writer {
        tokio::spawn(writer.run(stop_rx.clone()));
    }
    Ok(Running {
        addr,
        store,
        import,
        restored,
        db_health,
        source: source_status,
        task,
        stop,
        closing,
        feed,
        history_writer,
        history,
        documents,
        gate,
        shutdown_timeout: Duration::from_secs(cfg.shutdown_timeout_seconds.max(1)),
    })
}

/// `vitistack_applications{health}`, kept current with the inventory.
async fn count_applications(
    inventory: Arc<crate::inventory::Inventory>,
    gauge: prometheus::IntGaugeVec,
    mut stop: watch::Receiver<bool>,
) {
    use crate::domain::applications::Health;
    let mut changed = inventory.watch();
    loop {
        let counts = changed.borrow_and_update().counts();
        for h in Health::ALL {
            let label = h.label();
            gauge
                .with_label_values(&[label])
                .set(counts.get(h).copied().unwrap_or(0) as i64);
        }
        tokio::select! {
            r = changed.changed() => if r.is_err() { return },
            _ = stop.wait_for(|s| *s) => return,
        }
    }
}

/// The embedded source's cluster UUIDs: each datacenter the inventory holds gets one from the
/// database (made there once; while the database is away, asked again every 5 s).
async fn keep_cluster_uuids(
    inventory: Arc<crate::inventory::Inventory>,
    history: Arc<crate::history::History>,
    mut stop: watch::Receiver<bool>,
) {
    let mut changed = inventory.watch();
    loop {
        let s = inventory.snapshot();
        let datacenters: std::collections::BTreeSet<crate::model::Datacenter> = s
            .namespaces
            .keys()
            .cloned()
            .chain(s.apps.keys().map(|k| k.0.clone()))
            .collect();
        let mut waiting = false;
        for dc in datacenters {
            if inventory.cluster_uuid(&dc).is_some() {
                continue;
            }
            let fresh = uuid::Uuid::new_v4().to_string();
            match history.db() {
                Some(db) => match crate::db::inventory::cluster_uuid(&db, dc.key(), &fresh).await {
                    Ok(uuid) => inventory.set_cluster_uuid(&dc, uuid),
                    Err(e) => {
                        waiting = true;
                        tracing::warn!(datacenter = %dc, error = %e, "application inventory: the cluster UUID cannot be kept in the database yet");
                    }
                },
                // The database is away: asked again shortly.
                None => waiting = true,
            }
        }
        tokio::select! {
            _ = changed.changed() => {}
            _ = tokio::time::sleep(Duration::from_secs(5)), if waiting => {}
            _ = stop.wait_for(|s| *s) => return,
        }
    }
}

/// Authentication, rate limits and the other access settings; starts the keys file watcher.
async fn access(
    cfg: &ServeConfig,
    stop: watch::Receiver<bool>,
) -> anyhow::Result<Arc<crate::http::access::Access>> {
    let a = &cfg.access;
    let settings = a.auth_settings().map_err(anyhow::Error::msg)?;
    let kube = if settings.kubernetes.is_some() {
        Some(
            source::kube::client(&cfg.kube_settings())
                .await
                .map_err(|e| anyhow::anyhow!("AUTH_KUBERNETES: {e}"))?,
        )
    } else {
        None
    };
    let auth = crate::auth::Auth::new(settings, kube).map_err(anyhow::Error::msg)?;
    let s = auth.settings();
    tracing::info!(
        keys = auth.key_count(),
        kubernetes = s.kubernetes.is_some(),
        anonymous_read_from = ?s.anonymous_from.iter().map(ToString::to_string).collect::<Vec<_>>(),
        "authentication: {}",
        if auth.key_count() == 0 && s.kubernetes.is_none() && s.anonymous_from.is_empty() {
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

/// Start from configuration: bind, load, serve until SIGINT/SIGTERM.
pub async fn serve(cfg: ServeConfig) -> anyhow::Result<()> {
    let addr = cfg.listen_addr();
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen on {addr} (set PORT or BIND_ADDRESS): {e}"))?;
    let running = start(&cfg, listener).await?;
    let scheme = if cfg.access.tls_cert_file.is_some() {
        "https"
    } else {
        "http"
    };
    tracing::info!(addr = %running.addr, "serving GraphQL at {scheme}://{}/graphql", running.addr);
    running.wait().await
}

async fn shutdown() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        if let Ok(mut s) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        {
            s.recv().await;
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
    tracing::info!("shutting down");
}
