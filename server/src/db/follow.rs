//! Following rows other replicas write: read them all, then (PostgreSQL) each one announced on
//! a `LISTEN` channel, reading them all again whenever the connection was lost in between. On
//! SQLite (one replica) they are read once. The database may be away at first, or go away: the
//! follower waits for it and starts again, with the shared backoff.

use std::future::Future;
use std::time::Duration;

use tokio::sync::watch;

use super::{Db, DbError, Pool};

/// Follow `channel` until `stop`: `read(db, None)` reads every row, `read(db, Some(payload))` the
/// one a notification names. `db` gives the database once it is reachable; `what` names the rows
/// in the log.
pub async fn follow<R, F>(
    db: impl Fn() -> Option<Db>,
    channel: &'static str,
    what: &'static str,
    mut read: R,
    mut stop: watch::Receiver<bool>,
) where
    R: FnMut(Db, Option<String>) -> F,
    F: Future<Output = Result<(), DbError>>,
{
    let mut backoff =
        crate::retry::Backoff::new(Duration::from_millis(500), Duration::from_secs(10));
    loop {
        if *stop.borrow() {
            return;
        }
        let outcome = match db() {
            None => Err(None),
            Some(db) => {
                let run = follow_once(&db, channel, &mut read);
                tokio::select! {
                    r = run => r.map_err(Some),
                    _ = stop.wait_for(|s| *s) => return,
                }
            }
        };
        match outcome {
            Ok(()) => return,
            Err(Some(e)) => {
                tracing::warn!(error = %e, "{what} from other replicas not followed; trying again")
            }
            Err(None) => {}
        }
        tokio::select! {
            _ = tokio::time::sleep(backoff.delay()) => {}
            _ = stop.wait_for(|s| *s) => return,
        }
    }
}

/// Read every row, then (PostgreSQL) each one announced, until the connection fails.
async fn follow_once<R, F>(db: &Db, channel: &'static str, read: &mut R) -> Result<(), DbError>
where
    R: FnMut(Db, Option<String>) -> F,
    F: Future<Output = Result<(), DbError>>,
{
    let Pool::Postgres(pool) = db.pool() else {
        return read(db.clone(), None).await;
    };
    // Listening before reading: nothing written in between is missed.
    let mut listener = sqlx::postgres::PgListener::connect_with(pool).await?;
    listener.listen(channel).await?;
    read(db.clone(), None).await?;
    loop {
        match listener.try_recv().await? {
            Some(n) => read(db.clone(), Some(n.payload().to_string())).await?,
            // The connection was lost and made again: what was announced meanwhile is read.
            None => read(db.clone(), None).await?,
        }
    }
}
