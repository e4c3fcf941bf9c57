//! Setting values that hold secrets: they read as themselves, but `Debug` (and so every log of
//! the settings) shows nothing secret.

/// A value that must never be printed: `Debug` shows `<redacted>`, and there is no `Display`.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(pub String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<redacted>")
    }
}

impl std::str::FromStr for Secret {
    type Err = std::convert::Infallible;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(Secret(s.to_string()))
    }
}

/// A webhook endpoint: `Debug` shows its scheme and host only (the rest may be its key).
#[derive(Clone, PartialEq, Eq)]
pub struct WebhookUrl(pub String);

impl std::fmt::Debug for WebhookUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&crate::history::webhooks::endpoint_label(&self.0))
    }
}

impl std::str::FromStr for WebhookUrl {
    type Err = std::convert::Infallible;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(WebhookUrl(s.to_string()))
    }
}

/// `DATABASE_URL`: reads as the URL (`&str`), but `Debug` blanks its credentials.
#[derive(Clone, PartialEq, Eq)]
pub struct DatabaseUrl(pub String);

impl std::ops::Deref for DatabaseUrl {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for DatabaseUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&crate::db::redact_url(&self.0))
    }
}

impl std::str::FromStr for DatabaseUrl {
    type Err = std::convert::Infallible;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(DatabaseUrl(s.to_string()))
    }
}
