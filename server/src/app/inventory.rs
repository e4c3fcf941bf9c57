//! The application inventory's long-lived parts, started when it is on: the kept pause followed,
//! its history written, its gauge kept current, the pushes (with `HOSSTED_API_URL`), and on the
//! embedded source the cluster UUIDs kept in the database.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::config::ServeConfig;
use crate::http::Metrics;
use crate::inventory::Inventory;

/// Start the parts of `inventory` (fed by `feed`).
pub(super) fn start(
    cfg: &ServeConfig,
    inventory: &Arc<Inventory>,
    feed: &crate::source::Source,
    history: &Arc<crate::history::History>,
    metrics: &Metrics,
    stop: &watch::Receiver<bool>,
) {
    let db = || {
        let h = history.clone();
        move || h.db()
    };
    if let crate::source::Source::Embedded(_) = feed {
        tokio::spawn(keep_cluster_uuids(
            inventory.clone(),
            history.clone(),
            stop.clone(),
        ));
    }
    // The pause an admin kept (at start-up, and as other replicas change it).
    tokio::spawn(crate::inventory::pause::follow(
        inventory.clone(),
        db(),
        stop.clone(),
    ));
    drop(crate::history::applications::spawn(
        inventory.clone(),
        history.clone(),
        stop.clone(),
    ));
    tokio::spawn(
        metrics
            .inventory
            .clone()
            .follow(inventory.clone(), stop.clone()),
    );
    if let Some(push) = cfg.push_settings() {
        let pusher = crate::inventory::push::Pusher {
            inventory: inventory.clone(),
            leader: history.leader.clone(),
            db: Box::new(db()),
            counter: metrics.inventory.pushes.clone(),
        };
        tokio::spawn(pusher.run(push, stop.clone()));
    }
}

/// The embedded source's cluster UUIDs: each datacenter the inventory holds gets one from the
/// database (made there once; while the database is away, asked again every 5 s).
async fn keep_cluster_uuids(
    inventory: Arc<crate::inventory::Inventory>,
    history: Arc<crate::history::History>,
    mut stop: watch::Receiver<bool>,
) {
    let mut changed = inventory.watch();
    loop {
        let s = inventory.snapshot();
        let datacenters: std::collections::BTreeSet<crate::model::Datacenter> = s
            .namespaces
            .keys()
            .cloned()
            .chain(s.apps.keys().map(|k| k.0.clone()))
            .collect();
        let mut waiting = false;
        for dc in datacenters {
            if inventory.cluster_uuid(&dc).is_some() {
                continue;
            }
            let fresh = uuid::Uuid::new_v4().to_string();
            match history.db() {
                Some(db) => match crate::db::inventory::cluster_uuid(&db, dc.key(), &fresh).await {
                    Ok(uuid) => inventory.set_cluster_uuid(&dc, uuid),
                    Err(e) => {
                        waiting = true;
                        tracing::warn!(datacenter = %dc, error = %e, "application inventory: the cluster UUID cannot be kept in the database yet");
                    }
                },
                // The database is away: asked again shortly.
                None => waiting = true,
            }
        }
        tokio::select! {
            _ = changed.changed() => {}
            _ = tokio::time::sleep(Duration::from_secs(5)), if waiting => {}
            _ = stop.wait_for(|s| *s) => return,
        }
    }
}
