//! The application inventory: what the clusters say about Helm releases and the objects they
//! run (per datacenter and namespace), joined into applications on every change and published
//! as snapshots, with each change worth telling (an application added, removed, at a new
//! revision, or with a different health or readiness) sent to whoever listens.
//!
//! Sources (the kube watches, the demo) call [`Inventory::apply`], [`Inventory::delete`] and
//! [`Inventory::replace`]; the API reads [`Inventory::snapshot`] and [`Inventory::changes`].
//! Only the namespace a fact belongs to is joined again, so one pod's change costs that
//! namespace's releases, not the whole inventory.

pub mod push;
pub mod settings;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::{broadcast, watch};

use crate::clock::now_ms;
use crate::domain::applications::{
    Application, Health, IngressFacts, PodFacts, ServiceFacts, VolumeFacts, Workloads, application,
    live,
};
use crate::model::Datacenter;
use crate::model::helm::{HelmRelease, ReleaseStatus};
pub use settings::InventorySettings;

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
struct NamespaceFacts {
    exists: bool,
    /// By where Helm stored them (Secret or ConfigMap) and the storage object's name.
    releases: BTreeMap<(FactKind, String), HelmRelease>,
    pods: BTreeMap<String, PodFacts>,
    services: BTreeMap<String, ServiceFacts>,
    volumes: BTreeMap<String, VolumeFacts>,
    ingresses: BTreeMap<String, IngressFacts>,
    app_uuid: Option<String>,
}

impl NamespaceFacts {
    fn put(&mut self, fact: Fact) {
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

    fn remove(&mut self, kind: FactKind, name: &str) {
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
    fn clear(&mut self, kind: FactKind) -> bool {
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

    fn is_empty(&self) -> bool {
        !self.exists
            && self.releases.is_empty()
            && self.pods.is_empty()
            && self.services.is_empty()
            && self.volumes.is_empty()
            && self.ingresses.is_empty()
            && self.app_uuid.is_none()
    }

    /// The namespace's applications, one per release.
    fn applications(&self) -> Vec<(Application, Vec<Revision>)> {
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

/// One revision of a release, as its timeline shows it.
#[derive(Clone, Debug, PartialEq)]
pub struct Revision {
    pub revision: u64,
    pub status: ReleaseStatus,
    pub updated: Option<String>,
    pub chart_version: String,
    pub app_version: String,
}

impl Revision {
    fn of(r: &HelmRelease) -> Revision {
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
#[derive(Clone, Debug, PartialEq)]
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
        short_digest(&text)
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

/// The inventory of every datacenter.
pub struct Inventory {
    settings: InventorySettings,
    facts: Mutex<BTreeMap<Datacenter, BTreeMap<String, NamespaceFacts>>>,
    snapshot: watch::Sender<Arc<Snapshot>>,
    changes: broadcast::Sender<Arc<AppChange>>,
    paused: watch::Sender<bool>,
    cluster_uuids: Mutex<BTreeMap<Datacenter, String>>,
    /// Per datacenter, the kinds of fact still to be listed once (a datacenter with none left,
    /// or never announced, is synced).
    unlisted: Mutex<BTreeMap<Datacenter, BTreeSet<FactKind>>>,
    /// Moves on each time a cluster UUID becomes known or a datacenter is first synced.
    progress: watch::Sender<u64>,
}

impl std::fmt::Debug for Inventory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inventory")
            .field("applications", &self.snapshot.borrow().apps.len())
            .finish()
    }
}

/// The namespace whose UID names a cluster (talos-operator's `vitistack.io/kube-system-uid`).
const KUBE_SYSTEM: &str = "kube-system";

/// Changes a slow listener may fall behind by before it is told it missed some.
const CHANGE_BUFFER: usize = 4096;

impl Inventory {
    pub fn new(settings: InventorySettings) -> Arc<Inventory> {
        let (snapshot, _) = watch::channel(Arc::new(Snapshot::default()));
        let (changes, _) = broadcast::channel(CHANGE_BUFFER);
        Arc::new(Inventory {
            paused: watch::Sender::new(settings.paused),
            progress: watch::Sender::new(0),
            unlisted: Mutex::new(BTreeMap::new()),
            settings,
            facts: Mutex::new(BTreeMap::new()),
            snapshot,
            changes,
            cluster_uuids: Mutex::new(BTreeMap::new()),
        })
    }

    /// Its settings.
    pub fn settings(&self) -> &InventorySettings {
        &self.settings
    }

    /// The applications now.
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.snapshot.borrow().clone()
    }

    /// Snapshots as they change.
    pub fn watch(&self) -> watch::Receiver<Arc<Snapshot>> {
        self.snapshot.subscribe()
    }

    /// Changes from now on.
    pub fn changes(&self) -> broadcast::Receiver<Arc<AppChange>> {
        self.changes.subscribe()
    }

    /// Pushes stopped (the design's `stop: true`).
    pub fn paused(&self) -> bool {
        *self.paused.borrow()
    }

    /// The pause switch as it changes.
    pub fn watch_paused(&self) -> watch::Receiver<bool> {
        self.paused.subscribe()
    }

    /// Stop or resume the pushes; returns the previous setting.
    pub fn set_paused(&self, paused: bool) -> bool {
        self.paused.send_replace(paused)
    }

    /// Moves on each time a cluster UUID becomes known or a datacenter is first synced.
    pub fn watch_progress(&self) -> watch::Receiver<u64> {
        self.progress.subscribe()
    }

    /// `kinds` of `dc` are about to be listed: until each has been, `dc` is not synced.
    pub fn expect(&self, dc: &Datacenter, kinds: &[FactKind]) {
        self.unlisted
            .lock()
            .insert(dc.clone(), kinds.iter().copied().collect());
    }

    /// Every kind of fact of `dc` has been listed once (what it says is the cluster's state,
    /// not part of it).
    pub fn synced(&self, dc: &Datacenter) -> bool {
        self.unlisted.lock().get(dc).is_none_or(BTreeSet::is_empty)
    }

    fn listed(&self, dc: &Datacenter, kind: FactKind) {
        let done = {
            let mut unlisted = self.unlisted.lock();
            match unlisted.get_mut(dc) {
                Some(left) => left.remove(&kind) && left.is_empty(),
                None => false,
            }
        };
        if done {
            self.progress.send_modify(|n| *n += 1);
        }
    }

    /// The cluster UUID of a datacenter, once known.
    pub fn cluster_uuid(&self, dc: &Datacenter) -> Option<String> {
        self.cluster_uuids.lock().get(dc).cloned()
    }

    /// Every datacenter's cluster UUID known.
    pub fn cluster_uuids(&self) -> Vec<(Datacenter, String)> {
        self.cluster_uuids
            .lock()
            .iter()
            .map(|(d, u)| (d.clone(), u.clone()))
            .collect()
    }

    /// Record a datacenter's cluster UUID.
    pub fn set_cluster_uuid(&self, dc: &Datacenter, uuid: String) {
        self.cluster_uuids.lock().insert(dc.clone(), uuid);
        self.progress.send_modify(|n| *n += 1);
    }

    /// Whether facts of `namespace` are kept.
    pub fn admits(&self, namespace: &str) -> bool {
        !self.settings.denies(namespace)
    }

    /// A fact was added or changed.
    pub fn apply(&self, dc: &Datacenter, fact: Fact) {
        let mut facts = self.facts.lock();
        if let Fact::Namespace { name, uid } = &fact
            && name == KUBE_SYSTEM
        {
            self.set_kube_system_uid(dc, Some(uid.clone()));
        }
        if !self.admits(fact.namespace()) {
            return;
        }
        let ns = fact.namespace().to_string();
        facts
            .entry(dc.clone())
            .or_default()
            .entry(ns.clone())
            .or_default()
            .put(fact);
        self.rejoin(&mut facts, dc, [ns].into());
    }

    /// A fact is gone.
    pub fn delete(&self, dc: &Datacenter, kind: FactKind, namespace: &str, name: &str) {
        let mut facts = self.facts.lock();
        if kind == FactKind::Namespace && name == KUBE_SYSTEM {
            self.set_kube_system_uid(dc, None);
        }
        let Some(n) = facts
            .get_mut(dc)
            .and_then(|namespaces| namespaces.get_mut(namespace))
        else {
            return;
        };
        n.remove(kind, name);
        self.rejoin(&mut facts, dc, [namespace.to_string()].into());
    }

    /// Every fact of `kind` in `dc` is now `all` (a relist: what it lacks is gone).
    pub fn replace(&self, dc: &Datacenter, kind: FactKind, all: Vec<Fact>) {
        let mut facts = self.facts.lock();
        if kind == FactKind::Namespace {
            let uid = all.iter().find_map(|f| match f {
                Fact::Namespace { name, uid } if name == KUBE_SYSTEM => Some(uid.clone()),
                _ => None,
            });
            self.set_kube_system_uid(dc, uid);
        }
        let namespaces = facts.entry(dc.clone()).or_default();
        let mut touched: BTreeSet<String> = BTreeSet::new();
        // Only the namespaces that held a fact of this kind, or get one, are joined again (a
        // relist of one kind does not rejoin every namespace).
        for (ns, n) in namespaces.iter_mut() {
            if n.clear(kind) {
                touched.insert(ns.clone());
            }
        }
        for fact in all.into_iter().filter(|f| f.kind() == kind) {
            if !self.admits(fact.namespace()) {
                continue;
            }
            let ns = fact.namespace().to_string();
            namespaces.entry(ns.clone()).or_default().put(fact);
            touched.insert(ns);
        }
        self.rejoin(&mut facts, dc, touched);
        drop(facts);
        self.listed(dc, kind);
    }

    /// A datacenter is no longer watched: its applications go.
    pub fn forget(&self, dc: &Datacenter) {
        let mut facts = self.facts.lock();
        let Some(namespaces) = facts.get_mut(dc) else {
            return;
        };
        let touched: BTreeSet<String> = namespaces.keys().cloned().collect();
        namespaces.clear();
        self.set_kube_system_uid(dc, None);
        self.rejoin(&mut facts, dc, touched);
        facts.remove(dc);
        self.unlisted.lock().remove(dc);
    }

    /// Record (or drop) the UID of `dc`'s `kube-system` namespace; publishes a snapshot when it
    /// changed. Called with the facts locked, so snapshots stay in order.
    fn set_kube_system_uid(&self, dc: &Datacenter, uid: Option<String>) {
        self.snapshot.send_if_modified(|s| {
            let changed = match &uid {
                Some(u) => s.kube_system_uids.get(dc) != Some(u),
                None => s.kube_system_uids.contains_key(dc),
            };
            if changed {
                let mut next = (**s).clone();
                match uid {
                    Some(u) => drop(next.kube_system_uids.insert(dc.clone(), u)),
                    None => drop(next.kube_system_uids.remove(dc)),
                }
                next.generation += 1;
                *s = Arc::new(next);
            }
            changed
        });
    }

    /// Join `namespaces` of `dc` again and publish what changed.
    fn rejoin(
        &self,
        facts: &mut BTreeMap<Datacenter, BTreeMap<String, NamespaceFacts>>,
        dc: &Datacenter,
        namespaces: BTreeSet<String>,
    ) {
        let Some(held) = facts.get_mut(dc) else {
            return;
        };
        let old = self.snapshot();
        let mut next = (*old).clone();
        next.generation += 1;
        next.reconciled_ms = Some(now_ms());
        let mut changes = Vec::new();
        for ns in &namespaces {
            let fresh: BTreeMap<AppKey, Arc<AppEntry>> = match held.get(ns) {
                Some(n) => {
                    let uuid = n.app_uuid.clone();
                    n.applications()
                        .into_iter()
                        .map(|(app, revisions)| {
                            let e = AppEntry {
                                datacenter: dc.clone(),
                                app,
                                app_uuid: uuid.clone(),
                                revisions,
                            };
                            (e.key(), Arc::new(e))
                        })
                        .collect()
                }
                None => BTreeMap::new(),
            };
            let lo = (dc.clone(), ns.clone(), String::new());
            let before: Vec<AppKey> = old
                .apps
                .range(lo..)
                .take_while(|(k, _)| k.0 == *dc && k.1 == *ns)
                .map(|(k, _)| k.clone())
                .collect();
            for k in before {
                if !fresh.contains_key(&k)
                    && let Some(gone) = next.apps.remove(&k)
                {
                    changes.push((Some(gone), None));
                }
            }
            for (k, e) in fresh {
                match old.apps.get(&k) {
                    Some(b) if **b == *e => {}
                    b => {
                        changes.push((b.cloned(), Some(e.clone())));
                        next.apps.insert(k, e);
                    }
                }
            }
            let seen = next.namespaces.entry(dc.clone()).or_default();
            if held.get(ns).is_some_and(|n| n.exists) {
                seen.insert(ns.clone());
            } else {
                seen.remove(ns);
            }
            if held.get(ns).is_some_and(NamespaceFacts::is_empty) {
                held.remove(ns);
            }
        }
        if next.namespaces.get(dc).is_some_and(BTreeSet::is_empty) {
            next.namespaces.remove(dc);
        }
        let generation = next.generation;
        let initial = !self.synced(dc);
        self.snapshot.send_replace(Arc::new(next));
        for (before, after) in changes {
            let _ = self.changes.send(Arc::new(AppChange {
                before,
                after,
                generation,
                initial,
            }));
        }
    }
}

/// The first 12 bytes of a SHA-256, in hex: short enough to store and compare, long enough
/// never to collide among one application's states.
pub(crate) fn short_digest(text: &str) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(text.as_bytes())[..12]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[cfg(test)]
mod tests;
