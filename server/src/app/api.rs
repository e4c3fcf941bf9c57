//! What the server's requests share, built once: the GraphQL schemas (queries, mutations, the
//! subscription executor and its fan-out), the caches (answers, kept parts, documents), the
//! stream gate, the old status page's hub, and the HTTP server that serves them all until it is
//! told to stop.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::config::ServeConfig;
use crate::graphql::{SchemaSettings, build_executor_schemas, build_schema};
use crate::http::{AppState, Metrics, ServerState, router};
use crate::store::Store;

/// What the API is built from: the running parts it reads.
pub(super) struct Parts {
    pub store: Arc<Store>,
    pub metrics: Arc<Metrics>,
    pub db_health: Arc<crate::db::health::DbHealth>,
    pub source: Arc<crate::source::status::SourceStatus>,
    pub history: Arc<crate::history::History>,
    pub access: Arc<crate::http::access::Access>,
    pub inventory: Option<Arc<crate::inventory::Inventory>>,
    pub judge: crate::domain::operators::Judge,
    pub changer: Option<Arc<crate::change::Changer>>,
    pub hub_tokens: Option<crate::source::hub::HubTokens>,
}

/// The built API.
pub(super) struct Api {
    pub state: AppState,
    /// Set once every source has loaded.
    pub ready: Arc<AtomicBool>,
    /// Turns true at SIGTERM (or `stop`): `/ready` answers 503, sockets and streams close.
    going: watch::Sender<bool>,
    pub documents: Arc<crate::graphql::subscription::executor::SubscriptionDocuments>,
    pub gate: Arc<crate::http::streams::Gate>,
}

impl Api {
    /// Build the schemas, caches and shared state from `cfg` and `p`.
    pub(super) fn build(cfg: &ServeConfig, p: Parts, stop: &watch::Receiver<bool>) -> Api {
        let metrics = &p.metrics;
        let settings = SchemaSettings {
            inventory: p.inventory,
            operators: p.judge.clone(),
            max_page_size: cfg.max_page_size,
            max_depth: cfg.max_query_depth,
            limits: cfg.query_limits(),
            vitistack_name: cfg.vitistack_name.clone(),
            source: p.source.clone(),
            overcommit: crate::domain::hosts::Overcommit {
                cpu: cfg.cpu_overcommit,
                memory: cfg.memory_overcommit,
            },
            store: p.store.clone(),
            subscription_metrics: Some(metrics.subscriptions.clone()),
            history: Some(p.history.clone()),
            introspection: cfg.access.introspection,
            changer: p.changer,
            change: crate::graphql::mutation::ChangeSettings {
                min_hosts_that_can_fail: cfg.min_hosts_that_can_fail,
            },
            fanout: Some(crate::graphql::subscription::fanout::Fanout::start(
                &p.store,
                cfg.subscription_buffer,
                metrics.subscriptions.overflows.clone(),
                metrics.lagged.with_label_values(&["fanout"]),
            )),
        };
        let schema = build_schema(&settings);
        let subscription_schemas = build_executor_schemas(&settings);
        let documents = subscription_schemas.documents.clone();
        let mib = |n: usize| n.saturating_mul(1024 * 1024);
        let cache = Arc::new(crate::http::cache::ResponseCache::new(
            mib(cfg.response_cache_mb),
            metrics.cache_hits.clone(),
            metrics.cache_misses.clone(),
        ));
        let parts = Arc::new(crate::graphql::parts::PartCache::new(
            mib(cfg.part_cache_mb),
            metrics.part_hits.clone(),
            metrics.part_misses.clone(),
        ));
        let query_documents = Arc::new(crate::graphql::documents::QueryDocuments::new(
            crate::graphql::build_fast_schema(&settings),
            cfg.query_limits(),
            mib(cfg.document_cache_mb),
            metrics.document_hits.clone(),
            metrics.document_misses.clone(),
        ));
        let gate = Arc::new(crate::http::streams::Gate::new(cfg.stream_settings()));
        let ready = Arc::new(AtomicBool::new(false));
        let (going, going_away) = watch::channel(false);
        let hub = p
            .hub_tokens
            .map(|tokens| hub(tokens, &p.store, &p.source, &p.history, stop));
        let state = AppState::new(ServerState {
            going_away,
            access: p.access,
            cache,
            parts,
            documents: query_documents,
            gate: gate.clone(),
            store: p.store,
            schema,
            subscription_schemas,
            ready: ready.clone(),
            metrics: p.metrics,
            db_health: p.db_health,
            source: p.source,
            history: Some(p.history),
            probes: p.judge.probes.clone(),
            operator_stall: p.judge.stall,
            checks: Arc::default(),
            metrics_enabled: cfg.metrics_enabled,
            vitistack_name: cfg.vitistack_name.clone(),
            hub,
            hub_open_read: cfg.hub_open_read,
        });
        Api {
            state,
            ready,
            going,
            documents,
            gate,
        }
    }

    /// Serve on `listener` (over TLS with `tls`) until SIGINT/SIGTERM or `stop`: then `/ready`
    /// answers 503 at once, the listener stays open for `SHUTDOWN_DELAY_SECONDS` (after a
    /// signal), and closes. Returns its address, the serving task and the "closing" signal.
    pub(super) fn serve(
        &self,
        cfg: &ServeConfig,
        listener: TcpListener,
        tls: Option<Arc<rustls::ServerConfig>>,
        stop: &watch::Receiver<bool>,
    ) -> anyhow::Result<Serving> {
        let addr = listener.local_addr()?;
        let limits = cfg.connection_limits().map_err(anyhow::Error::msg)?;
        let mut http_stop = stop.clone();
        let going = self.going.clone();
        let delay = Duration::from_secs(cfg.shutdown_delay_seconds);
        let (closing_tx, closing) = watch::channel(false);
        let stopped = async move {
            let signalled = tokio::select! {
                _ = super::shutdown() => true,
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
        let connections = self.state.metrics.connections.clone();
        let app = router(self.state.clone());
        let task = match tls {
            None => tokio::spawn(crate::http::serve::serve(
                listener,
                app,
                limits,
                connections,
                stopped,
            )),
            Some(config) => {
                let listener = crate::http::tls::TlsListener::new(listener, config)?;
                tokio::spawn(crate::http::serve::serve(
                    listener,
                    app,
                    limits,
                    connections,
                    stopped,
                ))
            }
        };
        Ok(Serving {
            addr,
            task,
            closing,
        })
    }
}

/// The HTTP server running.
pub(super) struct Serving {
    pub addr: SocketAddr,
    pub task: tokio::task::JoinHandle<std::io::Result<()>>,
    /// Turns true once the listener is closing.
    pub closing: watch::Receiver<bool>,
}

/// The old status page's agents' reports (HUB_TOKENS_FILE), and the ones other replicas take
/// (and the last ones from before a restart) followed.
fn hub(
    tokens: crate::source::hub::HubTokens,
    store: &Arc<Store>,
    source: &Arc<crate::source::status::SourceStatus>,
    history: &Arc<crate::history::History>,
    stop: &watch::Receiver<bool>,
) -> Arc<crate::source::hub::Hub> {
    tracing::info!(
        datacenters = tokens.len(),
        "taking the old status page's agents' reports (HUB_TOKENS_FILE)"
    );
    let hub = Arc::new(crate::source::hub::Hub::new(
        tokens,
        store.clone(),
        source.clone(),
    ));
    let h = history.clone();
    tokio::spawn(crate::source::hub::follow(
        hub.clone(),
        move || h.db(),
        stop.clone(),
    ));
    hub
}
