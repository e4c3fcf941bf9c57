//! Answers that depend on more than the request's snapshot (the clock, the database, the watches)
//! are marked volatile by their resolvers, so that whoever keeps answers (the HTTP response
//! cache) knows not to.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Set by resolvers whose answer depends on more than the snapshot (e.g. `sources`).
#[derive(Clone, Default)]
pub struct Volatile(Arc<AtomicBool>);

impl Volatile {
    /// Mark the current request's answer as not cacheable.
    pub fn mark(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    /// True once a resolver marked the request.
    pub fn is_marked(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// Mark the request in `ctx` volatile (no-op outside an HTTP query, e.g. in subscriptions).
pub fn mark_volatile(ctx: &async_graphql::Context<'_>) {
    // Nor may a part of the answer that contains it be kept.
    crate::store::reads::note_inexact();
    if let Some(v) = ctx.data_opt::<Volatile>() {
        v.mark();
    }
}
