//! The database settings `serve`, `migrate` and `import` share.

use clap::Args;

use super::{ConfigError, DatabaseUrl};

/// Database settings, shared by `serve`, `migrate` and `import`.
#[derive(Args, Clone, Debug)]
pub struct DbConfig {
    /// Database for history and embedded-mode objects: `sqlite://FILE` (created if missing) or
    /// `postgres://USER:PASSWORD@HOST:PORT/DB`.
    #[arg(
        long,
        env = "DATABASE_URL",
        default_value = "sqlite://vitistack.db",
        hide_env_values = true
    )]
    pub database_url: DatabaseUrl,

    /// Largest number of open database connections.
    #[arg(long, env = "DB_MAX_OPEN_CONNS", default_value_t = 10)]
    pub db_max_open_conns: u32,

    /// Most database connections kept open while idle (Go's `MaxIdleConns`): beyond it, idle
    /// connections are closed.
    #[arg(long, env = "DB_MAX_IDLE_CONNS", default_value_t = 2)]
    pub db_max_idle_conns: u32,

    /// Close a database connection idle for longer than this (`60s`, `5m`; `0`: never).
    #[arg(long, env = "DB_CONN_MAX_IDLE_TIME", default_value = "60s")]
    pub db_conn_max_idle_time: String,

    /// Close database connections older than this many seconds.
    #[arg(long, env = "DB_CONN_MAX_LIFETIME_SECONDS", default_value_t = 1800)]
    pub db_conn_max_lifetime_seconds: u64,

    /// Give up connecting (or waiting for a free connection) after this many seconds.
    #[arg(long, env = "DB_CONNECT_TIMEOUT_SECONDS", default_value_t = 5)]
    pub db_connect_timeout_seconds: u64,
}

impl DbConfig {
    /// Pool settings.
    pub fn pool(&self) -> crate::db::PoolSettings {
        crate::db::PoolSettings {
            max_open: self.db_max_open_conns,
            max_idle: self.db_max_idle_conns,
            // Checked by `validate`; an unreadable value keeps the default (60 s) here.
            max_idle_time: self
                .max_idle_time()
                .unwrap_or(Some(std::time::Duration::from_secs(60))),
            max_lifetime: std::time::Duration::from_secs(self.db_conn_max_lifetime_seconds),
            acquire_timeout: std::time::Duration::from_secs(self.db_connect_timeout_seconds.max(1)),
            read_statements: crate::db::unregistered_counter(),
        }
    }

    /// Check the URL; the error names the variable and what it accepts.
    pub fn validate(&self) -> Result<(), ConfigError> {
        crate::db::Engine::of(&self.database_url)?;
        if self.db_max_open_conns == 0 {
            return Err(ConfigError::Zero("DB_MAX_OPEN_CONNS"));
        }
        self.max_idle_time()?;
        Ok(())
    }

    /// DB_CONN_MAX_IDLE_TIME; `0`: connections are never closed for being idle.
    fn max_idle_time(&self) -> Result<Option<std::time::Duration>, ConfigError> {
        let text = self.db_conn_max_idle_time.trim();
        if text.trim_end_matches(|c: char| c.is_ascii_alphabetic()) == "0" {
            return Ok(None);
        }
        super::settings::positive_duration("DB_CONN_MAX_IDLE_TIME", &self.db_conn_max_idle_time)
            .map(Some)
    }
}
