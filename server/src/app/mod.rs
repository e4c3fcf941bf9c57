//! Wiring: `start` starts the server's long-lived parts in order, each from its settings (its
//! own module says how), and `Running` stops them in the reverse order. The `import` command.

mod access;
mod api;
pub mod import;
mod inventory;
mod parts;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::config::ServeConfig;
use crate::db::health::DbHealth;
use crate::http::Metrics;
use crate::source::status::SourceStatus;
use crate::source::{ImportSummary, Source};
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

/// Start the source and serve on `listener`: each line starts one part (in the order they need
/// each other), and a part that cannot start stops the start, saying why.
pub async fn start(cfg: &ServeConfig, listener: TcpListener) -> anyhow::Result<Running> {
    cfg.validate().map_err(anyhow::Error::msg)?;
    cfg.warn_unused();
    let metrics = Arc::new(Metrics::new()?);
    let (stop, stop_rx) = watch::channel(false);
    // Access first: a bad keys file, token file or certificate stops the start before anything
    // has begun.
    let access = access::start(cfg, stop_rx.clone()).await?;
    let hub_tokens = cfg.hub_tokens()?;
    let tls = parts::tls(cfg)?;
    let store = Arc::new(
        Store::with_change_buffer(cfg.change_buffer)
            .derive_with(crate::domain::aggregates::deriver()),
    );
    let (source, why) = cfg.source_settings();
    tracing::info!(source = source.name(), reason = why, database = %crate::db::redact_url(&cfg.db.database_url), "source: {}", source.describe());
    // The database next: what the source kept in an earlier run comes back before anything new
    // (the kube source keeps nothing: the cluster is the truth).
    let db = parts::Database::open(cfg, &metrics).await?;
    let restored = source.restore(&db.start, &store, &db.health).await;
    access::sessions(&access, &db.start);
    let leader = parts::leader(cfg, stop_rx.clone(), metrics.leader.clone()).await?;
    let inventory = cfg
        .inventory_settings()
        .enabled
        .then(|| crate::inventory::Inventory::new(cfg.inventory_settings()));
    let (history, history_writer) = parts::history(
        cfg,
        &db,
        &store,
        &leader,
        inventory.as_ref(),
        &metrics,
        &stop_rx,
    );
    let lagged = metrics.lagged.with_label_values(&["object_writer"]);
    let feed = source.with_inventory(inventory.clone());
    let mut feed = (feed
        .start(
            &store,
            db.start,
            restored,
            db.health.clone(),
            stop_rx.clone(),
            lagged,
        )
        .await)
        .map_err(anyhow::Error::msg)?;
    parts::record_datacenters(&history, feed.status());
    if let Some(inv) = &inventory {
        inventory::start(cfg, inv, &feed, &history, &metrics, &stop_rx);
    }
    access::kubernetes_targets(&access, &store, feed.kube_settings());
    let writers = parts::Writers::new(cfg, &store, &feed, &leader, &metrics);
    let judge = parts::judge(cfg, &stop_rx)?;
    let api = api::Api::build(
        cfg,
        api::Parts {
            store: store.clone(),
            metrics,
            db_health: db.health.clone(),
            source: feed.status(),
            history: history.clone(),
            access,
            inventory,
            judge,
            changer: writers.changer,
            hub_tokens,
        },
        &stop_rx,
    );
    let serving = api.serve(cfg, listener, tls, &stop_rx)?;
    let import = feed.load(&store).await?;
    api.ready.store(true, Ordering::Release);
    // Checked from here on: before the load every operator would look unreachable, and its
    // recovery would be announced at every start.
    let interval = cfg.health_check_interval().map_err(anyhow::Error::msg)?;
    tokio::spawn(crate::http::checker::run(
        api.state.clone(),
        interval,
        writers.events,
        stop_rx.clone(),
    ));
    if let Some(status) = writers.status {
        tokio::spawn(status.run(stop_rx.clone()));
    }
    Ok(Running {
        addr: serving.addr,
        store,
        import,
        restored,
        db_health: db.health,
        source: feed.status(),
        task: serving.task,
        stop,
        closing: serving.closing,
        feed,
        history_writer,
        history,
        documents: api.documents,
        gate: api.gate,
        shutdown_timeout: Duration::from_secs(cfg.shutdown_timeout_seconds.max(1)),
    })
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
