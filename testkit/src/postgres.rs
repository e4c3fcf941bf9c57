//! A PostgreSQL database of a test's own on the machine's server (`scripts/test.sh` starts it),
//! dropped when the test ends, even when it panics.

/// Where test databases are created (`VITISTACK_TEST_POSTGRES`, else the local server).
pub fn admin_url() -> String {
    std::env::var("VITISTACK_TEST_POSTGRES")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into())
}

/// Host and port of the PostgreSQL server.
pub fn server() -> String {
    let url = admin_url();
    let after = url.split('@').nth(1).unwrap_or("127.0.0.1:5432/postgres");
    after
        .split('/')
        .next()
        .unwrap_or("127.0.0.1:5432")
        .to_string()
}

/// A fresh database, dropped with this value.
pub struct TempPostgres {
    pub name: String,
}

impl TempPostgres {
    /// Create it; fails the test when the server is not running.
    pub async fn create() -> TempPostgres {
        use sqlx::Connection;
        let name = format!("vitistack_test_{}", uuid_like());
        let mut admin = sqlx::PgConnection::connect(&admin_url())
            .await
            .expect("PostgreSQL on 127.0.0.1:5432 (scripts/test.sh starts it)");
        // The name is ours (random hex), not input.
        sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
            .execute(&mut admin)
            .await
            .expect("create test database");
        TempPostgres { name }
    }

    /// Its URL.
    pub fn url(&self) -> String {
        format!("postgres://postgres@{}/{}", server(), self.name)
    }

    /// One number a query over it answers (`SELECT count(*) …`).
    pub async fn scalar_i64(&self, sql: &'static str) -> i64 {
        use sqlx::Connection;
        let mut c = sqlx::PgConnection::connect(&self.url())
            .await
            .expect("connect to the test database");
        sqlx::query_scalar(sql)
            .fetch_one(&mut c)
            .await
            .expect("query the test database")
    }

    /// Its URL through `addr` (a proxy) instead.
    pub fn url_via(&self, addr: std::net::SocketAddr) -> String {
        format!("postgres://postgres@{addr}/{}", self.name)
    }
}

/// 32 random hex digits (a database name no other test picks).
fn uuid_like() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut out = String::new();
    for i in 0..2u64 {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(i);
        h.write_u128(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or_default(),
        );
        out.push_str(&format!("{:016x}", h.finish()));
    }
    out
}

/// Dropped on a thread of its own (`Drop` cannot await).
impl Drop for TempPostgres {
    fn drop(&mut self) {
        let name = self.name.clone();
        let dropped = std::thread::spawn(move || {
            use sqlx::Connection;
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .ok()?;
            rt.block_on(async {
                let mut admin = sqlx::PgConnection::connect(&admin_url()).await.ok()?;
                sqlx::query(sqlx::AssertSqlSafe(format!(
                    "DROP DATABASE IF EXISTS {name} WITH (FORCE)"
                )))
                .execute(&mut admin)
                .await
                .ok()
            })
        });
        let _ = dropped.join();
    }
}
