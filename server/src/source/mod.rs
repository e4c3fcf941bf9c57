//! Where objects come from: manifest files (the embedded source) and the generated demo fleet.

#[cfg(test)]
pub(crate) mod churn;
#[cfg(test)]
mod compact_tests;
pub mod datacenters;
pub mod demo;
pub mod demo_apps;
pub mod embedded;
pub mod hub;
pub mod inventory;
pub mod kube;
pub mod manifest;
pub mod simulator;
pub mod status;
pub mod weather;

use std::path::PathBuf;

use crate::store::{Op, Store};
pub use manifest::{FileReport, ManifestError, ManifestNote};

/// What an import did.
#[derive(Debug, Default)]
pub struct ImportSummary {
    /// One report per file read.
    pub files: Vec<FileReport>,
    /// Objects applied (created or changed) in the store.
    pub changed: usize,
    /// Objects read from accepted files that were already identical in the store.
    pub unchanged: usize,
}

impl ImportSummary {
    /// Every refusal, across files.
    pub fn errors(&self) -> impl Iterator<Item = &ManifestError> {
        self.files.iter().flat_map(|f| f.errors.iter())
    }

    /// Every note, across files.
    pub fn notes(&self) -> impl Iterator<Item = &ManifestNote> {
        self.files.iter().flat_map(|f| f.notes.iter())
    }

    /// Number of files refused.
    pub fn refused_files(&self) -> usize {
        self.files.iter().filter(|f| !f.accepted()).count()
    }

    /// Log what the import refused and noted.
    pub fn log(&self) {
        for e in self.errors() {
            tracing::warn!(file = %e.file, document = e.document, path = %e.path, reason = %e.reason, "manifest refused");
        }
        for n in self.notes() {
            tracing::info!(file = %n.file, document = n.document, "{}", n.message);
        }
        tracing::info!(
            files = self.files.len(),
            refused = self.refused_files(),
            changed = self.changed,
            "manifests loaded"
        );
    }
}

/// Which source feeds the store, with its settings: chosen once, from configuration.
#[derive(Clone, Debug)]
pub enum SourceSettings {
    /// The database, the demo fleet, manifests and mutations.
    Embedded(embedded::EmbeddedSettings),
    /// Watches on Kubernetes API servers, one per datacenter.
    Kube(kube::FleetSettings),
}

/// A running source: where the store's objects come from.
pub enum Source {
    /// See [`embedded`].
    Embedded(Box<embedded::EmbeddedSource>),
    /// See [`kube`]: the watchers of every datacenter, and the database connection held for
    /// closing (the clusters are the truth: nothing is written back).
    Kube {
        source: kube::Fleet,
        db: Option<crate::db::Db>,
    },
}

impl SourceSettings {
    /// `embedded` or `kube`.
    pub fn name(&self) -> &'static str {
        match self {
            SourceSettings::Embedded(_) => "embedded",
            SourceSettings::Kube(_) => "kube",
        }
    }

    /// What feeds the store, in words.
    pub fn describe(&self) -> &'static str {
        match self {
            SourceSettings::Embedded(_) => "embedded store",
            SourceSettings::Kube(_) => "Kubernetes watches",
        }
    }

    /// Read back what an earlier run kept, before anything else writes the store (the embedded
    /// source: its objects; the kube source: nothing, the cluster is the truth).
    pub async fn restore(
        &self,
        db: &crate::db::Start,
        store: &Store,
        health: &crate::db::health::DbHealth,
    ) -> usize {
        let (SourceSettings::Embedded(_), crate::db::Start::Connected(db)) = (self, db) else {
            return 0;
        };
        embedded::restore(db, store).await.unwrap_or_else(|e| {
            tracing::warn!(error = %e, "reading stored objects failed");
            health.failed(&e);
            0
        })
    }

    /// The same, feeding the application inventory (the demo's applications, or each
    /// datacenter's Helm releases and workloads).
    pub fn with_inventory(
        mut self,
        inventory: Option<std::sync::Arc<crate::inventory::Inventory>>,
    ) -> Self {
        match &mut self {
            SourceSettings::Embedded(s) => s.inventory = inventory,
            SourceSettings::Kube(s) => s.inventory = inventory,
        }
        self
    }

    /// Start the source on `store`.
    pub async fn start(
        self,
        store: &std::sync::Arc<Store>,
        db: crate::db::Start,
        restored: usize,
        health: std::sync::Arc<crate::db::health::DbHealth>,
        stop: tokio::sync::watch::Receiver<bool>,
        lagged: prometheus::IntCounter,
    ) -> Result<Source, kube::FleetError> {
        Ok(match self {
            SourceSettings::Embedded(settings) => {
                Source::Embedded(Box::new(embedded::EmbeddedSource::start(
                    store.clone(),
                    settings,
                    db,
                    restored,
                    health,
                    stop,
                    lagged,
                )))
            }
            SourceSettings::Kube(settings) => Source::Kube {
                source: kube::Fleet::start(store.clone(), &settings).await?,
                db: match db {
                    crate::db::Start::Connected(db) => Some(db),
                    crate::db::Start::Retry { .. } => None,
                },
            },
        })
    }
}

impl Source {
    /// Per-kind state: how current each kind is.
    pub fn status(&self) -> std::sync::Arc<status::SourceStatus> {
        match self {
            Source::Embedded(e) => e.status(),
            Source::Kube { source, .. } => source.status.clone(),
        }
    }

    /// How to reach each datacenter's cluster, for the kube source (kept current as
    /// datacenters come and go).
    pub fn kube_settings(&self) -> Option<kube::DatacenterSettings> {
        match self {
            Source::Embedded(_) => None,
            Source::Kube { source, .. } => Some(source.settings()),
        }
    }

    /// Objects read back from the database at start-up.
    pub fn restored(&self) -> usize {
        match self {
            Source::Embedded(e) => e.restored(),
            Source::Kube { .. } => 0,
        }
    }

    /// Load what the source loads once the server answers (the embedded source's demo fleet,
    /// simulator and manifests; the kube source's first lists are already under way).
    pub async fn load(&mut self, store: &std::sync::Arc<Store>) -> anyhow::Result<ImportSummary> {
        match self {
            Source::Embedded(e) => e.load(store).await,
            Source::Kube { .. } => Ok(ImportSummary::default()),
        }
    }

    /// Stop at once (tests simulating a crash).
    pub fn abort(&self) {
        if let Source::Embedded(e) = self {
            e.abort();
        }
    }

    /// Stop, write what is pending; the database connection, for closing.
    pub async fn stop(self) -> Option<crate::db::Db> {
        match self {
            Source::Embedded(e) => e.stop().await,
            Source::Kube { source, db, .. } => {
                drop(source);
                db
            }
        }
    }
}

/// How an import applies its files.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Apply {
    /// Each accepted file atomically, as news (changes the event log records).
    Atomic,
    /// As state being loaded at start-up ([`Store::load`]): paced so that no reader of the
    /// change stream is overrun, and not news for the event log.
    Load,
}

/// Read files and directories and apply every accepted file to the store. Refused files change
/// nothing.
pub async fn import_paths(
    store: &Store,
    paths: &[PathBuf],
    how: Apply,
) -> std::io::Result<ImportSummary> {
    let files = manifest::expand_paths(paths)?;
    let mut summary = ImportSummary::default();
    for path in files {
        let report = manifest::parse_file(&path);
        if report.accepted() {
            let n = report.objects.len();
            let ops = report.objects.iter().cloned().map(Op::Upsert).collect();
            let changed = match how {
                Apply::Atomic => store.apply(ops).len(),
                Apply::Load => store.load(ops).await,
            };
            summary.changed += changed;
            summary.unchanged += n.saturating_sub(changed);
        }
        summary.files.push(report);
    }
    Ok(summary)
}

/// Load the generated demo fleet into the store: a fleet that "already exists", not news for the
/// event log.
pub async fn load_demo(store: &Store, spec: &demo::FleetSpec) -> usize {
    store
        .load(demo::fleet(spec).into_iter().map(Op::Upsert).collect())
        .await
}
