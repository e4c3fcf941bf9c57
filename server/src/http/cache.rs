//! Response cache for GraphQL queries.
//!
//! A query's answer is a pure function of (snapshot, query text, operation name, variables):
//! snapshots are immutable and every resolver reads only the request's snapshot and fixed
//! configuration. The few resolvers that read something else (the live source status, history)
//! mark the request volatile (`graphql::Volatile`), and such answers are never kept. So a cached answer is byte-for-byte
//! what executing the query again would give, and the cache is dropped as soon as the store's
//! sequence moves on. Concurrent identical requests are executed once (single flight), which
//! is what a room of dashboards refetching after the same change looks like.

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::Mutex;
use tokio::sync::OnceCell;

/// What identifies an answer, besides the snapshot sequence.
pub use crate::graphql::parts::RequestKey;

/// An executed answer: the serialized body, and whether it may be kept.
#[derive(Clone)]
pub struct Answer {
    /// The JSON body.
    pub body: Bytes,
    /// True when the request was a query without errors whose resolvers read only the snapshot.
    pub cacheable: bool,
    /// The request failed before it ran (its status depends on the media type).
    pub rejected: bool,
    /// It did not finish within the request timeout (no body; never kept).
    pub timed_out: bool,
}

type Slot = Arc<OnceCell<Answer>>;

struct State {
    seq: u64,
    slots: HashMap<RequestKey, Slot>,
    /// The same answers by the caller's scope and the exact POST body that asked for them (see
    /// [`ResponseCache::by_body`]).
    bodies: HashMap<u64, HashMap<Bytes, Slot>>,
    bytes: usize,
}

/// Answers by key for one snapshot sequence, bounded in bytes and entries.
pub struct ResponseCache {
    state: Mutex<State>,
    max_bytes: usize,
    max_entries: usize,
    hits: prometheus::IntCounter,
    misses: prometheus::IntCounter,
}

/// How a request was answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Served from the cache (or from a concurrent identical request's execution).
    Hit,
    /// Executed.
    Miss,
}

impl ResponseCache {
    /// A cache keeping at most `max_bytes` of answers (0 disables it).
    pub fn new(
        max_bytes: usize,
        hits: prometheus::IntCounter,
        misses: prometheus::IntCounter,
    ) -> Self {
        ResponseCache {
            state: Mutex::new(State {
                seq: 0,
                slots: HashMap::new(),
                bodies: HashMap::new(),
                bytes: 0,
            }),
            max_bytes,
            max_entries: 4096,
            hits,
            misses,
        }
    }

    /// Entries held, their bytes, and the limit in bytes.
    pub fn figures(&self) -> (usize, usize, usize) {
        let st = self.state.lock();
        (st.slots.len(), st.bytes, self.max_bytes)
    }

    /// The answer for `key` at sequence `seq`: the cached one, or `execute`'s (kept when it is
    /// cacheable and fits).
    pub async fn get_or_execute<F, Fut>(
        &self,
        seq: u64,
        key: Option<&RequestKey>,
        execute: F,
    ) -> (Answer, Outcome)
    where
        F: FnOnce() -> Fut,
        Fut: std::future::Future<Output = Answer>,
    {
        let Some(key) = key.filter(|_| self.max_bytes > 0) else {
            self.misses.inc();
            return (execute().await, Outcome::Miss);
        };
        // The lock is released before any await (the guard must not live across one).
        let slot = self.slot(seq, key);
        let Some(slot) = slot else {
            self.misses.inc();
            return (execute().await, Outcome::Miss);
        };
        let mut ran = false;
        let answer = slot
            .get_or_init(|| {
                ran = true;
                execute()
            })
            .await
            .clone();
        if ran {
            self.misses.inc();
            let mut st = self.state.lock();
            if st.seq == seq {
                let size = answer.body.len() + key.size();
                if answer.cacheable && st.bytes + size <= self.max_bytes {
                    st.bytes += size;
                } else if st.slots.get(key).is_some_and(|s| Arc::ptr_eq(s, &slot)) {
                    // Not kept: later requests execute afresh (concurrent ones already shared it).
                    st.slots.remove(key);
                }
            }
            (answer, Outcome::Miss)
        } else {
            self.hits.inc();
            (answer, Outcome::Hit)
        }
    }
}

impl ResponseCache {
    /// The kept answer to a POST body seen before at sequence `seq`, found without reading the
    /// body. A body is the request (the same bytes are the same query, operation and variables),
    /// so this is the answer its key holds; only bodies whose answers were kept are indexed
    /// ([`ResponseCache::index_body`]), and the index is dropped with the answers. (Reading the
    /// body, building its key and finding its document were a tenth of a cached request's time.)
    pub fn by_body(&self, seq: u64, scope: u64, body: &[u8]) -> Option<Answer> {
        let st = self.state.lock();
        if st.seq != seq {
            return None;
        }
        let answer = st.bodies.get(&scope)?.get(body)?.get()?.clone();
        drop(st);
        self.hits.inc();
        Some(answer)
    }

    /// Index `body`, whose request has `key`, to the answer kept for `key` at `seq` (if one is).
    pub fn index_body(&self, seq: u64, key: &RequestKey, body: &[u8]) {
        let mut st = self.state.lock();
        let size = body.len() + 64;
        let scope = key.scope();
        if st.seq != seq
            || st.bodies.values().map(HashMap::len).sum::<usize>() >= self.max_entries
            || st.bytes + size > self.max_bytes
            || st.bodies.get(&scope).is_some_and(|b| b.contains_key(body))
        {
            return;
        }
        let Some(slot) = st
            .slots
            .get(key)
            .filter(|s| s.get().is_some_and(|a| a.cacheable))
        else {
            return;
        };
        let slot = slot.clone();
        st.bytes += size;
        st.bodies
            .entry(scope)
            .or_default()
            .insert(Bytes::copy_from_slice(body), slot);
    }

    /// The slot for `key` at `seq` (created if missing), or None when the answer must not be
    /// shared: an older snapshot than the cache's, or the cache is full of keys.
    fn slot(&self, seq: u64, key: &RequestKey) -> Option<Slot> {
        let mut st = self.state.lock();
        if st.seq != seq {
            if seq < st.seq {
                // A request that started before a change: leave the newer answers alone.
                return None;
            }
            st.seq = seq;
            st.slots.clear();
            st.bodies.clear();
            st.bytes = 0;
        }
        if let Some(slot) = st.slots.get(key) {
            return Some(slot.clone());
        }
        if st.slots.len() >= self.max_entries {
            return None;
        }
        let slot = Slot::default();
        st.slots.insert(key.clone(), slot.clone());
        Some(slot)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;

    fn cache(max: usize) -> ResponseCache {
        ResponseCache::new(
            max,
            prometheus::IntCounter::new("h", "h").expect("counter"),
            prometheus::IntCounter::new("m", "m").expect("counter"),
        )
    }

    fn key(q: &str) -> Option<RequestKey> {
        RequestKey::of(&async_graphql::Request::new(q))
    }

    fn answer(body: &str, cacheable: bool) -> Answer {
        Answer {
            body: Bytes::from(body.to_owned()),
            cacheable,
            rejected: false,
            timed_out: false,
        }
    }

    #[tokio::test]
    async fn answers_are_reused_only_for_the_same_sequence_and_request() {
        let c = cache(1 << 20);
        let (a, o) = c
            .get_or_execute(1, key("{a}").as_ref(), || async { answer("1", true) })
            .await;
        assert_eq!((&a.body[..], o), (&b"1"[..], Outcome::Miss));
        let (a, o) = c
            .get_or_execute(1, key("{a}").as_ref(), || async { answer("2", true) })
            .await;
        assert_eq!((&a.body[..], o), (&b"1"[..], Outcome::Hit));
        // Another query, same sequence: executed.
        let (a, _) = c
            .get_or_execute(1, key("{b}").as_ref(), || async { answer("3", true) })
            .await;
        assert_eq!(&a.body[..], b"3");
        // The store moved on: executed again.
        let (a, o) = c
            .get_or_execute(2, key("{a}").as_ref(), || async { answer("4", true) })
            .await;
        assert_eq!((&a.body[..], o), (&b"4"[..], Outcome::Miss));
        // A request on an older snapshot does not evict the newer answers.
        let (a, _) = c
            .get_or_execute(1, key("{a}").as_ref(), || async { answer("5", true) })
            .await;
        assert_eq!(&a.body[..], b"5");
        let (a, o) = c
            .get_or_execute(2, key("{a}").as_ref(), || async { answer("6", true) })
            .await;
        assert_eq!((&a.body[..], o), (&b"4"[..], Outcome::Hit));
    }

    #[tokio::test]
    async fn a_body_finds_the_answer_kept_for_its_request_at_the_same_sequence() {
        let c = cache(1 << 20);
        let k = key("{a}").expect("key");
        let body = br#"{"query":"{a}"}"#;
        // Nothing kept yet: nothing is indexed.
        c.index_body(1, &k, body);
        assert!(c.by_body(1, 0, body).is_none());
        c.get_or_execute(1, Some(&k), || async { answer("1", true) })
            .await;
        c.index_body(1, &k, body);
        assert_eq!(&c.by_body(1, 0, body).expect("indexed").body[..], b"1");
        // Another body, or another sequence: not found; the index goes with the answers.
        assert!(c.by_body(1, 0, br#"{"query": "{a}"}"#).is_none());
        assert!(c.by_body(2, 0, body).is_none());
        c.get_or_execute(2, Some(&k), || async { answer("2", true) })
            .await;
        assert!(c.by_body(1, 0, body).is_none());
        assert!(
            c.by_body(2, 0, body).is_none(),
            "indexed for sequence 1 only"
        );
        // An answer that was not kept is never indexed.
        let v = key("{v}").expect("key");
        c.get_or_execute(2, Some(&v), || async { answer("volatile", false) })
            .await;
        c.index_body(2, &v, br#"{"query":"{v}"}"#);
        assert!(c.by_body(2, 0, br#"{"query":"{v}"}"#).is_none());
    }

    #[tokio::test]
    async fn uncacheable_and_oversized_answers_are_not_kept() {
        let c = cache(10);
        c.get_or_execute(1, key("{a}").as_ref(), || async {
            answer("volatile", false)
        })
        .await;
        let (a, o) = c
            .get_or_execute(1, key("{a}").as_ref(), || async { answer("again", false) })
            .await;
        assert_eq!((&a.body[..], o), (&b"again"[..], Outcome::Miss));
        c.get_or_execute(1, key("{b}").as_ref(), || async {
            answer("far too long", true)
        })
        .await;
        let (a, _) = c
            .get_or_execute(1, key("{b}").as_ref(), || async { answer("x", true) })
            .await;
        assert_eq!(&a.body[..], b"x");
        // Disabled cache: always executed.
        let off = cache(0);
        off.get_or_execute(1, key("{a}").as_ref(), || async { answer("1", true) })
            .await;
        let (a, _) = off
            .get_or_execute(1, key("{a}").as_ref(), || async { answer("2", true) })
            .await;
        assert_eq!(&a.body[..], b"2");
    }

    #[tokio::test]
    async fn concurrent_identical_requests_execute_once() {
        let c = Arc::new(cache(1 << 20));
        let runs = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let (tx, rx) = tokio::sync::watch::channel(false);
        let mut tasks = Vec::new();
        for _ in 0..8 {
            let (c, runs, mut rx) = (c.clone(), runs.clone(), rx.clone());
            tasks.push(tokio::spawn(async move {
                c.get_or_execute(7, key("{a}").as_ref(), || async move {
                    runs.fetch_add(1, Ordering::SeqCst);
                    let _ = rx.wait_for(|go| *go).await;
                    // Not cacheable: only sharing the one execution gives every waiter this body.
                    answer("shared", false)
                })
                .await
                .0
                .body
            }));
        }
        // Current-thread runtime: every task runs up to its wait before the timer fires.
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        let _ = tx.send(true);
        for t in tasks {
            assert_eq!(&t.await.expect("task")[..], b"shared");
        }
        assert_eq!(runs.load(Ordering::SeqCst), 1);
    }
}
