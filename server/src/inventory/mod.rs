//! The application inventory: what the clusters say about Helm releases and the objects they
//! run (per datacenter and namespace), joined into applications on every change and published
//! as snapshots, with each change worth telling (an application added, removed, at a new
//! revision, or with a different health or readiness) sent to whoever listens.
//!
//! Sources (the kube watches, the demo) call [`Inventory::apply`], [`Inventory::delete`] and
//! [`Inventory::replace`]; the API reads [`Inventory::snapshot`] and [`Inventory::changes`].
//! Only the namespace a fact belongs to is joined again, so one pod's change costs that
//! namespace's releases, not the whole inventory.

mod metrics;
pub mod pause;
pub mod push;
pub mod settings;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::{broadcast, watch};

use crate::clock::now_ms;
use crate::model::Datacenter;
pub use metrics::InventoryMetrics;
pub use settings::InventorySettings;

mod facts;
mod state;

use facts::NamespaceFacts;
pub use facts::{Fact, FactKind};
pub use state::{AppChange, AppEntry, AppKey, Pause, Revision, Snapshot};

/// The inventory of every datacenter.
pub struct Inventory {
    settings: InventorySettings,
    facts: Mutex<BTreeMap<Datacenter, BTreeMap<String, NamespaceFacts>>>,
    snapshot: watch::Sender<Arc<Snapshot>>,
    changes: broadcast::Sender<Arc<AppChange>>,
    paused: watch::Sender<Pause>,
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
            paused: watch::Sender::new(Pause {
                paused: settings.paused,
                set: None,
            }),
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
        self.paused.borrow().paused
    }

    /// The pause, and who set it.
    pub fn pause(&self) -> Pause {
        self.paused.borrow().clone()
    }

    /// The pause as it changes.
    pub fn watch_paused(&self) -> watch::Receiver<Pause> {
        self.paused.subscribe()
    }

    /// Take `pause` (as kept in the database: [`pause::set`] and [`pause::follow`] call this);
    /// returns the previous one.
    pub fn set_pause(&self, pause: Pause) -> Pause {
        self.paused.send_replace(pause)
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
