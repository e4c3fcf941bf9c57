//! `Labels`: an object's labels, one copy shared by every object that has the same ones.
//!
//! Why shared: most objects' labels repeat their neighbours' (a cluster's Machines carry its id
//! and one of two roles), so one copy serves them all, and a label selector tested against
//! half a million Machines meets a few thousand label sets: tested once each, remembered by
//! the set's address ([`Labels::address`]). Read through the object instead, each Machine's
//! labels were three allocations away and 230,000 Machines' took about 85 ms on two cores
//! (`cargo bench --bench search_query`).
//!
//! The sets are interned in a table of at most [`INTERNED_SETS`]. The sets no object holds any
//! longer are dropped from it whenever as many sets were asked for since the last time as it
//! held then (so it holds at most about twice what objects hold, and each set asked for costs
//! a constant share of the sweeps); a set the full table has no room for is kept on its own
//! (shared by nothing, still correct), so labels no two objects share cannot grow the table
//! without bound.

use std::collections::HashSet;
use std::ops::Deref;
use std::sync::{Arc, LazyLock};

use parking_lot::Mutex;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::pairs::Pairs;

/// Labels, shared (see the module's comment). Reads as [`Pairs`].
#[derive(Clone)]
pub struct Labels(Arc<Pairs>);

/// At most this many label sets are interned.
const INTERNED_SETS: usize = 1 << 20;

/// Fewest sets asked for between two sweeps.
const LEAST_BETWEEN_SWEEPS: usize = 4096;

/// The interned sets, by their content, and when they are next swept.
static SETS: LazyLock<Mutex<Table>> = LazyLock::new(|| {
    Mutex::new(Table {
        sets: HashSet::new(),
        asked: 0,
        sweep_after: LEAST_BETWEEN_SWEEPS,
    })
});

struct Table {
    sets: HashSet<Interned>,
    /// New sets asked for since the last sweep.
    asked: usize,
    /// How many new sets are asked for before the next sweep.
    sweep_after: usize,
}

/// A set in the table, hashed and compared by its pairs (and found by them: see
/// [`Labels::new`]).
#[derive(PartialEq, Eq, Hash)]
struct Interned(Arc<Pairs>);

impl std::borrow::Borrow<Pairs> for Interned {
    fn borrow(&self) -> &Pairs {
        &self.0
    }
}

impl Labels {
    /// `pairs`, as the copy every object with the same labels shares (when the table has room).
    pub fn new(pairs: Pairs) -> Labels {
        let mut table = SETS.lock();
        // Found by the pairs themselves: a set met before allocates nothing.
        if let Some(found) = table.sets.get(&pairs) {
            return Labels(found.0.clone());
        }
        let probe = Interned(Arc::new(pairs));
        table.asked += 1;
        if table.asked >= table.sweep_after {
            // Drop those only the table holds.
            table.sets.retain(|s| Arc::strong_count(&s.0) > 1);
            table.asked = 0;
            table.sweep_after = table.sets.len().max(LEAST_BETWEEN_SWEEPS);
        }
        let shared = probe.0.clone();
        if table.sets.len() < INTERNED_SETS {
            table.sets.insert(probe);
        }
        Labels(shared)
    }

    /// Where the one copy is: two `Labels` at one address are the same labels (while both
    /// are held).
    pub fn address(&self) -> usize {
        Arc::as_ptr(&self.0) as usize
    }
}

impl Deref for Labels {
    type Target = Pairs;

    fn deref(&self) -> &Pairs {
        &self.0
    }
}

impl From<Pairs> for Labels {
    fn from(pairs: Pairs) -> Labels {
        Labels::new(pairs)
    }
}

/// Changed in place: a copy of its own (shared by nothing until it is read again).
impl std::ops::DerefMut for Labels {
    fn deref_mut(&mut self) -> &mut Pairs {
        Arc::make_mut(&mut self.0)
    }
}

impl<K: AsRef<str>, V: AsRef<str>, const N: usize> From<[(K, V); N]> for Labels {
    fn from(pairs: [(K, V); N]) -> Self {
        Labels::new(pairs.into())
    }
}

impl<K: AsRef<str>, V: AsRef<str>> FromIterator<(K, V)> for Labels {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        Labels::new(iter.into_iter().collect())
    }
}

impl Default for Labels {
    fn default() -> Labels {
        Labels::new(Pairs::default())
    }
}

impl PartialEq for Labels {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || *self.0 == *other.0
    }
}

impl Eq for Labels {}

impl std::fmt::Debug for Labels {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl Serialize for Labels {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Labels {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Pairs::deserialize(deserializer).map(Labels::new)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objects_with_the_same_labels_share_one_copy_and_others_do_not() {
        let a: Labels = serde_json::from_str(r#"{"app": "web", "tier": "x-labels-test"}"#).unwrap();
        let b = Labels::new([("tier", "x-labels-test"), ("app", "web")].into());
        let c = Labels::new([("tier", "x-labels-test"), ("app", "db")].into());
        assert_eq!(a.address(), b.address(), "one copy");
        assert_ne!(a.address(), c.address());
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert_eq!(b.get("app"), Some("web"));
        assert_eq!(
            serde_json::to_string(&a).unwrap(),
            r#"{"app":"web","tier":"x-labels-test"}"#
        );
    }

    #[test]
    fn the_table_drops_the_sets_nothing_holds_and_keeps_those_held() {
        let held = Labels::new([("x-sweep", "held")].into());
        // Sets no object keeps: swept out as more are asked for, each still reading as its
        // pairs.
        for i in 0..4 * LEAST_BETWEEN_SWEEPS {
            let v = format!("v{i}");
            let l = Labels::new([("x-sweep", v.as_str())].into());
            assert_eq!(l.get("x-sweep"), Some(v.as_str()));
        }
        let left = SETS
            .lock()
            .sets
            .iter()
            .filter(|s| s.0.get("x-sweep").is_some())
            .count();
        assert!(
            left <= 2 * LEAST_BETWEEN_SWEEPS,
            "{left} sets nothing holds are still kept"
        );
        let again = Labels::new([("x-sweep", "held")].into());
        assert_eq!(held.address(), again.address(), "a held set stays shared");
    }
}
