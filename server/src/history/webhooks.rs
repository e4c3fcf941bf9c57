//! Webhooks: configured endpoints receive the old operator's event types as JSON, signed with
//! HMAC-SHA256, with a timeout per attempt, retries with backoff, and the delivery state stored
//! in `webhook_deliveries`.
//!
//! Each endpoint has its own task and its own bounded queue, so a receiver that is down or slow
//! holds back only its own deliveries (in order); nothing else waits for it. When its queue is
//! full, further events for it are dropped and counted (`outcome="dropped"`).

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

/// How an endpoint appears in logs, errors and the database: its scheme and host only. Webhook
/// URLs are secrets (chat-style webhooks carry their key in the path or the query).
pub fn endpoint_label(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    if scheme.is_empty() {
        format!("<endpoint {host}>")
    } else {
        format!("{scheme}://{host}")
    }
}

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

/// An error with its causes ("error sending request: … : Connection refused").
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        let c = cause.to_string();
        if !text.contains(&c) {
            text.push_str(": ");
            text.push_str(&c);
        }
        source = cause.source();
    }
    text
}

/// `text` with every occurrence of the endpoint's URL (whole, or its path and query) replaced by
/// its label.
fn scrub(text: &str, url: &str, label: &str) -> String {
    let mut out = text.replace(url, label);
    if let Some(rest) = url
        .split_once("://")
        .and_then(|(_, r)| r.find('/').map(|i| &r[i..]))
        .filter(|rest| rest.len() > 1)
    {
        out = out.replace(rest, "/…");
    }
    out
}

/// The body sent for an event.
pub fn payload(row: &EventRow) -> Value {
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

/// The senders feeding each endpoint's task.
pub struct Webhooks {
    events: Vec<String>,
    endpoints: Vec<mpsc::Sender<Arc<EventRow>>>,
    history: Arc<History>,
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
        let mut endpoints = Vec::new();
        for url in &settings.urls {
            let (tx, rx) = mpsc::channel(settings.queue.max(1));
            tokio::spawn(deliver_all(
                url.clone(),
                rx,
                client.clone(),
                settings.clone(),
                history.clone(),
            ));
            endpoints.push(tx);
        }
        Some(Arc::new(Webhooks {
            events: settings.events.clone(),
            endpoints,
            history,
        }))
    }

    /// Hand an event to every endpoint that wants its type (never waits). Only the leading
    /// replica sends: every replica sees every event.
    pub fn offer(&self, row: &EventRow) {
        if !self.events.contains(&row.event_type) || !self.history.leader.leading() {
            return;
        }
        let row = Arc::new(row.clone());
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
}

/// Where a delivery stands after an attempt.
struct Attempt<'a> {
    state: &'a str,
    attempts: u32,
    status: Option<u16>,
    error: Option<&'a str>,
}

/// Delivery state kept in the database (best effort: deliveries go on while it is away).
async fn record(
    db: Option<&Db>,
    id: Option<i64>,
    endpoint: &str,
    row: &EventRow,
    a: Attempt<'_>,
) -> Result<Option<i64>, DbError> {
    let Some(db) = db else { return Ok(None) };
    let now = now_ms();
    let (state, error) = (a.state, a.error);
    let status = a.status.map(i32::from);
    let attempts = a.attempts as i32;
    let pg = db.engine() == crate::db::Engine::Postgres;
    let _turn = db.write_turn().await;
    let id = with_pool!(db, p => match id {
        None => {
            let sql = if pg {
                "INSERT INTO webhook_deliveries (endpoint, event_seq, event_type, state, attempts, \
                 last_status, last_error, created_ms, updated_ms) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8) RETURNING id"
            } else {
                "INSERT INTO webhook_deliveries (endpoint, event_seq, event_type, state, attempts, \
                 last_status, last_error, created_ms, updated_ms) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?8) RETURNING id"
            };
            let id: i64 = sqlx::query_scalar(sql)
                .bind(endpoint)
                .bind(row.seq as i64)
                .bind(&row.event_type)
                .bind(state)
                .bind(attempts)
                .bind(status)
                .bind(error)
                .bind(now)
                .fetch_one(p)
                .await?;
            Some(id)
        }
        Some(id) => {
            let sql = if pg {
                "UPDATE webhook_deliveries SET state = $1, attempts = $2, last_status = $3, \
                 last_error = $4, updated_ms = $5 WHERE id = $6"
            } else {
                "UPDATE webhook_deliveries SET state = ?1, attempts = ?2, last_status = ?3, \
                 last_error = ?4, updated_ms = ?5 WHERE id = ?6"
            };
            sqlx::query(sql)
                .bind(state)
                .bind(attempts)
                .bind(status)
                .bind(error)
                .bind(now)
                .bind(id)
                .execute(p)
                .await?;
            Some(id)
        }
    });
    Ok(id)
}

/// Deliver one endpoint's events in order, each with retries.
async fn deliver_all(
    url: String,
    mut rx: mpsc::Receiver<Arc<EventRow>>,
    client: reqwest::Client,
    settings: WebhookSettings,
    history: Arc<History>,
) {
    let counter = |outcome: &str| history.metrics.webhooks.with_label_values(&[outcome]).inc();
    // The URL is a secret: logs, errors and the database see only these.
    let label = endpoint_label(&url);
    let endpoint = endpoint_id(&url);
    while let Some(row) = rx.recv().await {
        let body = payload(&row).to_string();
        let delivery = uuid::Uuid::new_v4().to_string();
        let mut id = None;
        let mut backoff = crate::retry::Backoff::new(settings.first_retry, Duration::from_secs(60));
        for attempt in 1..=settings.max_attempts.max(1) {
            let mut req = client
                .post(&url)
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
                    Some(scrub(&error_chain(&e.without_url()), &url, &label)),
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
            let db = history.db();
            let a = Attempt {
                state,
                attempts: attempt,
                status,
                error: error.as_deref(),
            };
            match record(db.as_ref(), id, &endpoint, &row, a).await {
                Ok(new_id) => id = new_id.or(id),
                Err(e) => tracing::warn!(error = %e, "webhook delivery state not stored"),
            }
            if error.is_none() {
                break;
            }
            if last {
                tracing::warn!(endpoint = %label, event = %row.event_type, attempts = attempt, error = ?error, "webhook delivery failed");
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
    fn signature_is_hmac_sha256_hex() {
        // RFC 4231 test case 2.
        assert_eq!(
            signature("Jefe", b"what do ya want for nothing?"),
            "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }
}
