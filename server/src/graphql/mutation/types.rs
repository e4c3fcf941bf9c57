//! What mutations take and answer: cluster changes, pool scales, manifest imports.

use async_graphql::{InputObject, SimpleObject};

use crate::change::cluster::ClusterPlan;
use crate::graphql::types::ClusterObj;

/// What a cluster mutation did.
#[derive(SimpleObject)]
pub struct ClusterChange {
    /// The cluster as the graph shows it after the change (its last state after a deletion:
    /// with finalizers it stays, marked deleting, until talos-operator has torn it down).
    pub cluster: ClusterObj,
    /// False when the cluster already was as asked: nothing was written.
    pub changed: bool,
    /// For creating and scaling: the plan the change was checked against.
    pub plan: Option<ClusterPlan>,
}

/// A pool's new size, for `scaleCluster`.
#[derive(InputObject)]
pub struct PoolScale {
    /// The pool.
    pub name: String,
    /// Its machines.
    pub replicas: i32,
}

/// One manifest file to import.
#[derive(InputObject)]
pub struct ManifestFileInput {
    /// Its name, used in messages (`tenant-a.yaml`).
    pub name: String,
    /// YAML or JSON documents (`---` separated).
    pub content: String,
}

/// A refused document.
#[derive(SimpleObject)]
pub struct ManifestProblem {
    /// 0-based document index in the file.
    pub document: i32,
    /// `Kind namespace/name` when known.
    pub object: Option<String>,
    /// Field path ("" for the document as a whole).
    pub path: String,
    /// What is wrong.
    pub reason: String,
}

/// What importing one file did.
#[derive(SimpleObject)]
pub struct ManifestFileResult {
    /// The file's name.
    pub name: String,
    /// True when every document was valid and the file was applied.
    pub accepted: bool,
    /// Objects the file holds (applied when accepted).
    pub objects: i32,
    /// Why it was refused (nothing of a refused file is applied).
    pub problems: Vec<ManifestProblem>,
    /// Remarks that refused nothing (pruned fields, skipped kinds).
    pub notes: Vec<String>,
}

/// What `importManifests` did.
#[derive(SimpleObject)]
pub struct ImportResult {
    /// One entry per file, in order.
    pub files: Vec<ManifestFileResult>,
    /// Objects created or changed.
    pub changed: i32,
    /// Objects that already were as given.
    pub unchanged: i32,
}
