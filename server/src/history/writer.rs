//! The event-log writer: reads the store's change stream without ever waiting for the database,
//! keeps the rows in a bounded queue and writes them in batches (one transaction each).
//!
//! While the database is away the queue fills; below its bound (`HISTORY_BUFFER`) nothing is
//! lost and everything is written when the database returns. Past the bound, new events are
//! dropped and counted (`vitistack_history_events_dropped_total`), and one gap marker row
//! (`history.gap`, with the number dropped and the first sequence missed) takes their place in the
//! log as soon as there is room again.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{broadcast, watch};
use tokio::time::Instant;

use super::{EventRow, History, now_ms, row_of};
use crate::db::Start;
use crate::db::health::DbHealth;
use crate::db::{Db, DbError, Pool};
use crate::store::Change;

/// How the writer batches and how long events are kept.
#[derive(Clone, Debug)]
pub struct HistorySettings {
    /// Events held in memory while they wait for the database (`HISTORY_BUFFER`).
    pub buffer: usize,
    /// Rows per transaction (`HISTORY_BATCH_SIZE`).
    pub batch_size: usize,
    /// Write at most this long after an event arrived (`HISTORY_FLUSH_INTERVAL_MS`).
    pub flush_interval: Duration,
    /// Delete events older than this (`HISTORY_RETENTION_DAYS`), and the timeline's moments.
    pub retention: Duration,
    /// The timeline's bound in bytes (`HISTORY_MAX_BYTES`; 0: none but the retention).
    pub max_bytes: u64,
    /// Rebuilt past graphs kept in memory, in bytes (`HISTORY_CACHE_MB`).
    pub cache_bytes: usize,
}

impl Default for HistorySettings {
    fn default() -> Self {
        HistorySettings {
            buffer: 100_000,
            batch_size: 5_000,
            flush_interval: Duration::from_millis(500),
            retention: Duration::from_secs(30 * 24 * 3600),
            max_bytes: 1 << 30,
            cache_bytes: 256 << 20,
        }
    }
}

/// Rows per SQLite INSERT statement (13 parameters each; far below SQLite's parameter limit).
const ROWS_PER_STATEMENT: usize = 500;

/// Insert rows in one transaction; rows already stored (same uid, resourceVersion and change)
/// are skipped. Returns how many were new.
pub async fn insert(db: &Db, rows: &[EventRow]) -> Result<u64, DbError> {
    if rows.is_empty() {
        return Ok(0);
    }
    let _turn = db.write_turn().await;
    match db.pool() {
        Pool::Postgres(p) => insert_postgres(p, rows).await,
        Pool::Sqlite(p) => insert_sqlite(p, rows).await,
    }
}

/// One field of PostgreSQL's COPY text format.
fn copy_field(out: &mut String, v: Option<&str>) {
    let Some(v) = v else {
        out.push_str("\\N");
        return;
    };
    for ch in v.chars() {
        match ch {
            '\\' => out.push_str("\\\\"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c => out.push(c),
        }
    }
}

/// The rows in COPY text format.
pub fn copy_text(rows: &[EventRow]) -> String {
    let mut out = String::with_capacity(rows.len() * 256);
    for r in rows {
        let at = r.at_ms.to_string();
        let seq = r.seq.to_string();
        let diff = r.diff.to_string();
        let dropped = r.dropped.map(|d| d.to_string());
        let fields: [Option<&str>; 15] = [
            Some(&at),
            Some(&seq),
            Some(r.kind),
            Some(&r.namespace),
            Some(&r.name),
            Some(&r.uid),
            Some(&r.resource_version),
            Some(r.change),
            Some(&r.event_type),
            r.phase_before.as_deref(),
            r.phase_after.as_deref(),
            Some(&diff),
            dropped.as_deref(),
            r.actor.as_deref(),
            Some(&r.datacenter),
        ];
        for (i, f) in fields.iter().enumerate() {
            if i > 0 {
                out.push('\t');
            }
            copy_field(&mut out, *f);
        }
        out.push('\n');
    }
    out
}

/// PostgreSQL: the batch is streamed with COPY into the connection's staging table, then moved
/// into `events` by one INSERT … SELECT (COPY cannot skip rows already stored).
async fn insert_postgres(p: &sqlx::PgPool, rows: &[EventRow]) -> Result<u64, DbError> {
    let text = copy_text(rows);
    let mut tx = p.begin().await?;
    // A history row may be lost in a server crash within the last moments (never corrupted):
    // not waiting for the WAL flush of each batch lets the log keep up with a busy cluster.
    sqlx::query("SET LOCAL synchronous_commit = off")
        .execute(&mut *tx)
        .await?;
    let mut copy = tx.copy_in_raw("COPY events_in FROM STDIN").await?;
    copy.send(text.into_bytes()).await?;
    copy.finish().await?;
    let n = sqlx::query(
        "INSERT INTO events (at_ms, seq, kind, namespace, name, uid, resource_version, change, \
         event_type, phase_before, phase_after, diff, dropped, actor, datacenter) \
         SELECT at_ms, seq, kind, namespace, name, uid, resource_version, change, event_type, \
         phase_before, phase_after, diff::jsonb, dropped, actor, datacenter FROM events_in \
         ON CONFLICT (datacenter, uid, resource_version, change) DO NOTHING",
    )
    .execute(&mut *tx)
    .await?
    .rows_affected();
    tx.commit().await?;
    Ok(n)
}

/// SQLite: multi-row INSERTs in one transaction.
async fn insert_sqlite(p: &sqlx::SqlitePool, rows: &[EventRow]) -> Result<u64, DbError> {
    let mut added = 0;
    let mut tx = p.begin().await?;
    for chunk in rows.chunks(ROWS_PER_STATEMENT) {
        let mut q = sqlx::QueryBuilder::new(
            "INSERT INTO events (at_ms, seq, kind, namespace, name, uid, resource_version, \
             change, event_type, phase_before, phase_after, diff, dropped, actor, datacenter) ",
        );
        q.push_values(chunk, |mut b, r| {
            b.push_bind(r.at_ms)
                .push_bind(r.seq as i64)
                .push_bind(r.kind)
                .push_bind(r.namespace.as_str())
                .push_bind(r.name.as_str())
                .push_bind(r.uid.as_str())
                .push_bind(r.resource_version.as_str())
                .push_bind(r.change)
                .push_bind(r.event_type.as_str())
                .push_bind(r.phase_before.as_deref())
                .push_bind(r.phase_after.as_deref())
                .push_bind(sqlx::types::Json(&r.diff))
                .push_bind(r.dropped.map(|d| d as i64))
                .push_bind(r.actor.as_deref())
                .push_bind(r.datacenter.as_str());
        });
        q.push(" ON CONFLICT (datacenter, uid, resource_version, change) DO NOTHING");
        added += q.build().execute(&mut *tx).await?.rows_affected();
    }
    tx.commit().await?;
    Ok(added)
}

/// Events missed while the queue was full (or the change stream ran ahead of the writer).
#[derive(Debug, Default)]
struct Gap {
    first_seq: u64,
    dropped: u64,
}

/// What waits in the queue before it becomes a row: a change (its row is computed off the async
/// workers, in bulk) or a row already made (a gap marker).
enum Pending {
    Change(Arc<Change>, i64),
    Row(Box<EventRow>),
}

/// The bounded queue with its gap accounting.
struct Queue {
    /// Changes and markers in arrival order, not yet turned into rows.
    raw: Vec<Pending>,
    /// Rows ready to be written, in order (all older than `raw`).
    rows: VecDeque<EventRow>,
    /// Entries taken out for a conversion or write that has not finished (they count against
    /// the bound).
    in_flight: usize,
    bound: usize,
    gap: Option<Gap>,
    history: Arc<History>,
}

impl Queue {
    fn len(&self) -> usize {
        self.raw.len() + self.rows.len() + self.in_flight
    }

    fn full(&self) -> bool {
        self.len() >= self.bound
    }

    fn missed(&mut self, first_seq: u64, n: u64) {
        let gap = self.gap.get_or_insert(Gap {
            first_seq,
            dropped: 0,
        });
        gap.dropped += n;
        self.history.metrics.dropped.inc_by(n);
    }

    /// Record the pending gap as a marker row, once there is room for it.
    fn mark_gap(&mut self) {
        if self.full() {
            return;
        }
        if let Some(gap) = self.gap.take() {
            tracing::warn!(
                dropped = gap.dropped,
                from_seq = gap.first_seq,
                "history buffer was full: events dropped, gap recorded"
            );
            self.raw.push(Pending::Row(Box::new(EventRow::gap(
                gap.first_seq,
                gap.dropped,
                now_ms(),
            ))));
            self.history.metrics.gaps.inc();
        }
    }

    fn accept(&mut self, c: Arc<Change>) {
        if c.loaded {
            return; // state being loaded is not news
        }
        self.mark_gap();
        if self.full() {
            self.missed(c.seq, 1);
        } else {
            self.raw.push(Pending::Change(c, now_ms()));
        }
    }

    fn gauge(&self) {
        self.history.metrics.pending.set(self.len() as i64);
    }
}

/// The writer's end of the change stream.
struct Reader {
    rx: broadcast::Receiver<Arc<Change>>,
    last_seq: u64,
    open: bool,
    /// Changes missed because the ring overflowed behind this reader.
    lagged: prometheus::IntCounter,
}

impl Reader {
    /// Queue what the change stream delivered (and the rest of its burst).
    fn take(&mut self, q: &mut Queue, r: Result<Arc<Change>, broadcast::error::RecvError>) {
        match r {
            Ok(c) => {
                self.last_seq = c.seq;
                q.accept(c);
                loop {
                    match self.rx.try_recv() {
                        Ok(c) => {
                            self.last_seq = c.seq;
                            q.accept(c);
                        }
                        Err(broadcast::error::TryRecvError::Lagged(n)) => {
                            self.lagged.inc_by(n);
                            q.missed(self.last_seq + 1, n)
                        }
                        Err(_) => break,
                    }
                }
            }
            Err(broadcast::error::RecvError::Lagged(n)) => {
                self.lagged.inc_by(n);
                q.missed(self.last_seq + 1, n)
            }
            Err(broadcast::error::RecvError::Closed) => self.open = false,
        }
        q.gauge();
    }

    /// Run `work` while still reading the change stream into `q`: a slow database or a big
    /// conversion never makes the writer fall behind the shared ring.
    async fn during<F: std::future::Future>(&mut self, q: &mut Queue, work: F) -> F::Output {
        tokio::pin!(work);
        loop {
            let c = tokio::select! {
                r = &mut work => break r,
                c = self.rx.recv(), if self.open => c,
            };
            self.take(q, c);
        }
    }

    /// Turn the queued changes into rows on a blocking thread (diffs cost CPU the async workers
    /// need for the fan-out and the API).
    async fn convert(&mut self, q: &mut Queue) {
        if q.raw.is_empty() {
            return;
        }
        let raw = std::mem::take(&mut q.raw);
        let n = raw.len();
        q.in_flight += n;
        let work = tokio::task::spawn_blocking(move || {
            raw.into_iter()
                .map(|p| match p {
                    Pending::Change(c, at) => row_of(&c, at),
                    Pending::Row(r) => *r,
                })
                .collect::<Vec<_>>()
        });
        let rows = self.during(q, work).await;
        q.in_flight -= n;
        match rows {
            Ok(rows) => {
                if let Some(hooks) = q.history.webhooks.get() {
                    rows.iter().for_each(|r| hooks.offer(r));
                }
                // Entries queued meanwhile are newer: they stay in `raw`, behind these rows.
                q.rows.extend(rows);
            }
            Err(e) => {
                tracing::error!(error = %e, events = n, "computing history rows failed");
                q.missed(self.last_seq, n as u64);
            }
        }
    }
}

const MAX_BACKOFF: Duration = Duration::from_secs(10);
/// How long shutdown keeps trying to write what is queued.
const STOP_GRACE: Duration = Duration::from_secs(5);

/// Write the event log from `rx` until `stop` turns true (then write what is queued, for up to
/// a few seconds). `start` is the database as start-up found it; when it was away the writer
/// connects by itself and publishes the connection for history queries.
pub fn spawn(
    start: Start,
    history: Arc<History>,
    rx: broadcast::Receiver<Arc<Change>>,
    health: Arc<DbHealth>,
    stop: watch::Receiver<bool>,
    lagged: prometheus::IntCounter,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(run(start, history, rx, health, stop, lagged))
}

async fn run(
    start: Start,
    history: Arc<History>,
    rx: broadcast::Receiver<Arc<Change>>,
    health: Arc<DbHealth>,
    mut stop: watch::Receiver<bool>,
    lagged: prometheus::IntCounter,
) {
    let settings = history.settings.clone();
    let target = match start {
        Start::Connected(db) => {
            history.connected(db);
            None
        }
        Start::Retry { url, pool } => Some((url, pool)),
    };
    let mut q = Queue {
        raw: Vec::new(),
        rows: VecDeque::new(),
        in_flight: 0,
        bound: settings.buffer.max(2),
        gap: None,
        history: history.clone(),
    };
    let mut reader = Reader {
        rx,
        last_seq: 0,
        open: true,
        lagged,
    };
    let mut backoff = crate::retry::Backoff::new(Duration::from_millis(100), MAX_BACKOFF);
    let mut due: Option<Instant> = None;
    let mut retention_due = Instant::now();
    let mut stopping: Option<Instant> = None;
    loop {
        if stopping.is_none() {
            let wake = due.unwrap_or_else(|| Instant::now() + Duration::from_secs(3600));
            let got = tokio::select! {
                r = reader.rx.recv(), if reader.open => Some(r),
                _ = tokio::time::sleep_until(wake), if due.is_some() => None,
                _ = stop.changed() => {
                    stopping = Some(Instant::now() + STOP_GRACE);
                    None
                }
            };
            if let Some(r) = got {
                reader.take(&mut q, r);
                if !reader.open {
                    stopping = Some(Instant::now() + STOP_GRACE);
                }
                if due.is_none() {
                    due = Some(Instant::now() + settings.flush_interval);
                }
                if q.raw.len() >= settings.batch_size {
                    // Rows are compact; changes hold whole objects: convert as they pile up.
                    reader.convert(&mut q).await;
                }
                if q.rows.len() >= settings.batch_size {
                    due = Some(Instant::now());
                }
            }
            q.gauge();
            if stopping.is_none() && due.is_none_or(|d| Instant::now() < d) {
                continue;
            }
        } else {
            reader.open = false;
            while let Ok(c) = reader.rx.try_recv() {
                q.accept(c);
            }
        }
        if history.db().is_none()
            && let Some((url, pool)) = &target
        {
            // Connecting may take the whole connect timeout: read on meanwhile.
            match reader.during(&mut q, Db::open(url, pool)).await {
                Ok(db) => history.connected(db),
                Err(e) => {
                    tracing::warn!(error = %e, "database unreachable; history events are queued");
                    health.failed(&e);
                }
            }
        }
        reader.convert(&mut q).await;
        // Write a batch while the change stream keeps being read.
        let n = q.rows.len().min(settings.batch_size);
        let batch: Vec<EventRow> = q.rows.drain(..n).collect();
        q.in_flight += batch.len();
        let db = history.db();
        let result = reader
            .during(&mut q, async {
                match &db {
                    Some(db) => insert(db, &batch).await.map_err(Some),
                    None => Err(None),
                }
            })
            .await;
        q.in_flight -= batch.len();
        match result {
            Ok(_) => {
                history.metrics.written.inc_by(batch.len() as u64);
                health.ok();
                // Room again: a gap waiting for it is marked now, not at the next event.
                q.mark_gap();
                backoff.reset();
                if Instant::now() >= retention_due
                    && history.leader.leading()
                    && let Some(db) = &db
                {
                    retention_due = Instant::now() + Duration::from_secs(3600);
                    let cutoff = now_ms() - settings.retention.as_millis() as i64;
                    // A large table takes a while to trim: the change stream is read meanwhile,
                    // so the ring never overflows behind the writer's back.
                    match reader
                        .during(&mut q, super::query::delete_before(db, cutoff))
                        .await
                    {
                        Ok(0) => {}
                        Ok(n) => tracing::info!(deleted = n, "history retention"),
                        Err(e) => tracing::warn!(error = %e, "history retention failed"),
                    }
                }
                // After the retention: what it read meanwhile is due too.
                due = (q.len() > 0).then(|| {
                    if q.rows.len() + q.raw.len() >= settings.batch_size {
                        Instant::now()
                    } else {
                        Instant::now() + settings.flush_interval
                    }
                });
            }
            Err(e) => {
                if let Some(e) = e {
                    tracing::warn!(error = %e, queued = batch.len() + q.len(), "writing history failed; retrying");
                    health.failed(&e);
                }
                // Back to the front, in order; what arrived meanwhile stays behind it.
                for row in batch.into_iter().rev() {
                    q.rows.push_front(row);
                }
                due = Some(Instant::now() + backoff.delay());
            }
        }
        q.gauge();
        if let Some(deadline) = stopping {
            if q.rows.is_empty() && q.raw.is_empty() {
                return;
            }
            if Instant::now() >= deadline {
                tracing::error!(
                    queued = q.rows.len(),
                    "stopping with history events the database did not take"
                );
                return;
            }
            if due.is_some_and(|d| d > Instant::now()) {
                tokio::time::sleep(backoff.upcoming().min(Duration::from_millis(500))).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copy_text_escapes_what_the_format_reserves() {
        let mut r = EventRow::gap(7, 3, 1_000);
        r.name = "a\tb\\c\nd".into();
        r.actor = Some("key:ops".into());
        r.diff = serde_json::json!([{"path": "/spec/x", "after": "line\nbreak \\ tab\t"}]);
        let text = copy_text(&[r]);
        let fields: Vec<&str> = text.trim_end_matches('\n').split('\t').collect();
        assert_eq!(fields.len(), 15, "{text}");
        assert_eq!(fields[13], "key:ops");
        assert_eq!(fields[4], "a\\tb\\\\c\\nd");
        assert_eq!(fields[9], "\\N", "a null phase");
        assert_eq!(fields[12], "3");
        // JSON escapes its own control characters; COPY then doubles the backslashes.
        assert!(fields[11].contains("line\\\\nbreak"), "{}", fields[11]);
        assert_eq!(text.matches('\n').count(), 1, "one line per row");
    }
}
