//! What part of the graph a reader may see: everything, or per datacenter the namespaces of each
//! kind and the cluster-scoped kinds (as Kubernetes RBAC grants `list`). A reader limited to a
//! scope reads a snapshot that holds only what it may see ([`Snapshot::restricted`]), so every
//! list, count, aggregate, look-up and relationship answers within it without knowing it.
//!
//! Scopes are interned: equal grants are one scope with one id, so people with the same access
//! share cached answers and restricted snapshots.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

use super::{ObjectKey, Snapshot};
use crate::model::{Datacenter, Kind, Resource};

/// The namespaces a kind is shown in.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Namespaces {
    /// Every namespace (for a cluster-scoped kind: the kind is shown).
    All,
    /// Only these (empty: none). A cluster-scoped kind is shown by [`Namespaces::All`] only.
    Only(BTreeSet<String>),
}

impl Namespaces {
    fn shows(&self, kind: Kind, namespace: &str) -> bool {
        match self {
            Namespaces::All => true,
            Namespaces::Only(set) => kind.namespaced() && set.contains(namespace),
        }
    }
}

/// What one datacenter shows: each kind shown and its namespaces (a kind not named is hidden).
pub type KindGrants = BTreeMap<Kind, Namespaces>;

/// What a limited reader may see.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Grants {
    /// Per datacenter; `None` stands for every datacenter not named.
    pub datacenters: BTreeMap<Option<Datacenter>, KindGrants>,
}

impl Grants {
    /// Every namespaced kind in `namespaces`, in every datacenter; no cluster-scoped kind (what
    /// an API key limited to namespaces sees).
    pub fn namespaces<S: AsRef<str>>(namespaces: &[S]) -> Grants {
        let set: BTreeSet<String> = namespaces.iter().map(|n| n.as_ref().to_string()).collect();
        let kinds = Kind::ALL
            .iter()
            .filter(|k| k.namespaced())
            .map(|k| (*k, Namespaces::Only(set.clone())))
            .collect();
        Grants {
            datacenters: BTreeMap::from([(None, kinds)]),
        }
    }

    /// What is shown of `datacenter` (its own grants, else the ones for every datacenter).
    pub fn of(&self, datacenter: &Datacenter) -> Option<&KindGrants> {
        self.datacenters
            .get(&Some(datacenter.clone()))
            .or_else(|| self.datacenters.get(&None))
    }
}

/// A limited scope: interned grants.
#[derive(Debug)]
pub struct Limited {
    id: u64,
    grants: Grants,
}

impl Limited {
    /// The grants.
    pub fn grants(&self) -> &Grants {
        &self.grants
    }
}

/// What a reader may see.
#[derive(Clone, Debug, Default)]
pub enum Scope {
    /// Everything (an admin, a viewer of the whole fleet, the server itself).
    #[default]
    All,
    /// Only what the grants show.
    Only(Arc<Limited>),
}

impl PartialEq for Scope {
    fn eq(&self, other: &Scope) -> bool {
        self.id() == other.id()
    }
}

impl Eq for Scope {}

/// Most distinct scopes kept interned; past it, those no reader holds are forgotten.
const MAX_INTERNED: usize = 100_000;

fn interned() -> &'static Mutex<HashMap<Grants, Arc<Limited>>> {
    static INTERNED: std::sync::LazyLock<Mutex<HashMap<Grants, Arc<Limited>>>> =
        std::sync::LazyLock::new(Default::default);
    &INTERNED
}

impl Scope {
    /// The scope of these grants: one scope (one id) for equal grants.
    pub fn limited(grants: Grants) -> Scope {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        let mut map = interned().lock();
        if let Some(found) = map.get(&grants) {
            return Scope::Only(found.clone());
        }
        if map.len() >= MAX_INTERNED {
            map.retain(|_, l| Arc::strong_count(l) > 1);
        }
        let limited = Arc::new(Limited {
            id: NEXT.fetch_add(1, Ordering::Relaxed),
            grants: grants.clone(),
        });
        map.insert(grants, limited.clone());
        Scope::Only(limited)
    }

    /// Identity: 0 for everything; equal ids see the same objects (caches are keyed by it).
    pub fn id(&self) -> u64 {
        match self {
            Scope::All => 0,
            Scope::Only(l) => l.id,
        }
    }

    /// True when everything is seen.
    pub fn is_all(&self) -> bool {
        matches!(self, Scope::All)
    }

    /// The grants of a limited scope.
    pub fn grants(&self) -> Option<&Grants> {
        match self {
            Scope::All => None,
            Scope::Only(l) => Some(&l.grants),
        }
    }

    /// Whether an object of `kind` in `namespace` of `datacenter` is seen.
    pub fn sees(&self, datacenter: &Datacenter, kind: Kind, namespace: &str) -> bool {
        match self {
            Scope::All => true,
            Scope::Only(l) => l
                .grants
                .of(datacenter)
                .and_then(|kinds| kinds.get(&kind))
                .is_some_and(|ns| ns.shows(kind, namespace)),
        }
    }

    /// Whether this object is seen.
    pub fn sees_object(&self, r: &Resource) -> bool {
        self.sees(r.datacenter(), r.kind(), r.namespace())
    }

    /// Whether the object with this key is seen.
    pub fn sees_key(&self, key: &ObjectKey) -> bool {
        self.sees(&key.datacenter, key.kind, &key.namespace)
    }

    /// Whether anything at all is seen in `datacenter`.
    pub fn sees_datacenter(&self, datacenter: &Datacenter) -> bool {
        match self {
            Scope::All => true,
            Scope::Only(l) => l.grants.of(datacenter).is_some_and(|kinds| {
                kinds.values().any(|ns| match ns {
                    Namespaces::All => true,
                    Namespaces::Only(set) => !set.is_empty(),
                })
            }),
        }
    }

    /// Whether `namespace` of `datacenter` is seen for some kind (`None`: every namespace).
    pub fn sees_namespace(&self, datacenter: &Datacenter, namespace: &str) -> bool {
        match self {
            Scope::All => true,
            Scope::Only(l) => l.grants.of(datacenter).is_some_and(|kinds| {
                kinds
                    .iter()
                    .any(|(k, ns)| k.namespaced() && ns.shows(*k, namespace))
            }),
        }
    }
}

impl Snapshot {
    /// The namespaces of `datacenter` that hold an object (those a grant per namespace is asked
    /// for).
    pub fn namespaces(&self, datacenter: &Datacenter) -> BTreeSet<String> {
        Kind::ALL
            .iter()
            .filter(|k| k.namespaced())
            .flat_map(|k| self.list_datacenter(datacenter, *k))
            .map(|r| r.namespace().to_string())
            .collect()
    }

    /// The objects of this snapshot that `scope` sees, indexed as the store indexes them, at the
    /// same sequence number; no derived state (the store derives it, see
    /// [`super::Store::view`]). A namespace granted is one range of the ordered map, so a tenant's
    /// view costs what it holds, not what the fleet holds.
    pub(super) fn restricted(&self, scope: &Limited) -> Snapshot {
        let mut out = Snapshot {
            seq: self.seq,
            ..Default::default()
        };
        let take = |out: &mut Snapshot, start: ObjectKey, same: &dyn Fn(&ObjectKey) -> bool| {
            for (k, v) in self.objects.range(start..).take_while(|(k, _)| same(k)) {
                out.insert(k.clone(), v.object().clone());
            }
        };
        for dc in self.datacenters.keys() {
            let Some(kinds) = scope.grants.of(dc) else {
                continue;
            };
            for (&kind, namespaces) in kinds {
                match namespaces {
                    Namespaces::All => take(&mut out, ObjectKey::new(dc, kind, "", ""), &|k| {
                        k.kind == kind && &k.datacenter == dc
                    }),
                    Namespaces::Only(set) if kind.namespaced() => {
                        for ns in set {
                            take(&mut out, ObjectKey::new(dc, kind, ns, ""), &|k| {
                                k.kind == kind && &k.datacenter == dc && &k.namespace == ns
                            });
                        }
                    }
                    Namespaces::Only(_) => {}
                }
            }
        }
        out.settle_in_order();
        out
    }
}

/// The store as one reader sees it: its snapshots are views ([`super::Store::view`]), and
/// [`ScopedStore::sees`] tells which changes of the stream are its to see.
#[derive(Clone)]
pub struct ScopedStore {
    store: Arc<super::Store>,
    scope: Scope,
}

impl ScopedStore {
    /// `store` as `scope` sees it.
    pub fn new(store: Arc<super::Store>, scope: Scope) -> Self {
        ScopedStore { store, scope }
    }

    /// The current snapshot, as much of it as the scope sees.
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.store.view(&self.store.snapshot(), &self.scope)
    }

    /// Every change applied after this call (of every object: filter with [`ScopedStore::sees`]).
    pub fn subscribe(&self) -> tokio::sync::broadcast::Receiver<Arc<super::Change>> {
        self.store.subscribe()
    }

    /// Whether the scope sees this object.
    pub fn sees(&self, r: &Resource) -> bool {
        self.scope.sees_object(r)
    }

    /// The scope.
    pub fn scope(&self) -> &Scope {
        &self.scope
    }
}
