//! How far the timeline is written, and waiting for it: a moment is answered only once every
//! change before it is in the database, never from part of it (the writer batches changes for
//! `HISTORY_FLUSH_INTERVAL_MS`, and a large batch takes a while to write).
//!
//! The writer moves the mark after each write (in this process, and, with leader election, in
//! the database for the replicas that do not write the timeline) and, while nothing changes,
//! about once a second. A
//! reader on the writing replica asks the writer to write now and waits for the mark; a reader
//! on another replica waits for the mark in the database.

use std::time::Duration;

use tokio::sync::{Notify, watch};

use super::rebuild::PastError;
use crate::db::{Db, DbError, statement, with_pool};

/// How long a reader waits for the mark before it says the timeline is behind: the writer
/// retries a database that is away for longer, and the request's own timeout may end it first.
const WAIT: Duration = Duration::from_secs(30);
/// How often a replica that does not write the timeline reads the mark while it waits.
const POLL: Duration = Duration::from_millis(100);
/// While nothing changes, the mark in the database moves at most this often (ms).
pub(super) const IDLE_EVERY_MS: i64 = 1000;

/// The mark: every change the store applied before it (ms since the epoch) is written.
#[derive(Debug)]
pub struct Written {
    through: watch::Sender<i64>,
    /// A reader waits: the writer writes what it holds now.
    pub(super) wanted: Notify,
}

impl Default for Written {
    fn default() -> Self {
        Written {
            through: watch::Sender::new(0),
            wanted: Notify::new(),
        }
    }
}

impl Written {
    /// This process's writer wrote every change before `through_ms`.
    pub(super) fn advance(&self, through_ms: i64) {
        self.through.send_if_modified(|t| {
            let moved = through_ms > *t;
            *t = (*t).max(through_ms);
            moved
        });
    }

    /// Wait until every change before `at_ms` (or before now, for a later moment) is written:
    /// by this process's writer when `writing`, else as the database's mark says.
    pub async fn caught_up(&self, db: &Db, writing: bool, at_ms: i64) -> Result<(), PastError> {
        let target = at_ms.min(crate::clock::now_ms() - 1);
        let behind = |through: i64| PastError::Behind {
            asked: at_ms,
            through: (through > 0).then_some(through),
        };
        if writing {
            let mut rx = self.through.subscribe();
            if *rx.borrow_and_update() >= target {
                return Ok(());
            }
            self.wanted.notify_one();
            let reached = tokio::time::timeout(WAIT, rx.wait_for(|t| *t >= target)).await;
            return match reached {
                Ok(Ok(_)) => Ok(()),
                _ => Err(behind(*self.through.borrow())),
            };
        }
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let through = read(db).await?;
            if through >= target {
                return Ok(());
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(behind(through));
            }
            tokio::time::sleep(POLL).await;
        }
    }
}

/// The mark in the database (0: none yet).
async fn read(db: &Db) -> Result<i64, DbError> {
    let through: Option<i64> = statement!(db, p => {
        sqlx::query_scalar("SELECT through_ms FROM timeline_written WHERE id = 1")
            .fetch_optional(p)
            .await?
    });
    Ok(through.unwrap_or(0))
}

/// Keep `through_ms` as the mark in the database.
pub(super) async fn store(db: &Db, through_ms: i64) -> Result<(), DbError> {
    let _turn = db.write_turn().await;
    with_pool!(db, p => {
        sqlx::query(
            "INSERT INTO timeline_written (id, through_ms) VALUES (1, $1) \
             ON CONFLICT (id) DO UPDATE SET through_ms = excluded.through_ms",
        )
        .bind(through_ms)
        .execute(p)
        .await?;
    });
    Ok(())
}
