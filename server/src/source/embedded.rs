//! The embedded source: the graph without a cluster. Objects come from the database (what an
//! earlier run kept), the demo fleet, manifest files and mutations; the object writer keeps them
//! in the database; the simulator (with the demo) plays the operators' pipeline on them.

use std::path::PathBuf;
use std::sync::Arc;

use tokio::sync::watch;

use super::demo::FleetSpec;
use super::simulator::SimulatorSettings;
use super::status::SourceStatus;
use super::{Apply, ImportSummary};
use crate::db::health::DbHealth;
use crate::db::object_writer::{self, WriterSettings};
use crate::db::{Db, DbError, Start, objects};
use crate::store::Store;

/// What the embedded source loads and how it keeps it.
#[derive(Clone, Debug)]
pub struct EmbeddedSettings {
    /// The demo fleet to load (when the database holds nothing yet).
    pub demo: Option<FleetSpec>,
    /// Play the pipeline on the demo fleet.
    pub simulate: Option<SimulatorSettings>,
    /// Manifest files and directories loaded at start-up.
    pub manifests: Vec<PathBuf>,
    /// How the object writer batches.
    pub writer: WriterSettings,
}

/// The running embedded source.
pub struct EmbeddedSource {
    settings: EmbeddedSettings,
    status: Arc<SourceStatus>,
    /// The task writing objects to the database (it owns the connection).
    writer: tokio::task::JoinHandle<Option<Db>>,
    simulator: Option<tokio::task::JoinHandle<()>>,
    /// Objects read back from the database at start-up.
    restored: usize,
}

/// Read back the objects the database holds (an earlier run's) into `store`, past every
/// sequence number the history recorded. Returns how many.
pub async fn restore(db: &Db, store: &Store) -> Result<usize, DbError> {
    let stored = objects::load_logged(db).await?;
    let n = store.restore(stored);
    // Past every version the history recorded too (objects deleted since, or written there
    // before the objects table caught up).
    let seq = objects::max_sequence(db).await?;
    store.advance_to(seq);
    Ok(n)
}

impl EmbeddedSource {
    /// Start keeping the store in the database (`db`: as it was opened; the writer retries a
    /// database that was away). `restored`: objects [`restore`] read back.
    pub fn start(
        store: Arc<Store>,
        settings: EmbeddedSettings,
        db: Start,
        restored: usize,
        health: Arc<DbHealth>,
        stop: watch::Receiver<bool>,
        lagged: prometheus::IntCounter,
    ) -> Self {
        let writer = object_writer::spawn_writer(
            db,
            store.clone(),
            store.subscribe(),
            health,
            stop,
            settings.writer.clone(),
            lagged,
        );
        EmbeddedSource {
            settings,
            status: Arc::new(SourceStatus::embedded()),
            writer,
            simulator: None,
            restored,
        }
    }

    /// Per-kind state (always current: the store is the source).
    pub fn status(&self) -> Arc<SourceStatus> {
        self.status.clone()
    }

    /// Objects read back from the database at start-up.
    pub fn restored(&self) -> usize {
        self.restored
    }

    /// Load the demo fleet (unless the database gave objects back), start the simulator, load
    /// the manifests.
    pub async fn load(&mut self, store: &Arc<Store>) -> anyhow::Result<ImportSummary> {
        let restored = self.restored;
        if let Some(spec) = &self.settings.demo {
            if restored > 0 {
                tracing::info!(
                    restored,
                    "demo fleet not loaded: the database already holds objects from an earlier run"
                );
            } else {
                let n = super::load_demo(store, spec).await;
                tracing::info!(objects = n, clusters = spec.clusters, "demo fleet loaded");
            }
            if let Some(sim) = &self.settings.simulate {
                if restored > 0 {
                    tracing::warn!(
                        "simulator: the database holds objects from an earlier run; the demo's clusters \
                         are reset to their generated state, clusters an earlier simulation created stay as stored"
                    );
                }
                self.simulator = Some(super::simulator::start(
                    store.clone(),
                    spec,
                    sim,
                    restored > 0,
                ));
            }
        }
        if self.settings.manifests.is_empty() {
            return Ok(ImportSummary::default());
        }
        let summary = super::import_paths(store, &self.settings.manifests, Apply::Load).await?;
        summary.log();
        Ok(summary)
    }

    /// Stop at once (tests simulating a crash): nothing pending is written.
    pub fn abort(&self) {
        self.writer.abort();
        if let Some(s) = &self.simulator {
            s.abort();
        }
    }

    /// Stop the simulator, write what is pending; the database connection, for closing.
    pub async fn stop(self) -> Option<Db> {
        if let Some(sim) = self.simulator {
            sim.abort();
        }
        self.writer.await.ok().flatten()
    }
}
