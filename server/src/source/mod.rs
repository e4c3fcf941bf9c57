//! Where objects come from: manifest files (the embedded source) and the generated demo fleet.

#[cfg(test)]
pub(crate) mod churn;
pub mod demo;
pub mod kube;
pub mod manifest;
pub mod operators;
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
