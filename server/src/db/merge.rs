//! The database came back after being away at start-up: what it holds is merged into the live
//! graph before the objects table is rewritten from it.

use super::Db;
use super::objects::load_logged;
use crate::store::{Key, Op, Store};

/// The database came back after start-up: objects it holds that the store does not are added
/// (as changes, so live clients see them); the table is then rewritten from the store.
pub(crate) async fn merge(db: &Db, store: &Store) {
    match load_logged(db).await {
        Ok(objects) => {
            let snap = store.snapshot();
            let missing: Vec<Op> = objects
                .into_iter()
                .filter(|r| snap.get_key(&Key::of(r)).is_none())
                .map(Op::Upsert)
                .collect();
            let n = store.apply(missing).len();
            tracing::info!(
                restored = n,
                "database reachable again; stored objects merged"
            );
        }
        Err(e) => tracing::warn!(error = %e, "reading stored objects failed"),
    }
}
