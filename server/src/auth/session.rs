//! Sign-in sessions: a person signed in through the OpenID provider holds a random token in an
//! HttpOnly cookie; the server keeps the session (who, their groups, until when, and the
//! provider's refresh and ID tokens sealed with AES-256-GCM under a key derived from the client
//! secret) in the database, so every replica knows it and none can read the provider's tokens
//! from a copy of the database. The database holds the SHA-256 of the cookie's token, never the
//! token. Sessions are refreshed with the provider before the ID token expires (one replica at a
//! time, claimed in the database) and end at sign-out, when the provider refuses a refresh, or at
//! their longest (`OIDC_SESSION_MAX_HOURS`).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine as _;
use futures::future::BoxFuture;
use parking_lot::Mutex;
use ring::aead;
use ring::rand::{SecureRandom, SystemRandom};
use serde::{Deserialize, Serialize};

use super::oidc::{OidcError, Person, Provider};

/// A session as the database keeps it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionRecord {
    /// SHA-256 (hex) of the cookie's token.
    pub id: String,
    /// The user name.
    pub user: String,
    /// The groups, sorted.
    pub groups: Vec<String>,
    /// When it began (ms since the epoch).
    pub created_ms: i64,
    /// When it ends at the latest.
    pub ends_ms: i64,
    /// When the provider's ID token ends (refreshed before).
    pub token_expires_ms: i64,
    /// When it was last refreshed (or began).
    pub refreshed_ms: i64,
    /// The provider's tokens, sealed.
    pub sealed: String,
    /// Moves at every write (a refresh claims it).
    pub version: i64,
}

/// Where sessions are kept (the database; every replica reads the same).
pub trait SessionStore: Send + Sync {
    /// The session with this id.
    fn load(&self, id: &str) -> BoxFuture<'_, Result<Option<SessionRecord>, String>>;
    /// Keep a new session (and drop those that ended before `now_ms`).
    fn insert(&self, record: &SessionRecord, now_ms: i64) -> BoxFuture<'_, Result<(), String>>;
    /// Take the right to refresh: true when `version` is still the session's and no other
    /// replica claimed it since `stale_ms`.
    fn claim(
        &self,
        id: &str,
        version: i64,
        now_ms: i64,
        stale_ms: i64,
    ) -> BoxFuture<'_, Result<bool, String>>;
    /// Write a refreshed session (its version moves on).
    fn update(&self, record: &SessionRecord) -> BoxFuture<'_, Result<(), String>>;
    /// End a session.
    fn delete(&self, id: &str) -> BoxFuture<'_, Result<(), String>>;
}

/// The provider's tokens of a session (sealed in the database).
#[derive(Serialize, Deserialize)]
struct Held {
    refresh_token: Option<String>,
    id_token: Option<String>,
}

/// What a sign-in carries between the redirect to the provider and its return (sealed in a
/// short-lived cookie, so any replica can finish it).
#[derive(Serialize, Deserialize)]
struct Flow {
    state: String,
    nonce: String,
    verifier: String,
    to: String,
    at_ms: i64,
}

/// How long a sign-in at the provider may take.
pub const FLOW_LIFETIME: Duration = Duration::from_secs(600);
/// How long a replica trusts what it read of a session (a sign-out on another replica ends it
/// here within this).
const KEPT: Duration = Duration::from_secs(2);
/// A refresh claimed longer ago than this was abandoned: another replica may take it.
const CLAIM_STALE: Duration = Duration::from_secs(10);

/// Seals and opens with AES-256-GCM (ring).
struct Sealer {
    key: aead::LessSafeKey,
    random: SystemRandom,
}

impl Sealer {
    /// The key every replica derives from the client secret.
    fn new(secret: &str) -> Sealer {
        let prk = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, secret.as_bytes());
        let derived = ring::hmac::sign(&prk, b"vitistack sign-in sessions v1");
        let key = aead::UnboundKey::new(&aead::AES_256_GCM, derived.as_ref())
            .map(aead::LessSafeKey::new)
            .unwrap_or_else(|_| unreachable!("an HMAC-SHA256 tag is an AES-256 key"));
        Sealer {
            key,
            random: SystemRandom::new(),
        }
    }

    fn seal(&self, plain: &[u8], context: &str) -> Option<String> {
        let mut nonce = [0u8; 12];
        self.random.fill(&mut nonce).ok()?;
        let mut data = plain.to_vec();
        self.key
            .seal_in_place_append_tag(
                aead::Nonce::assume_unique_for_key(nonce),
                aead::Aad::from(context.as_bytes()),
                &mut data,
            )
            .ok()?;
        let mut out = nonce.to_vec();
        out.extend_from_slice(&data);
        Some(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(out))
    }

    fn open(&self, sealed: &str, context: &str) -> Option<Vec<u8>> {
        let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(sealed)
            .ok()?;
        if bytes.len() < 12 + 16 {
            return None;
        }
        let (nonce, data) = bytes.split_at(12);
        let nonce = aead::Nonce::try_assume_unique_for_key(nonce).ok()?;
        let mut data = data.to_vec();
        let plain = self
            .key
            .open_in_place(nonce, aead::Aad::from(context.as_bytes()), &mut data)
            .ok()?;
        Some(plain.to_vec())
    }

    fn random(&self) -> Option<String> {
        let mut bytes = [0u8; 32];
        self.random.fill(&mut bytes).ok()?;
        Some(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes))
    }
}

/// Why a sign-in did not finish (shown on the page the provider returned to).
#[derive(Debug, thiserror::Error)]
pub enum SignInError {
    #[error(
        "this sign-in is not the one this browser began (or it took longer than 10 minutes): sign in again"
    )]
    Flow,
    #[error("the provider did not return an ID token")]
    NoIdToken,
    #[error(transparent)]
    Provider(#[from] OidcError),
    #[error("sessions cannot be kept: the database did not answer ({0})")]
    Store(String),
}

/// A session found for a cookie.
/// A sign-in the provider confirmed: who, where they were going, and the provider's tokens
/// (never shown; sealed when the session is kept).
pub struct Finished {
    pub person: Person,
    pub to: String,
    held: Held,
}

#[derive(Clone, Debug)]
pub struct Found {
    /// Its id (the SHA-256 of the cookie).
    pub id: Arc<str>,
    /// Who signed in.
    pub person: Person,
    /// When the session ends at the latest.
    pub ends: jiff::Timestamp,
}

/// The sessions of this server.
pub struct Sessions {
    provider: Arc<Provider>,
    store: Arc<dyn SessionStore>,
    sealer: Sealer,
    kept: Mutex<HashMap<String, (Instant, Option<SessionRecord>)>>,
}

/// Most sessions a replica remembers reading (past it, the memory is emptied).
const MAX_KEPT: usize = 10_000;

impl Sessions {
    /// Sessions kept in `store`, sealed with a key from the client secret (sign-in needs one).
    pub fn new(provider: Arc<Provider>, store: Arc<dyn SessionStore>) -> Option<Sessions> {
        let secret = provider.settings().client_secret.clone()?;
        Some(Sessions {
            provider,
            store,
            sealer: Sealer::new(&secret.0),
            kept: Mutex::new(HashMap::new()),
        })
    }

    /// The provider.
    pub fn provider(&self) -> &Arc<Provider> {
        &self.provider
    }

    /// Begin a sign-in that returns to `to`: the provider's URL to send the browser to, and the
    /// sealed value of the cookie that carries the sign-in until it returns.
    pub async fn begin(&self, to: &str, redirect: &str) -> Result<(String, String), SignInError> {
        let (Some(state), Some(nonce), Some(verifier)) = (
            self.sealer.random(),
            self.sealer.random(),
            self.sealer.random(),
        ) else {
            return Err(SignInError::Flow);
        };
        let url = self
            .provider
            .authorize_url(redirect, &state, &nonce, &verifier)
            .await?;
        let flow = Flow {
            state,
            nonce,
            verifier,
            to: to.to_string(),
            at_ms: now_ms(),
        };
        let plain = serde_json::to_vec(&flow).map_err(|_| SignInError::Flow)?;
        let sealed = self.sealer.seal(&plain, "flow").ok_or(SignInError::Flow)?;
        Ok((url, sealed))
    }

    /// Finish a sign-in: the flow cookie must be this browser's and carry `state`; the code is
    /// exchanged and the ID token checked (its nonce included). Nothing is kept yet: the server
    /// first decides whether it admits the person, then [`Sessions::open`] keeps the session.
    pub async fn finish(
        &self,
        flow_cookie: &str,
        state: &str,
        code: &str,
        redirect: &str,
    ) -> Result<Finished, SignInError> {
        let flow: Flow = self
            .sealer
            .open(flow_cookie, "flow")
            .and_then(|p| serde_json::from_slice(&p).ok())
            .ok_or(SignInError::Flow)?;
        let fresh = now_ms() - flow.at_ms < FLOW_LIFETIME.as_millis() as i64;
        let same = bool::from(subtle::ConstantTimeEq::ct_eq(
            flow.state.as_bytes(),
            state.as_bytes(),
        ));
        if !(fresh && same) {
            return Err(SignInError::Flow);
        }
        let tokens = self
            .provider
            .exchange(code, redirect, &flow.verifier)
            .await?;
        let id_token = tokens.id_token.clone().ok_or(SignInError::NoIdToken)?;
        let claims = self
            .provider
            .verify(
                &id_token,
                Some(std::slice::from_ref(&self.provider.settings().client_id)),
                Some(&flow.nonce),
            )
            .await?;
        let person = self.provider.person(&claims)?;
        Ok(Finished {
            person,
            to: flow.to,
            held: Held {
                refresh_token: tokens.refresh_token,
                id_token: Some(id_token),
            },
        })
    }

    /// A session for a finished sign-in (once the server has said it admits the person): the
    /// cookie's token.
    pub async fn open(&self, finished: &Finished) -> Result<String, SignInError> {
        let Finished { person, held, .. } = finished;
        let token = self.sealer.random().ok_or(SignInError::Flow)?;
        let id = session_id(&token);
        let now = now_ms();
        let record = SessionRecord {
            sealed: self.seal_held(held, &id).ok_or(SignInError::Flow)?,
            id,
            user: person.user.clone(),
            groups: person.groups.clone(),
            created_ms: now,
            ends_ms: now + self.provider.settings().session_max.as_millis() as i64,
            token_expires_ms: person.expires.as_millisecond(),
            refreshed_ms: now,
            version: 0,
        };
        self.store
            .insert(&record, now)
            .await
            .map_err(SignInError::Store)?;
        Ok(token)
    }

    fn seal_held(&self, held: &Held, id: &str) -> Option<String> {
        self.sealer.seal(&serde_json::to_vec(held).ok()?, id)
    }

    async fn read(&self, id: &str) -> Result<Option<SessionRecord>, String> {
        if let Some((at, r)) = self.kept.lock().get(id)
            && at.elapsed() < KEPT
        {
            return Ok(r.clone());
        }
        let r = self.store.load(id).await?;
        let mut kept = self.kept.lock();
        if kept.len() >= MAX_KEPT {
            kept.clear();
        }
        kept.insert(id.to_string(), (Instant::now(), r.clone()));
        Ok(r)
    }

    fn forget(&self, id: &str) {
        self.kept.lock().remove(id);
    }

    /// The session behind a cookie's token, refreshed when its ID token is about to end: None
    /// when there is none or it ended. Err when the database did not answer.
    pub async fn find(self: &Arc<Self>, token: &str) -> Result<Option<Found>, String> {
        let id = session_id(token);
        let Some(record) = self.read(&id).await? else {
            return Ok(None);
        };
        let now = now_ms();
        if now >= record.ends_ms {
            return Ok(None);
        }
        let lifetime = (record.token_expires_ms - record.refreshed_ms).max(0);
        let margin = (lifetime / 3).min(60_000);
        let record = if now >= record.token_expires_ms - margin {
            if now < record.token_expires_ms {
                // Still valid: refreshed in the background, this request goes on.
                let me = self.clone();
                let r = record.clone();
                tokio::spawn(async move { me.refresh(r).await });
                record
            } else {
                match self.refresh(record).await {
                    Some(r) => r,
                    None => return Ok(None),
                }
            }
        } else {
            record
        };
        Ok(Some(Found {
            id: record.id.clone().into(),
            person: Person {
                user: record.user.clone(),
                groups: record.groups.clone(),
                expires: ts(record.token_expires_ms),
            },
            ends: ts(record.ends_ms),
        }))
    }

    /// Refresh a session with the provider (if this replica wins the claim). The session as it
    /// is afterwards; None when it ended (the provider refused, or it expired unrefreshed).
    async fn refresh(&self, record: SessionRecord) -> Option<SessionRecord> {
        let now = now_ms();
        let claimed = self
            .store
            .claim(
                &record.id,
                record.version,
                now,
                now - CLAIM_STALE.as_millis() as i64,
            )
            .await
            .unwrap_or(false);
        if !claimed {
            // Another replica refreshes it (or did): read what it wrote.
            self.forget(&record.id);
            let again = self.store.load(&record.id).await.ok().flatten()?;
            return (now_ms() < again.token_expires_ms).then_some(again);
        }
        let held: Option<Held> = self
            .sealer
            .open(&record.sealed, &record.id)
            .and_then(|p| serde_json::from_slice(&p).ok());
        let Some(refresh_token) = held.as_ref().and_then(|h| h.refresh_token.clone()) else {
            return self
                .ended(&record, "the provider gave no refresh token")
                .await;
        };
        let tokens = match self.provider.refresh(&refresh_token).await {
            Ok(t) => t,
            Err(OidcError::Refused(why)) => return self.ended(&record, &why).await,
            Err(e) => {
                tracing::warn!(user = %record.user, error = %e, "a session could not be refreshed; tried again later");
                return (now_ms() < record.token_expires_ms).then_some(record);
            }
        };
        let mut next = record.clone();
        let client = std::slice::from_ref(&self.provider.settings().client_id);
        match &tokens.id_token {
            Some(t) => match self.provider.verify(t, Some(client), None).await {
                Ok(claims) => match self.provider.person(&claims) {
                    Ok(p) if p.user == record.user => {
                        next.groups = p.groups;
                        next.token_expires_ms = p.expires.as_millisecond();
                    }
                    _ => {
                        return self
                            .ended(&record, "the refreshed token names someone else")
                            .await;
                    }
                },
                Err(e) => return self.ended(&record, &e.to_string()).await,
            },
            None => {
                next.token_expires_ms =
                    now_ms() + tokens.expires_in.unwrap_or(300).saturating_mul(1000) as i64;
            }
        }
        let held = Held {
            refresh_token: tokens.refresh_token.or(Some(refresh_token)),
            id_token: tokens.id_token.or_else(|| held.and_then(|h| h.id_token)),
        };
        next.sealed = self.seal_held(&held, &record.id)?;
        next.refreshed_ms = now_ms();
        next.version = record.version + 2;
        if let Err(e) = self.store.update(&next).await {
            tracing::warn!(error = %e, "a refreshed session could not be written");
        }
        self.forget(&record.id);
        tracing::info!(user = %next.user, "session refreshed with the provider");
        Some(next)
    }

    async fn ended(&self, record: &SessionRecord, why: &str) -> Option<SessionRecord> {
        tracing::info!(user = %record.user, reason = why, "session ended: it could not be refreshed");
        let _ = self.store.delete(&record.id).await;
        self.forget(&record.id);
        None
    }

    /// Whether the session `id` still exists and has not ended (open sockets ask).
    pub async fn alive(&self, id: &str) -> Result<bool, String> {
        let now = now_ms();
        Ok(self
            .read(id)
            .await?
            .is_some_and(|r| now < r.ends_ms && now < r.token_expires_ms + KEPT.as_millis() as i64))
    }

    /// End the session behind a cookie's token; its ID token is returned (the provider's
    /// end-session request names it).
    pub async fn end(&self, token: &str) -> Option<String> {
        let id = session_id(token);
        let record = self.store.load(&id).await.ok().flatten();
        let _ = self.store.delete(&id).await;
        self.forget(&id);
        let record = record?;
        let held: Held = self
            .sealer
            .open(&record.sealed, &record.id)
            .and_then(|p| serde_json::from_slice(&p).ok())?;
        held.id_token
    }
}

/// The id a cookie's token is kept under.
pub fn session_id(token: &str) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, token.as_bytes());
    digest.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

fn now_ms() -> i64 {
    jiff::Timestamp::now().as_millisecond()
}

fn ts(ms: i64) -> jiff::Timestamp {
    jiff::Timestamp::from_millisecond(ms).unwrap_or(jiff::Timestamp::UNIX_EPOCH)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sealed_tokens_open_only_with_the_same_key_and_context() {
        let a = Sealer::new("secret-one");
        let sealed = a.seal(b"refresh-token-value", "session-1").unwrap();
        assert!(!sealed.contains("refresh"));
        assert_eq!(
            a.open(&sealed, "session-1").unwrap(),
            b"refresh-token-value"
        );
        assert!(
            a.open(&sealed, "session-2").is_none(),
            "bound to its session"
        );
        assert!(
            Sealer::new("secret-two")
                .open(&sealed, "session-1")
                .is_none()
        );
        let mut tampered = sealed.clone().into_bytes();
        tampered[20] = if tampered[20] == b'A' { b'B' } else { b'A' };
        assert!(
            a.open(&String::from_utf8(tampered).unwrap(), "session-1")
                .is_none()
        );
    }
}
