//! Sign-in sessions in the database (the `sessions` table): every replica finds a session any
//! of them began, and a sign-out on one ends it on all.

use futures::future::BoxFuture;

use super::{Db, with_pool};
use crate::auth::session::{SessionRecord, SessionStore};

/// Sessions kept in `db`.
pub struct DbSessions(pub Db);

#[derive(sqlx::FromRow)]
struct Row {
    id: String,
    username: String,
    groups_json: String,
    created_ms: i64,
    ends_ms: i64,
    token_expires_ms: i64,
    refreshed_ms: i64,
    sealed: String,
    version: i64,
}

// `$N` placeholders, each used once and in order: both engines read them alike.
const LOAD: &str = "SELECT id, username, groups_json, created_ms, ends_ms, token_expires_ms, \
     refreshed_ms, sealed, version FROM sessions WHERE id = $1";
const PURGE: &str = "DELETE FROM sessions WHERE ends_ms < $1";
const INSERT: &str = "INSERT INTO sessions (id, username, groups_json, created_ms, ends_ms, \
     token_expires_ms, refreshed_ms, sealed, version) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)";
const CLAIM: &str = "UPDATE sessions SET version = version + 1, refreshing_ms = $1 \
     WHERE id = $2 AND version = $3 AND (refreshing_ms IS NULL OR refreshing_ms < $4)";
const UPDATE: &str = "UPDATE sessions SET groups_json = $1, token_expires_ms = $2, \
     refreshed_ms = $3, sealed = $4, version = $5, refreshing_ms = NULL WHERE id = $6";
const DELETE: &str = "DELETE FROM sessions WHERE id = $1";

fn err(e: sqlx::Error) -> String {
    super::DbError::from(e).to_string()
}

impl SessionStore for DbSessions {
    fn load(&self, id: &str) -> BoxFuture<'_, Result<Option<SessionRecord>, String>> {
        let id = id.to_string();
        Box::pin(async move {
            let row: Option<Row> =
                with_pool!(self.0, p => sqlx::query_as(LOAD).bind(&id).fetch_optional(p).await)
                    .map_err(err)?;
            Ok(row.map(|r| SessionRecord {
                id: r.id,
                user: r.username,
                groups: serde_json::from_str(&r.groups_json).unwrap_or_default(),
                created_ms: r.created_ms,
                ends_ms: r.ends_ms,
                token_expires_ms: r.token_expires_ms,
                refreshed_ms: r.refreshed_ms,
                sealed: r.sealed,
                version: r.version,
            }))
        })
    }

    fn insert(&self, r: &SessionRecord, now_ms: i64) -> BoxFuture<'_, Result<(), String>> {
        let r = r.clone();
        Box::pin(async move {
            let _turn = self.0.write_turn().await;
            let groups = serde_json::to_string(&r.groups).unwrap_or_else(|_| "[]".into());
            with_pool!(self.0, p => sqlx::query(PURGE).bind(now_ms).execute(p).await.map(|_| ()))
                .map_err(err)?;
            with_pool!(self.0, p => sqlx::query(INSERT)
                .bind(&r.id).bind(&r.user).bind(&groups).bind(r.created_ms).bind(r.ends_ms)
                .bind(r.token_expires_ms).bind(r.refreshed_ms).bind(&r.sealed).bind(r.version)
                .execute(p).await.map(|_| ()))
            .map_err(err)
        })
    }

    fn claim(
        &self,
        id: &str,
        version: i64,
        now_ms: i64,
        stale_ms: i64,
    ) -> BoxFuture<'_, Result<bool, String>> {
        let id = id.to_string();
        Box::pin(async move {
            let _turn = self.0.write_turn().await;
            let done = with_pool!(self.0, p => sqlx::query(CLAIM)
                .bind(now_ms).bind(&id).bind(version).bind(stale_ms)
                .execute(p).await.map(|r| r.rows_affected()))
            .map_err(err)?;
            Ok(done == 1)
        })
    }

    fn update(&self, r: &SessionRecord) -> BoxFuture<'_, Result<(), String>> {
        let r = r.clone();
        Box::pin(async move {
            let _turn = self.0.write_turn().await;
            let groups = serde_json::to_string(&r.groups).unwrap_or_else(|_| "[]".into());
            with_pool!(self.0, p => sqlx::query(UPDATE)
                .bind(&groups).bind(r.token_expires_ms).bind(r.refreshed_ms).bind(&r.sealed)
                .bind(r.version).bind(&r.id)
                .execute(p).await.map(|_| ()))
            .map_err(err)
        })
    }

    fn delete(&self, id: &str) -> BoxFuture<'_, Result<(), String>> {
        let id = id.to_string();
        Box::pin(async move {
            let _turn = self.0.write_turn().await;
            with_pool!(self.0, p => sqlx::query(DELETE).bind(&id).execute(p).await.map(|_| ()))
                .map_err(err)
        })
    }
}
