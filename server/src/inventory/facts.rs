//! What the watches say, trimmed to what the inventory shows (a fact), and what one namespace
//! holds of them, joined into its applications.

use std::collections::BTreeMap;

use super::Revision;
use crate::domain::applications::{
    Application, IngressFacts, PodFacts, ServiceFacts, VolumeFacts, Workloads, application, live,
};
use crate::model::helm::{HelmRelease, ReleaseStatus};

/// The kinds of fact the inventory keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FactKind {
    /// One revision of a release, stored in a Secret (Helm's default storage).
    Release,
    /// One revision of a release, stored in a ConfigMap (`HELM_DRIVER=configmap`).
    ConfigMapRelease,
    Pod,
    Service,
    Volume,
    Ingress,
    /// A namespace's `uuid` Secret.
    AppUuid,
    Namespace,
}

/// One fact, trimmed to what the inventory shows.
#[derive(Clone, Debug, PartialEq)]
pub enum Fact {
    /// A release revision, under the name of the object Helm stored it in.
    Release {
        object: String,
        release: Box<HelmRelease>,
        /// Stored in a ConfigMap rather than a Secret.
        in_configmap: bool,
    },
    Pod(PodFacts),
    Service(ServiceFacts),
    Volume(VolumeFacts),
    Ingress(IngressFacts),
    /// The app UUID a namespace's `uuid` Secret holds.
    AppUuid {
        namespace: String,
        uuid: String,
    },
    /// A namespace exists (with its UID).
    Namespace {
        name: String,
        uid: String,
    },
}

impl Fact {
    /// Its kind.
    pub fn kind(&self) -> FactKind {
        match self {
            Fact::Release {
                in_configmap: false,
                ..
            } => FactKind::Release,
            Fact::Release { .. } => FactKind::ConfigMapRelease,
            Fact::Pod(_) => FactKind::Pod,
            Fact::Service(_) => FactKind::Service,
            Fact::Volume(_) => FactKind::Volume,
            Fact::Ingress(_) => FactKind::Ingress,
            Fact::AppUuid { .. } => FactKind::AppUuid,
            Fact::Namespace { .. } => FactKind::Namespace,
        }
    }

    /// The namespace it belongs to (a namespace's own name for `Namespace`).
    pub fn namespace(&self) -> &str {
        match self {
            // The storage object lives in the release's namespace.
            Fact::Release { release, .. } => &release.namespace,
            Fact::Pod(p) => &p.meta.namespace,
            Fact::Service(s) => &s.meta.namespace,
            Fact::Volume(v) => &v.meta.namespace,
            Fact::Ingress(i) => &i.meta.namespace,
            Fact::AppUuid { namespace, .. } => namespace,
            Fact::Namespace { name, .. } => name,
        }
    }

    /// Its name within the namespace and kind.
    pub fn name(&self) -> &str {
        match self {
            Fact::Release { object, .. } => object,
            Fact::Pod(p) => &p.meta.name,
            Fact::Service(s) => &s.meta.name,
            Fact::Volume(v) => &v.meta.name,
            Fact::Ingress(i) => &i.meta.name,
            Fact::AppUuid { .. } => "uuid",
            Fact::Namespace { name, .. } => name,
        }
    }
}

/// What one namespace holds.
#[derive(Clone, Debug, Default)]
pub(super) struct NamespaceFacts {
    pub(super) exists: bool,
    /// By where Helm stored them (Secret or ConfigMap) and the storage object's name.
    releases: BTreeMap<(FactKind, String), HelmRelease>,
    pods: BTreeMap<String, PodFacts>,
    services: BTreeMap<String, ServiceFacts>,
    volumes: BTreeMap<String, VolumeFacts>,
    ingresses: BTreeMap<String, IngressFacts>,
    pub(super) app_uuid: Option<String>,
}

impl NamespaceFacts {
    pub(super) fn put(&mut self, fact: Fact) {
        let kind = fact.kind();
        match fact {
            Fact::Release {
                object, release, ..
            } => {
                self.releases.insert((kind, object), *release);
            }
            Fact::Pod(p) => {
                self.pods.insert(p.meta.name.clone(), p);
            }
            Fact::Service(s) => {
                self.services.insert(s.meta.name.clone(), s);
            }
            Fact::Volume(v) => {
                self.volumes.insert(v.meta.name.clone(), v);
            }
            Fact::Ingress(i) => {
                self.ingresses.insert(i.meta.name.clone(), i);
            }
            Fact::AppUuid { uuid, .. } => self.app_uuid = Some(uuid),
            Fact::Namespace { .. } => self.exists = true,
        }
    }

    pub(super) fn remove(&mut self, kind: FactKind, name: &str) {
        match kind {
            FactKind::Release | FactKind::ConfigMapRelease => {
                drop(self.releases.remove(&(kind, name.to_string())))
            }
            FactKind::Pod => drop(self.pods.remove(name)),
            FactKind::Service => drop(self.services.remove(name)),
            FactKind::Volume => drop(self.volumes.remove(name)),
            FactKind::Ingress => drop(self.ingresses.remove(name)),
            FactKind::AppUuid => self.app_uuid = None,
            FactKind::Namespace => self.exists = false,
        }
    }

    /// Drop every fact of `kind`; true when there was one.
    pub(super) fn clear(&mut self, kind: FactKind) -> bool {
        match kind {
            FactKind::Release | FactKind::ConfigMapRelease => {
                let before = self.releases.len();
                self.releases.retain(|(k, _), _| *k != kind);
                self.releases.len() != before
            }
            FactKind::Pod => !std::mem::take(&mut self.pods).is_empty(),
            FactKind::Service => !std::mem::take(&mut self.services).is_empty(),
            FactKind::Volume => !std::mem::take(&mut self.volumes).is_empty(),
            FactKind::Ingress => !std::mem::take(&mut self.ingresses).is_empty(),
            FactKind::AppUuid => self.app_uuid.take().is_some(),
            FactKind::Namespace => std::mem::replace(&mut self.exists, false),
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        !self.exists
            && self.releases.is_empty()
            && self.pods.is_empty()
            && self.services.is_empty()
            && self.volumes.is_empty()
            && self.ingresses.is_empty()
            && self.app_uuid.is_none()
    }

    /// The namespace's applications, one per release.
    pub(super) fn applications(&self) -> Vec<(Application, Vec<Revision>)> {
        let revisions: Vec<HelmRelease> = self.releases.values().cloned().collect();
        let w = Workloads {
            pods: self.pods.values().collect(),
            services: self.services.values().collect(),
            volumes: self.volumes.values().collect(),
            ingresses: self.ingresses.values().collect(),
        };
        live(&revisions)
            .into_values()
            .map(|release| {
                let mine = revisions.iter().filter(|r| r.name == release.name);
                let newer_failed = mine
                    .clone()
                    .filter(|r| r.status == ReleaseStatus::Failed && r.revision > release.revision)
                    .map(|r| r.revision)
                    .max();
                let mut history: Vec<Revision> = mine.map(Revision::of).collect();
                history.sort_by_key(|r| std::cmp::Reverse(r.revision));
                (application(release, &w, newer_failed), history)
            })
            .collect()
    }
}
