//! The inventory as it is served: each application with its revisions, the snapshot of them all,
//! each change worth telling, and the pause of the pushes.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use crate::domain::applications::{Application, Health};
use crate::model::Datacenter;
use crate::model::helm::{HelmRelease, ReleaseStatus};

/// Whether the pushes are stopped, and by whom.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pause {
    pub paused: bool,
    /// Who set it and when (ms since the epoch); None: `APPLICATIONS_PAUSED` (no admin has).
    pub set: Option<(String, i64)>,
}

/// One revision of a release, as its timeline shows it.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Revision {
    pub revision: u64,
    pub status: ReleaseStatus,
    pub updated: Option<String>,
    pub chart_version: String,
    pub app_version: String,
}

impl Revision {
    pub(super) fn of(r: &HelmRelease) -> Revision {
        Revision {
            revision: r.revision,
            status: r.status,
            updated: r.updated.clone(),
            chart_version: r.chart_version.clone(),
            app_version: r.app_version.clone(),
        }
    }
}

/// An application as served: where it runs, what it is, and its revisions (newest first).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct AppEntry {
    pub datacenter: Datacenter,
    pub app: Application,
    /// From the namespace's `uuid` Secret, when it has one.
    pub app_uuid: Option<String>,
    pub revisions: Vec<Revision>,
}

impl AppEntry {
    /// (datacenter, namespace, release name).
    pub fn key(&self) -> AppKey {
        (
            self.datacenter.clone(),
            self.app.release.namespace.clone(),
            self.app.release.name.clone(),
        )
    }

    /// Pods ready, of all its pods.
    pub fn ready_pods(&self) -> (usize, usize) {
        let ready = self.app.pods.iter().filter(|p| p.ready).count();
        (ready, self.app.pods.len())
    }

    /// A digest of its state: the revision and status, and each pod's readiness, restarts,
    /// waiting reasons and when it last turned (ready or not). Two moments that differ in what
    /// a user would see have different digests, and replicas watching the same cluster agree.
    pub fn state_digest(&self) -> String {
        let r = &self.app.release;
        let mut text = format!("{}|{:?}", r.revision, r.status);
        let mut pods: Vec<_> = self.app.pods.iter().collect();
        pods.sort_by(|a, b| a.meta.name.cmp(&b.meta.name));
        for p in pods {
            text.push_str(&format!(
                "|{}={}/{}/{}/{}",
                p.meta.name,
                p.ready,
                p.restarts,
                p.waiting.join(","),
                p.ready_since.as_deref().unwrap_or("")
            ));
        }
        super::short_digest(&text)
    }

    /// What the inventory API must hear about: the revision, or which pods are ready.
    pub fn readiness(&self) -> (u64, Vec<(&str, bool)>) {
        (
            self.app.release.revision,
            self.app
                .pods
                .iter()
                .map(|p| (p.meta.name.as_str(), p.ready))
                .collect(),
        )
    }
}

/// (datacenter, namespace, release name).
pub type AppKey = (Datacenter, String, String);

/// The inventory at one moment.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    pub apps: BTreeMap<AppKey, Arc<AppEntry>>,
    /// Namespaces seen per datacenter (denied ones excluded).
    pub namespaces: BTreeMap<Datacenter, BTreeSet<String>>,
    /// Moves on with every change.
    pub generation: u64,
    /// When the applications were last joined again (ms since the epoch).
    pub reconciled_ms: Option<i64>,
    /// Per datacenter, the UID of the watched cluster's `kube-system` namespace: what names
    /// the cluster its applications run on (the KubernetesCluster annotated with it).
    pub kube_system_uids: BTreeMap<Datacenter, String>,
}

impl Snapshot {
    /// The applications `scope` sees: those in namespaces it sees (a Helm release is kept in
    /// its namespace).
    pub fn visible(self: &Arc<Self>, scope: &crate::store::Scope) -> Arc<Snapshot> {
        if scope.is_all() {
            return self.clone();
        }
        Arc::new(Snapshot {
            apps: self
                .apps
                .iter()
                .filter(|(_, a)| scope.sees_namespace(&a.datacenter, &a.app.release.namespace))
                .map(|(k, a)| (k.clone(), a.clone()))
                .collect(),
            namespaces: self
                .namespaces
                .iter()
                .map(|(dc, set)| {
                    let seen = set
                        .iter()
                        .filter(|ns| scope.sees_namespace(dc, ns))
                        .cloned()
                        .collect();
                    (dc.clone(), seen)
                })
                .collect(),
            generation: self.generation,
            reconciled_ms: self.reconciled_ms,
            kube_system_uids: self.kube_system_uids.clone(),
        })
    }

    /// Applications by health.
    pub fn counts(&self) -> BTreeMap<Health, usize> {
        self.counts_in(None)
    }

    /// Applications by health in datacenter `dc` (`None`: every one).
    pub fn counts_in(&self, dc: Option<&Datacenter>) -> BTreeMap<Health, usize> {
        let mut out = BTreeMap::new();
        for a in self
            .apps
            .values()
            .filter(|a| dc.is_none_or(|d| a.datacenter == *d))
        {
            *out.entry(a.app.health).or_insert(0) += 1;
        }
        out
    }
}

/// One change worth telling.
#[derive(Clone, Debug)]
pub struct AppChange {
    /// None: the application is new.
    pub before: Option<Arc<AppEntry>>,
    /// None: it is gone.
    pub after: Option<Arc<AppEntry>>,
    /// The snapshot generation it belongs to.
    pub generation: u64,
    /// Made while the datacenter's first lists were still coming in: what they find was there
    /// before, it is not news.
    pub initial: bool,
}

impl AppChange {
    /// The application concerned (as it is now, else as it was).
    pub fn entry(&self) -> Option<&Arc<AppEntry>> {
        self.after.as_ref().or(self.before.as_ref())
    }

    /// The revision or a pod's readiness moved (what the inventory API is sent).
    pub fn pushable(&self) -> bool {
        match (&self.before, &self.after) {
            (Some(b), Some(a)) => b.readiness() != a.readiness(),
            (None, Some(_)) => true,
            _ => false,
        }
    }
}
