//! `Pairs`: a small JSON object kept as one sorted boxed slice of (interned key, value).
//!
//! Why not a `BTreeMap`: a B-tree's first leaf takes room for eleven entries however few it
//! holds: about 540 bytes for string pairs, 720 for a KubeVirt domain's `requests` of quantities
//! (one entry, `memory`), each key a string of its own. Labels, annotations, the generated
//! model's maps and KubeVirt's resources have a handful of entries whose keys are the same few
//! in every object: here an entry is its key's pointer (shared) and its value
//! (`cargo bench --bench fleet_memory`, BENCHMARKS.md). Reads are a binary search.
//!
//! It reads and writes the JSON of a map: keys in order, one value per key (a later duplicate in
//! the JSON wins, as in a map).

use std::borrow::Borrow;
use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::hash::{Hash, Hasher};
use std::marker::PhantomData;
use std::sync::{Arc, LazyLock};

use parking_lot::Mutex;
use serde::de::{MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::text::{Str, deserialize_text};

/// Entries sorted by key, one per key, keys interned; string values unless `V` says otherwise.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Pairs<V = Str>(Box<[(Key, V)]>);

/// An interned key: a thin pointer (8 bytes, where an `Arc<str>` took 16 in every entry) to the
/// one copy of its text.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Key(Arc<Box<str>>);

impl Hash for Key {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_str().hash(state)
    }
}

impl Borrow<str> for Key {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

/// At most this many distinct keys are interned (a label key is at most 317 characters); keys past
/// it are kept each on its own, so hostile input cannot grow the table without bound.
const INTERNED_KEYS: usize = 16_384;

static KEYS: LazyLock<Mutex<HashSet<Key>>> = LazyLock::new(Default::default);

impl Key {
    fn new(k: &str) -> Key {
        let mut keys = KEYS.lock();
        if let Some(found) = keys.get(k) {
            return found.clone();
        }
        let key = Key(Arc::new(k.into()));
        if keys.len() < INTERNED_KEYS {
            keys.insert(key.clone());
        }
        key
    }

    /// The key's text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl<V> Default for Pairs<V> {
    fn default() -> Self {
        Pairs(Box::new([]))
    }
}

impl<V> Pairs<V> {
    /// Where `key` is, or where it would go.
    fn position(&self, key: &str) -> Result<usize, usize> {
        self.0.binary_search_by(|(k, _)| k.as_str().cmp(key))
    }

    /// The value of `key`, whatever its type (string pairs read as `&str` with [`Pairs::get`]).
    pub fn value(&self, key: &str) -> Option<&V> {
        let i = self.position(key).ok()?;
        Some(&self.0[i].1)
    }

    /// The entries in key order.
    pub fn entries(&self) -> impl ExactSizeIterator<Item = (&str, &V)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// How many pairs.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// No pairs.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Built from pairs in any order; of two with one key the later wins.
    fn from_vec(mut pairs: Vec<(Key, V)>) -> Pairs<V> {
        // Stable: equal keys keep their order, and the last of each run is the one kept.
        pairs.sort_by(|a, b| a.0.cmp(&b.0));
        let mut kept: Vec<(Key, V)> = Vec::with_capacity(pairs.len());
        for p in pairs {
            match kept.last_mut() {
                Some(last) if last.0 == p.0 => *last = p,
                _ => kept.push(p),
            }
        }
        Pairs(kept.into_boxed_slice())
    }
}

impl Pairs {
    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.value(key).map(|v| &**v)
    }

    /// The pairs in key order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&str, &str)> {
        self.0.iter().map(|(k, v)| (k.as_str(), &**v))
    }

    /// Set `key` to `value` (replacing its value when it has one).
    pub fn insert(&mut self, key: &str, value: &str) {
        let at = self.position(key);
        let mut pairs = std::mem::take(&mut self.0).into_vec();
        match at {
            Ok(i) => pairs[i].1 = value.into(),
            Err(i) => pairs.insert(i, (Key::new(key), value.into())),
        }
        self.0 = pairs.into_boxed_slice();
    }

    /// Take `key` out; its value, when it had one.
    pub fn remove(&mut self, key: &str) -> Option<String> {
        let i = self.position(key).ok()?;
        let mut pairs = std::mem::take(&mut self.0).into_vec();
        let (_, v) = pairs.remove(i);
        self.0 = pairs.into_boxed_slice();
        Some(v.into())
    }
}

impl<K: AsRef<str>, V: AsRef<str>> FromIterator<(K, V)> for Pairs {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        Pairs::from_vec(
            iter.into_iter()
                .map(|(k, v)| (Key::new(k.as_ref()), v.as_ref().into()))
                .collect(),
        )
    }
}

impl From<BTreeMap<String, String>> for Pairs {
    fn from(map: BTreeMap<String, String>) -> Self {
        map.into_iter().collect()
    }
}

impl<K: AsRef<str>, V: AsRef<str>, const N: usize> From<[(K, V); N]> for Pairs {
    fn from(pairs: [(K, V); N]) -> Self {
        pairs.into_iter().collect()
    }
}

impl<'de> Deserialize<'de> for Key {
    /// From the text as the parser holds it: a key already interned allocates nothing.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserialize_text(deserializer, |text| Key::new(&text))
    }
}

impl<V: fmt::Debug> fmt::Debug for Pairs<V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.entries()).finish()
    }
}

impl<V: Serialize> Serialize for Pairs<V> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (k, v) in self.entries() {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

impl<'de, V: Deserialize<'de>> Deserialize<'de> for Pairs<V> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct PairsVisitor<V>(PhantomData<V>);
        impl<'de, V: Deserialize<'de>> Visitor<'de> for PairsVisitor<V> {
            type Value = Pairs<V>;

            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a map")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Pairs<V>, A::Error> {
                let mut pairs = Vec::with_capacity(map.size_hint().unwrap_or(4).min(64));
                while let Some(k) = map.next_key::<Key>()? {
                    pairs.push((k, map.next_value()?));
                }
                Ok(Pairs::from_vec(pairs))
            }
        }
        deserializer.deserialize_map(PairsVisitor(PhantomData))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Quantity;

    #[test]
    fn pairs_keep_one_value_per_key_the_last_and_share_their_keys() {
        let p: Pairs = serde_json::from_str(r#"{"k": "1", "a\u0041": "x", "k": "2"}"#).unwrap();
        assert_eq!(p.iter().collect::<Vec<_>>(), [("aA", "x"), ("k", "2")]);
        let q: Pairs = [("k", "other")].into_iter().collect();
        assert!(Arc::ptr_eq(&p.0[1].0.0, &q.0[0].0.0), "one key, one string");
        assert_eq!(
            std::mem::size_of::<(Key, Str)>(),
            24,
            "a shared key takes 8 bytes"
        );
        let mut r = q.clone();
        r.insert("a", "1");
        r.insert("k", "3");
        assert_eq!(r.iter().collect::<Vec<_>>(), [("a", "1"), ("k", "3")]);
        assert_eq!(r.remove("a").as_deref(), Some("1"));
        assert_eq!(r.remove("a"), None);
        assert_eq!(r.iter().collect::<Vec<_>>(), [("k", "3")]);
        assert!(serde_json::from_str::<Pairs>(r#"{"k": 1}"#).is_err());
    }

    #[test]
    fn pairs_of_any_value_read_and_write_the_json_of_a_map() {
        let text = r#"{"memory":"4Gi","cpu":"500m","memory":"8Gi"}"#;
        let p: Pairs<Quantity> = serde_json::from_str(text).unwrap();
        assert_eq!(
            serde_json::to_string(&p).unwrap(),
            r#"{"cpu":"500m","memory":"8Gi"}"#
        );
        assert_eq!(p.value("memory").and_then(Quantity::bytes), Some(8 << 30));
        assert_eq!(p.value("cpu").and_then(Quantity::value), Some(0.5));
        assert_eq!(p.value("disk"), None);
        let flags: Pairs<bool> = serde_json::from_str(r#"{"b":true,"a":false}"#).unwrap();
        assert_eq!(
            flags.entries().collect::<Vec<_>>(),
            [("a", &false), ("b", &true)]
        );
        assert!(serde_json::from_str::<Pairs<i64>>(r#"{"a":"x"}"#).is_err());
        assert_eq!(format!("{flags:?}"), r#"{"a": false, "b": true}"#);
    }
}
