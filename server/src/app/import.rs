//! `vitistack import`: manifests applied to the objects a database keeps for the embedded source,
//! without a running server.

use std::collections::BTreeMap;
use std::sync::Arc;

use tokio::sync::broadcast;

use crate::db::Db;
use crate::db::object_writer::note;
use crate::db::objects::{load_logged, rewrite_all, write};
use crate::model::Resource;
use crate::store::Store;

/// `vitistack import`: apply manifest files to the stored objects (each file atomically, refused
/// files change nothing) and write the result in one transaction.
pub async fn import(
    db: &Db,
    paths: &[std::path::PathBuf],
) -> Result<crate::source::ImportSummary, anyhow::Error> {
    let store = Store::new();
    let stored = load_logged(db).await?;
    store.restore(stored);
    let before = store.snapshot();
    let mut rx = store.subscribe();
    let mut summary =
        crate::source::import_paths(&store, paths, crate::source::Apply::Atomic).await?;
    let mut batch = BTreeMap::new();
    let mut overflowed = false;
    loop {
        match rx.try_recv() {
            Ok(c) => note(&mut batch, &c),
            Err(broadcast::error::TryRecvError::Lagged(_)) => overflowed = true,
            Err(_) => break,
        }
    }
    // Files may define the same object differently; count (and write) only net changes.
    let read = summary.changed + summary.unchanged;
    batch.retain(|key, after| !same_stored(before.get_key(key), after.as_ref()));
    summary.changed = batch.len();
    summary.unchanged = read.saturating_sub(batch.len());
    if overflowed {
        rewrite_all(db, &store).await?;
    } else {
        write(db, &batch).await?;
    }
    Ok(summary)
}

/// Equal as stored, apart from the bookkeeping a round of changes bumps.
fn same_stored(before: Option<&Arc<Resource>>, after: Option<&Arc<Resource>>) -> bool {
    let plain = |r: &Resource| {
        let mut v = r.to_value();
        if let Some(meta) = v.get_mut("metadata").and_then(|m| m.as_object_mut()) {
            meta.remove("resourceVersion");
            meta.remove("generation");
        }
        v
    };
    match (before, after) {
        (None, None) => true,
        (Some(a), Some(b)) => plain(a) == plain(b),
        _ => false,
    }
}
