//! The timeline's rows as written: the versions and a checkpoint in their order, in bounded
//! transactions, and the next number to give an object.

use crate::db::{Db, DbError, with_pool};

/// Versions per transaction.
const TX_ROWS: usize = 2_000;
/// Versions per INSERT statement (3 parameters each; SQLite).
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
    match db.pool() {
        crate::db::Pool::Postgres(p) => {
            let mut tx = p.begin().await?;
            // As the event log: a crash may lose the last moments' rows (the next start writes a
            // checkpoint), never corrupt them; not waiting for each batch's WAL flush keeps up.
            sqlx::query("SET LOCAL synchronous_commit = off")
                .execute(&mut *tx)
                .await?;
            // COPY keeps the rows' order: their ids are given in it.
            let mut copy = tx
                .copy_in_raw("COPY timeline_versions (at_ms, object, body) FROM STDIN")
                .await?;
            copy.send(copy_text(rows)).await?;
            copy.finish().await?;
            tx.commit().await?;
        }
        crate::db::Pool::Sqlite(p) => {
            let mut tx = p.begin().await?;
            for chunk in rows.chunks(VERSIONS_PER_STATEMENT) {
                let mut b =
                    sqlx::QueryBuilder::new("INSERT INTO timeline_versions (at_ms, object, body) ");
                b.push_values(chunk, |mut b, (object, at, body)| {
                    b.push_bind(*at).push_bind(*object).push_bind(body.clone());
                });
                b.build().execute(&mut *tx).await?;
            }
            tx.commit().await?;
        }
    }
    Ok(())
}

/// Versions in PostgreSQL's COPY text format: time, object, and the body as `bytea` in hex (its
/// backslash doubled, as COPY text reads one), or `\N` for a deletion. (Multi-row INSERTs of bound
/// parameters took 5,147 versions/s; `cargo bench --bench history_ingest`.)
fn copy_text(rows: &[(i64, i64, Option<Vec<u8>>)]) -> Vec<u8> {
    use std::io::Write;
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let bytes: usize = rows.iter().map(|r| r.2.as_ref().map_or(0, Vec::len)).sum();
    let mut out = Vec::with_capacity(bytes * 2 + rows.len() * 40);
    for (object, at, body) in rows {
        // Writing into a Vec cannot fail.
        let _ = write!(out, "{at}\t{object}\t");
        match body {
            Some(b) => {
                out.extend_from_slice(b"\\\\x");
                for byte in b {
                    out.push(HEX[usize::from(byte >> 4)]);
                    out.push(HEX[usize::from(byte & 0xf)]);
                }
            }
            None => out.extend_from_slice(b"\\N"),
        }
        out.push(b'\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::copy_text;

    #[test]
    fn copy_text_is_time_object_and_hex_bytea_or_null() {
        let rows = vec![(7, 1_000, Some(vec![0x00, 0xab, b'\\'])), (8, 1_001, None)];
        assert_eq!(
            String::from_utf8(copy_text(&rows)).expect("text"),
            "1000\t7\t\\\\x00ab5c\n1001\t8\t\\N\n"
        );
    }
}
