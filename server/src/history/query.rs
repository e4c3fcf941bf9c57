//! Reading the event log: pages by filter (newest first, keyset on the row id), the recent events
//! of many objects in one statement (for the DataLoader), phase changes, failures per day, and
//! retention.

use std::collections::HashMap;

use serde_json::Value;

use crate::db::{Db, DbError, statement, with_pool};

/// One stored event.
#[derive(Clone, Debug, PartialEq, sqlx::FromRow)]
pub struct StoredEvent {
    /// Row id (increasing in write order).
    pub id: i64,
    /// ms since the Unix epoch.
    pub at_ms: i64,
    /// The store's sequence number.
    pub seq: i64,
    /// Kind name ("" for gap markers).
    pub kind: String,
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// metadata.uid.
    pub uid: String,
    /// metadata.resourceVersion.
    pub resource_version: String,
    /// ADDED, MODIFIED, DELETED or GAP.
    pub change: String,
    /// `infrastructure.machine.created`, …
    pub event_type: String,
    /// Phase before.
    pub phase_before: Option<String>,
    /// Phase after.
    pub phase_after: Option<String>,
    /// JSON diff.
    pub diff: sqlx::types::Json<Value>,
    /// Events dropped (gap markers).
    pub dropped: Option<i64>,
    /// Who asked for the change through the API, when someone did.
    pub actor: Option<String>,
    /// The key of the object's datacenter ("" on a single-cluster server).
    pub datacenter: String,
}

const COLUMNS: &str = "id, at_ms, seq, kind, namespace, name, uid, resource_version, change, \
                       event_type, phase_before, phase_after, diff, dropped, actor, datacenter";

/// What `events(filter)` selects; every part optional.
#[derive(Clone, Debug, Default)]
pub struct EventQuery {
    /// One object by uid.
    pub uid: Option<String>,
    /// Kind name.
    pub kind: Option<String>,
    /// Namespace.
    pub namespace: Option<String>,
    /// Name.
    pub name: Option<String>,
    /// Event types (any of).
    pub types: Vec<String>,
    /// At or after (ms).
    pub since_ms: Option<i64>,
    /// Before (ms).
    pub until_ms: Option<i64>,
    /// Only rows with an id below this (the keyset cursor).
    pub before_id: Option<i64>,
    /// Who asked for the change through the API.
    pub actor: Option<String>,
    /// The object's datacenter.
    pub datacenter: Option<String>,
    /// What the caller may see: rows of other objects are left out.
    pub scope: crate::store::Scope,
}

/// Up to `limit` events matching `q`, newest first.
pub async fn page(db: &Db, q: &EventQuery, limit: usize) -> Result<Vec<StoredEvent>, DbError> {
    let rows = statement!(db, p => {
        let mut b = sqlx::QueryBuilder::new(format!("SELECT {COLUMNS} FROM events WHERE 1 = 1"));
        if let Some(v) = &q.uid {
            b.push(" AND uid = ").push_bind(v.clone());
        }
        if let Some(v) = &q.datacenter {
            b.push(" AND datacenter = ").push_bind(v.clone());
        }
        if let Some(v) = &q.kind {
            b.push(" AND kind = ").push_bind(v.clone());
        }
        if let Some(v) = &q.namespace {
            b.push(" AND namespace = ").push_bind(v.clone());
        }
        if let Some(v) = &q.name {
            b.push(" AND name = ").push_bind(v.clone());
        }
        if let Some(v) = &q.actor {
            // A person (OIDC or Kubernetes) is recorded as `USER (how; groups …)`: the
            // name alone finds their changes.
            b.push(" AND (actor = ")
                .push_bind(v.clone())
                .push(" OR substr(actor, 1, ")
                .push_bind(v.chars().count() as i64 + 2)
                .push(") = ")
                .push_bind(format!("{v} ("))
                .push(")");
        }
        push_scope(&mut b, &q.scope);
        if !q.types.is_empty() {
            b.push(" AND event_type IN (");
            let mut s = b.separated(", ");
            for t in &q.types {
                s.push_bind(t.clone());
            }
            b.push(")");
        }
        if let Some(v) = q.since_ms {
            b.push(" AND at_ms >= ").push_bind(v);
        }
        if let Some(v) = q.until_ms {
            b.push(" AND at_ms < ").push_bind(v);
        }
        if let Some(v) = q.before_id {
            b.push(" AND id < ").push_bind(v);
        }
        b.push(" ORDER BY id DESC LIMIT ").push_bind(limit as i64);
        b.build_query_as::<StoredEvent>().fetch_all(p).await?
    });
    Ok(rows)
}

/// ` AND (…)`: only the rows of objects `scope` sees (nothing for everything). A datacenter's own
/// grants apply to it; the grants for every datacenter apply to the datacenters not named.
fn push_scope<DB: sqlx::Database>(b: &mut sqlx::QueryBuilder<DB>, scope: &crate::store::Scope)
where
    String: for<'t> sqlx::Encode<'t, DB> + sqlx::Type<DB>,
{
    let Some(grants) = scope.grants() else {
        return;
    };
    let named: Vec<String> = grants
        .datacenters
        .keys()
        .flatten()
        .map(|d| d.key().to_string())
        .collect();
    b.push(" AND (1 = 0");
    for (dc, kinds) in &grants.datacenters {
        for (kind, namespaces) in kinds {
            b.push(" OR (kind = ").push_bind(kind.name().to_string());
            match dc {
                Some(dc) => {
                    b.push(" AND datacenter = ").push_bind(dc.key().to_string());
                }
                None if named.is_empty() => {}
                None => {
                    b.push(" AND datacenter NOT IN ");
                    push_uids(b, &named);
                }
            }
            match namespaces {
                crate::store::Namespaces::All => {}
                crate::store::Namespaces::Only(set) if kind.namespaced() && !set.is_empty() => {
                    b.push(" AND namespace IN ");
                    push_uids(b, &set.iter().cloned().collect::<Vec<_>>());
                }
                crate::store::Namespaces::Only(_) => {
                    b.push(" AND 1 = 0");
                }
            }
            b.push(")");
        }
    }
    b.push(")");
}

/// Rows grouped by uid, each group in the order of the rows.
fn by_uid(rows: Vec<StoredEvent>) -> HashMap<String, Vec<StoredEvent>> {
    let mut out: HashMap<String, Vec<StoredEvent>> = HashMap::new();
    for r in rows {
        out.entry(r.uid.clone()).or_default().push(r);
    }
    out
}

/// `(?, ?, …)` with the uids bound.
fn push_uids<DB: sqlx::Database>(b: &mut sqlx::QueryBuilder<DB>, uids: &[String])
where
    String: for<'t> sqlx::Encode<'t, DB> + sqlx::Type<DB>,
{
    b.push("(");
    let mut s = b.separated(", ");
    for u in uids {
        s.push_bind(u.clone());
    }
    b.push(")");
}

/// The newest `per_object` events of each uid, newest first, in one statement.
pub async fn recent_by_uid(
    db: &Db,
    uids: &[String],
    per_object: usize,
) -> Result<HashMap<String, Vec<StoredEvent>>, DbError> {
    if uids.is_empty() {
        return Ok(HashMap::new());
    }
    let rows: Vec<StoredEvent> = statement!(db, p => {
        let mut b = sqlx::QueryBuilder::new(format!(
            "SELECT {COLUMNS} FROM (SELECT {COLUMNS}, ROW_NUMBER() OVER \
             (PARTITION BY uid ORDER BY id DESC) AS n FROM events WHERE uid IN "
        ));
        push_uids(&mut b, uids);
        b.push(") ranked WHERE n <= ").push_bind(per_object as i64);
        b.push(" ORDER BY uid, id DESC");
        b.build_query_as::<StoredEvent>().fetch_all(p).await?
    });
    Ok(by_uid(rows))
}

/// Each uid's creation, deletion and phase changes, oldest first, in one statement.
pub async fn phase_changes_by_uid(
    db: &Db,
    uids: &[String],
) -> Result<HashMap<String, Vec<StoredEvent>>, DbError> {
    if uids.is_empty() {
        return Ok(HashMap::new());
    }
    let rows: Vec<StoredEvent> = statement!(db, p => {
        let mut b =
            sqlx::QueryBuilder::new(format!("SELECT {COLUMNS} FROM events WHERE uid IN "));
        push_uids(&mut b, uids);
        b.push(
            " AND (change <> 'MODIFIED' OR COALESCE(phase_before, '') <> COALESCE(phase_after, '')) \
             ORDER BY uid, id",
        );
        b.build_query_as::<StoredEvent>().fetch_all(p).await?
    });
    Ok(by_uid(rows))
}

/// Objects of `kind` entering phase `phase`, per UTC day since `since_ms`: (day number since the
/// epoch, count), oldest first.
pub async fn entered_phase_per_day(
    db: &Db,
    kind: &str,
    phase: &str,
    since_ms: i64,
    scope: &crate::store::Scope,
) -> Result<Vec<(i64, i64)>, DbError> {
    let rows: Vec<(i64, i64)> = statement!(db, p => {
        let mut b = sqlx::QueryBuilder::new(
            "SELECT at_ms / 86400000 AS day, COUNT(*) AS n FROM events WHERE kind = ",
        );
        b.push_bind(kind.to_string())
            .push(" AND phase_after = ")
            .push_bind(phase.to_string())
            .push(" AND COALESCE(phase_before, '') <> ")
            .push_bind(phase.to_string())
            .push(" AND at_ms >= ")
            .push_bind(since_ms);
        push_scope(&mut b, scope);
        b.push(" GROUP BY at_ms / 86400000 ORDER BY day");
        b.build_query_as::<(i64, i64)>().fetch_all(p).await?
    });
    Ok(rows)
}

/// Delete events older than `cutoff_ms`; returns how many.
pub async fn delete_before(db: &Db, cutoff_ms: i64) -> Result<u64, DbError> {
    let _turn = db.write_turn().await;
    let n = with_pool!(db, p => {
        sqlx::query(match db.engine() {
            crate::db::Engine::Sqlite => "DELETE FROM events WHERE at_ms < ?1",
            crate::db::Engine::Postgres => "DELETE FROM events WHERE at_ms < $1",
        })
        .bind(cutoff_ms)
        .execute(p)
        .await?
        .rows_affected()
    });
    Ok(n)
}
