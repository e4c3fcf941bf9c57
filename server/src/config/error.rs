//! A setting that cannot be used, named with what it accepts.

/// A setting that cannot be used: the error names the variable and what it accepts.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{0} must be at least 1")]
    Zero(&'static str),
    #[error("{setting} must be a number above 0, not {value}")]
    NotPositive { setting: &'static str, value: f64 },
    #[error("{setting} must be a duration above 0 like 60s, 2m or 500ms, not `{value}`")]
    NotADuration { setting: String, value: String },
    #[error("{0} must be an http:// or https:// URL")]
    NotAUrl(String),
    #[error("{setting}: {source}")]
    RateLimit {
        setting: &'static str,
        source: crate::http::rate::RateLimitError,
    },
    #[error("TLS_CERT_FILE and TLS_KEY_FILE are set together or not at all")]
    TlsPair,
    #[error(transparent)]
    Database(#[from] crate::db::DbError),
    /// Anything else: the variable and what is wrong with its value.
    #[error("{setting}: {reason}")]
    Invalid {
        setting: &'static str,
        reason: String,
    },
}

impl ConfigError {
    pub(super) fn invalid(setting: &'static str, reason: String) -> Self {
        ConfigError::Invalid { setting, reason }
    }
}
