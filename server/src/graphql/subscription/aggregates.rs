//! Aggregates of the graph as subscriptions (`infrastructureSummary`, `hostsChanged`): the value
//! now, then again after changes settle and only when it changed.

use std::sync::Arc;

use futures::StreamExt;
use tokio::sync::{broadcast, watch};

use super::events::{After, Mode, Seq};
use super::metrics::Active;
use crate::error::ErrorCode;
use crate::store::Snapshot;

/// An aggregate of the graph, sent first as it is, then again after changes settle (`debounce`)
/// and only when its value changed; `mode` picks the part (an opening is the first value only).
/// `also`: another source the value reads (the application inventory), whose changes are
/// waited on too.
pub(super) fn aggregate<T, F>(
    store: crate::store::ScopedStore,
    debounce: std::time::Duration,
    active: Active,
    compute: F,
    mode: Mode,
    after: Option<&Arc<After>>,
    also: Option<watch::Receiver<Arc<crate::inventory::Snapshot>>>,
) -> futures::stream::BoxStream<'static, Seq<T>>
where
    T: PartialEq + Clone + Send + 'static,
    F: Fn(&Snapshot) -> T + Send + 'static,
{
    let rx = store.subscribe();
    let mut also = also;
    if let Some(a) = also.as_mut() {
        a.mark_unchanged();
    }
    let snap = store.snapshot();
    let at = seq(&snap, &also);
    After::note(after, at);
    let first = Seq::new(at, compute(&snap));
    drop(snap);
    active.event(false);
    let state = (rx, also, store, active, compute, first.event.clone());
    let rest = futures::stream::unfold(
        state,
        move |(mut rx, mut also, store, active, compute, last)| async move {
            loop {
                // Wait for a change, then let the burst settle.
                let other = async {
                    match also.as_mut() {
                        Some(a) => a.changed().await.is_ok(),
                        None => std::future::pending().await,
                    }
                };
                tokio::select! {
                    r = rx.recv() => match r {
                        Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
                        Err(broadcast::error::RecvError::Closed) => return None,
                    },
                    open = other => if !open {
                        also = None;
                        continue;
                    },
                }
                tokio::time::sleep(debounce).await;
                // Drain what arrived meanwhile: one recomputation covers it all.
                while let Ok(_) | Err(broadcast::error::TryRecvError::Lagged(_)) = rx.try_recv() {}
                if let Some(a) = also.as_mut() {
                    a.mark_unchanged();
                }
                let snap = store.snapshot();
                let now = compute(&snap);
                if now != last {
                    active.event(false);
                    return Some((
                        Seq::new(seq(&snap, &also), now.clone()),
                        (rx, also, store, active, compute, now),
                    ));
                }
            }
        },
    );
    let first = futures::stream::once(async move { first });
    match mode {
        Mode::Opening | Mode::Resync => first.boxed(),
        Mode::Whole | Mode::Live => first.chain(rest).boxed(),
    }
}

/// Where a value stands: the store's sequence number, plus the inventory's generation when it
/// reads the inventory too (both only grow, so a change of either moves it on, and the
/// subscription executor, which sends only what is past the opening, lets it through).
fn seq(snap: &Snapshot, also: &Option<watch::Receiver<Arc<crate::inventory::Snapshot>>>) -> u64 {
    snap.seq() + also.as_ref().map_or(0, |a| a.borrow().generation)
}

pub(super) fn debounce_of(ms: u32) -> async_graphql::Result<std::time::Duration> {
    if !(10..=60_000).contains(&ms) {
        return Err(ErrorCode::BadDebounce
            .graphql(format!("debounceMs must be between 10 and 60000, not {ms}")));
    }
    Ok(std::time::Duration::from_millis(u64::from(ms)))
}
