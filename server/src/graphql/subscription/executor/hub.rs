//! Hubs: one task per (document, variables, operation) renders each event once into a ring that
//! every subscriber of it reads at its own pace.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use async_graphql::Response;
use parking_lot::Mutex;

/// What a subscription sends: a response (a refusal or an error, serialized by the transport),
/// or an event already rendered to JSON (shared by the subscribers of a hub).
#[derive(Debug)]
pub enum Payload {
    /// Not rendered yet.
    Response(Box<Response>),
    /// The response's JSON.
    Json(Arc<str>),
}

impl Payload {
    /// The response's JSON.
    pub fn json(&self) -> std::borrow::Cow<'_, str> {
        match self {
            Payload::Json(j) => std::borrow::Cow::Borrowed(j),
            Payload::Response(r) => std::borrow::Cow::Owned(to_json(r)),
        }
    }
}

pub(super) fn to_json(r: &Response) -> String {
    serde_json::to_string(r).unwrap_or_else(|e| {
        serde_json::json!({"errors": [{"message": format!("event not serializable: {e}")}]})
            .to_string()
    })
}

/// One event of a hub, rendered once.
pub(super) struct Frame {
    /// The store's sequence number the event reflects.
    pub(super) seq: u64,
    /// The hub missed changes: every subscriber reads a fresh opening.
    pub(super) resync: bool,
    /// A value sent only when it changed.
    pub(super) aggregate: bool,
    pub(super) json: Arc<str>,
}

/// A hub's newest frames, read by each subscriber at its own pace. Written here rather than with
/// `tokio::sync::broadcast`, which allocates every slot up front: 1,024 slots of ~40 bytes per hub
/// (40 KiB) cost 4 KiB per subscriber with 1,000 hubs of ten subscribers each; this holds only
/// the frames sent (a pointer each) up to `capacity`.
pub(super) struct Ring {
    pub(super) inner: Mutex<RingFrames>,
    pub(super) capacity: usize,
    /// Where each subscriber is: each is woken through its cursor when a frame comes, and one
    /// falling out of the ring is counted when it happens
    /// (`vitistack_subscription_overflows_total`), not when it next reads.
    pub(super) readers: Mutex<Vec<std::sync::Weak<RingCursor>>>,
    pub(super) overflows: Option<prometheus::IntCounter>,
}

/// A subscriber's position in its hub's ring, whether it has fallen out of it, and how to wake
/// it. (A waker of its own, where a `Notify` made each waiting subscriber hold a `Notified`
/// future: the ring knows its readers already.)
#[derive(Default)]
pub(super) struct RingCursor {
    pub(super) at: std::sync::atomic::AtomicU64,
    pub(super) overflowed: std::sync::atomic::AtomicBool,
    pub(super) waker: futures::task::AtomicWaker,
}

pub(super) struct RingFrames {
    /// The position of `frames[0]` in the hub's stream.
    pub(super) first: u64,
    pub(super) frames: std::collections::VecDeque<Arc<Frame>>,
    pub(super) ended: bool,
}

/// What a subscriber finds at its position in a ring.
pub(super) enum RingRead {
    Frame(Arc<Frame>),
    /// The frames from its position on were dropped (it fell further behind than the ring holds).
    Lagged,
    /// Nothing yet.
    Pending,
    /// The hub's stream has ended.
    Ended,
}

impl Ring {
    pub(super) fn new(capacity: usize, overflows: Option<prometheus::IntCounter>) -> Self {
        Ring {
            readers: Mutex::default(),
            overflows,
            inner: Mutex::new(RingFrames {
                first: 0,
                frames: Default::default(),
                ended: false,
            }),
            capacity,
        }
    }

    pub(super) fn push(&self, frame: Arc<Frame>) {
        let dropped = {
            let mut r = self.inner.lock();
            let dropped = (r.frames.len() >= self.capacity).then(|| {
                r.frames.pop_front();
                r.first += 1;
                r.first
            });
            r.frames.push_back(frame);
            dropped
        };
        self.wake(dropped);
    }

    /// Wake every reader (those gone are forgotten); with `dropped`, the position of the oldest
    /// frame left after one was dropped, count the readers whose next frame that was.
    fn wake(&self, dropped: Option<u64>) {
        self.readers.lock().retain(|c| {
            let Some(c) = c.upgrade() else {
                return false;
            };
            if let Some(first) = dropped
                && c.at.load(Ordering::Acquire) < first
                && !c.overflowed.swap(true, Ordering::AcqRel)
                && let Some(m) = &self.overflows
            {
                m.inc();
            }
            c.waker.wake();
            true
        });
    }

    /// A new reader at the end of the ring.
    pub(super) fn reader(&self) -> Arc<RingCursor> {
        let c = Arc::new(RingCursor::default());
        c.at.store(self.end_position(), Ordering::Release);
        self.readers.lock().push(Arc::downgrade(&c));
        c
    }

    pub(super) fn end(&self) {
        self.inner.lock().ended = true;
        self.wake(None);
    }

    /// The position after the newest frame: where a subscriber joining now starts.
    pub(super) fn end_position(&self) -> u64 {
        let r = self.inner.lock();
        r.first + r.frames.len() as u64
    }

    pub(super) fn read(&self, at: u64) -> RingRead {
        let r = self.inner.lock();
        if at < r.first {
            return RingRead::Lagged;
        }
        match r.frames.get((at - r.first) as usize) {
            Some(f) => RingRead::Frame(f.clone()),
            None if r.ended => RingRead::Ended,
            None => RingRead::Pending,
        }
    }
}

/// The shared stream of one document with one set of variables: its task renders each event
/// once; it stops when its last subscriber goes.
pub(super) struct Hub {
    pub(super) ring: Arc<Ring>,
    pub(super) task: tokio::task::JoinHandle<()>,
    pub(super) gauge: Option<prometheus::IntGauge>,
    /// What it runs documents with, shared by its subscribers.
    pub(super) runner: Arc<super::Runner>,
}

impl Drop for Hub {
    fn drop(&mut self) {
        self.task.abort();
        if let Some(g) = &self.gauge {
            g.dec();
        }
    }
}

/// Which document, variables and operation a hub serves. (Once requests carry a principal, what
/// it may see must be part of the key too: a hub's render is handed out as is.)
/// Document, variables, operation and the subscribers' scope (`store::Scope::id`).
pub(super) type HubKey = (Arc<str>, String, Option<String>, u64);

/// The open hubs.
pub struct Hubs {
    pub(super) open: Mutex<std::collections::HashMap<HubKey, std::sync::Weak<Hub>>>,
    /// Events a hub may hold for a subscriber that has not taken them yet.
    pub(super) capacity: usize,
    pub(super) metrics: Option<crate::graphql::subscription::SubscriptionMetrics>,
}

impl Hubs {
    /// No hub yet; each holds up to `capacity` events per subscriber.
    pub fn new(
        capacity: usize,
        metrics: Option<crate::graphql::subscription::SubscriptionMetrics>,
    ) -> Self {
        Hubs {
            open: Mutex::default(),
            capacity: capacity.max(1),
            metrics,
        }
    }

    pub(super) fn get(&self, key: &HubKey) -> Option<Arc<Hub>> {
        self.open.lock().get(key).and_then(std::sync::Weak::upgrade)
    }

    /// Keep `hub` for `key`, or the one another subscriber opened meanwhile.
    pub(super) fn insert(&self, key: HubKey, hub: Arc<Hub>) -> Arc<Hub> {
        let mut open = self.open.lock();
        if let Some(other) = open.get(&key).and_then(std::sync::Weak::upgrade) {
            return other;
        }
        if open.len() >= 64 && open.len().is_power_of_two() {
            open.retain(|_, h| h.strong_count() > 0);
        }
        open.insert(key, Arc::downgrade(&hub));
        hub
    }
}
