//! The timeline's rows as written: the versions and a checkpoint in their order, in bounded
//! transactions, and the next number to give an object.

use crate::db::{Db, DbError, with_pool};

/// Versions per transaction.
const TX_ROWS: usize = 2_000;
/// Versions per INSERT statement (3 parameters each).
const VERSIONS_PER_STATEMENT: usize = 300;

/// A checkpoint about to be written.
pub(super) struct Checkpoint {
    pub at_ms: i64,
    pub objects: i64,
    pub max_object: i64,
    /// Bytes of the versions between the previous checkpoint and this one.
    pub before_bytes: u64,
    pub body: Vec<u8>,
    /// It continues the one before: the same numbering, every change between them written.
    pub continues: bool,
}

/// The next object number: above every number the kept timeline uses.
pub(super) async fn next_object(db: &Db) -> Result<i64, DbError> {
    let (versions, checkpoints): (Option<i64>, Option<i64>) = with_pool!(db, p => {
        let v = sqlx::query_scalar("SELECT max(object) FROM timeline_versions").fetch_one(p).await?;
        let c = sqlx::query_scalar("SELECT max(max_object) FROM timeline_checkpoints").fetch_one(p).await?;
        (v, c)
    });
    Ok(versions.unwrap_or(0).max(checkpoints.unwrap_or(0)) + 1)
}

/// Insert the versions (those before `split` first), then the checkpoint after them, then the
/// rest, in transactions of at most `TX_ROWS` rows each, taking a turn at the database for each:
/// the other writers (the event log, the objects) never wait behind a whole large batch. When one
/// fails, those before it stay (a prefix of the changes, as if the rest had been missed).
pub(super) async fn write(
    db: &Db,
    rows: &[(i64, i64, Option<Vec<u8>>)],
    split: usize,
    cp: Option<&Checkpoint>,
) -> Result<(), DbError> {
    for part in rows[..split].chunks(TX_ROWS) {
        insert_versions(db, part).await?;
    }
    if let Some(cp) = cp {
        let _turn = db.write_turn().await;
        with_pool!(db, p => {
            let mut tx = p.begin().await?;
            let after: Option<i64> = sqlx::query_scalar("SELECT max(id) FROM timeline_versions")
                .fetch_one(&mut *tx)
                .await?;
            sqlx::query(
                "INSERT INTO timeline_checkpoints \
                 (at_ms, after_version, objects, max_object, before_bytes, body, continues) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7)",
            )
            .bind(cp.at_ms)
            .bind(after.unwrap_or(0))
            .bind(cp.objects)
            .bind(cp.max_object)
            .bind(cp.before_bytes as i64)
            .bind(cp.body.as_slice())
            .bind(cp.continues)
            .execute(&mut *tx)
            .await?;
            tx.commit().await?;
        });
    }
    for part in rows[split..].chunks(TX_ROWS) {
        insert_versions(db, part).await?;
    }
    Ok(())
}

/// One transaction of versions.
async fn insert_versions(db: &Db, rows: &[(i64, i64, Option<Vec<u8>>)]) -> Result<(), DbError> {
    let _turn = db.write_turn().await;
    with_pool!(db, p => {
        let mut tx = p.begin().await?;
        for chunk in rows.chunks(VERSIONS_PER_STATEMENT) {
            let mut b = sqlx::QueryBuilder::new("INSERT INTO timeline_versions (at_ms, object, body) ");
            b.push_values(chunk, |mut b, (object, at, body)| {
                b.push_bind(*at).push_bind(*object).push_bind(body.clone());
            });
            b.build().execute(&mut *tx).await?;
        }
        tx.commit().await?;
    });
    Ok(())
}
