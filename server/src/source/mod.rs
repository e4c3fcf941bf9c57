//! Where objects come from: manifest files (the embedded source) and the generated demo fleet.

pub mod demo;
pub mod kube;
pub mod manifest;
pub mod simulator;
pub mod status;

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
}

/// Read files and directories and apply every accepted file to the store, each file atomically.
/// Refused files change nothing.
pub fn import_paths(store: &Store, paths: &[PathBuf]) -> std::io::Result<ImportSummary> {
    let files = manifest::expand_paths(paths)?;
    let mut summary = ImportSummary::default();
    for path in files {
        let report = manifest::parse_file(&path);
        if report.accepted() {
            let n = report.objects.len();
            let changes = store.apply(report.objects.iter().cloned().map(Op::Upsert).collect());
            summary.changed += changes.len();
            summary.unchanged += n.saturating_sub(changes.len());
        }
        summary.files.push(report);
    }
    Ok(summary)
}

/// Load the generated demo fleet into the store.
pub fn load_demo(store: &Store, spec: &demo::FleetSpec) -> usize {
    // The demo is a fleet that "already exists": not news for the event log.
    store
        .apply_loaded(demo::fleet(spec).into_iter().map(Op::Upsert).collect())
        .len()
}
