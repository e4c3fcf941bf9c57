//! In-process fan-out of the store's change stream to subscriptions.
//!
//! One task reads the change stream once and hands each change only to the subscriptions that
//! want it: they are indexed by kind and namespace, and the filter (label selector, phase, name)
//! is checked here, so an idle subscription costs no work per change and is never woken for
//! changes it does not want. Each subscription has its own bounded queue; when it is full (a
//! slow reader) the subscription is marked overflowed and later sends RESYNC and a fresh snapshot,
//! never unbounded memory and never a stall of the stream or of other subscribers.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::Mutex;
use tokio::sync::{broadcast, mpsc};

use crate::model::Kind;
use crate::store::{Change, Store};

/// What a subscription's queue carries: a change it wants, or None (look at the overflow flag).
pub type Item = Option<Arc<Change>>;

/// Decides whether a subscription wants a change (called on the fan-out task).
pub type Wants = Box<dyn Fn(&Change) -> bool + Send + Sync>;

struct Entry {
    id: u64,
    wants: Wants,
    tx: mpsc::Sender<Item>,
    overflowed: Arc<AtomicBool>,
}

#[derive(Default)]
struct Registry {
    next_id: u64,
    /// (kind, namespace or "" for every namespace) → subscriptions.
    by_kind_ns: HashMap<(Kind, String), Vec<Entry>>,
    /// Registered keys of each subscription (for removal).
    keys: HashMap<u64, Vec<(Kind, String)>>,
}

/// The fan-out: a registry and the task feeding it.
pub struct Fanout {
    registry: Arc<Mutex<Registry>>,
    /// Queue length of each subscription.
    pub capacity: usize,
}

/// A registered subscription's end: its queue, its overflow flag, and removal on drop.
pub struct Subscriber {
    /// Changes it wants, in order.
    pub rx: mpsc::Receiver<Item>,
    /// Set when changes were dropped because the queue was full (or the fan-out fell behind).
    pub overflowed: Arc<AtomicBool>,
    id: u64,
    registry: Arc<Mutex<Registry>>,
}

impl Drop for Subscriber {
    fn drop(&mut self) {
        let mut reg = self.registry.lock();
        if let Some(keys) = reg.keys.remove(&self.id) {
            for k in keys {
                if let Some(v) = reg.by_kind_ns.get_mut(&k) {
                    v.retain(|e| e.id != self.id);
                    if v.is_empty() {
                        reg.by_kind_ns.remove(&k);
                    }
                }
            }
        }
    }
}

impl std::fmt::Debug for Fanout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fanout")
            .field("subscriptions", &self.len())
            .field("capacity", &self.capacity)
            .finish()
    }
}

impl Fanout {
    /// Start the fan-out of `store`'s changes (on the current Tokio runtime).
    /// `overflows` counts the queues that overflow, `lagged` the changes the fan-out itself
    /// missed.
    pub fn start(
        store: &Store,
        capacity: usize,
        overflows: prometheus::IntCounter,
        lagged: prometheus::IntCounter,
    ) -> Arc<Fanout> {
        let registry = Arc::new(Mutex::new(Registry::default()));
        let rx = store.subscribe();
        tokio::spawn(run(rx, registry.clone(), overflows, lagged));
        Arc::new(Fanout {
            registry,
            capacity: capacity.max(1),
        })
    }

    /// Register interest in `kinds` (all when None) in `namespace` (all when None), with a
    /// finer test `wants`. Register before reading the snapshot: every change after it arrives.
    pub fn register(
        &self,
        kinds: Option<&[Kind]>,
        namespace: Option<&str>,
        wants: impl Fn(&Change) -> bool + Send + Sync + Clone + 'static,
    ) -> Subscriber {
        let (tx, rx) = mpsc::channel(self.capacity);
        let overflowed = Arc::new(AtomicBool::new(false));
        let mut reg = self.registry.lock();
        reg.next_id += 1;
        let id = reg.next_id;
        let ns = namespace.unwrap_or_default().to_string();
        let kinds: Vec<Kind> = kinds.map_or_else(|| Kind::ALL.to_vec(), <[Kind]>::to_vec);
        let mut keys = Vec::with_capacity(kinds.len());
        for k in kinds {
            let key = (k, ns.clone());
            reg.by_kind_ns.entry(key.clone()).or_default().push(Entry {
                id,
                wants: Box::new(wants.clone()),
                tx: tx.clone(),
                overflowed: overflowed.clone(),
            });
            keys.push(key);
        }
        reg.keys.insert(id, keys);
        Subscriber {
            rx,
            overflowed,
            id,
            registry: self.registry.clone(),
        }
    }

    /// Subscriptions registered now.
    pub fn len(&self) -> usize {
        self.registry.lock().keys.len()
    }

    /// True when nobody is registered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

fn offer(e: &Entry, c: &Arc<Change>, overflows: &prometheus::IntCounter) {
    if !(e.wants)(c) {
        return;
    }
    if let Err(mpsc::error::TrySendError::Full(_)) = e.tx.try_send(Some(c.clone()))
        && !e.overflowed.swap(true, Ordering::AcqRel)
    {
        overflows.inc();
    }
}

async fn run(
    mut rx: broadcast::Receiver<Arc<Change>>,
    registry: Arc<Mutex<Registry>>,
    overflows: prometheus::IntCounter,
    lagged: prometheus::IntCounter,
) {
    loop {
        match rx.recv().await {
            Ok(c) => {
                let reg = registry.lock();
                let kind = c.object.kind();
                let ns = c.object.namespace();
                if let Some(v) = reg.by_kind_ns.get(&(kind, ns.to_string())) {
                    v.iter().for_each(|e| offer(e, &c, &overflows));
                }
                if !ns.is_empty()
                    && let Some(v) = reg.by_kind_ns.get(&(kind, String::new()))
                {
                    v.iter().for_each(|e| offer(e, &c, &overflows));
                }
            }
            Err(broadcast::error::RecvError::Lagged(missed)) => {
                lagged.inc_by(missed);
                // The fan-out itself fell behind: every subscription may have missed changes.
                tracing::warn!(
                    missed,
                    "subscription fan-out fell behind; every subscriber resyncs"
                );
                let reg = registry.lock();
                for e in reg.by_kind_ns.values().flatten() {
                    e.overflowed.store(true, Ordering::Release);
                    let _ = e.tx.try_send(None);
                }
            }
            Err(broadcast::error::RecvError::Closed) => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Resource;
    use crate::store::Op;

    fn machine(ns: &str, name: &str) -> Op {
        Op::Upsert(
            Resource::from_value(
                Kind::Machine,
                "v1alpha1",
                serde_json::json!({"metadata": {"name": name, "namespace": ns}, "spec": {}}),
            )
            .expect("machine"),
        )
    }

    #[tokio::test]
    async fn changes_go_only_to_interested_queues_and_overflow_is_flagged() {
        let store = Store::new();
        let overflows = prometheus::IntCounter::new("o", "o").expect("counter");
        let lagged = prometheus::IntCounter::new("l", "l").expect("counter");
        let fanout = Fanout::start(&store, 2, overflows.clone(), lagged);
        let mut a = fanout.register(Some(&[Kind::Machine]), Some("a"), |_| true);
        let mut any = fanout.register(Some(&[Kind::Machine]), None, |c| c.object.name() != "skip");
        let mut clusters = fanout.register(Some(&[Kind::KubernetesCluster]), None, |_| true);
        store.apply(vec![machine("b", "m1")]);
        store.apply(vec![machine("a", "m2")]);
        store.apply(vec![machine("a", "skip")]);
        let got = |item: Option<Item>| item.flatten().map(|c| c.object.name().to_string());
        assert_eq!(got(any.rx.recv().await), Some("m1".into()));
        assert_eq!(got(any.rx.recv().await), Some("m2".into()));
        assert_eq!(got(a.rx.recv().await), Some("m2".into()));
        assert_eq!(got(a.rx.recv().await), Some("skip".into()));
        tokio::task::yield_now().await;
        assert!(any.rx.try_recv().is_err(), "filtered out by its test");
        assert!(clusters.rx.try_recv().is_err(), "another kind");
        assert!(!a.overflowed.load(Ordering::Acquire));
        // Capacity 2: the third unread change overflows.
        for i in 0..3 {
            store.apply(vec![machine("a", &format!("o{i}"))]);
        }
        let both = async {
            while !(a.overflowed.load(Ordering::Acquire) && any.overflowed.load(Ordering::Acquire))
            {
                tokio::task::yield_now().await;
            }
        };
        tokio::time::timeout(std::time::Duration::from_secs(30), both)
            .await
            .expect("both queues overflow");
        assert_eq!(
            overflows.get(),
            2,
            "two queues overflowed, each counted once"
        );
        assert_eq!(fanout.len(), 3);
        drop((a, any, clusters));
        assert!(fanout.is_empty());
    }
}
