//! State being loaded: [`Store::load`] applies a large amount of it paced to the change stream's
//! readers, and [`Store::loading`] tells them that a first sync is under way (a source holds a
//! [`Loading`] from its start until its first sync is done), so that a reader can tell a burst
//! of loaded state from news: the timeline takes its checkpoints of the whole graph less often
//! while one runs, as each would be outdated at once.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::{Arrival, Op, STALLED_READER, Store};

/// Held while a first sync or a load runs; dropping it says it is done.
#[derive(Debug)]
pub struct Loading(Arc<AtomicUsize>);

impl Drop for Loading {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Store {
    /// Say that a first sync (or a load) runs until the returned value is dropped.
    pub fn loading(&self) -> Loading {
        self.loads.fetch_add(1, Ordering::AcqRel);
        Loading(self.loads.clone())
    }

    /// True while any first sync or load runs.
    pub fn is_loading(&self) -> bool {
        self.loads.load(Ordering::Acquire) > 0
    }

    /// Load a large amount of state (the demo fleet, manifests at start-up, a source's first
    /// list) as `loaded` changes, without overrunning the change stream: the writes are applied
    /// in slices of at most half the stream's capacity, and before each slice this waits until
    /// the readers (fan-out, object writer, history) have made room for it. So a load of any
    /// size reaches every reader; nothing is dropped and nobody has to resync. Each slice is
    /// atomic, the whole load is not (callers load before they report ready). A reader that
    /// makes no progress at all for [`STALLED_READER`] is left behind: it will find it lagged,
    /// as any reader that stops does. Returns the changes made.
    pub async fn load(&self, ops: Vec<Op>) -> usize {
        let _loading = self.loading();
        let slice = (self.capacity / 2).max(1);
        let mut made = 0;
        let mut ops = ops.into_iter().peekable();
        while ops.peek().is_some() {
            let chunk: Vec<Op> = ops.by_ref().take(slice).collect();
            self.room_for(chunk.len()).await;
            made += self.apply_marked(chunk, Arrival::Loaded, None).len();
        }
        made
    }

    /// Wait until the change stream can take `n` more changes without overrunning a reader.
    async fn room_for(&self, n: usize) {
        let mut queued = self.changes.len();
        let mut progress_at = tokio::time::Instant::now();
        while queued + n > self.capacity {
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
            let now = self.changes.len();
            if now < queued {
                progress_at = tokio::time::Instant::now();
            } else if progress_at.elapsed() >= STALLED_READER {
                tracing::warn!(
                    queued = now,
                    "a change stream reader makes no progress; loading on without it"
                );
                return;
            }
            queued = now;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loading_lasts_while_any_holder_keeps_it() {
        let store = Store::new();
        assert!(!store.is_loading());
        let a = store.loading();
        let b = store.loading();
        drop(a);
        assert!(store.is_loading(), "one first sync still runs");
        drop(b);
        assert!(!store.is_loading());
    }
}
