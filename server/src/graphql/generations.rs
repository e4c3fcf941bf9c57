//! A map bounded in bytes, in two generations: entries go into the current generation; when it
//! holds half the bound it becomes the previous one (the one before is dropped whole), and an
//! entry found in the previous generation moves back. So what is in use stays, at most the bound
//! is held, and nothing is evicted one by one. The kept parts of answers and the parsed documents
//! are held this way.

use std::borrow::Borrow;
use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Arc;

use parking_lot::Mutex;

/// A value the map holds, with the bytes it is counted as.
pub trait Weighed {
    /// Bytes counted for this value.
    fn bytes(&self) -> usize;
}

struct State<K, V> {
    current: HashMap<K, Arc<V>, rustc_hash::FxBuildHasher>,
    current_bytes: usize,
    previous: HashMap<K, Arc<V>, rustc_hash::FxBuildHasher>,
}

/// The map (see the module's comment).
pub struct Generations<K, V> {
    state: Mutex<State<K, V>>,
    max_bytes: usize,
}

impl<K: Hash + Eq, V: Weighed> Generations<K, V> {
    /// A map of at most `max_bytes` (0: nothing is kept).
    pub fn new(max_bytes: usize) -> Self {
        Generations {
            state: Mutex::new(State {
                current: HashMap::default(),
                current_bytes: 0,
                previous: HashMap::default(),
            }),
            max_bytes,
        }
    }

    /// True when the bound is 0.
    pub fn is_off(&self) -> bool {
        self.max_bytes == 0
    }

    /// The value at `key`, moved back into the current generation if it was in the previous.
    pub fn find<Q>(&self, key: &Q) -> Option<Arc<V>>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let mut st = self.state.lock();
        if let Some(v) = st.current.get(key) {
            return Some(v.clone());
        }
        let (k, v) = st.previous.remove_entry(key)?;
        st.current_bytes += v.bytes();
        st.current.insert(k, v.clone());
        self.rotate(&mut st);
        Some(v)
    }

    /// Keep `value` at `key` (a value larger than half the bound is not kept).
    pub fn keep(&self, key: K, value: Arc<V>) {
        if value.bytes() > self.max_bytes / 2 {
            return;
        }
        let mut st = self.state.lock();
        st.current_bytes += value.bytes();
        if let Some(old) = st.current.insert(key, value) {
            st.current_bytes = st.current_bytes.saturating_sub(old.bytes());
        }
        self.rotate(&mut st);
    }

    /// Drop the value at `key` if it is still `value`.
    pub fn forget(&self, key: &K, value: &Arc<V>) {
        let mut st = self.state.lock();
        if st.current.get(key).is_some_and(|v| Arc::ptr_eq(v, value)) {
            st.current.remove(key);
            st.current_bytes = st.current_bytes.saturating_sub(value.bytes());
        }
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        let st = self.state.lock();
        st.current.len() + st.previous.len()
    }

    /// True when nothing is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn rotate(&self, st: &mut State<K, V>) {
        if st.current_bytes > self.max_bytes / 2 {
            st.previous = std::mem::take(&mut st.current);
            st.current_bytes = 0;
        }
    }
}
