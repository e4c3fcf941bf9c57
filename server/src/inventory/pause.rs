//! The pause of the pushes (`setApplicationsPaused`, the design's `stop: true`), kept in the
//! database so that a restart and every replica hold it: an admin's pause is written there first
//! (refused, with nothing changed, while the database is away), then taken by this replica;
//! the others take it from the database (PostgreSQL tells them at once). Until an admin sets
//! one, `APPLICATIONS_PAUSED` holds.

use std::sync::Arc;

use tokio::sync::watch;

use super::{Inventory, Pause};
use crate::db::inventory::{PAUSE_CHANNEL, StoredPause};
use crate::db::{Db, DbError};

fn of(stored: StoredPause) -> Pause {
    Pause {
        paused: stored.paused,
        set: Some((stored.changed_by, stored.changed_ms)),
    }
}

/// Keep `paused` (set by `by`) in the database, then take it here.
pub async fn set(inventory: &Inventory, db: &Db, paused: bool, by: &str) -> Result<Pause, DbError> {
    let stored = StoredPause {
        paused,
        changed_by: by.to_string(),
        changed_ms: crate::clock::now_ms(),
    };
    crate::db::inventory::set_pause(db, &stored).await?;
    let pause = of(stored);
    let was = inventory.set_pause(pause.clone());
    if was.paused != paused {
        tracing::info!(
            paused,
            by,
            "application inventory pushes {}",
            if paused { "stopped" } else { "resumed" }
        );
    }
    Ok(pause)
}

/// The pause kept in the database now (None: none kept, or the database cannot say), taken
/// here when it differs. The pusher asks before each push: a pause another replica kept a moment
/// ago holds even before its announcement arrives.
pub async fn current(inventory: &Inventory, db: &Db) -> Option<Pause> {
    match crate::db::inventory::pause(db).await {
        Ok(Some(stored)) => {
            let pause = of(stored);
            take(inventory, &pause);
            Some(pause)
        }
        Ok(None) => None,
        Err(e) => {
            tracing::warn!(error = %e, "application inventory: the kept pause cannot be read");
            None
        }
    }
}

fn take(inventory: &Inventory, pause: &Pause) {
    if inventory.pause() != *pause {
        tracing::info!(
            paused = pause.paused,
            by = pause.set.as_ref().map(|(by, _)| by.as_str()),
            "application inventory pushes {} (kept in the database)",
            if pause.paused { "stopped" } else { "resumed" }
        );
        inventory.set_pause(pause.clone());
    }
}

/// Take the kept pause at start-up and every change of it another replica makes, until `stop`.
pub async fn follow(
    inventory: Arc<Inventory>,
    db: impl Fn() -> Option<Db>,
    stop: watch::Receiver<bool>,
) {
    let read = |db: Db, _: Option<String>| {
        let inventory = inventory.clone();
        async move {
            if let Some(stored) = crate::db::inventory::pause(&db).await? {
                take(&inventory, &of(stored));
            }
            Ok(())
        }
    };
    crate::db::follow::follow(db, PAUSE_CHANNEL, "the inventory's pause", read, stop).await;
}
