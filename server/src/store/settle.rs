//! Where a write's new objects take their places in the snapshot's ordered sets (the ordered map
//! of objects, search's words): together when the write settles, in an order unrelated to the
//! keys'.

use std::sync::Arc;

use super::{ObjectKey, Snapshot};
use crate::model::Resource;

impl Snapshot {
    /// Give the objects new in this write their places in the ordered sets, in an order
    /// unrelated to the keys'. A B-tree filled in key order (a list from the API server comes
    /// sorted by namespace and name) splits every full leaf in half and leaves it so: its leaves
    /// end half full, where in no particular order they end about two-thirds full (imbl's `OrdSet`
    /// of 16-byte entries: 42 against 28 bytes an entry). Called before a snapshot is read.
    pub(super) fn settle(&mut self) {
        if !self.unsettled.is_empty() {
            let new = scrambled(std::mem::take(&mut self.unsettled));
            self.place(new);
        }
    }

    /// Settle when `key`'s object is one of the unsettled (held by key, not yet in the ordered
    /// map): a change or deletion of an object new in the same write must find it placed. Any
    /// other change leaves the write's new objects to be placed together.
    pub(super) fn settle_for(&mut self, key: &ObjectKey) {
        if !self.unsettled.is_empty()
            && self.by_key.get(key).is_some()
            && !self.objects.contains_key(key)
        {
            self.settle();
        }
    }

    /// [`Snapshot::settle`] in the order written, for a snapshot built once from another's
    /// ordered map and read at once (a reader's view): inserts out of key order cost time, and
    /// such a snapshot lives only as long as its readers.
    pub(super) fn settle_in_order(&mut self) {
        let new = std::mem::take(&mut self.unsettled);
        self.place(new);
    }

    fn place(&mut self, new: Vec<(ObjectKey, Arc<Resource>)>) {
        for (key, object) in new {
            if let Some(search) = &mut self.search {
                search.add(&key, &object);
            }
            self.objects.insert(key, super::held::Held::new(object));
        }
    }
}

/// `entries` in the order of their keys' hashes: an order unrelated to the keys' own (see
/// [`Snapshot::settle`]).
fn scrambled(mut entries: Vec<(ObjectKey, Arc<Resource>)>) -> Vec<(ObjectKey, Arc<Resource>)> {
    entries.sort_by_cached_key(|(key, _)| super::hashed::hash(key));
    entries
}
