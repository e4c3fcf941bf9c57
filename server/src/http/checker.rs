//! The health check that runs on its own every `HEALTH_CHECK_INTERVAL`: it asks the database
//! (`/health`'s `checks.database` is its last answer, or the last use's), judges every operator,
//! and announces each operator whose state changed since the check before: a log line, the
//! webhook event `infrastructure.operator.status` with `{operator, status}`, a count in
//! `vitistack_operator_events_processed_total`, and on Kubernetes an Event on the datacenter's
//! Vitistack (`Warning` when it is no longer healthy, `Normal` when it is again). Only the
//! replica that leads announces, so several replicas send each change once.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use serde_json::json;

use super::AppState;
use crate::change::events::{EventWriter, Note};
use crate::domain::operators::{OperatorHealth, OperatorState};
use crate::history::EventRow;
use crate::history::webhooks::OPERATOR_KIND;
use crate::model::Kind;
use crate::store::ObjectKey;

/// The event type the old aggregator sent for an operator's change of state.
pub const OPERATOR_STATUS: &str = "infrastructure.operator.status";

/// What the checks found last, and how many changes they announced.
#[derive(Debug, Default)]
pub struct Checks {
    /// Each operator's state at the last check; None before the first.
    last: Mutex<Option<BTreeMap<String, OperatorState>>>,
    /// Changes of an operator's state announced since start.
    announced: AtomicU64,
    /// Checks made since start.
    made: AtomicU64,
}

impl Checks {
    /// Changes of an operator's state announced since start.
    pub fn announced(&self) -> u64 {
        self.announced.load(Ordering::Relaxed)
    }

    /// Checks made since start.
    pub fn made(&self) -> u64 {
        self.made.load(Ordering::Relaxed)
    }

    /// Remember this check's states; the operators whose state differs from the last check's
    /// (none at the first: there is nothing to compare with).
    fn changed<'o>(
        &self,
        now: &'o [OperatorHealth],
    ) -> Vec<(&'o OperatorHealth, Option<OperatorState>)> {
        let states: BTreeMap<String, OperatorState> =
            now.iter().map(|o| (o.operator.clone(), o.status)).collect();
        let before = self.last.lock().replace(states);
        let Some(before) = before else {
            return Vec::new();
        };
        now.iter()
            .filter_map(|o| match before.get(&o.operator) {
                Some(b) if *b == o.status => None,
                b => Some((o, b.copied())),
            })
            .collect()
    }
}

/// Check every `interval` until `stop` turns true.
pub async fn run(
    app: AppState,
    interval: Duration,
    events: Option<EventWriter>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    loop {
        check(&app, events.as_ref()).await;
        tokio::select! {
            _ = tokio::time::sleep(interval) => {}
            _ = stop.wait_for(|s| *s) => return,
        }
    }
}

/// One check.
async fn check(app: &AppState, events: Option<&EventWriter>) {
    if let Some(db) = app.history.as_ref().and_then(|h| h.db()) {
        match tokio::time::timeout(Duration::from_secs(5), db.ping()).await {
            Ok(Ok(())) => app.db_health.ok(),
            Ok(Err(e)) => app.db_health.failed(&e),
            Err(_) => app
                .db_health
                .failed(&crate::db::DbError::Query(sqlx::Error::PoolTimedOut)),
        }
    }
    let operators = app.operators();
    let changed = app.checks.changed(&operators);
    app.checks.made.fetch_add(1, Ordering::Relaxed);
    let leading = app.history.as_ref().is_none_or(|h| h.leader.leading());
    for (o, before) in changed {
        announce(app, events, o, before, leading);
    }
}

/// Tell whoever listens that `o` is now in its state (it was `before`).
fn announce(
    app: &AppState,
    events: Option<&EventWriter>,
    o: &OperatorHealth,
    before: Option<OperatorState>,
    leading: bool,
) {
    let (from, to) = (
        before.map_or("unknown", OperatorState::name),
        o.status.name(),
    );
    let reason = o.reason.clone().unwrap_or_default();
    if o.status == OperatorState::Healthy {
        tracing::info!(operator = o.operator, from, to, "operator state changed");
    } else {
        tracing::warn!(
            operator = o.operator,
            from,
            to,
            reason,
            "operator state changed"
        );
    }
    if !leading {
        return;
    }
    app.checks.announced.fetch_add(1, Ordering::Relaxed);
    let at_ms = crate::clock::now_ms();
    if let Some(hooks) = app.history.as_ref().and_then(|h| h.webhooks.get()) {
        hooks.offer(&EventRow {
            at_ms,
            datacenter: String::new(),
            seq: app.store.snapshot().seq(),
            kind: OPERATOR_KIND,
            namespace: String::new(),
            name: o.operator.clone(),
            uid: format!("operator/{}", o.operator),
            resource_version: at_ms.to_string(),
            change: "MODIFIED",
            event_type: OPERATOR_STATUS.into(),
            phase_before: Some(from.to_string()),
            phase_after: Some(to.to_string()),
            diff: json!([
                {"path": "/status", "before": from, "after": to},
                {"path": "/reason", "before": null, "after": o.reason},
            ]),
            dropped: None,
            actor: None,
        });
    }
    let Some(events) = events else {
        return;
    };
    // The Event goes on the datacenter's Vitistack (the one VITISTACKCRDNAME names, else the
    // first): an operator is not an object of its own.
    let snap = app.store.snapshot();
    let Some(vitistack) = snap
        .get(
            &Default::default(),
            Kind::Vitistack,
            "",
            &app.vitistack_name,
        )
        .or_else(|| snap.list(Kind::Vitistack).next())
    else {
        tracing::debug!(
            operator = o.operator,
            "no Vitistack to write the operator's Event on"
        );
        return;
    };
    let healthy = o.status == OperatorState::Healthy;
    let mut text = format!("{} is {to}", program(&o.operator));
    if !reason.is_empty() {
        text.push_str(": ");
        text.push_str(&reason);
    }
    // An Event's note holds at most 1 kB.
    if text.len() > 1000 {
        let mut end = 1000;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
    events.publish(
        &ObjectKey::of(vitistack),
        Kind::Vitistack.versions()[0],
        Some(vitistack.uid().to_string()).filter(|u| !u.is_empty()),
        Note {
            warning: !healthy,
            reason: match o.status {
                OperatorState::Healthy => "OperatorHealthy",
                OperatorState::Unhealthy => "OperatorUnhealthy",
                OperatorState::Unreachable => "OperatorUnreachable",
            }
            .into(),
            action: "Check".into(),
            text,
        },
    );
}

/// What an operator is called where it runs (`kea-operator`).
fn program(name: &str) -> &'static str {
    crate::domain::operators::Operator::ALL
        .iter()
        .find(|o| o.name() == name)
        .map_or("an operator", |o| o.program())
}
