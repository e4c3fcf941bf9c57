//! Snapshots of the graph at a past moment (`history::timeline`): built from a list of objects,
//! or from another past snapshot and the objects that changed since it. Neither is the store's:
//! no change is published and the current snapshot is left alone.

use std::sync::Arc;

use super::{Change, ChangeType, ObjectKey, Snapshot, Store, version_seq};
use crate::model::Resource;

impl Store {
    /// A snapshot holding exactly `objects` (a later one of a key replacing an earlier), with
    /// this store's derived state.
    pub fn past(&self, objects: Vec<Resource>) -> Arc<Snapshot> {
        let seq = objects.iter().map(version_seq).max().unwrap_or(0);
        let objects: Vec<(ObjectKey, Arc<Resource>)> = objects
            .into_iter()
            .map(|r| (ObjectKey::of(&r), Arc::new(r)))
            .collect();
        let mut snap = Snapshot::of_objects(&objects);
        if snap.by_key.len() != objects.len() {
            // A key came twice (a timeline's graph never holds one twice): one by one.
            snap = Snapshot::default();
            for (key, r) in objects {
                snap.insert(key, r);
            }
            snap.settle();
        }
        snap.seq = seq;
        if let Some(derive) = &self.deriver {
            snap.derived = Some(derive(None, &snap, &[]));
        }
        Arc::new(snap)
    }

    /// `base` with the objects of `removed` taken out and `upserted` put in (removals first):
    /// the same snapshot [`Store::past`] makes of the resulting objects, derived state included,
    /// in time proportional to the changes. Its sequence is the highest resourceVersion held, as
    /// there.
    pub fn past_from(
        &self,
        base: &Snapshot,
        removed: Vec<ObjectKey>,
        upserted: Vec<Resource>,
    ) -> Arc<Snapshot> {
        let mut snap = base.successor();
        let mut changes = Vec::with_capacity(removed.len() + upserted.len());
        let mut lowered = false;
        for key in removed {
            if let Some(prev) = snap.remove(&key) {
                lowered |= version_seq(&prev) >= snap.seq;
                changes.push(Change {
                    seq: 0,
                    change: ChangeType::Deleted,
                    object: prev.clone(),
                    previous: Some(prev),
                    loaded: true,
                    actor: None,
                    at_ms: 0,
                });
            }
        }
        for r in upserted {
            let key = ObjectKey::of(&r);
            let previous = snap.by_key.get(&key).cloned();
            if previous.as_deref() == Some(&r) {
                continue;
            }
            if let Some(prev) = &previous {
                lowered |= version_seq(prev) >= snap.seq;
            }
            snap.seq = snap.seq.max(version_seq(&r));
            let object = Arc::new(r);
            snap.insert(key, object.clone());
            changes.push(Change {
                seq: 0,
                change: if previous.is_some() {
                    ChangeType::Modified
                } else {
                    ChangeType::Added
                },
                object,
                previous,
                loaded: true,
                actor: None,
                at_ms: 0,
            });
        }
        snap.settle();
        if lowered {
            // The highest version may have gone: ask every object, as a fresh build does.
            snap.seq = snap
                .objects
                .values()
                .map(|r| version_seq(r.object()))
                .max()
                .unwrap_or(0);
        }
        if let Some(derive) = &self.deriver
            && !changes.is_empty()
        {
            let made: Vec<Arc<Change>> = changes.into_iter().map(Arc::new).collect();
            let before = snap.derived.take();
            snap.derived = Some(derive(before.as_ref(), &snap, &made));
        }
        Arc::new(snap)
    }
}
