//! What `/health/database` and `/metrics` say about the database: up or down, the last error
//! (password-free), and the object writer's figures.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use parking_lot::Mutex;
use serde::Serialize;

use super::{DbError, Engine};

/// What `/health/database` and `/metrics` report about the database.
#[derive(Debug)]
pub struct DbHealth {
    engine: Engine,
    url: String,
    up: AtomicBool,
    last_error: Mutex<Option<String>>,
    last_write: Mutex<Option<jiff::Timestamp>>,
    pub(crate) pending: AtomicUsize,
    written: AtomicU64,
    failures: AtomicU64,
}

/// `/health/database` body.
#[derive(Debug, Serialize)]
pub struct DbHealthReport {
    /// `up` or `down`.
    pub status: &'static str,
    /// `sqlite` or `postgres`.
    pub engine: &'static str,
    /// The URL with its password blanked.
    pub url: String,
    /// Objects waiting to be written.
    pub pending_writes: usize,
    /// Objects written since start.
    pub written: u64,
    /// Failed write or connect attempts since start.
    pub failures: u64,
    /// When the last write succeeded.
    pub last_write_at: Option<String>,
    /// The last error, while the database is down.
    pub error: Option<String>,
    /// History events waiting to be written.
    pub history_pending: usize,
    /// History events written since start.
    pub history_written: u64,
    /// History events dropped since start because the buffer was full (marked as gaps).
    pub history_dropped: u64,
}

impl DbHealth {
    /// Health of a database not connected yet.
    pub fn new(engine: Engine, url: &str) -> Self {
        DbHealth {
            engine,
            url: crate::db::redact_url(url),
            up: AtomicBool::new(false),
            last_error: Mutex::new(Some("not connected yet".into())),
            last_write: Mutex::new(None),
            pending: AtomicUsize::new(0),
            written: AtomicU64::new(0),
            failures: AtomicU64::new(0),
        }
    }

    /// True when the last attempt succeeded.
    pub fn is_up(&self) -> bool {
        self.up.load(Ordering::Acquire)
    }

    /// Objects waiting to be written.
    pub fn pending(&self) -> usize {
        self.pending.load(Ordering::Relaxed)
    }

    /// Failed attempts since start.
    pub fn failures(&self) -> u64 {
        self.failures.load(Ordering::Relaxed)
    }

    /// Record a success.
    pub fn ok(&self) {
        self.up.store(true, Ordering::Release);
        *self.last_error.lock() = None;
    }

    /// Record a failure.
    pub fn failed(&self, e: &DbError) {
        self.up.store(false, Ordering::Release);
        self.failures.fetch_add(1, Ordering::Relaxed);
        *self.last_error.lock() = Some(e.to_string());
    }

    /// Record a write of `n` objects.
    pub(crate) fn wrote(&self, n: usize) {
        self.written.fetch_add(n as u64, Ordering::Relaxed);
        *self.last_write.lock() = Some(jiff::Timestamp::now());
        self.ok();
    }

    /// The report `/health/database` serves, with the history writer's figures.
    pub fn report(&self, history: HistoryFigures) -> DbHealthReport {
        DbHealthReport {
            status: if self.is_up() { "up" } else { "down" },
            engine: self.engine.name(),
            url: self.url.clone(),
            pending_writes: self.pending(),
            written: self.written.load(Ordering::Relaxed),
            failures: self.failures(),
            last_write_at: self.last_write.lock().map(|t| t.to_string()),
            error: self.last_error.lock().clone(),
            history_pending: history.pending,
            history_written: history.written,
            history_dropped: history.dropped,
        }
    }
}

/// The history writer's figures, for the same report.
#[derive(Clone, Copy, Debug, Default)]
pub struct HistoryFigures {
    /// Events waiting to be written.
    pub pending: usize,
    /// Events written since start.
    pub written: u64,
    /// Events dropped since start.
    pub dropped: u64,
}
