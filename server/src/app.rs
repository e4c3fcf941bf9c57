//! Wiring: load sources into the store, build the schema, serve HTTP until shutdown.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::net::TcpListener;

use crate::config::ServeConfig;
use crate::graphql::{SchemaSettings, build_schema};
use crate::http::{AppState, Metrics, router};
use crate::source::{self, ImportSummary, demo::FleetSpec};
use crate::store::Store;

/// A running server.
pub struct Running {
    /// Where it listens.
    pub addr: SocketAddr,
    /// The store it serves.
    pub store: Arc<Store>,
    /// What start-up loading did.
    pub import: ImportSummary,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl Running {
    /// Wait for the server to stop.
    pub async fn wait(self) -> anyhow::Result<()> {
        self.task.await??;
        Ok(())
    }

    /// Stop serving.
    pub fn abort(&self) {
        self.task.abort();
    }
}

/// Load the embedded source and start serving on `listener`.
pub async fn start(cfg: &ServeConfig, listener: TcpListener) -> anyhow::Result<Running> {
    cfg.validate().map_err(anyhow::Error::msg)?;
    let store = Arc::new(Store::new());
    let ready = Arc::new(AtomicBool::new(false));
    let metrics = Arc::new(Metrics::new()?);
    let schema = build_schema(&SchemaSettings {
        max_page_size: cfg.max_page_size,
        max_depth: cfg.max_query_depth,
        vitistack_name: cfg.vitistack_name.clone(),
    });
    let state = AppState {
        store: store.clone(),
        schema,
        ready: ready.clone(),
        metrics,
        max_depth: cfg.max_query_depth,
    };
    let addr = listener.local_addr()?;
    let task = tokio::spawn(async move {
        axum::serve(listener, router(state))
            .with_graceful_shutdown(shutdown())
            .await
    });

    if cfg.demo {
        let spec = if cfg.demo_clusters == 0 {
            FleetSpec::demo()
        } else {
            FleetSpec::large(cfg.demo_clusters)
        };
        let n = source::load_demo(&store, &spec);
        tracing::info!(objects = n, clusters = spec.clusters, "demo fleet loaded");
    }
    let import = if cfg.manifests.is_empty() {
        ImportSummary::default()
    } else {
        let summary = source::import_paths(&store, &cfg.manifests)?;
        for e in summary.errors() {
            tracing::warn!(file = %e.file, document = e.document, path = %e.path, reason = %e.reason, "manifest refused");
        }
        for n in summary.notes() {
            tracing::info!(file = %n.file, document = n.document, "{}", n.message);
        }
        tracing::info!(
            files = summary.files.len(),
            refused = summary.refused_files(),
            changed = summary.changed,
            "manifests loaded"
        );
        summary
    };
    ready.store(true, Ordering::Release);
    Ok(Running {
        addr,
        store,
        import,
        task,
    })
}

/// Start from configuration: bind, load, serve until SIGINT/SIGTERM.
pub async fn serve(cfg: ServeConfig) -> anyhow::Result<()> {
    let addr = cfg.listen_addr();
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen on {addr} (set PORT or BIND_ADDRESS): {e}"))?;
    tracing::info!(source = "embedded", database = %crate::config::redact_url(&cfg.database_url), "source: embedded store (no cluster configured)");
    let running = start(&cfg, listener).await?;
    tracing::info!(addr = %running.addr, "serving GraphQL at http://{}/graphql", running.addr);
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
