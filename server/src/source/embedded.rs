//! The embedded source: the graph without a cluster. Objects come from the database (what an
//! earlier run kept), the demo fleet, manifest files and mutations; the object writer keeps them
//! in the database; the simulator (with the demo) plays the operators' pipeline on them.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

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
    /// How datacenters are judged: with the demo's datacenters, or when agents push other
    /// datacenters' reports.
    pub datacenters: Option<super::datacenters::Policy>,
    /// The demo's datacenters (`DEMO_DATACENTERS`), each with a fleet and a simulator of its
    /// own (empty: the one datacenter).
    pub demo_datacenters: Vec<crate::model::Datacenter>,
    /// How often one of the demo's datacenters goes away for a while (None: never).
    pub demo_outages: Option<std::time::Duration>,
    /// Where the demo's applications go (None: the inventory is off).
    pub inventory: Option<Arc<crate::inventory::Inventory>>,
}

/// The running embedded source.
pub struct EmbeddedSource {
    settings: EmbeddedSettings,
    status: Arc<SourceStatus>,
    /// The task writing objects to the database (it owns the connection).
    writer: tokio::task::JoinHandle<Option<Db>>,
    simulators: Vec<tokio::task::JoinHandle<()>>,
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
            status: Arc::new(SourceStatus::embedded(
                &if settings.demo_datacenters.is_empty() {
                    vec![Default::default()]
                } else {
                    settings.demo_datacenters.clone()
                },
                settings.datacenters,
            )),
            settings,
            writer,
            simulators: Vec::new(),
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
            // One fleet per datacenter, each with names of its own.
            let fleets: Vec<FleetSpec> = if self.settings.demo_datacenters.is_empty() {
                vec![spec.clone()]
            } else {
                self.settings
                    .demo_datacenters
                    .iter()
                    .enumerate()
                    .map(|(i, dc)| FleetSpec {
                        datacenter: dc.clone(),
                        seed: spec.seed + 1_000 * i as u64,
                        ..spec.clone()
                    })
                    .collect()
            };
            let away = match self.status.datacenters.as_ref() {
                Some(d) if !self.settings.demo_datacenters.is_empty() => {
                    let (away, task) = super::weather::start(
                        self.status.clone(),
                        self.settings.demo_datacenters.clone(),
                        self.settings.demo_outages,
                        d.policy,
                    );
                    self.simulators.push(task);
                    away
                }
                _ => vec![Arc::new(std::sync::atomic::AtomicBool::new(false))],
            };
            if restored > 0 {
                tracing::info!(
                    restored,
                    "demo fleet not loaded: the database already holds objects from an earlier run"
                );
            } else {
                for fleet in &fleets {
                    let n = super::load_demo(store, fleet).await;
                    tracing::info!(objects = n, clusters = fleet.clusters, datacenter = %fleet.datacenter, "demo fleet loaded");
                }
            }
            if let Some(inventory) = &self.settings.inventory {
                for fleet in &fleets {
                    super::demo_apps::load(inventory, &fleet.datacenter);
                    if let Some(sim) = &self.settings.simulate {
                        // About one step every 5 s at the simulator's default pace.
                        let step = Duration::from_secs_f64(
                            (10.0 / sim.steps_per_second.max(0.01)).clamp(0.2, 30.0),
                        );
                        self.simulators.push(super::demo_apps::simulate(
                            inventory.clone(),
                            fleet.datacenter.clone(),
                            step,
                        ));
                    }
                }
            }
            if let Some(sim) = &self.settings.simulate {
                if restored > 0 {
                    tracing::warn!(
                        "simulator: the database holds objects from an earlier run; the demo's clusters \
                         are reset to their generated state, clusters an earlier simulation created stay as stored"
                    );
                }
                for (i, (fleet, away)) in fleets.iter().zip(away).enumerate() {
                    let settings = SimulatorSettings {
                        seed: sim.seed + i as u64,
                        ..sim.clone()
                    };
                    self.simulators.push(super::simulator::start(
                        store.clone(),
                        fleet,
                        &settings,
                        restored > 0,
                        away,
                    ));
                }
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
        for s in &self.simulators {
            s.abort();
        }
    }

    /// Stop the simulator, write what is pending; the database connection, for closing.
    pub async fn stop(self) -> Option<Db> {
        for sim in self.simulators {
            sim.abort();
        }
        self.writer.await.ok().flatten()
    }
}
