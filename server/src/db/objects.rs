//! The `objects` table: the embedded source's objects, one row per object, in either engine.
//! Read back at start-up; written by the object writer (`db::object_writer`).

use std::collections::BTreeMap;
use std::sync::Arc;

use super::{Db, DbError, Engine, with_pool};
use crate::model::{Datacenter, Kind, Resource};
use crate::store::{ObjectKey, Store};

/// Per-engine statements (parameter syntax, JSON column type and clock differ).
struct Sql {
    upsert: &'static str,
    delete: &'static str,
    select: &'static str,
}

const SQLITE: Sql = Sql {
    upsert: "INSERT INTO objects (kind, namespace, name, api_version, uid, resource_version, body, \
             datacenter) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) \
             ON CONFLICT (datacenter, kind, namespace, name) DO UPDATE SET api_version = excluded.api_version, \
             uid = excluded.uid, resource_version = excluded.resource_version, body = excluded.body, \
             updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now')",
    delete: "DELETE FROM objects WHERE kind = ?1 AND namespace = ?2 AND name = ?3 \
             AND datacenter = ?4",
    select: "SELECT kind, api_version, body, datacenter FROM objects \
             ORDER BY datacenter, kind, namespace, name",
};

const POSTGRES: Sql = Sql {
    upsert: "INSERT INTO objects (kind, namespace, name, api_version, uid, resource_version, body, \
             datacenter) VALUES ($1, $2, $3, $4, $5, $6, $7::jsonb, $8) \
             ON CONFLICT (datacenter, kind, namespace, name) DO UPDATE SET api_version = excluded.api_version, \
             uid = excluded.uid, resource_version = excluded.resource_version, body = excluded.body, \
             updated_at = now()",
    delete: "DELETE FROM objects WHERE kind = $1 AND namespace = $2 AND name = $3 \
             AND datacenter = $4",
    select: "SELECT kind, api_version, body::text, datacenter FROM objects \
             ORDER BY datacenter, kind, namespace, name",
};

fn sql(engine: Engine) -> &'static Sql {
    match engine {
        Engine::Sqlite => &SQLITE,
        Engine::Postgres => &POSTGRES,
    }
}

/// A stored row that could not be turned back into an object (e.g. written by a newer version).
#[derive(Debug, Clone)]
pub struct SkippedRow {
    /// Kind column.
    pub kind: String,
    /// Why it was skipped.
    pub reason: RowError,
}

/// Why a stored row no longer decodes.
#[derive(Clone, Debug, thiserror::Error)]
pub enum RowError {
    /// A kind this version does not know.
    #[error(transparent)]
    Kind(#[from] crate::model::kind::UnknownKind),
    /// A body the model cannot read.
    #[error("{0}")]
    Body(std::sync::Arc<serde_json::Error>),
}

impl From<serde_json::Error> for RowError {
    fn from(e: serde_json::Error) -> Self {
        RowError::Body(std::sync::Arc::new(e))
    }
}

/// Every stored object, plus the rows that no longer decode.
pub async fn load(db: &Db) -> Result<(Vec<Resource>, Vec<SkippedRow>), DbError> {
    let q = sql(db.engine()).select;
    let rows: Vec<(String, String, String, String)> =
        with_pool!(db, p => sqlx::query_as(q).fetch_all(p).await?);
    let mut objects = Vec::with_capacity(rows.len());
    let mut skipped = Vec::new();
    for (kind, api_version, body, datacenter) in rows {
        let decoded = kind.parse::<Kind>().map_err(RowError::from).and_then(|k| {
            let version = api_version.rsplit('/').next().unwrap_or_default();
            let value = serde_json::from_str(&body)?;
            Ok(Resource::from_value(k, version, value)?
                .in_datacenter(&Datacenter::new(&datacenter)))
        });
        match decoded {
            Ok(r) => objects.push(r),
            Err(reason) => skipped.push(SkippedRow { kind, reason }),
        }
    }
    Ok((objects, skipped))
}

/// The highest sequence the database has recorded: of the stored objects (their
/// resourceVersion) and of the event log. A store that continues from here never gives a
/// resourceVersion twice to one object (its history rows are unique by uid and version).
pub async fn max_sequence(db: &Db) -> Result<u64, DbError> {
    let q = "SELECT COALESCE(MAX(v), 0) FROM (SELECT MAX(resource_version) AS v FROM objects \
             UNION ALL SELECT MAX(seq) AS v FROM events) AS m";
    let max: i64 = with_pool!(db, p => sqlx::query_scalar(q).fetch_one(p).await?);
    Ok(u64::try_from(max).unwrap_or(0))
}

/// Every stored object; rows that no longer decode are logged and left out.
pub async fn load_logged(db: &Db) -> Result<Vec<Resource>, DbError> {
    let (objects, skipped) = load(db).await?;
    for s in &skipped {
        tracing::warn!(kind = %s.kind, reason = %s.reason, "stored object skipped");
    }
    Ok(objects)
}

/// The row values of an object.
fn row(r: &Resource) -> (String, String, i64, String) {
    let api_version = r.kind().api_version(r.version());
    let rv = r
        .meta()
        .resource_version
        .as_deref()
        .and_then(|v| v.parse::<i64>().ok())
        .unwrap_or(0);
    (
        api_version,
        r.uid().to_string(),
        rv,
        r.to_value().to_string(),
    )
}

/// Write the latest state of some objects (None = deleted) in one transaction.
pub async fn write(
    db: &Db,
    batch: &BTreeMap<ObjectKey, Option<Arc<Resource>>>,
) -> Result<(), DbError> {
    write_in_tx(db, batch).await
}

/// Replace the whole table with the store's current objects, in one transaction.
pub async fn rewrite_all(db: &Db, store: &Store) -> Result<usize, DbError> {
    let snap = store.snapshot();
    let mut all: BTreeMap<ObjectKey, Option<Arc<Resource>>> = Kind::ALL
        .iter()
        .flat_map(|k| snap.list(*k))
        .map(|r| (ObjectKey::of(r), Some(r.clone())))
        .collect();
    // Stored objects the graph no longer has are deleted; rows this version cannot read (e.g.
    // written by a newer one) are left as they are: a rewrite must not lose what it cannot see.
    let (stored, _) = load(db).await?;
    for r in stored {
        let key = ObjectKey::of(&r);
        if snap.get_key(&key).is_none() {
            all.insert(key, None);
        }
    }
    let n = all.len();
    write_in_tx(db, &all).await?;
    Ok(n)
}

async fn write_in_tx(
    db: &Db,
    batch: &BTreeMap<ObjectKey, Option<Arc<Resource>>>,
) -> Result<(), DbError> {
    let s = sql(db.engine());
    let _turn = db.write_turn().await;
    with_pool!(db, p => {
        let mut tx = p.begin().await?;
        for (key, object) in batch {
            match object {
                Some(r) => {
                    let (api_version, uid, rv, body) = row(r);
                    sqlx::query(s.upsert)
                        .bind(key.kind.name())
                        .bind(key.namespace.as_str())
                        .bind(key.name.as_str())
                        .bind(api_version)
                        .bind(uid)
                        .bind(rv)
                        .bind(body)
                        .bind(key.datacenter.key())
                        .execute(&mut *tx)
                        .await?;
                }
                None => {
                    sqlx::query(s.delete)
                        .bind(key.kind.name())
                        .bind(key.namespace.as_str())
                        .bind(key.name.as_str())
                        .bind(key.datacenter.key())
                        .execute(&mut *tx)
                        .await?;
                }
            }
        }
        tx.commit().await?;
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_rewrite_keeps_rows_it_cannot_read_and_deletes_objects_that_are_gone() {
        let path =
            std::env::temp_dir().join(format!("vitistack-rewrite-{}.db", uuid::Uuid::new_v4()));
        let url = format!("sqlite://{}", path.display());
        let db = Db::open(&url, &crate::db::PoolSettings::default())
            .await
            .expect("open");
        let machine = |name: &str| {
            Resource::from_value(
                Kind::Machine,
                "v1alpha1",
                serde_json::json!({"metadata": {"name": name, "namespace": "ns"}, "spec": {}}),
            )
            .expect("machine")
        };
        let store = Store::new();
        store.apply(vec![
            crate::store::Op::Upsert(machine("kept")),
            crate::store::Op::Upsert(machine("gone")),
        ]);
        rewrite_all(&db, &store).await.expect("rewrite");
        // A row from a newer version this one cannot decode.
        let crate::db::Pool::Sqlite(pool) = db.pool() else {
            panic!("sqlite")
        };
        sqlx::query(
            "INSERT INTO objects (kind, namespace, name, api_version, uid, resource_version, body) \
             VALUES ('FutureKind', 'ns', 'f', 'vitistack.io/v9', 'u', 1, '{}')",
        )
        .execute(pool)
        .await
        .expect("insert");
        store.apply(vec![crate::store::Op::Delete(ObjectKey::new(
            &Default::default(),
            Kind::Machine,
            "ns",
            "gone",
        ))]);
        rewrite_all(&db, &store).await.expect("rewrite");
        let (objects, skipped) = load(&db).await.expect("load");
        let names: Vec<&str> = objects.iter().map(|r| r.name()).collect();
        assert_eq!(names, ["kept"]);
        assert_eq!(skipped.len(), 1, "the unreadable row is still there");
        assert_eq!(skipped[0].kind, "FutureKind");
        db.close().await;
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
        }
    }
}
