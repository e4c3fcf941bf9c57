//! The database: SQLite by default (a file, zero set-up), PostgreSQL for production.
//!
//! Both engines run the same numbered migrations from `migrations/<engine>/` (embedded in the
//! binary). The live graph never depends on the database: it is written from the change stream
//! and read back only at start-up.

pub mod follow;
pub mod health;
pub mod hub_reports;
pub mod inventory;
mod merge;
pub mod object_writer;
pub mod objects;
pub mod sessions;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::{Arc, LazyLock, Weak};
use std::time::Duration;

use sqlx::ConnectOptions;
use sqlx::migrate::Migrator;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};

/// A statement slower than this is logged at [`SLOW_STATEMENT_LEVEL`]: debug, not sqlx's warn,
/// since sqlx logs the whole statement and a history batch is a many-row INSERT (hundreds of
/// lines of placeholders per message on a loaded machine). Slow writes show in
/// `vitistack_database_pending_writes`.
const SLOW_STATEMENT: std::time::Duration = std::time::Duration::from_secs(1);
const SLOW_STATEMENT_LEVEL: log::LevelFilter = log::LevelFilter::Debug;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};

static SQLITE_MIGRATIONS: Migrator = sqlx::migrate!("../migrations/sqlite");
static POSTGRES_MIGRATIONS: Migrator = sqlx::migrate!("../migrations/postgres");

/// The per-connection staging table the history writer copies PostgreSQL batches into (created
/// when a pooled connection opens, emptied at every commit; the history owns its use).
pub const POSTGRES_STAGING: &str = "CREATE TEMP TABLE IF NOT EXISTS events_in (at_ms BIGINT, \
     seq BIGINT, kind TEXT, namespace TEXT, name TEXT, uid TEXT, resource_version TEXT, \
     change TEXT, event_type TEXT, phase_before TEXT, phase_after TEXT, diff TEXT, \
     dropped BIGINT, actor TEXT, datacenter TEXT) ON COMMIT DELETE ROWS";

/// Connection pool settings (the names follow Go's `database/sql` settings the old operator's
/// design used: max open connections, idle connections, connection lifetime).
#[derive(Clone, Debug)]
pub struct PoolSettings {
    /// Largest number of open connections (`DB_MAX_OPEN_CONNS`).
    pub max_open: u32,
    /// Most connections kept open while idle (`DB_MAX_IDLE_CONNS`).
    pub max_idle: u32,
    /// Close a connection idle for longer (`DB_CONN_MAX_IDLE_TIME`; None: never).
    pub max_idle_time: Option<Duration>,
    /// Close connections older than this (`DB_CONN_MAX_LIFETIME_SECONDS`).
    pub max_lifetime: Duration,
    /// Give up waiting for a connection after this long (`DB_CONNECT_TIMEOUT_SECONDS`).
    pub acquire_timeout: Duration,
    /// Counts the read statements run through [`statement!`] (served as
    /// `vitistack_history_queries_total`; a new counter when none is registered).
    pub read_statements: prometheus::IntCounter,
}

impl Default for PoolSettings {
    fn default() -> Self {
        PoolSettings {
            max_open: 10,
            max_idle: 2,
            max_idle_time: Some(Duration::from_secs(60)),
            max_lifetime: Duration::from_secs(30 * 60),
            acquire_timeout: Duration::from_secs(5),
            read_statements: unregistered_counter(),
        }
    }
}

/// `DB_MAX_IDLE_CONNS` as Go's `database/sql` means it: at most this many connections stay open
/// while idle. sqlx has a floor (`min_connections`) and an idle time, no cap, so the idle ones
/// beyond it are closed here, looked at every second, until the pool is closed.
fn cap_idle<DB: sqlx::Database>(pool: sqlx::Pool<DB>, cap: u32) {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        while !pool.is_closed() {
            tick.tick().await;
            while pool.num_idle() > cap as usize {
                match pool.try_acquire() {
                    Some(conn) => {
                        let _ = conn.close().await;
                    }
                    None => break,
                }
            }
        }
    });
}

/// A statement counter nobody serves (settings built without the server's metrics).
pub fn unregistered_counter() -> prometheus::IntCounter {
    prometheus::IntCounter::new("vitistack_history_queries_total", "read statements")
        .unwrap_or_else(|_| unreachable!("the name and help are valid"))
}

/// The database as start-up found it: what the writers (objects, history) start with.
#[derive(Clone)]
pub enum Start {
    /// Connected and restored at start-up; only changes from now on need writing.
    Connected(Db),
    /// Not reachable at start-up: keep trying; when it answers, merge its objects into the store
    /// (those the store does not have) and rewrite the table from the store.
    Retry {
        /// `DATABASE_URL`.
        url: String,
        /// Pool settings.
        pool: PoolSettings,
    },
}

/// A failure talking to the database, with the (password-free) URL it concerned.
#[derive(Debug, thiserror::Error)]
pub enum DbError {
    /// The URL is neither `sqlite:` nor `postgres://`.
    #[error("DATABASE_URL `{0}` must start with sqlite: or postgres://")]
    Scheme(String),
    /// Could not connect.
    #[error("cannot connect to {url}: {source}")]
    Connect {
        /// The URL, password blanked.
        url: String,
        /// Why.
        source: sqlx::Error,
    },
    /// A migration failed.
    #[error("migrating {url} failed: {source}")]
    Migrate {
        /// The URL, password blanked.
        url: String,
        /// Why.
        source: sqlx::migrate::MigrateError,
    },
    /// A statement failed.
    #[error("database error: {0}")]
    Query(#[from] sqlx::Error),
}

/// Which engine a URL names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Engine {
    /// A SQLite file.
    Sqlite,
    /// A PostgreSQL server.
    Postgres,
}

impl Engine {
    /// The engine of a `DATABASE_URL`.
    pub fn of(url: &str) -> Result<Engine, DbError> {
        if url.starts_with("sqlite:") {
            Ok(Engine::Sqlite)
        } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Ok(Engine::Postgres)
        } else {
            Err(DbError::Scheme(redact_url(url)))
        }
    }

    /// `sqlite` or `postgres`.
    pub fn name(self) -> &'static str {
        match self {
            Engine::Sqlite => "sqlite",
            Engine::Postgres => "postgres",
        }
    }
}

/// A connection pool to either engine.
#[derive(Clone, Debug)]
pub enum Pool {
    /// SQLite.
    Sqlite(SqlitePool),
    /// PostgreSQL.
    Postgres(PgPool),
}

/// The database: a pool to either engine, and the counter of the read statements run on it.
#[derive(Clone, Debug)]
pub struct Db {
    pool: Pool,
    read_statements: prometheus::IntCounter,
    /// SQLite: the file's write turn, shared by every pool of this process on the same file.
    turn: Option<Arc<tokio::sync::Mutex<()>>>,
}

/// One writer at a time per SQLite file, taken in this process. SQLite itself lets one writer
/// in, and another that waits longer than the busy timeout fails with `database is locked`
/// (seen under load: a batch of object writes held the lock while the history writer waited).
/// Our writers (objects, history, its retention, webhook deliveries, imports) take turns here
/// instead, queued in order without a time limit; the busy timeout is left to other processes.
/// Every pool opened on the same file in this process shares the turn (the history writer
/// opens its own when the database was away at start-up).
fn sqlite_turn(file: &Path) -> Arc<tokio::sync::Mutex<()>> {
    type Turns = HashMap<PathBuf, Weak<tokio::sync::Mutex<()>>>;
    static TURNS: LazyLock<parking_lot::Mutex<Turns>> = LazyLock::new(Default::default);
    let key = std::fs::canonicalize(file).unwrap_or_else(|_| file.to_path_buf());
    let mut turns = TURNS.lock();
    turns.retain(|_, t| t.strong_count() > 0);
    if let Some(turn) = turns.get(&key).and_then(Weak::upgrade) {
        return turn;
    }
    let turn = Arc::new(tokio::sync::Mutex::new(()));
    turns.insert(key, Arc::downgrade(&turn));
    turn
}

/// Run the same code against whichever pool `db` holds (the statements are engine-neutral or
/// chosen per engine by the caller).
macro_rules! with_pool {
    ($db:expr, $pool:ident => $body:expr) => {
        match $db.pool() {
            $crate::db::Pool::Sqlite($pool) => $body,
            $crate::db::Pool::Postgres($pool) => $body,
        }
    };
}
pub(crate) use with_pool;

/// Run one read statement (`$body`, on the pool `$pool`) and count it: this is how a test (and
/// `/metrics`) sees how many statements a GraphQL answer really cost.
macro_rules! statement {
    ($db:expr, $pool:ident => $body:expr) => {{
        $db.count_statement();
        $crate::db::with_pool!($db, $pool => $body)
    }};
}
pub(crate) use statement;

impl Db {
    /// Connect (creating the SQLite file if needed). Does not migrate.
    pub async fn connect(url: &str, settings: &PoolSettings) -> Result<Db, DbError> {
        let connect_err = |source| DbError::Connect {
            url: redact_url(url),
            source,
        };
        match Engine::of(url)? {
            Engine::Sqlite => {
                let opts = SqliteConnectOptions::from_str(url)
                    .map_err(connect_err)?
                    .create_if_missing(true)
                    .journal_mode(SqliteJournalMode::Wal)
                    // WAL with NORMAL: never corrupted; a power cut may lose the last commits.
                    .synchronous(SqliteSynchronous::Normal)
                    .busy_timeout(settings.acquire_timeout)
                    .log_slow_statements(SLOW_STATEMENT_LEVEL, SLOW_STATEMENT);
                let file = opts.get_filename().to_path_buf();
                let pool = SqlitePoolOptions::new()
                    .max_connections(settings.max_open.max(1))
                    // One connection always: an in-memory database lives only as long as one.
                    .min_connections(1)
                    .idle_timeout(settings.max_idle_time)
                    .max_lifetime(settings.max_lifetime)
                    .acquire_timeout(settings.acquire_timeout)
                    .connect_with(opts)
                    .await
                    .map_err(connect_err)?;
                cap_idle(pool.clone(), settings.max_idle.max(1));
                Ok(Db {
                    pool: Pool::Sqlite(pool),
                    read_statements: settings.read_statements.clone(),
                    turn: Some(sqlite_turn(&file)),
                })
            }
            Engine::Postgres => {
                let opts = PgConnectOptions::from_str(url)
                    .map_err(connect_err)?
                    .log_slow_statements(SLOW_STATEMENT_LEVEL, SLOW_STATEMENT);
                // One direct connection first: a pool only says "timed out", this says why.
                let first = tokio::time::timeout(
                    settings.acquire_timeout,
                    <sqlx::PgConnection as sqlx::Connection>::connect_with(&opts),
                )
                .await
                .map_err(|_| connect_err(sqlx::Error::PoolTimedOut))?;
                let conn = first.map_err(connect_err)?;
                let _ = sqlx::Connection::close(conn).await;
                let pool = PgPoolOptions::new()
                    .after_connect(|conn, _| {
                        Box::pin(async move {
                            // Where history batches are copied to (a temporary table per
                            // connection; cheap, and gone with the connection).
                            sqlx::Executor::execute(&mut *conn, POSTGRES_STAGING).await?;
                            Ok(())
                        })
                    })
                    .max_connections(settings.max_open.max(1))
                    .min_connections(settings.max_idle.min(1))
                    .idle_timeout(settings.max_idle_time)
                    .max_lifetime(settings.max_lifetime)
                    .acquire_timeout(settings.acquire_timeout)
                    .connect_with(opts)
                    .await
                    .map_err(connect_err)?;
                cap_idle(pool.clone(), settings.max_idle);
                Ok(Db {
                    pool: Pool::Postgres(pool),
                    read_statements: settings.read_statements.clone(),
                    turn: None,
                })
            }
        }
    }

    /// Connect and bring the schema up to date.
    pub async fn open(url: &str, settings: &PoolSettings) -> Result<Db, DbError> {
        let db = Db::connect(url, settings).await?;
        db.migrate().await.map_err(|e| match e {
            DbError::Migrate { source, .. } => DbError::Migrate {
                url: redact_url(url),
                source,
            },
            other => other,
        })?;
        Ok(db)
    }

    /// Apply pending migrations; returns the versions now applied.
    pub async fn migrate(&self) -> Result<Vec<i64>, DbError> {
        let migrate_err = |source| DbError::Migrate {
            url: String::new(),
            source,
        };
        match &self.pool {
            Pool::Sqlite(p) => SQLITE_MIGRATIONS.run(p).await.map_err(migrate_err)?,
            Pool::Postgres(p) => POSTGRES_MIGRATIONS.run(p).await.map_err(migrate_err)?,
        }
        let versions: Vec<i64> = with_pool!(self, p => {
            sqlx::query_scalar("SELECT version FROM _sqlx_migrations WHERE success ORDER BY version")
                .fetch_all(p)
                .await?
        });
        Ok(versions)
    }

    /// The engine behind the pool.
    pub fn engine(&self) -> Engine {
        match self.pool {
            Pool::Sqlite(_) => Engine::Sqlite,
            Pool::Postgres(_) => Engine::Postgres,
        }
    }

    /// The pool.
    pub fn pool(&self) -> &Pool {
        &self.pool
    }

    /// The pool's connections: (idle, in use, the most it opens).
    pub fn connections(&self) -> (u32, u32, u32) {
        let (size, idle, max) = with_pool!(self, p => (
            p.size(),
            p.num_idle() as u32,
            p.options().get_max_connections()
        ));
        (idle, size.saturating_sub(idle), max)
    }

    /// Wait for this process's turn to write (SQLite: one writer per file, see [`sqlite_turn`];
    /// PostgreSQL: at once). Hold what it returns until the write is committed.
    pub async fn write_turn(&self) -> Option<tokio::sync::OwnedMutexGuard<()>> {
        match &self.turn {
            Some(turn) => Some(turn.clone().lock_owned().await),
            None => None,
        }
    }

    /// Count one read statement (see [`statement!`]).
    pub fn count_statement(&self) {
        self.read_statements.inc();
    }

    /// Read statements run through [`statement!`] on this database so far.
    pub fn read_statements(&self) -> u64 {
        self.read_statements.get()
    }

    /// A round trip to the server.
    pub async fn ping(&self) -> Result<(), DbError> {
        with_pool!(self, p => { sqlx::query("SELECT 1").execute(p).await?; });
        Ok(())
    }

    /// Close every connection.
    pub async fn close(&self) {
        with_pool!(self, p => p.close().await)
    }
}

/// Query parameters of a connection URL that carry credentials (libpq's and sqlx's names).
const SECRET_PARAMS: &[&str] = &[
    "password",
    "sslpassword",
    "passfile",
    "sslkey",
    "token",
    "access_token",
    "api_key",
    "apikey",
    "secret",
];

/// A connection URL with its credentials blanked, for messages and logs: the password of
/// `user:password@`, and query parameters that carry one (`?password=`, `sslpassword`, `token`).
pub fn redact_url(url: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b, Some(q)),
        None => (url, None),
    };
    let mut out = match (base.find("://"), base.rfind('@')) {
        (Some(s), Some(at)) if at > s => match base[s + 3..at].split_once(':') {
            Some((user, _)) => format!("{}{user}:***{}", &base[..s + 3], &base[at..]),
            None => base.to_string(),
        },
        _ => base.to_string(),
    };
    if let Some(q) = query {
        out.push('?');
        let params: Vec<String> = q
            .split('&')
            .map(|pair| match pair.split_once('=') {
                Some((k, _)) if SECRET_PARAMS.contains(&k.to_ascii_lowercase().as_str()) => {
                    format!("{k}=***")
                }
                _ => pair.to_string(),
            })
            .collect();
        out.push_str(&params.join("&"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connection_credentials_are_blanked() {
        assert_eq!(
            redact_url("postgres://app:hunter2@db:5432/v"),
            "postgres://app:***@db:5432/v"
        );
        assert_eq!(redact_url("sqlite://vitistack.db"), "sqlite://vitistack.db");
        assert_eq!(
            redact_url(
                "postgres://db/v?user=app&password=hunter2&sslmode=require&SSLPassword=k3y&token=t0k"
            ),
            "postgres://db/v?user=app&password=***&sslmode=require&SSLPassword=***&token=***"
        );
        assert_eq!(
            redact_url("postgres://a:b@db/v?password=c"),
            "postgres://a:***@db/v?password=***"
        );
    }
}
