//! The watcher of credentials: re-reads the keys file, and tells open sockets when a key
//! expires, the keys change, or reviews, tokens and sessions need checking again.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use super::{Auth, KeySet};

impl Auth {
    /// Re-read the keys file every `reload`, tell sockets when a key expires and when reviews
    /// need renewing; runs until `stop`.
    pub fn spawn_watcher(
        self: &Arc<Self>,
        mut stop: watch::Receiver<bool>,
    ) -> tokio::task::JoinHandle<()> {
        let auth = self.clone();
        tokio::spawn(async move {
            let reload = auth.settings.reload.max(Duration::from_millis(100));
            // Reviews run out, tokens expire and sessions end: sockets re-check at this pace.
            let renew = match (&auth.reviewer, &auth.provider) {
                (Some(r), _) => Some(r.recheck()),
                (None, Some(_)) => Some(auth.settings.review_ttl / 2),
                (None, None) => None,
            }
            .map(|d| d.max(Duration::from_millis(500)));
            let mut last_text = auth
                .settings
                .keys_file
                .as_ref()
                .and_then(|p| std::fs::read_to_string(p).ok());
            let mut last_error: Option<String> = None;
            let mut next_renew = renew.map(|d| tokio::time::Instant::now() + d);
            loop {
                let now = jiff::Timestamp::now();
                let mut wait = reload;
                if let Some(e) = auth.keys.load().next_expiry(now) {
                    let until = e.duration_since(now).unsigned_abs();
                    wait = wait.min(until + Duration::from_millis(10));
                }
                if let Some(at) = next_renew {
                    wait = wait.min(at.saturating_duration_since(tokio::time::Instant::now()));
                }
                let expiring = auth.keys.load().next_expiry(now);
                tokio::select! {
                    _ = tokio::time::sleep(wait) => {}
                    _ = stop.wait_for(|s| *s) => return,
                }
                let now = jiff::Timestamp::now();
                if expiring.is_some_and(|e| e <= now) {
                    tracing::info!("an API key expired: its sockets are closed");
                    auth.bump();
                }
                if let (Some(at), Some(d)) = (next_renew, renew)
                    && tokio::time::Instant::now() >= at
                {
                    next_renew = Some(tokio::time::Instant::now() + d);
                    auth.bump();
                }
                let Some(path) = auth.settings.keys_file.clone() else {
                    continue;
                };
                let text = tokio::task::spawn_blocking(move || std::fs::read_to_string(&path))
                    .await
                    .ok()
                    .and_then(Result::ok);
                if text == last_text {
                    continue;
                }
                let origin = auth
                    .settings
                    .keys_file
                    .as_ref()
                    .map(|p| p.display().to_string())
                    .unwrap_or_default();
                match text.as_deref().map(|t| KeySet::parse(t, &origin)) {
                    Some(Ok(keys)) => {
                        tracing::info!(keys = keys.len(), "API keys reloaded");
                        auth.set_keys(keys);
                        last_error = None;
                        last_text = text;
                    }
                    // A file being rewritten, or wrong: the keys in force stay.
                    Some(Err(e)) => {
                        let e = e.to_string();
                        if last_error.as_ref() != Some(&e) {
                            tracing::warn!(error = %e, "API keys file refused; the keys in force stay");
                            last_error = Some(e);
                        }
                    }
                    None => {
                        let e = format!("{origin} cannot be read");
                        if last_error.as_ref() != Some(&e) {
                            tracing::warn!(file = %origin, "API keys file cannot be read; the keys in force stay");
                            last_error = Some(e);
                        }
                    }
                }
            }
        })
    }
}
