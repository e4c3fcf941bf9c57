//! The application inventory's cluster UUIDs (`inventory_clusters`), one per datacenter: the
//! first replica to ask makes it, every later ask (any replica, any restart) reads it.

use super::{Db, DbError, with_pool};

/// The cluster UUID of `datacenter`, made now (as `fresh`) if none is kept yet.
pub async fn cluster_uuid(db: &Db, datacenter: &str, fresh: &str) -> Result<String, DbError> {
    let pg = db.engine() == super::Engine::Postgres;
    let insert = if pg {
        "INSERT INTO inventory_clusters (datacenter, cluster_uuid) VALUES ($1, $2) ON CONFLICT (datacenter) DO NOTHING"
    } else {
        "INSERT INTO inventory_clusters (datacenter, cluster_uuid) VALUES (?1, ?2) ON CONFLICT (datacenter) DO NOTHING"
    };
    let select = if pg {
        "SELECT cluster_uuid FROM inventory_clusters WHERE datacenter = $1"
    } else {
        "SELECT cluster_uuid FROM inventory_clusters WHERE datacenter = ?1"
    };
    let _turn = db.write_turn().await;
    let uuid: String = with_pool!(db, p => {
        sqlx::query(insert).bind(datacenter).bind(fresh).execute(p).await?;
        sqlx::query_scalar(select).bind(datacenter).fetch_one(p).await?
    });
    Ok(uuid)
}

/// Claim the push of application `namespace/name` of `datacenter` at `fingerprint`: true when it
/// is to be sent (new, changed, or not delivered yet), false when that fingerprint was delivered.
pub async fn claim_push(
    db: &Db,
    datacenter: &str,
    namespace: &str,
    name: &str,
    fingerprint: &str,
    now_ms: i64,
) -> Result<bool, DbError> {
    let pg = db.engine() == super::Engine::Postgres;
    let sql = if pg {
        "INSERT INTO inventory_pushes (datacenter, namespace, name, fingerprint, state, attempts, updated_ms) \
         VALUES ($1, $2, $3, $4, 'pending', 0, $5) ON CONFLICT (datacenter, namespace, name) DO UPDATE \
         SET fingerprint = excluded.fingerprint, state = 'pending', attempts = 0, updated_ms = excluded.updated_ms \
         WHERE NOT (inventory_pushes.fingerprint = excluded.fingerprint AND inventory_pushes.state = 'delivered') \
         RETURNING 1"
    } else {
        "INSERT INTO inventory_pushes (datacenter, namespace, name, fingerprint, state, attempts, updated_ms) \
         VALUES (?1, ?2, ?3, ?4, 'pending', 0, ?5) ON CONFLICT (datacenter, namespace, name) DO UPDATE \
         SET fingerprint = excluded.fingerprint, state = 'pending', attempts = 0, updated_ms = excluded.updated_ms \
         WHERE NOT (inventory_pushes.fingerprint = excluded.fingerprint AND inventory_pushes.state = 'delivered') \
         RETURNING 1"
    };
    let _turn = db.write_turn().await;
    let mine: Option<i32> = with_pool!(db, p => sqlx::query_scalar(sql)
        .bind(datacenter)
        .bind(namespace)
        .bind(name)
        .bind(fingerprint)
        .bind(now_ms)
        .fetch_optional(p)
        .await?);
    Ok(mine.is_some())
}

/// How one attempt went.
#[derive(Clone, Copy, Debug)]
pub struct PushAttempt<'a> {
    pub state: &'a str,
    pub attempts: u32,
    pub status: Option<u16>,
    pub error: Option<&'a str>,
}

/// Record an attempt of the push claimed at `fingerprint` (a newer claim is left alone).
pub async fn record_push(
    db: &Db,
    key: (&str, &str, &str),
    fingerprint: &str,
    a: PushAttempt<'_>,
    now_ms: i64,
) -> Result<(), DbError> {
    let pg = db.engine() == super::Engine::Postgres;
    let sql = if pg {
        "UPDATE inventory_pushes SET state = $1, attempts = $2, last_status = $3, last_error = $4, updated_ms = $5 \
         WHERE datacenter = $6 AND namespace = $7 AND name = $8 AND fingerprint = $9"
    } else {
        "UPDATE inventory_pushes SET state = ?1, attempts = ?2, last_status = ?3, last_error = ?4, updated_ms = ?5 \
         WHERE datacenter = ?6 AND namespace = ?7 AND name = ?8 AND fingerprint = ?9"
    };
    let _turn = db.write_turn().await;
    with_pool!(db, p => sqlx::query(sql)
        .bind(a.state)
        .bind(a.attempts as i32)
        .bind(a.status.map(i32::from))
        .bind(a.error)
        .bind(now_ms)
        .bind(key.0)
        .bind(key.1)
        .bind(key.2)
        .bind(fingerprint)
        .execute(p)
        .await
        .map(|_| ())?);
    Ok(())
}

/// The PostgreSQL channel a change of the pause is announced on.
pub const PAUSE_CHANNEL: &str = "vitistack_inventory_pause";

/// The pause as an admin last set it.
#[derive(Clone, Debug, PartialEq, Eq, sqlx::FromRow)]
pub struct StoredPause {
    pub paused: bool,
    /// The principal that set it (`key:NAME`, `kubernetes:USER`).
    pub changed_by: String,
    /// When (ms since the Unix epoch).
    pub changed_ms: i64,
}

/// The pause kept, if an admin ever set one.
pub async fn pause(db: &Db) -> Result<Option<StoredPause>, DbError> {
    let sql = "SELECT paused, changed_by, changed_ms FROM inventory_pause WHERE id = 1";
    Ok(with_pool!(db, p => sqlx::query_as(sql).fetch_optional(p).await?))
}

/// Keep `pause`; on PostgreSQL every replica listening is told when it commits.
pub async fn set_pause(db: &Db, pause: &StoredPause) -> Result<(), DbError> {
    let _turn = db.write_turn().await;
    match db.pool() {
        super::Pool::Postgres(p) => {
            let mut tx = p.begin().await?;
            sqlx::query(
                "INSERT INTO inventory_pause (id, paused, changed_by, changed_ms) VALUES (1, $1, $2, $3) \
                 ON CONFLICT (id) DO UPDATE SET paused = excluded.paused, \
                 changed_by = excluded.changed_by, changed_ms = excluded.changed_ms",
            )
                .bind(pause.paused)
                .bind(&pause.changed_by)
                .bind(pause.changed_ms)
                .execute(&mut *tx)
                .await?;
            sqlx::query("SELECT pg_notify($1, '')")
                .bind(PAUSE_CHANNEL)
                .execute(&mut *tx)
                .await?;
            tx.commit().await?;
        }
        super::Pool::Sqlite(p) => {
            sqlx::query(
                "INSERT INTO inventory_pause (id, paused, changed_by, changed_ms) VALUES (1, ?1, ?2, ?3) \
                 ON CONFLICT (id) DO UPDATE SET paused = excluded.paused, \
                 changed_by = excluded.changed_by, changed_ms = excluded.changed_ms",
            )
                .bind(pause.paused)
                .bind(&pause.changed_by)
                .bind(pause.changed_ms)
                .execute(p)
                .await?;
        }
    }
    Ok(())
}
