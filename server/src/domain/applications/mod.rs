//! The application inventory: each Helm release's live revision joined with the pods,
//! services, volumes and ingresses it runs, judged healthy or not, and the document the
//! hossted design pushes for it.
//!
//! The join never crosses a namespace. An object belongs to a release when (in this order) its
//! `meta.helm.sh/release-name`/`-namespace` annotations name it, its
//! `app.kubernetes.io/instance` label names it (with `app.kubernetes.io/managed-by` absent or
//! `Helm`), or the release's manifest made it (kind and name).

use std::collections::BTreeMap;

use crate::model::helm::{HelmRelease, ReleaseStatus};

mod document;

pub use document::{DocumentIds, document};

/// The labels and annotations a join reads, with the object's identity.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Meta {
    pub name: String,
    pub namespace: String,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
}

/// A pod, as the inventory shows it.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PodFacts {
    pub meta: Meta,
    /// Its containers' images, in order.
    pub images: Vec<String>,
    /// `status.phase` (`Running`, `Pending`, …).
    pub phase: String,
    /// Every container ready.
    pub ready: bool,
    /// Restarts over its containers.
    pub restarts: u32,
    /// Why containers wait (`CrashLoopBackOff`, `ImagePullBackOff`, …).
    pub waiting: Vec<String>,
    /// When its `Ready` condition last changed (`lastTransitionTime`): tells one readiness flap
    /// from the next.
    pub ready_since: Option<String>,
}

/// A service and its ports.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ServiceFacts {
    pub meta: Meta,
    pub ports: Vec<i32>,
}

/// A PersistentVolumeClaim and the storage it requests (bytes).
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct VolumeFacts {
    pub meta: Meta,
    pub requested_bytes: Option<i128>,
}

/// An ingress and the hosts it serves.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct IngressFacts {
    pub meta: Meta,
    pub hosts: Vec<String>,
}

/// What one namespace holds that a release can own.
#[derive(Clone, Debug, Default)]
pub struct Workloads<'a> {
    pub pods: Vec<&'a PodFacts>,
    pub services: Vec<&'a ServiceFacts>,
    pub volumes: Vec<&'a VolumeFacts>,
    pub ingresses: Vec<&'a IngressFacts>,
}

/// How an application is doing.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub enum Health {
    /// Deployed, every pod running and ready.
    Healthy,
    /// Deployed, but something is wrong (the reasons say what).
    Degraded,
    /// The release failed (no revision of it is deployed).
    Failed,
    PendingInstall,
    PendingUpgrade,
    PendingRollback,
    /// Being uninstalled.
    Uninstalling,
    /// Helm says nothing usable.
    Unknown,
}

impl Health {
    /// Its name in the API and metrics (`PENDING_UPGRADE`).
    pub fn label(self) -> &'static str {
        match self {
            Health::Healthy => "HEALTHY",
            Health::Degraded => "DEGRADED",
            Health::Failed => "FAILED",
            Health::PendingInstall => "PENDING_INSTALL",
            Health::PendingUpgrade => "PENDING_UPGRADE",
            Health::PendingRollback => "PENDING_ROLLBACK",
            Health::Uninstalling => "UNINSTALLING",
            Health::Unknown => "UNKNOWN",
        }
    }

    /// Every health.
    pub const ALL: &'static [Health] = &[
        Health::Healthy,
        Health::Degraded,
        Health::Failed,
        Health::PendingInstall,
        Health::PendingUpgrade,
        Health::PendingRollback,
        Health::Uninstalling,
        Health::Unknown,
    ];
}

/// One application: its live revision, what it runs, and how it does.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Application {
    pub release: HelmRelease,
    pub pods: Vec<PodFacts>,
    pub services: Vec<ServiceFacts>,
    pub volumes: Vec<VolumeFacts>,
    pub ingresses: Vec<IngressFacts>,
    pub health: Health,
    /// Why it is not healthy, in words.
    pub reasons: Vec<String>,
}

const RELEASE_NAME: &str = "meta.helm.sh/release-name";
const RELEASE_NAMESPACE: &str = "meta.helm.sh/release-namespace";
const INSTANCE: &str = "app.kubernetes.io/instance";
const MANAGED_BY: &str = "app.kubernetes.io/managed-by";

/// Whether the object (`kind`, `meta`) belongs to `release`.
pub fn belongs(release: &HelmRelease, kind: &str, meta: &Meta) -> bool {
    if meta.namespace != release.namespace {
        return false;
    }
    let a = |k: &str| meta.annotations.get(k).map(String::as_str);
    if a(RELEASE_NAME) == Some(release.name.as_str())
        && a(RELEASE_NAMESPACE).is_none_or(|ns| ns == release.namespace)
    {
        return true;
    }
    let l = |k: &str| meta.labels.get(k).map(String::as_str);
    if l(INSTANCE) == Some(release.name.as_str()) && l(MANAGED_BY).is_none_or(|m| m == "Helm") {
        return true;
    }
    release.objects.iter().any(|o| {
        o.kind == kind
            && o.name == meta.name
            && o.namespace
                .as_deref()
                .is_none_or(|ns| ns == release.namespace)
    })
}

/// The live revision of each release among `revisions` (every revision of every release, in any
/// order): its newest deployed or pending revision; a release without one shows its newest
/// revision (a failed install, an uninstall under way). Keyed by (namespace, name).
pub fn live(revisions: &[HelmRelease]) -> BTreeMap<(String, String), &HelmRelease> {
    let mut out: BTreeMap<(String, String), &HelmRelease> = BTreeMap::new();
    for r in revisions {
        let key = (r.namespace.clone(), r.name.clone());
        let better = match out.get(&key) {
            None => true,
            Some(held) => match (r.status.live(), held.status.live()) {
                (true, false) => true,
                (false, true) => false,
                _ => r.revision > held.revision,
            },
        };
        if better {
            out.insert(key, r);
        }
    }
    out
}

/// The objects of one kind among `items` that `release` owns.
fn owned<T: Clone>(
    release: &HelmRelease,
    kind: &str,
    items: &[&T],
    meta: fn(&T) -> &Meta,
) -> Vec<T> {
    items
        .iter()
        .filter(|o| belongs(release, kind, meta(o)))
        .map(|o| (*o).clone())
        .collect()
}

/// `release` joined with what it owns among `w` (its namespace's objects), and judged.
/// `newer_failed`: the revision of a failed upgrade newer than the live one, if any.
pub fn application(
    release: &HelmRelease,
    w: &Workloads<'_>,
    newer_failed: Option<u64>,
) -> Application {
    let pods = owned(release, "Pod", &w.pods, |p| &p.meta);
    let services = owned(release, "Service", &w.services, |s| &s.meta);
    let volumes = owned(release, "PersistentVolumeClaim", &w.volumes, |v| &v.meta);
    let ingresses = owned(release, "Ingress", &w.ingresses, |i| &i.meta);
    let (health, reasons) = judge(release, &pods, newer_failed);
    Application {
        release: release.clone(),
        pods,
        services,
        volumes,
        ingresses,
        health,
        reasons,
    }
}

/// Health and its reasons.
fn judge(
    release: &HelmRelease,
    pods: &[PodFacts],
    newer_failed: Option<u64>,
) -> (Health, Vec<String>) {
    let health = match release.status {
        ReleaseStatus::Deployed => Health::Healthy,
        ReleaseStatus::Failed => Health::Failed,
        ReleaseStatus::PendingInstall => Health::PendingInstall,
        ReleaseStatus::PendingUpgrade => Health::PendingUpgrade,
        ReleaseStatus::PendingRollback => Health::PendingRollback,
        ReleaseStatus::Uninstalling => Health::Uninstalling,
        ReleaseStatus::Unknown | ReleaseStatus::Uninstalled | ReleaseStatus::Superseded => {
            Health::Unknown
        }
    };
    let mut reasons = Vec::new();
    if release.status == ReleaseStatus::Failed {
        reasons.push(format!("revision {} failed", release.revision));
    }
    if let Some(n) = newer_failed {
        reasons.push(format!(
            "the upgrade to revision {n} failed; revision {} still runs",
            release.revision
        ));
    }
    for p in pods {
        let name = &p.meta.name;
        if p.waiting.iter().any(|w| w == "CrashLoopBackOff") {
            reasons.push(format!(
                "pod {name} is crash-looping ({} restarts)",
                p.restarts
            ));
        } else if let Some(w) = p.waiting.iter().find(|w| {
            matches!(
                w.as_str(),
                "ImagePullBackOff" | "ErrImagePull" | "InvalidImageName"
            )
        }) {
            reasons.push(format!("pod {name} cannot pull its image ({w})"));
        } else if p.phase == "Failed" {
            reasons.push(format!("pod {name} failed"));
        } else if p.phase == "Pending" {
            reasons.push(format!("pod {name} is pending"));
        } else if p.phase == "Running" && !p.ready {
            reasons.push(format!("pod {name} is not ready"));
        }
    }
    if health == Health::Healthy && !reasons.is_empty() {
        return (Health::Degraded, reasons);
    }
    (health, reasons)
}

#[cfg(test)]
mod tests;
