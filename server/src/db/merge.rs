//! The database came back after being away at start-up: what it holds is merged into the live
//! graph before the objects table is rewritten from it.

use std::collections::HashSet;

use crate::model::Resource;
use crate::store::{ObjectKey, Op, Snapshot};

/// What merging the stored `objects` into the graph `snap` adds: the objects the graph lacks,
/// except those deleted while the database was away (`tombstones`), which must not come back.
/// They are loaded state (they existed before), not news.
pub(crate) fn merge_plan(
    objects: Vec<Resource>,
    snap: &Snapshot,
    tombstones: &HashSet<ObjectKey>,
) -> Vec<Op> {
    objects
        .into_iter()
        .filter(|r| {
            let key = ObjectKey::of(r);
            snap.get_key(&key).is_none() && !tombstones.contains(&key)
        })
        .map(Op::Upsert)
        .collect()
}
