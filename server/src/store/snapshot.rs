//! A consistent view of the graph at one sequence number: the objects, ordered and hashed, the
//! secondary indexes, and what is derived or memoised for exactly these objects.

use std::sync::Arc;

use imbl::{GenericHashMap, OrdMap, OrdSet};
use parking_lot::Mutex;

use super::{Change, Idx, ObjectKey, index_entries, reads};
use crate::model::{Kind, Resource};

/// A persistent hash map with a fast, non-cryptographic hasher (keys are not attacker-chosen
/// hash-flooding material: they are object names already admitted by validation).
pub(super) type FastMap<K, V> =
    GenericHashMap<K, V, rustc_hash::FxBuildHasher, imbl::shared_ptr::DefaultSharedPtr>;

/// State derived from the objects and brought up to date with every write (the fleet's
/// aggregates). The store does not know what it is: whoever makes the store says how to derive
/// it ([`Store::derive_with`]).
pub type DerivedState = Arc<dyn std::any::Any + Send + Sync>;

/// How derived state follows the objects: from the state before (None: derive from scratch),
/// the snapshot after and the changes in between, the state after.
pub type Deriver =
    Box<dyn Fn(Option<&DerivedState>, &Snapshot, &[Arc<Change>]) -> DerivedState + Send + Sync>;

/// A consistent view of the graph at one sequence number.
#[derive(Clone, Default)]
pub struct Snapshot {
    pub(super) seq: u64,
    /// Ordered, for listing a kind or a namespace.
    pub(super) objects: OrdMap<ObjectKey, Arc<Resource>>,
    /// The same objects hashed, for point lookups (relationships resolve through these).
    pub(super) by_key: FastMap<ObjectKey, Arc<Resource>>,
    pub(super) by_uid: FastMap<String, ObjectKey>,
    pub(super) index: FastMap<(Idx, String), Members>,
    /// What the store's deriver keeps for exactly these objects.
    pub(super) derived: Option<DerivedState>,
    /// Values computed from exactly these objects on first use (see [`Snapshot::memo`]); every
    /// write starts a new one.
    pub(super) memo: Arc<Mutex<Vec<DerivedState>>>,
}

/// Largest index set kept as a sorted slice; bigger sets become a B-tree.
pub(super) const SMALL_SET: usize = 32;

/// The keys behind one index value. Most relationships hold a handful of objects: a sorted slice
/// costs a few words each, where a B-tree node would cost a kilobyte.
#[derive(Clone, Debug)]
pub(super) enum Members {
    Small(Arc<[ObjectKey]>),
    Large(OrdSet<ObjectKey>),
}

impl Default for Members {
    fn default() -> Self {
        Members::Small(Arc::new([]))
    }
}

impl Members {
    fn insert(&mut self, key: ObjectKey) {
        match self {
            Members::Small(keys) => {
                let Err(pos) = keys.binary_search(&key) else {
                    return;
                };
                if keys.len() < SMALL_SET {
                    let mut next = Vec::with_capacity(keys.len() + 1);
                    next.extend_from_slice(&keys[..pos]);
                    next.push(key);
                    next.extend_from_slice(&keys[pos..]);
                    *keys = next.into();
                } else {
                    let mut set: OrdSet<ObjectKey> = keys.iter().cloned().collect();
                    set.insert(key);
                    *self = Members::Large(set);
                }
            }
            Members::Large(set) => {
                set.insert(key);
            }
        }
    }

    /// Remove a key; true when the set is now empty.
    fn remove(&mut self, key: &ObjectKey) -> bool {
        match self {
            Members::Small(keys) => {
                if let Ok(pos) = keys.binary_search(key) {
                    let mut next = keys.to_vec();
                    next.remove(pos);
                    *keys = next.into();
                }
                keys.is_empty()
            }
            Members::Large(set) => {
                set.remove(key);
                set.is_empty()
            }
        }
    }

    fn iter(&self) -> impl Iterator<Item = &ObjectKey> {
        let (small, large) = match self {
            Members::Small(keys) => (Some(keys.iter()), None),
            Members::Large(set) => (None, Some(set.iter())),
        };
        small
            .into_iter()
            .flatten()
            .chain(large.into_iter().flatten())
    }
}

impl Snapshot {
    /// The sequence number of the last change this snapshot contains.
    pub fn seq(&self) -> u64 {
        reads::note_inexact();
        self.seq
    }

    /// A copy to write the next snapshot into: values memoised for this one do not carry over.
    pub(super) fn successor(&self) -> Snapshot {
        Snapshot {
            memo: Default::default(),
            ..self.clone()
        }
    }

    /// The derived state of type `T` for exactly this snapshot's objects, when the store keeps
    /// one.
    pub fn derived<T: std::any::Any>(&self) -> Option<&T> {
        reads::note_inexact();
        self.derived.as_deref()?.downcast_ref::<T>()
    }

    /// A value computed from this snapshot once and shared by every reader of it (a summary
    /// all subscribers of a burst send): `compute` runs on first use of a `T` (rarely twice,
    /// when two readers race; both get an equal value).
    pub fn memo<T: std::any::Any + Send + Sync>(
        &self,
        compute: impl FnOnce(&Snapshot) -> T,
    ) -> Arc<T> {
        reads::note_inexact();
        let found = self
            .memo
            .lock()
            .iter()
            .find_map(|v| v.clone().downcast::<T>().ok());
        if let Some(v) = found {
            return v;
        }
        let v = Arc::new(compute(self));
        self.memo.lock().push(v.clone() as DerivedState);
        v
    }

    /// Look an object up by identity.
    pub fn get(&self, kind: Kind, namespace: &str, name: &str) -> Option<&Arc<Resource>> {
        let key = ObjectKey::new(kind, namespace, name);
        let found = self.by_key.get(&key);
        reads::note_key(|| key, found);
        found
    }

    /// Look an object up by key.
    pub fn get_key(&self, key: &ObjectKey) -> Option<&Arc<Resource>> {
        let found = self.by_key.get(key);
        reads::note_key(|| key.clone(), found);
        found
    }

    /// Look an object up by `metadata.uid`.
    pub fn by_uid(&self, uid: &str) -> Option<&Arc<Resource>> {
        let found = self.by_uid_untracked(uid);
        reads::note_uid(uid, found);
        found
    }

    pub(super) fn by_uid_untracked(&self, uid: &str) -> Option<&Arc<Resource>> {
        self.by_uid.get(uid).and_then(|k| self.by_key.get(k))
    }

    /// Every object of a kind, ordered by namespace then name.
    pub fn list(&self, kind: Kind) -> impl Iterator<Item = &Arc<Resource>> + '_ {
        reads::note_inexact();
        let start = ObjectKey::new(kind, "", "");
        self.objects
            .range(start..)
            .take_while(move |(k, _)| k.kind == kind)
            .map(|(_, v)| v)
    }

    /// Every object of a kind in one namespace, ordered by name.
    pub fn list_in(
        &self,
        kind: Kind,
        namespace: &str,
    ) -> impl Iterator<Item = &Arc<Resource>> + '_ {
        reads::note_inexact();
        let start = ObjectKey::new(kind, namespace, "");
        let ns = namespace.to_string();
        self.objects
            .range(start..)
            .take_while(move |(k, _)| k.kind == kind && k.namespace == ns)
            .map(|(_, v)| v)
    }

    /// Objects of a kind (in one namespace, when given) after `after`, in key order: a cursor
    /// can walk a kind one object at a time.
    pub fn list_after<'a>(
        &'a self,
        kind: Kind,
        namespace: Option<&'a str>,
        after: Option<&ObjectKey>,
    ) -> impl Iterator<Item = &'a Arc<Resource>> + 'a {
        use std::ops::Bound;
        reads::note_inexact();
        let start = match after {
            Some(k) => Bound::Excluded(k.clone()),
            None => Bound::Included(ObjectKey::new(kind, namespace.unwrap_or_default(), "")),
        };
        self.objects
            .range((start, Bound::Unbounded))
            .take_while(move |(k, _)| {
                k.kind == kind && namespace.is_none_or(|ns| k.namespace == ns)
            })
            .map(|(_, v)| v)
    }

    /// Number of objects of a kind.
    pub fn count(&self, kind: Kind) -> usize {
        self.list(kind).count()
    }

    /// Objects found through a secondary index, ordered by key.
    pub fn lookup(&self, idx: Idx, value: &str) -> impl Iterator<Item = &Arc<Resource>> + '_ {
        reads::note_index(self, idx, value);
        self.lookup_untracked(idx, value)
    }

    pub(super) fn lookup_untracked(
        &self,
        idx: Idx,
        value: &str,
    ) -> impl Iterator<Item = &Arc<Resource>> + '_ {
        self.index
            .get(&(idx, value.to_string()))
            .into_iter()
            .flat_map(Members::iter)
            .filter_map(|k| self.by_key.get(k))
    }

    /// The first object found through a secondary index.
    pub fn lookup_one(&self, idx: Idx, value: &str) -> Option<&Arc<Resource>> {
        self.lookup(idx, value).next()
    }

    /// Total number of objects.
    pub fn len(&self) -> usize {
        reads::note_inexact();
        self.objects.len()
    }

    /// True when the graph holds nothing.
    pub fn is_empty(&self) -> bool {
        reads::note_inexact();
        self.objects.is_empty()
    }

    pub(super) fn unindex(&mut self, key: &ObjectKey, r: &Resource) {
        for entry in index_entries(r) {
            if let Some(set) = self.index.get_mut(&entry)
                && set.remove(key)
            {
                self.index.remove(&entry);
            }
        }
        if !r.uid().is_empty() {
            self.by_uid.remove(r.uid());
        }
    }

    pub(super) fn reindex(&mut self, key: &ObjectKey, r: &Resource) {
        for entry in index_entries(r) {
            self.index.entry(entry).or_default().insert(key.clone());
        }
        if !r.uid().is_empty() {
            self.by_uid.insert(r.uid().to_string(), key.clone());
        }
    }
}
