//! The push to the inventory API (the hossted design's): each application's document (an array
//! of one `app_api_info` + `app_info`, the design's field names) is POSTed to `HOSSTED_API_URL`
//! with `Authorization: Bearer HOSSTED_AUTH_TOKEN` when its revision or its pods' readiness
//! changed, never on another change (a label). Only while this replica leads and the pushes are
//! not paused. Each push is claimed in the database under a fingerprint of what it says: a
//! fingerprint delivered once is not sent again, by any replica or after a restart; attempts
//! are retried like webhooks and their outcome recorded.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::{broadcast, watch};

use super::{AppEntry, AppKey, Inventory};
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
    /// `HOSSTED_EMAIL_ID`: the account's e-mail, sent as `email_id` (empty when unset).
    pub email_id: String,
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

/// The body pushed for `a`: the design's array, with this one application (each application is
/// pushed when it changes, not the whole inventory: see the README).
pub fn body(a: &AppEntry, cluster_uuid: &str, email_id: &str) -> Value {
    Value::Array(vec![crate::domain::applications::document(
        &a.app,
        crate::domain::applications::DocumentIds {
            cluster_uuid,
            app_uuid: a.app_uuid.as_deref().unwrap_or_default(),
            email_id,
        },
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
        // What this process delivered last per application: a state pushed on a scan is not
        // sent again by the change that made it, even while the database is away.
        let mut sent: HashMap<AppKey, String> = HashMap::new();
        loop {
            // Wait for a turn: leading, and not paused.
            loop {
                let turn = *leading.borrow_and_update() && !paused.borrow_and_update().paused;
                if turn {
                    break;
                }
                tokio::select! {
                    _ = moved(&mut leading) => {}
                    _ = moved(&mut paused) => {}
                    _ = stop.wait_for(|s| *s) => return,
                }
            }
            // Another replica may have pushed while this one did not lead.
            sent.clear();
            // Listening before reading: a change after the scan is not missed.
            let mut changes = self.inventory.changes();
            let snap = self.inventory.snapshot();
            for key in snap.apps.keys() {
                self.push(&client, &settings, key, &mut sent).await;
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
                    // A change made while its datacenter's first lists were coming in is not
                    // pushed: the list that completes them moves `progress`, and the rescan then
                    // pushes the whole state.
                    Some(Ok(c)) if c.initial || !c.pushable() => {}
                    Some(Ok(c)) => {
                        if let Some(a) = &c.after {
                            self.push(&client, &settings, &a.key(), &mut sent).await;
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

    /// Push application `key` as it is now, unless what it says was delivered.
    ///
    /// The state pushed is read here, not taken from the change that asked for the push: a
    /// change is handled after later ones were made (this loop runs behind the watches), and a
    /// change made while the datacenter's lists were still coming in holds a half-listed state
    /// (a release without its pods) even when the datacenter is synced by the time it is read.
    async fn push(
        &self,
        client: &reqwest::Client,
        settings: &PushSettings,
        key: &AppKey,
        sent: &mut HashMap<AppKey, String>,
    ) {
        let count = |outcome: &str| self.counter.with_label_values(&[outcome]).inc();
        // Sent once the cluster UUID is known and the datacenter's first lists are all in (not a
        // state half listed); the loop scans again then. `synced` is asked before the state is
        // read: the inventory publishes a list's state before it counts the list as done.
        if !self.inventory.synced(&key.0) {
            return;
        }
        let Some(cluster_uuid) = self.inventory.cluster_uuid(&key.0) else {
            return;
        };
        let Some(a) = self.inventory.snapshot().apps.get(key).cloned() else {
            return;
        };
        let a = &*a;
        let fp = fingerprint(a);
        if sent.get(key) == Some(&fp) {
            return;
        }
        let r = &a.app.release;
        let row = (a.datacenter.key(), r.namespace.as_str(), r.name.as_str());
        let db = (self.db)();
        if let Some(db) = &db {
            match claim_push(db, row.0, row.1, row.2, &fp, crate::clock::now_ms()).await {
                Ok(true) => {}
                Ok(false) => return,
                Err(e) => {
                    tracing::warn!(error = %e, "application inventory: push state not stored")
                }
            }
        }
        let body = body(a, &cluster_uuid, &settings.email_id).to_string();
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
            // A pause kept by another replica a moment ago holds before its announcement
            // arrives: the database is asked.
            if let Some(db) = &db {
                super::pause::current(&self.inventory, db).await;
            }
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
                if let Err(e) = record_push(db, row, &fp, at, crate::clock::now_ms()).await {
                    tracing::warn!(error = %e, "application inventory: push state not stored");
                }
            }
            drop(turn);
            match error {
                None => {
                    sent.insert(key.clone(), fp);
                    tracing::debug!(
                        namespace = row.1,
                        name = row.2,
                        revision = r.revision,
                        "application inventory: pushed"
                    );
                    return;
                }
                Some(e) if state == "failed" => {
                    tracing::warn!(endpoint = %label, namespace = row.1, name = row.2, attempts = attempt, error = %e, "application inventory: push failed");
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
