//! The push to the inventory API (the hossted design's): each application's document (an array
//! of one `app_api_info` + `app_info`, the design's field names) is POSTed to `HOSSTED_API_URL`
//! with `Authorization: Bearer HOSSTED_AUTH_TOKEN` when its revision or its pods' readiness
//! changed, never on another change (a label). Only while this replica leads and the pushes are
//! not paused. Each push is claimed in the database under a fingerprint of what it says: a
//! fingerprint delivered once is not sent again, by any replica or after a restart; attempts
//! are retried like webhooks and their outcome recorded.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::{broadcast, watch};

use super::{AppEntry, Inventory};
use crate::db::Db;
use crate::db::inventory::{PushAttempt, claim_push, record_push};
use crate::leader::Leader;
use crate::outbound::{endpoint_label, error_chain, scrub};

/// Where and how to push.
#[derive(Clone)]
pub struct PushSettings {
    /// `HOSSTED_API_URL` (a secret: logged by scheme and host only).
    pub url: String,
    /// `HOSSTED_AUTH_TOKEN`; never logged.
    pub token: Option<String>,
    /// Time per attempt.
    pub timeout: Duration,
    /// Attempts before a push is marked failed.
    pub max_attempts: u32,
    /// First retry delay; doubles up to a minute.
    pub first_retry: Duration,
}

impl std::fmt::Debug for PushSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PushSettings")
            .field("url", &endpoint_label(&self.url))
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

/// What the push needs besides its settings.
pub struct Pusher {
    pub inventory: Arc<Inventory>,
    pub leader: Leader,
    /// The database, when it is there (pushes go on unrecorded while it is away).
    pub db: Box<dyn Fn() -> Option<Db> + Send + Sync>,
    /// `vitistack_inventory_pushes_total{outcome}`.
    pub counter: prometheus::IntCounterVec,
}

/// What an application's push says, as a short digest: its revision and which pods are ready.
pub fn fingerprint(a: &AppEntry) -> String {
    let (revision, mut pods) = a.readiness();
    pods.sort_unstable();
    let mut text = format!("{revision}");
    for (name, ready) in pods {
        text.push_str(&format!("|{name}={ready}"));
    }
    super::short_digest(&text)
}

/// The body pushed for `a`: the design's array, with this one application.
pub fn body(a: &AppEntry, cluster_uuid: &str) -> Value {
    Value::Array(vec![crate::domain::applications::document(
        &a.app,
        cluster_uuid,
        a.app_uuid.as_deref().unwrap_or_default(),
    )])
}

impl Pusher {
    /// Push until `stop` turns true.
    pub async fn run(self, settings: PushSettings, mut stop: watch::Receiver<bool>) {
        let client = match reqwest::Client::builder().timeout(settings.timeout).build() {
            Ok(c) => c,
            Err(e) => {
                tracing::error!(error = %e, "application inventory: no HTTP client; nothing is pushed");
                return;
            }
        };
        tracing::info!(endpoint = %endpoint_label(&settings.url), "application inventory: pushing changes to the inventory API");
        let mut leading = self.leader.watch();
        let mut paused = self.inventory.watch_paused();
        let mut progress = self.inventory.watch_progress();
        loop {
            // Wait for a turn: leading, and not paused.
            loop {
                let turn = *leading.borrow_and_update() && !*paused.borrow_and_update();
                if turn {
                    break;
                }
                tokio::select! {
                    _ = moved(&mut leading) => {}
                    _ = moved(&mut paused) => {}
                    _ = stop.wait_for(|s| *s) => return,
                }
            }
            // Listening before reading: a change after the scan is not missed.
            let mut changes = self.inventory.changes();
            let snap = self.inventory.snapshot();
            for a in snap.apps.values() {
                self.push(&client, &settings, a).await;
            }
            // Then each change that says something new; a rescan after a lag, a newly known
            // cluster UUID (what waited for it), or a pause or step-down.
            loop {
                let next = tokio::select! {
                    c = changes.recv() => Some(c),
                    _ = moved(&mut progress) => None,
                    _ = moved(&mut leading) => None,
                    _ = moved(&mut paused) => None,
                    _ = stop.wait_for(|s| *s) => return,
                };
                match next {
                    Some(Ok(c)) => {
                        if let Some(a) = c.after.as_ref().filter(|_| c.pushable()) {
                            self.push(&client, &settings, a).await;
                        }
                    }
                    Some(Err(broadcast::error::RecvError::Closed)) => return,
                    // Missed changes (a lag), a new cluster UUID, a datacenter synced, a pause or
                    // a step-down: look at everything again.
                    Some(Err(broadcast::error::RecvError::Lagged(_))) | None => break,
                }
            }
        }
    }

    /// Push `a` unless what it says was delivered.
    async fn push(&self, client: &reqwest::Client, settings: &PushSettings, a: &AppEntry) {
        let count = |outcome: &str| self.counter.with_label_values(&[outcome]).inc();
        // Sent once the cluster UUID is known and the datacenter's first lists are all in (not a
        // state half listed); the loop scans again then.
        if !self.inventory.synced(&a.datacenter) {
            return;
        }
        let Some(cluster_uuid) = self.inventory.cluster_uuid(&a.datacenter) else {
            return;
        };
        let fp = fingerprint(a);
        let r = &a.app.release;
        let key = (a.datacenter.key(), r.namespace.as_str(), r.name.as_str());
        let db = (self.db)();
        if let Some(db) = &db {
            match claim_push(db, key.0, key.1, key.2, &fp, crate::clock::now_ms()).await {
                Ok(true) => {}
                Ok(false) => return,
                Err(e) => {
                    tracing::warn!(error = %e, "application inventory: push state not stored")
                }
            }
        }
        let body = body(a, &cluster_uuid).to_string();
        let label = endpoint_label(&settings.url);
        let mut backoff = crate::retry::Backoff::new(settings.first_retry, Duration::from_secs(60));
        let attempts = settings.max_attempts.max(1);
        for attempt in 1..=attempts {
            // A turn held from the send to its record: a replica stepping down gives the Lease up
            // only after it, so its successor finds the push recorded. Paused or stepped down:
            // the claim stays pending, and the next scan sends it.
            let Some(turn) = self.leader.turn().await else {
                return;
            };
            if self.inventory.paused() {
                return;
            }
            let mut req = client
                .post(&settings.url)
                .header("Content-Type", "application/json")
                .body(body.clone());
            if let Some(token) = &settings.token {
                req = req.bearer_auth(token);
            }
            let (status, error) = match req.send().await {
                Ok(res) if res.status().is_success() => (Some(res.status().as_u16()), None),
                Ok(res) => (
                    Some(res.status().as_u16()),
                    Some(format!("answered {}", res.status())),
                ),
                Err(e) => (
                    None,
                    Some(scrub(&error_chain(&e.without_url()), &settings.url, &label)),
                ),
            };
            let state = match (&error, attempt == attempts) {
                (None, _) => "delivered",
                (Some(_), true) => "failed",
                (Some(_), false) => "pending",
            };
            count(match state {
                "delivered" => "delivered",
                "failed" => "failed",
                _ => "retried",
            });
            if let Some(db) = &db {
                let at = PushAttempt {
                    state,
                    attempts: attempt,
                    status,
                    error: error.as_deref(),
                };
                if let Err(e) = record_push(db, key, &fp, at, crate::clock::now_ms()).await {
                    tracing::warn!(error = %e, "application inventory: push state not stored");
                }
            }
            drop(turn);
            match error {
                None => {
                    tracing::debug!(
                        namespace = key.1,
                        name = key.2,
                        revision = r.revision,
                        "application inventory: pushed"
                    );
                    return;
                }
                Some(e) if state == "failed" => {
                    tracing::warn!(endpoint = %label, namespace = key.1, name = key.2, attempts = attempt, error = %e, "application inventory: push failed");
                    return;
                }
                Some(_) => tokio::time::sleep(backoff.delay()).await,
            }
        }
    }
}

/// Until `w` changes; never when its sender is gone (a process without leader election leads
/// for good: its leadership never changes).
async fn moved<T>(w: &mut watch::Receiver<T>) {
    if w.changed().await.is_err() {
        std::future::pending::<()>().await;
    }
}
