//! The applications' history in the event log: a release installed (after its datacenter's first
//! lists: what was there before is not news), at a new revision, with a new health, or removed.
//! Kind `Application`, the release's namespace and name, event types `application.installed`,
//! `application.revision`, `application.health`, `application.removed`.
//!
//! A row's identity is the application and the transition (revision and health before and
//! after), so replicas writing the same change write one row, and a restart writes nothing
//! again. (The same transition made twice, e.g. a pod that fails, recovers and fails again at
//! one revision, is one row.)

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tokio::sync::{broadcast, watch};

use super::{EventRow, History, now_ms};
use crate::inventory::{AppChange, AppEntry, Inventory};

/// Rows kept while the database is away; the oldest go first.
const HOLD: usize = 10_000;

/// The kind name of application events.
pub const KIND: &str = "Application";

/// The event-log identity of an application (`uid`): its namespace and name.
pub fn uid(a: &AppEntry) -> String {
    format!(
        "application:{}/{}",
        a.app.release.namespace, a.app.release.name
    )
}

fn health(a: &AppEntry) -> String {
    a.app.health.label().to_string()
}

/// The row a change makes, if it is one the log keeps: none from the datacenter's first lists
/// (what they find was there before, not news).
pub fn row(c: &AppChange, at_ms: i64) -> Option<EventRow> {
    if c.initial {
        return None;
    }
    let (change, event_type, now) = match (&c.before, &c.after) {
        (None, Some(a)) => ("ADDED", "application.installed", a),
        (Some(b), None) => ("DELETED", "application.removed", b),
        (Some(b), Some(a)) if b.app.release.revision != a.app.release.revision => {
            ("MODIFIED", "application.revision", a)
        }
        (Some(b), Some(a)) if b.app.health != a.app.health => ("MODIFIED", "application.health", a),
        _ => return None,
    };
    let mut diff = Vec::new();
    if let (Some(b), Some(a)) = (&c.before, &c.after) {
        if b.app.release.revision != a.app.release.revision {
            diff.push(json!({"path": "/revision", "before": b.app.release.revision, "after": a.app.release.revision}));
            diff.push(json!({"path": "/chartVersion", "before": b.app.release.chart_version, "after": a.app.release.chart_version}));
        }
        if b.app.health != a.app.health {
            diff.push(json!({"path": "/health", "before": health(b), "after": health(a)}));
        }
    }
    let r = &now.app.release;
    Some(EventRow {
        at_ms,
        datacenter: now.datacenter.key().to_string(),
        seq: c.generation,
        kind: KIND,
        namespace: r.namespace.clone(),
        name: r.name.clone(),
        uid: uid(now),
        // The transition (from, to) and the state it led to: the same change seen by several
        // replicas is one row, and the same transition made again later (a pod flapping) is a
        // new one.
        resource_version: format!(
            "{}>{}:{}@{}",
            c.before.as_deref().map_or_else(String::new, |b| format!(
                "{}:{}",
                b.app.release.revision,
                health(b)
            )),
            r.revision,
            health(now),
            now.state_digest()
        ),
        change,
        event_type: event_type.to_string(),
        phase_before: c.before.as_deref().map(health),
        phase_after: c.after.as_deref().map(health),
        diff: serde_json::Value::Array(diff),
        dropped: None,
        actor: None,
    })
}

/// Write the applications' history until `stop` turns true.
pub fn spawn(
    inventory: Arc<Inventory>,
    history: Arc<History>,
    mut stop: watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut changes = inventory.changes();
        let mut held: VecDeque<EventRow> = VecDeque::new();
        loop {
            let got = tokio::select! {
                c = changes.recv() => Some(c),
                _ = tokio::time::sleep(Duration::from_secs(5)), if !held.is_empty() => None,
                _ = stop.wait_for(|s| *s) => return,
            };
            let mut take = |c: &AppChange| {
                if let Some(r) = row(c, now_ms()) {
                    if held.len() >= HOLD {
                        held.pop_front();
                    }
                    held.push_back(r);
                }
            };
            match got {
                Some(Ok(c)) => take(&c),
                Some(Err(broadcast::error::RecvError::Lagged(n))) => {
                    tracing::warn!(
                        missed = n,
                        "application history: changes missed (the writer fell behind)"
                    );
                }
                Some(Err(broadcast::error::RecvError::Closed)) => return,
                None => {}
            }
            // What else has come meanwhile, in one write.
            while let Ok(c) = changes.try_recv() {
                take(&c);
            }
            if held.is_empty() {
                continue;
            }
            let Some(db) = history.db() else {
                continue;
            };
            let rows: Vec<EventRow> = held.iter().cloned().collect();
            match super::writer::insert(&db, &rows).await {
                Ok(_) => held.clear(),
                Err(e) => {
                    tracing::warn!(error = %e, rows = rows.len(), "application history not written yet")
                }
            }
        }
    })
}
