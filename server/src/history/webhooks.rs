//! Webhooks: configured endpoints receive the old operator's event types as JSON, signed with
//! HMAC-SHA256, with a timeout per attempt, retries with backoff, and the delivery state stored
//! in `webhook_deliveries`.
//!
//! Each endpoint has its own task and its own bounded queue, so a receiver that is down or slow
//! holds back only its own deliveries (in order); nothing else waits for it. When its queue is
//! full, further events for it are dropped and counted (`outcome="dropped"`).

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use hmac::{Hmac, KeyInit, Mac};
use serde_json::{Value, json};
use sha2::Sha256;
use tokio::sync::mpsc;

use super::{EventRow, History, now_ms};
use crate::db::{Db, DbError, with_pool};

/// The event types sent by default (the old operator's).
pub const DEFAULT_EVENTS: [&str; 5] = [
    "infrastructure.machine.created",
    "infrastructure.machine.deleted",
    "infrastructure.cluster.updated",
    "infrastructure.operator.status",
    "infrastructure.network.configured",
];

/// Header carrying `sha256=<hex HMAC of the body>`.
pub const SIGNATURE_HEADER: &str = "X-Vitistack-Signature";

/// Webhook settings.
#[derive(Clone)]
pub struct WebhookSettings {
    /// Endpoints (`WEBHOOK_URLS`).
    pub urls: Vec<String>,
    /// HMAC key (`WEBHOOK_SECRET`); never logged.
    pub secret: Option<String>,
    /// Event types sent (`WEBHOOK_EVENTS`).
    pub events: Vec<String>,
    /// Time per attempt (`WEBHOOK_TIMEOUT_SECONDS`).
    pub timeout: Duration,
    /// Attempts per event before it is marked failed (`WEBHOOK_MAX_ATTEMPTS`).
    pub max_attempts: u32,
    /// First retry delay; doubles up to a minute (`WEBHOOK_RETRY_MS`).
    pub first_retry: Duration,
    /// Events queued per endpoint (`WEBHOOK_QUEUE`).
    pub queue: usize,
}

impl std::fmt::Debug for WebhookSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebhookSettings")
            .field("urls", &self.urls.len())
            .field("secret", &self.secret.as_ref().map(|_| "<redacted>"))
            .field("events", &self.events)
            .finish()
    }
}

pub use crate::outbound::endpoint_label;
use crate::outbound::{error_chain, scrub};

/// The id an endpoint is recorded under in `webhook_deliveries`: its scheme and host and a short
/// digest of the whole URL (stable across restarts, telling endpoints on one host apart, and
/// revealing nothing of the path or query).
pub fn endpoint_id(url: &str) -> String {
    use sha2::Digest;
    let digest = Sha256::digest(url.as_bytes());
    let mut id = endpoint_label(url);
    id.push('#');
    for b in &digest[..6] {
        id.push_str(&format!("{b:02x}"));
    }
    id
}

/// The body sent for an event. An operator's change of state (kind `Operator`) also says
/// `{operator, status}` and why, as the old operator's `infrastructure.operator.status` did.
pub fn payload(row: &EventRow) -> Value {
    let mut body = object_payload(row);
    if row.kind == OPERATOR_KIND {
        body["operator"] = json!(row.name);
        body["status"] = json!(row.phase_after);
        body["previousStatus"] = json!(row.phase_before);
        body["reason"] = row
            .diff
            .as_array()
            .and_then(|d| d.iter().find(|e| e["path"] == "/reason"))
            .map_or(Value::Null, |e| e["after"].clone());
    }
    body
}

/// The `kind` of an operator's event row (an operator is not a Kubernetes kind).
pub const OPERATOR_KIND: &str = "Operator";

fn object_payload(row: &EventRow) -> Value {
    json!({
        "type": row.event_type,
        "time": super::rfc3339(row.at_ms),
        "sequence": row.seq,
        "kind": row.kind,
        "namespace": row.namespace,
        "name": row.name,
        "uid": row.uid,
        "resourceVersion": row.resource_version,
        "change": row.change,
        "phaseBefore": row.phase_before,
        "phaseAfter": row.phase_after,
        "diff": row.diff,
    })
}

/// `sha256=<hex>` of `body` under `secret`.
pub fn signature(secret: &str, body: &[u8]) -> String {
    // HMAC accepts keys of any length.
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(secret.as_bytes())
        .unwrap_or_else(|_| unreachable!("HMAC takes any key length"));
    mac.update(body);
    let bytes = mac.finalize().into_bytes();
    let mut hex = String::with_capacity(7 + bytes.len() * 2);
    hex.push_str("sha256=");
    for b in bytes {
        hex.push_str(&format!("{b:02x}"));
    }
    hex
}

/// Events of the wanted types seen while another replica leads, oldest first (by the store's
/// sequence). When this replica takes the Lease over they are offered for delivery: what the
/// previous holder delivered is refused by its claim, and what it had not sent yet (its crash
/// came before, or the takeover took a while) is sent now, so a change between a holder's end
/// and the takeover is not lost.
struct Waiting {
    rows: parking_lot::Mutex<VecDeque<Arc<EventRow>>>,
    /// Rows kept at most (`WEBHOOK_QUEUE`); the oldest go first.
    hold: usize,
}

impl Waiting {
    /// Keep `row` in sequence order (a row handed back by a delivery task is older than the ones
    /// offered after the step-down).
    fn keep(rows: &mut VecDeque<Arc<EventRow>>, hold: usize, row: Arc<EventRow>) {
        let at = rows.partition_point(|r| r.seq <= row.seq);
        rows.insert(at, row);
        while rows.len() > hold {
            rows.pop_front();
        }
    }
}

/// The senders feeding each endpoint's task.
pub struct Webhooks {
    events: Vec<String>,
    endpoints: Vec<mpsc::Sender<Arc<EventRow>>>,
    history: Arc<History>,
    waiting: Arc<Waiting>,
}

impl std::fmt::Debug for Webhooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Webhooks")
            .field("endpoints", &self.endpoints.len())
            .finish()
    }
}

impl Webhooks {
    /// Start one delivery task per endpoint (None when no endpoint is configured).
    pub fn start(settings: &WebhookSettings, history: Arc<History>) -> Option<Arc<Webhooks>> {
        if settings.urls.is_empty() {
            return None;
        }
        if settings.secret.is_none() {
            tracing::warn!("WEBHOOK_URLS without WEBHOOK_SECRET: deliveries are not signed");
        }
        let client = match reqwest::Client::builder().timeout(settings.timeout).build() {
            Ok(c) => c,
            Err(e) => {
                tracing::error!(error = %e, "webhooks disabled: no HTTP client");
                return None;
            }
        };
        let waiting = Arc::new(Waiting {
            rows: parking_lot::Mutex::new(VecDeque::new()),
            hold: settings.queue.max(1),
        });
        let mut endpoints = Vec::new();
        for url in &settings.urls {
            let (tx, rx) = mpsc::channel(settings.queue.max(1));
            tokio::spawn(deliver_all(
                Endpoint::new(url),
                rx,
                client.clone(),
                settings.clone(),
                history.clone(),
                waiting.clone(),
            ));
            endpoints.push(tx);
        }
        let hooks = Arc::new(Webhooks {
            events: settings.events.clone(),
            endpoints,
            history: history.clone(),
            waiting,
        });
        tokio::spawn(take_over(Arc::downgrade(&hooks), history.leader.watch()));
        Some(hooks)
    }

    /// Hand an event to every endpoint that wants its type (never waits). Only the leading
    /// replica sends (every replica sees every event); the others keep it for a takeover.
    pub fn offer(&self, row: &EventRow) {
        if !self.events.contains(&row.event_type) {
            return;
        }
        let row = Arc::new(row.clone());
        // Leadership is read under the lock that `release_waiting` takes after it changed: a
        // row is either sent now or kept and sent by the takeover, never left behind.
        let mut waiting = self.waiting.rows.lock();
        if self.history.leader.leading() {
            self.send(row);
        } else {
            Waiting::keep(&mut waiting, self.waiting.hold, row);
        }
    }

    fn send(&self, row: Arc<EventRow>) {
        for tx in &self.endpoints {
            if tx.try_send(row.clone()).is_err() {
                self.history
                    .metrics
                    .webhooks
                    .with_label_values(&["dropped"])
                    .inc();
            }
        }
    }

    /// This replica took the Lease: offer what it kept meanwhile.
    fn release_waiting(&self) {
        let mut waiting = self.waiting.rows.lock();
        if !self.history.leader.leading() {
            return;
        }
        let rows = std::mem::take(&mut *waiting);
        if !rows.is_empty() {
            tracing::info!(
                events = rows.len(),
                "leading now: offering the events seen while another replica led (those it delivered are skipped)"
            );
        }
        rows.into_iter().for_each(|r| self.send(r));
    }
}

/// Each time this replica starts leading, release what waited.
async fn take_over(
    hooks: std::sync::Weak<Webhooks>,
    mut leading: tokio::sync::watch::Receiver<bool>,
) {
    loop {
        if leading.wait_for(|l| *l).await.is_err() {
            return;
        }
        match hooks.upgrade() {
            Some(h) => h.release_waiting(),
            None => return,
        }
        if leading.wait_for(|l| !*l).await.is_err() {
            return;
        }
    }
}

/// An event's identity across replicas and restarts (the events table's):
/// `datacenter/uid/resourceVersion/change`.
pub fn event_key(row: &EventRow) -> String {
    format!(
        "{}/{}/{}/{}",
        row.datacenter, row.uid, row.resource_version, row.change
    )
}

/// The `X-Vitistack-Delivery` id: the same for one event at one endpoint whichever replica
/// sends it and however often, so a receiver can drop a repeat.
pub fn delivery_id(endpoint: &str, key: &str) -> String {
    use sha2::Digest;
    let mut h = Sha256::new();
    h.update(endpoint.as_bytes());
    h.update([0]);
    h.update(key.as_bytes());
    let d = h.finalize();
    let mut b = [0u8; 16];
    b.copy_from_slice(&d[..16]);
    // Shaped as an RFC 9562 version 8 (custom) UUID.
    b[6] = (b[6] & 0x0f) | 0x80;
    b[8] = (b[8] & 0x3f) | 0x80;
    uuid::Uuid::from_bytes(b).to_string()
}

/// One endpoint: its URL (a secret) and how logs and the database name it.
struct Endpoint {
    url: String,
    label: String,
    id: String,
}

impl Endpoint {
    fn new(url: &str) -> Self {
        Endpoint {
            url: url.to_string(),
            label: endpoint_label(url),
            id: endpoint_id(url),
        }
    }
}

/// Where a delivery stands after an attempt.
struct Attempt<'a> {
    state: &'a str,
    attempts: u32,
    status: Option<u16>,
    error: Option<&'a str>,
}

/// What claiming an event for delivery found.
enum Claim {
    /// This replica delivers it (the row's id).
    Mine(i64),
    /// Delivered or given up already (by this replica or another): not sent again.
    Settled,
}

/// Claim `row` for delivery at `endpoint`: a new pending row, or one left pending by a holder
/// that stopped (crashed, or stepped down before it finished).
async fn claim(
    db: &Db,
    endpoint: &str,
    key: &str,
    owner: &str,
    row: &EventRow,
) -> Result<Claim, DbError> {
    let pg = db.engine() == crate::db::Engine::Postgres;
    let sql = if pg {
        "INSERT INTO webhook_deliveries (endpoint, event_seq, event_type, state, attempts, \
         created_ms, updated_ms, event_key, owner) VALUES ($1, $2, $3, 'pending', 0, $4, $4, $5, $6) \
         ON CONFLICT (endpoint, event_key) DO UPDATE SET owner = excluded.owner, \
         updated_ms = excluded.updated_ms WHERE webhook_deliveries.state = 'pending' RETURNING id"
    } else {
        "INSERT INTO webhook_deliveries (endpoint, event_seq, event_type, state, attempts, \
         created_ms, updated_ms, event_key, owner) VALUES (?1, ?2, ?3, 'pending', 0, ?4, ?4, ?5, ?6) \
         ON CONFLICT (endpoint, event_key) DO UPDATE SET owner = excluded.owner, \
         updated_ms = excluded.updated_ms WHERE webhook_deliveries.state = 'pending' RETURNING id"
    };
    let _turn = db.write_turn().await;
    let id: Option<i64> = with_pool!(db, p => sqlx::query_scalar(sql)
        .bind(endpoint)
        .bind(row.seq as i64)
        .bind(&row.event_type)
        .bind(now_ms())
        .bind(key)
        .bind(owner)
        .fetch_optional(p)
        .await?);
    Ok(id.map_or(Claim::Settled, Claim::Mine))
}

/// Delivery state kept in the database (best effort: deliveries go on while it is away).
async fn record(db: &Db, id: i64, a: Attempt<'_>) -> Result<(), DbError> {
    let pg = db.engine() == crate::db::Engine::Postgres;
    let sql = if pg {
        "UPDATE webhook_deliveries SET state = $1, attempts = $2, last_status = $3, \
         last_error = $4, updated_ms = $5 WHERE id = $6"
    } else {
        "UPDATE webhook_deliveries SET state = ?1, attempts = ?2, last_status = ?3, \
         last_error = ?4, updated_ms = ?5 WHERE id = ?6"
    };
    let _turn = db.write_turn().await;
    let _updated = with_pool!(db, p => sqlx::query(sql)
        .bind(a.state)
        .bind(a.attempts as i32)
        .bind(a.status.map(i32::from))
        .bind(a.error)
        .bind(now_ms())
        .bind(id)
        .execute(p)
        .await?
        .rows_affected());
    Ok(())
}

/// Deliver one endpoint's events in order, each with retries.
async fn deliver_all(
    ep: Endpoint,
    mut rx: mpsc::Receiver<Arc<EventRow>>,
    client: reqwest::Client,
    settings: WebhookSettings,
    history: Arc<History>,
    waiting: Arc<Waiting>,
) {
    let counter = |outcome: &str| history.metrics.webhooks.with_label_values(&[outcome]).inc();
    while let Some(row) = rx.recv().await {
        let key = event_key(&row);
        let db = history.db();
        // Without the database (away, or none configured) the event is sent unrecorded.
        let mut id = None;
        if let Some(db) = &db {
            match claim(db, &ep.id, &key, history.leader.identity(), &row).await {
                Ok(Claim::Mine(i)) => id = Some(i),
                Ok(Claim::Settled) => continue,
                Err(e) => tracing::warn!(error = %e, "webhook delivery state not stored"),
            }
        }
        let body = payload(&row).to_string();
        let delivery = delivery_id(&ep.id, &key);
        let mut backoff = crate::retry::Backoff::new(settings.first_retry, Duration::from_secs(60));
        for attempt in 1..=settings.max_attempts.max(1) {
            // The turn lasts until the attempt is recorded: a replica stepping down gives the
            // Lease up only after that, so its successor never finds this claim pending and
            // sends the event again.
            let Some(turn) = history.leader.turn().await else {
                // Stepped down: kept for this replica's next turn; the claim stays pending, so
                // whichever replica leads next sends it.
                let mut rows = waiting.rows.lock();
                Waiting::keep(&mut rows, waiting.hold, row.clone());
                break;
            };
            let mut req = client
                .post(&ep.url)
                .header("Content-Type", "application/json")
                .header("X-Vitistack-Event", &row.event_type)
                .header("X-Vitistack-Delivery", &delivery)
                .body(body.clone());
            if let Some(secret) = &settings.secret {
                req = req.header(SIGNATURE_HEADER, signature(secret, body.as_bytes()));
            }
            let (status, error) = match req.send().await {
                Ok(r) if r.status().is_success() => (Some(r.status().as_u16()), None),
                Ok(r) => (
                    Some(r.status().as_u16()),
                    Some(format!("answered {}", r.status())),
                ),
                // Without the URL (a webhook URL may carry its key), and any trace of it removed.
                Err(e) => (
                    None,
                    Some(scrub(&error_chain(&e.without_url()), &ep.url, &ep.label)),
                ),
            };
            let last = attempt == settings.max_attempts.max(1);
            let state = match (&error, last) {
                (None, _) => "delivered",
                (Some(_), true) => "failed",
                (Some(_), false) => "pending",
            };
            counter(match state {
                "delivered" => "delivered",
                "failed" => "failed",
                _ => "retried",
            });
            if let (Some(db), Some(id)) = (&db, id) {
                let a = Attempt {
                    state,
                    attempts: attempt,
                    status,
                    error: error.as_deref(),
                };
                if let Err(e) = record(db, id, a).await {
                    tracing::warn!(error = %e, "webhook delivery state not stored");
                }
            }
            drop(turn);
            if error.is_none() {
                break;
            }
            if last {
                tracing::warn!(endpoint = %ep.label, event = %row.event_type, attempts = attempt, error = ?error, "webhook delivery failed");
                break;
            }
            tokio::time::sleep(backoff.delay()).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_delivery_id_is_the_same_for_one_event_and_differs_between_endpoints() {
        let a = delivery_id("https://a#01", "oslo/u1/7/created");
        assert_eq!(a, delivery_id("https://a#01", "oslo/u1/7/created"));
        assert_ne!(a, delivery_id("https://b#02", "oslo/u1/7/created"));
        assert_ne!(a, delivery_id("https://a#01", "bergen/u1/7/created"));
        let u = uuid::Uuid::parse_str(&a).expect("a UUID");
        assert_eq!(u.get_version_num(), 8);
    }

    #[test]
    fn kept_rows_stay_in_sequence_order_within_their_bound() {
        let row = |seq| {
            let mut r = EventRow::gap(seq, 0, 0);
            r.seq = seq;
            Arc::new(r)
        };
        let mut rows = VecDeque::new();
        for seq in [5, 6, 9] {
            Waiting::keep(&mut rows, 3, row(seq));
        }
        // Handed back by a delivery task that saw the step-down: older than 9.
        Waiting::keep(&mut rows, 3, row(7));
        let seqs: Vec<u64> = rows.iter().map(|r| r.seq).collect();
        assert_eq!(seqs, [6, 7, 9], "in order, the oldest dropped");
    }

    #[test]
    fn signature_is_hmac_sha256_hex() {
        // RFC 4231 test case 2.
        assert_eq!(
            signature("Jefe", b"what do ya want for nothing?"),
            "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }
}
