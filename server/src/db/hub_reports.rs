//! The last report of each pushing datacenter (`hub_reports`): written by the replica an agent
//! reached, read by every replica (PostgreSQL tells them on [`CHANNEL`]) and at start-up.

use super::{Db, DbError, Engine, Pool};

/// The PostgreSQL channel a stored report is announced on (its payload: the datacenter's key).
pub const CHANNEL: &str = "vitistack_hub_reports";

/// A stored report.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct StoredReport {
    /// The datacenter's key.
    pub datacenter: String,
    /// The report's JSON (`StatusData`, as the server read it).
    pub body: String,
    /// When it was taken (ms since the Unix epoch).
    pub received_ms: i64,
}

/// Keep `r` as its datacenter's last report, unless a newer one is stored already; on
/// PostgreSQL every replica listening is told.
pub async fn save(db: &Db, r: &StoredReport) -> Result<(), DbError> {
    let _turn = db.write_turn().await;
    match db.pool() {
        Pool::Postgres(p) => {
            let mut tx = p.begin().await?;
            sqlx::query(
                "INSERT INTO hub_reports (datacenter, body, received_ms) VALUES ($1, $2, $3) \
                 ON CONFLICT (datacenter) DO UPDATE SET body = excluded.body, \
                 received_ms = excluded.received_ms WHERE hub_reports.received_ms <= excluded.received_ms",
            )
            .bind(&r.datacenter)
            .bind(&r.body)
            .bind(r.received_ms)
            .execute(&mut *tx)
            .await?;
            // Delivered when the transaction commits, to every session listening.
            sqlx::query("SELECT pg_notify($1, $2)")
                .bind(CHANNEL)
                .bind(&r.datacenter)
                .execute(&mut *tx)
                .await?;
            tx.commit().await?;
        }
        Pool::Sqlite(p) => {
            sqlx::query(
                "INSERT INTO hub_reports (datacenter, body, received_ms) VALUES (?1, ?2, ?3) \
                 ON CONFLICT (datacenter) DO UPDATE SET body = excluded.body, \
                 received_ms = excluded.received_ms WHERE hub_reports.received_ms <= excluded.received_ms",
            )
            .bind(&r.datacenter)
            .bind(&r.body)
            .bind(r.received_ms)
            .execute(p)
            .await?;
        }
    }
    Ok(())
}

/// Every stored report.
pub async fn all(db: &Db) -> Result<Vec<StoredReport>, DbError> {
    let sql = "SELECT datacenter, body, received_ms FROM hub_reports ORDER BY datacenter";
    Ok(super::with_pool!(db, p => sqlx::query_as(sql).fetch_all(p).await?))
}

/// The stored report of one datacenter.
pub async fn one(db: &Db, datacenter: &str) -> Result<Option<StoredReport>, DbError> {
    let sql = if db.engine() == Engine::Postgres {
        "SELECT datacenter, body, received_ms FROM hub_reports WHERE datacenter = $1"
    } else {
        "SELECT datacenter, body, received_ms FROM hub_reports WHERE datacenter = ?1"
    };
    Ok(super::with_pool!(db, p => sqlx::query_as(sql).bind(datacenter).fetch_optional(p).await?))
}
