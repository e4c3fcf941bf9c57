//! The keys behind one index value, and their place in the store's indexes.

use std::hash::Hash;
use std::sync::Arc;

use imbl::OrdSet;

use super::ObjectKey;
pub(super) use super::hashed::FastMap;

/// Largest index set kept as a sorted slice; bigger sets become a B-tree.
pub(super) const SMALL_SET: usize = 32;

/// The keys behind one index value. Most relationships hold a handful of objects: a sorted slice
/// costs a few words each, where a B-tree node would cost a kilobyte; and many one (a uid, a
/// cluster's id), held without an allocation of its own.
#[derive(Clone, Debug)]
pub(super) enum Members {
    One(ObjectKey),
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
    pub(super) fn from_sorted(mut keys: Vec<ObjectKey>) -> Members {
        match keys.len() {
            1 => Members::One(keys.swap_remove(0)),
            n if n <= SMALL_SET => Members::Small(keys.into()),
            _ => Members::Large(keys.into_iter().collect()),
        }
    }

    pub(super) fn insert(&mut self, key: ObjectKey) {
        match self {
            Members::One(one) => {
                if *one != key {
                    let mut keys = [one.clone(), key];
                    keys.sort_unstable();
                    *self = Members::Small(Arc::new(keys));
                }
            }
            Members::Small(keys) if keys.is_empty() => *self = Members::One(key),
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
            Members::One(one) if one == key => {
                *self = Members::default();
                true
            }
            Members::One(_) => false,
            Members::Small(keys) => {
                if let Ok(pos) = keys.binary_search(key) {
                    let mut next = keys.to_vec();
                    next.remove(pos);
                    if next.len() == 1 {
                        *self = Members::from_sorted(next);
                        return false;
                    }
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
            Members::One(key) => (Some(std::slice::from_ref(key).iter()), None),
            Members::Small(keys) => (Some(keys.iter()), None),
            Members::Large(set) => (None, Some(set.iter())),
        };
        small
            .into_iter()
            .flatten()
            .chain(large.into_iter().flatten())
    }
}

/// Put `key` in the set of `map` under `value` (a new set holds it alone).
pub(super) fn add_member<K: Hash + Eq + Clone>(
    map: &mut FastMap<K, Members>,
    value: K,
    key: &ObjectKey,
) {
    match map.get_mut(&value) {
        Some(set) => set.insert(key.clone()),
        None => {
            map.insert(value, Members::One(key.clone()));
        }
    }
}

/// Take `key` out of the set of `map` under `value`, and the set out once it is empty.
pub(super) fn drop_member<K: Hash + Eq + Clone>(
    map: &mut FastMap<K, Members>,
    value: &K,
    key: &ObjectKey,
) {
    if let Some(set) = map.get_mut(value)
        && set.remove(key)
    {
        map.remove(value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Datacenter, Kind};

    fn key(name: &str) -> ObjectKey {
        ObjectKey::new(&Datacenter::new("east"), Kind::Machine, "ns", name)
    }

    fn names(m: &Members) -> Vec<String> {
        m.iter().map(|k| k.name.to_string()).collect()
    }

    #[test]
    fn a_set_grows_from_one_key_and_shrinks_back_to_it() {
        let mut map: FastMap<u64, Members> = FastMap::default();
        add_member(&mut map, 7, &key("b"));
        assert!(matches!(map.get(&7), Some(Members::One(_))));
        add_member(&mut map, 7, &key("b"));
        assert_eq!(map.get(&7).map(names), Some(vec!["b".to_string()]));
        add_member(&mut map, 7, &key("a"));
        add_member(&mut map, 7, &key("c"));
        assert_eq!(
            map.get(&7).map(names),
            Some(vec!["a".into(), "b".into(), "c".into()])
        );
        drop_member(&mut map, &7, &key("a"));
        drop_member(&mut map, &7, &key("x"));
        drop_member(&mut map, &7, &key("c"));
        assert!(matches!(map.get(&7), Some(Members::One(k)) if k.name == "b"));
        drop_member(&mut map, &7, &key("z"));
        assert_eq!(map.get(&7).map(names), Some(vec!["b".to_string()]));
        drop_member(&mut map, &7, &key("b"));
        assert!(map.get(&7).is_none(), "an emptied set is taken out");
        let big: Vec<ObjectKey> = (0..40).map(|i| key(&format!("m{i:02}"))).collect();
        let set = Members::from_sorted(big.clone());
        assert!(matches!(set, Members::Large(_)));
        assert_eq!(set.iter().count(), 40);
        assert!(matches!(
            Members::from_sorted(big[..1].to_vec()),
            Members::One(_)
        ));
    }
}
