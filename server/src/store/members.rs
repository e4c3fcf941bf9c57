//! The sets the store's indexes keep: a persistent hash map with a fast hasher, and the keys
//! behind one index value.

use std::sync::Arc;

use imbl::{GenericHashMap, OrdSet};

use super::ObjectKey;

/// A persistent hash map with a fast, non-cryptographic hasher (keys are not attacker-chosen
/// hash-flooding material: they are object names already admitted by validation).
pub(super) type FastMap<K, V> =
    GenericHashMap<K, V, rustc_hash::FxBuildHasher, imbl::shared_ptr::DefaultSharedPtr>;

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
    /// The set of `keys`, sorted and without repeats: built once where inserting them one by
    /// one copies a small set at each.
    pub(super) fn from_sorted(keys: Vec<ObjectKey>) -> Members {
        match keys.len() <= SMALL_SET {
            true => Members::Small(keys.into()),
            false => Members::Large(keys.into_iter().collect()),
        }
    }

    pub(super) fn insert(&mut self, key: ObjectKey) {
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
    pub(super) fn remove(&mut self, key: &ObjectKey) -> bool {
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

    pub(super) fn iter(&self) -> impl Iterator<Item = &ObjectKey> {
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
