//! Aggregates of the graph as subscriptions (`infrastructureSummary`, `hostsChanged`): the value
//! now, then again after changes settle and only when it changed.

use std::sync::Arc;

use futures::StreamExt;
use tokio::sync::broadcast;

use super::events::{After, Mode, Seq};
use super::metrics::Active;
use crate::error::ErrorCode;
use crate::store::{Snapshot, Store};

/// An aggregate of the graph, sent first as it is, then again after changes settle (`debounce`)
/// and only when its value changed; `mode` picks the part (an opening is the first value only).
pub(super) fn aggregate<T, F>(
    store: Arc<Store>,
    debounce: std::time::Duration,
    active: Active,
    compute: F,
    mode: Mode,
    after: Option<&Arc<After>>,
) -> futures::stream::BoxStream<'static, Seq<T>>
where
    T: PartialEq + Clone + Send + 'static,
    F: Fn(&Snapshot) -> T + Send + 'static,
{
    let rx = store.subscribe();
    let snap = store.snapshot();
    After::note(after, snap.seq());
    let first = Seq::new(snap.seq(), compute(&snap));
    drop(snap);
    active.event(false);
    let state = (rx, store, active, compute, first.event.clone());
    let rest = futures::stream::unfold(
        state,
        move |(mut rx, store, active, compute, last)| async move {
            loop {
                // Wait for a change, then let the burst settle.
                match rx.recv().await {
                    Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
                    Err(broadcast::error::RecvError::Closed) => return None,
                }
                tokio::time::sleep(debounce).await;
                // Drain what arrived meanwhile: one recomputation covers it all.
                while let Ok(_) | Err(broadcast::error::TryRecvError::Lagged(_)) = rx.try_recv() {}
                let snap = store.snapshot();
                let now = compute(&snap);
                if now != last {
                    active.event(false);
                    return Some((
                        Seq::new(snap.seq(), now.clone()),
                        (rx, store, active, compute, now),
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

pub(super) fn debounce_of(ms: u32) -> async_graphql::Result<std::time::Duration> {
    if !(10..=60_000).contains(&ms) {
        return Err(ErrorCode::BadDebounce
            .graphql(format!("debounceMs must be between 10 and 60000, not {ms}")));
    }
    Ok(std::time::Duration::from_millis(u64::from(ms)))
}
