//! `FastMap`: the store's persistent hash map, a B-tree ordered by each key's 64-bit hash.
//!
//! Why not `imbl`'s `HashMap` (a HAMT): its nodes keep room for every slot of their width
//! however few they hold, and at the store's sizes most of them hold a few: 134–172 bytes per
//! entry of 24 bytes (10,000 to 1,000,000 entries), where `imbl`'s `OrdMap` of the same entries
//! takes 37–44. The store keeps every object in two such maps (by key, by uid) and its
//! relationships in a third, so at a million objects the difference is about 250 MB. A lookup is
//! one hash and a search of `u64`s down the tree; two keys with one hash share a bucket.

use std::hash::{BuildHasher, Hash};

use imbl::OrdMap;

/// A persistent map from keys to values, found by the keys' hashes (see the module's
/// documentation). Cloning it is cheap (its nodes are shared).
#[derive(Clone)]
pub(super) struct FastMap<K: Clone, V: Clone> {
    buckets: OrdMap<u64, Bucket<K, V>>,
    len: usize,
}

/// The entries whose keys have one hash: nearly always one.
#[derive(Clone)]
enum Bucket<K, V> {
    One(K, V),
    Many(Box<[(K, V)]>),
}

/// The hasher: fast and non-cryptographic (keys are not attacker-chosen hash-flooding material:
/// they are object names already admitted by validation, uids and index values).
pub(super) fn hash<K: Hash + ?Sized>(key: &K) -> u64 {
    rustc_hash::FxBuildHasher.hash_one(key)
}

impl<K: Clone, V: Clone> Default for FastMap<K, V> {
    fn default() -> Self {
        FastMap {
            buckets: OrdMap::new(),
            len: 0,
        }
    }
}

impl<K: Hash + Eq + Clone, V: Clone> FastMap<K, V> {
    /// How many entries.
    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// The key as stored and its value.
    pub(super) fn get_key_value(&self, key: &K) -> Option<(&K, &V)> {
        match self.buckets.get(&hash(key))? {
            Bucket::One(k, v) => (k == key).then_some((k, v)),
            Bucket::Many(entries) => entries.iter().find(|(k, _)| k == key).map(|(k, v)| (k, v)),
        }
    }

    /// The value of `key`.
    pub(super) fn get(&self, key: &K) -> Option<&V> {
        self.get_key_value(key).map(|(_, v)| v)
    }

    /// The value of `key`, to change in place (the nodes on its way are copied when shared).
    pub(super) fn get_mut(&mut self, key: &K) -> Option<&mut V> {
        let h = hash(key);
        // Looked up first so that a missing key copies no node.
        self.get(key)?;
        match self.buckets.get_mut(&h)? {
            Bucket::One(_, v) => Some(v),
            Bucket::Many(entries) => entries.iter_mut().find(|(k, _)| k == key).map(|(_, v)| v),
        }
    }

    /// Set `key` to `value`; the value it had.
    pub(super) fn insert(&mut self, key: K, value: V) -> Option<V> {
        let h = hash(&key);
        let Some(bucket) = self.buckets.get_mut(&h) else {
            self.buckets.insert(h, Bucket::One(key, value));
            self.len += 1;
            return None;
        };
        let mut all: Vec<(K, V)> = match bucket {
            Bucket::One(k, v) if *k == key => return Some(std::mem::replace(v, value)),
            Bucket::One(k, v) => vec![(k.clone(), v.clone())],
            Bucket::Many(entries) => {
                if let Some((_, v)) = entries.iter_mut().find(|(k, _)| *k == key) {
                    return Some(std::mem::replace(v, value));
                }
                entries.to_vec()
            }
        };
        all.push((key, value));
        *bucket = Bucket::Many(all.into_boxed_slice());
        self.len += 1;
        None
    }

    /// Take `key` out; its value, when it had one.
    pub(super) fn remove(&mut self, key: &K) -> Option<V> {
        let h = hash(key);
        let removed = match self.buckets.get(&h)? {
            Bucket::One(k, _) if k == key => match self.buckets.remove(&h) {
                Some(Bucket::One(_, v)) => Some(v),
                _ => None,
            },
            Bucket::One(..) => None,
            Bucket::Many(entries) => {
                let mut rest = entries.to_vec();
                let at = rest.iter().position(|(k, _)| k == key)?;
                let (_, v) = rest.remove(at);
                let bucket = match rest.len() {
                    1 => {
                        let (k, v) = rest.remove(0);
                        Bucket::One(k, v)
                    }
                    _ => Bucket::Many(rest.into_boxed_slice()),
                };
                self.buckets.insert(h, bucket);
                Some(v)
            }
        };
        if removed.is_some() {
            self.len -= 1;
        }
        removed
    }

    /// Every entry, in no particular order.
    #[cfg(test)]
    pub(super) fn iter(&self) -> impl Iterator<Item = (&K, &V)> {
        self.buckets.values().flat_map(|b| {
            let (one, many) = match b {
                Bucket::One(k, v) => (Some((k, v)), None),
                Bucket::Many(entries) => (None, Some(entries.iter().map(|(k, v)| (k, v)))),
            };
            one.into_iter().chain(many.into_iter().flatten())
        })
    }
}

impl<K: Hash + Eq + Clone, V: Clone> FromIterator<(K, V)> for FastMap<K, V> {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        let mut map = FastMap::default();
        for (k, v) in iter {
            map.insert(k, v);
        }
        map
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A key whose hash is chosen: two of them collide on purpose.
    #[derive(Clone, Debug, PartialEq, Eq)]
    struct Colliding(u64, &'static str);

    impl Hash for Colliding {
        fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
            self.0.hash(state);
        }
    }

    #[test]
    fn keys_with_one_hash_are_kept_apart_and_found_again() {
        let mut m: FastMap<Colliding, i32> = FastMap::default();
        let (a, b, c) = (Colliding(1, "a"), Colliding(1, "b"), Colliding(2, "c"));
        assert_eq!(m.insert(a.clone(), 1), None);
        assert_eq!(m.insert(b.clone(), 2), None);
        assert_eq!(m.insert(c.clone(), 3), None);
        assert_eq!(m.insert(b.clone(), 20), Some(2));
        assert_eq!(m.len(), 3);
        assert_eq!(
            (m.get(&a), m.get(&b), m.get(&c)),
            (Some(&1), Some(&20), Some(&3))
        );
        assert_eq!(m.get(&Colliding(1, "z")), None);
        if let Some(v) = m.get_mut(&a) {
            *v = 10;
        }
        let before = m.clone();
        assert_eq!(m.remove(&a), Some(10));
        assert_eq!(m.remove(&a), None);
        assert_eq!(m.remove(&Colliding(1, "z")), None);
        assert_eq!((m.get(&a), m.get(&b)), (None, Some(&20)));
        assert_eq!(m.len(), 2);
        let mut rest: Vec<_> = m.iter().map(|(k, v)| (k.1, *v)).collect();
        rest.sort();
        assert_eq!(rest, [("b", 20), ("c", 3)]);
        // The copy taken before is untouched (a persistent map).
        assert_eq!(before.get(&a), Some(&10));
        assert_eq!(before.len(), 3);
        let again: FastMap<Colliding, i32> = before.iter().map(|(k, v)| (k.clone(), *v)).collect();
        assert_eq!(again.len(), 3);
        assert_eq!(again.get_key_value(&b), Some((&b, &20)));
    }
}
