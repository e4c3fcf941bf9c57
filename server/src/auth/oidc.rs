//! The OpenID provider: its discovery document and signing keys, the tokens it signs checked
//! (signature, issuer, audience, expiry, not-before, with a bounded clock skew), and the
//! authorization code flow with PKCE that signs people in (authorize URL, code and refresh token
//! exchanges, the provider's end-session URL).
//!
//! Written on `jsonwebtoken` (which verifies with ring, already built for rustls) rather than the
//! `openidconnect` crate, which brings a second set of RSA and elliptic-curve implementations
//! (RustCrypto) for the same checks.

use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine as _;
use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use parking_lot::Mutex;
use serde::Deserialize;
use serde_json::{Map, Value};

use super::Role;

/// The provider and how its tokens are read.
#[derive(Clone, Debug)]
pub struct OidcSettings {
    /// `OIDC_ISSUER_URL`: where `/.well-known/openid-configuration` is, and the `iss` of its tokens.
    pub issuer: String,
    /// `OIDC_CLIENT_ID`: this server's client; ID tokens must be meant for it.
    pub client_id: String,
    /// The client secret (read from `OIDC_CLIENT_SECRET_FILE`); sign-in needs it. Never shown.
    pub client_secret: Option<Secret>,
    /// Scopes asked at sign-in.
    pub scopes: Vec<String>,
    /// The claim naming the user (`sub` by default, as the API server's `--oidc-username-claim`).
    pub username_claim: String,
    /// Put before the user name (as `--oidc-username-prefix`).
    pub username_prefix: String,
    /// The claim listing the groups.
    pub groups_claim: String,
    /// Put before each group (as `--oidc-groups-prefix`).
    pub groups_prefix: String,
    /// Audiences a bearer token may be meant for besides the client id.
    pub audiences: Vec<String>,
    /// Where the provider sends people back (`…/auth/callback`); None: from the request's host.
    pub redirect_url: Option<String>,
    /// Group → role, over the whole fleet or in some namespaces (`OIDC_ROLE_MAP`).
    pub role_map: Vec<Mapped>,
    /// Clock difference allowed on `exp`, `nbf` and `iat`.
    pub clock_skew: Duration,
    /// Longest a sign-in session lasts, refreshes included.
    pub session_max: Duration,
    /// The name on the sign-in button.
    pub provider_name: String,
    /// CA certificates (PEM) the provider's TLS certificate is checked against, besides the
    /// system's.
    pub ca_pem: Option<Vec<u8>>,
}

/// One entry of `OIDC_ROLE_MAP`: the members of `group` get `role`, over the whole fleet or, on
/// a fleet without Kubernetes RBAC for people, in `namespaces` only.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mapped {
    pub group: String,
    pub role: Role,
    pub namespaces: Option<Vec<String>>,
}

/// A secret kept in memory; never shown.
#[derive(Clone)]
pub struct Secret(pub Arc<str>);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<redacted>")
    }
}

/// The provider's endpoints, from its discovery document.
#[derive(Clone, Debug, Deserialize)]
pub struct Metadata {
    pub issuer: String,
    pub authorization_endpoint: String,
    pub token_endpoint: String,
    pub jwks_uri: String,
    #[serde(default)]
    pub end_session_endpoint: Option<String>,
}

/// Why a token or a sign-in step was refused (said to the client; never holds the token).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OidcError {
    #[error("the OpenID provider could not be reached: {0}")]
    Unreachable(String),
    #[error("the token is not valid: {0}")]
    Invalid(String),
    #[error("the OpenID provider refused: {0}")]
    Refused(String),
}

/// The signing keys fetched, and when.
struct Keys {
    set: JwkSet,
    fetched: Instant,
}

/// Keys older than this are fetched again before a token is checked (a key the provider
/// withdrew stops being accepted).
const KEYS_MAX_AGE: Duration = Duration::from_secs(600);
/// A token naming a key not held fetches the keys again, at most this often (a stream of forged
/// key ids cannot make the server hammer the provider).
const KEYS_REFETCH_EVERY: Duration = Duration::from_secs(5);

/// Asymmetric signatures only: `none` cannot be parsed, and HMAC would take the public key as
/// the secret.
const ALGORITHMS: [Algorithm; 9] = [
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
    Algorithm::ES256,
    Algorithm::ES384,
    Algorithm::EdDSA,
];

/// The claims of a checked token.
pub type Claims = Map<String, Value>;

/// Who a checked token names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Person {
    /// The user name (prefixed as configured).
    pub user: String,
    /// The groups (prefixed as configured), sorted.
    pub groups: Vec<String>,
    /// When the token stops being valid.
    pub expires: jiff::Timestamp,
}

/// The tokens a code or refresh token exchange gave.
#[derive(Clone, Deserialize)]
pub struct Tokens {
    pub id_token: Option<String>,
    pub refresh_token: Option<String>,
    #[serde(default)]
    pub expires_in: Option<u64>,
}

/// The OpenID provider as this server uses it.
pub struct Provider {
    settings: OidcSettings,
    http: reqwest::Client,
    metadata: tokio::sync::Mutex<Option<Arc<Metadata>>>,
    keys: tokio::sync::Mutex<Option<Keys>>,
    last_refetch: Mutex<Option<Instant>>,
}

impl Provider {
    /// A provider from its settings (nothing is fetched until first needed).
    pub fn new(settings: OidcSettings) -> Result<Provider, String> {
        let mut builder = reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .redirect(reqwest::redirect::Policy::none());
        if let Some(pem) = &settings.ca_pem {
            for cert in reqwest::Certificate::from_pem_bundle(pem)
                .map_err(|e| format!("OIDC_CA_FILE: {e}"))?
            {
                builder = builder.add_root_certificate(cert);
            }
        }
        let http = builder.build().map_err(|e| e.to_string())?;
        Ok(Provider {
            settings,
            http,
            metadata: tokio::sync::Mutex::new(None),
            keys: tokio::sync::Mutex::new(None),
            last_refetch: Mutex::new(None),
        })
    }

    /// The settings.
    pub fn settings(&self) -> &OidcSettings {
        &self.settings
    }

    /// True when `token` is a JWT whose (unchecked) issuer is this provider: it is checked here,
    /// not reviewed by Kubernetes.
    pub fn claims_issuer(&self, token: &str) -> bool {
        let mut parts = token.split('.');
        let (Some(_), Some(payload), Some(_), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return false;
        };
        let Ok(bytes) = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(payload) else {
            return false;
        };
        #[derive(Deserialize)]
        struct Iss {
            iss: Option<String>,
        }
        serde_json::from_slice::<Iss>(&bytes)
            .ok()
            .and_then(|i| i.iss)
            .is_some_and(|iss| same_issuer(&iss, &self.settings.issuer))
    }

    /// The discovery document (fetched once; again after a failure).
    pub async fn metadata(&self) -> Result<Arc<Metadata>, OidcError> {
        let mut held = self.metadata.lock().await;
        if let Some(m) = held.as_ref() {
            return Ok(m.clone());
        }
        let url = format!(
            "{}/.well-known/openid-configuration",
            self.settings.issuer.trim_end_matches('/')
        );
        let m: Metadata = self.get_json(&url).await?;
        if !same_issuer(&m.issuer, &self.settings.issuer) {
            return Err(OidcError::Unreachable(format!(
                "the discovery document names the issuer `{}`, not OIDC_ISSUER_URL `{}`",
                m.issuer, self.settings.issuer
            )));
        }
        let m = Arc::new(m);
        *held = Some(m.clone());
        Ok(m)
    }

    async fn get_json<T: serde::de::DeserializeOwned>(&self, url: &str) -> Result<T, OidcError> {
        let response = self
            .http
            .get(url)
            .send()
            .await
            .map_err(|e| OidcError::Unreachable(crate::outbound::error_chain(&e)))?;
        if !response.status().is_success() {
            return Err(OidcError::Unreachable(format!(
                "{url} answered {}",
                response.status()
            )));
        }
        response
            .json()
            .await
            .map_err(|e| OidcError::Unreachable(format!("{url}: {e}")))
    }

    /// The key that signed a token with this header: from the keys held, or from keys fetched
    /// again when none matches (the provider rotated them), at most every few seconds.
    async fn key_for(&self, kid: Option<&str>, alg: Algorithm) -> Result<DecodingKey, OidcError> {
        let mut keys = self.keys.lock().await;
        let stale = keys
            .as_ref()
            .is_none_or(|k| k.fetched.elapsed() > KEYS_MAX_AGE);
        if !stale && let Some(key) = keys.as_ref().and_then(|k| pick(&k.set, kid, alg)) {
            return key;
        }
        let may_fetch = stale || {
            let mut last = self.last_refetch.lock();
            let allowed = last.is_none_or(|at| at.elapsed() >= KEYS_REFETCH_EVERY);
            if allowed {
                *last = Some(Instant::now());
            }
            allowed
        };
        if may_fetch {
            let metadata = self.metadata().await?;
            match self.get_json::<JwkSet>(&metadata.jwks_uri).await {
                Ok(set) => {
                    *keys = Some(Keys {
                        set,
                        fetched: Instant::now(),
                    });
                }
                Err(e) if keys.is_none() => return Err(e),
                Err(e) => {
                    tracing::warn!(error = %e, "the provider's keys could not be fetched again; the keys held stay")
                }
            }
        }
        match keys.as_ref().and_then(|k| pick(&k.set, kid, alg)) {
            Some(key) => key,
            None => Err(OidcError::Invalid(format!(
                "it is signed with a key the provider does not publish (kid {})",
                kid.map_or_else(|| "absent".to_string(), |k| format!("`{k}`"))
            ))),
        }
    }

    /// Check `token`: signed by one of the provider's keys with an asymmetric algorithm, issued by
    /// it, meant for one of `audiences` (None: the client or OIDC_AUDIENCES), not expired and not
    /// before its time (within the clock skew), and carrying `nonce` when one is given.
    pub async fn verify(
        &self,
        token: &str,
        audiences: Option<&[String]>,
        nonce: Option<&str>,
    ) -> Result<Claims, OidcError> {
        let header = jsonwebtoken::decode_header(token).map_err(|e| {
            OidcError::Invalid(format!(
                "its header cannot be read or names no accepted algorithm ({e})"
            ))
        })?;
        if !ALGORITHMS.contains(&header.alg) {
            return Err(OidcError::Invalid(format!(
                "it is signed with {:?}; only asymmetric signatures are accepted",
                header.alg
            )));
        }
        let key = self.key_for(header.kid.as_deref(), header.alg).await?;
        let mut validation = Validation::new(header.alg);
        validation.leeway = self.settings.clock_skew.as_secs();
        validation.validate_nbf = true;
        validation.set_required_spec_claims(&["exp", "iss", "aud"]);
        validation.set_issuer(&[
            self.settings.issuer.as_str(),
            self.settings.issuer.trim_end_matches('/'),
        ]);
        let mut accepted: Vec<&str> = vec![self.settings.client_id.as_str()];
        match audiences {
            Some(a) => accepted = a.iter().map(String::as_str).collect(),
            None => accepted.extend(self.settings.audiences.iter().map(String::as_str)),
        }
        validation.set_audience(&accepted);
        let data = jsonwebtoken::decode::<Claims>(token, &key, &validation).map_err(|e| {
            use jsonwebtoken::errors::ErrorKind;
            OidcError::Invalid(match e.kind() {
                ErrorKind::ExpiredSignature => "it has expired".to_string(),
                ErrorKind::ImmatureSignature => "it is not valid yet (nbf)".to_string(),
                ErrorKind::InvalidAudience => format!(
                    "it is meant for another audience (accepted: {})",
                    accepted.join(", ")
                ),
                ErrorKind::InvalidIssuer => "another issuer signed it".to_string(),
                ErrorKind::InvalidSignature => "its signature does not match".to_string(),
                ErrorKind::MissingRequiredClaim(c) => format!("it has no `{c}` claim"),
                other => format!("{other:?}"),
            })
        })?;
        let claims = data.claims;
        let skew = self.settings.clock_skew.as_secs_f64();
        if let Some(iat) = claims.get("iat").and_then(Value::as_f64)
            && iat > now_seconds() + skew
        {
            return Err(OidcError::Invalid(
                "it was issued in the future (iat)".into(),
            ));
        }
        if let Some(nonce) = nonce
            && claims.get("nonce").and_then(Value::as_str) != Some(nonce)
        {
            return Err(OidcError::Invalid("its nonce is not this sign-in's".into()));
        }
        Ok(claims)
    }

    /// Who checked `claims` name: the user claim (prefixed) and the groups claim (a list or one
    /// name), and when the token expires.
    pub fn person(&self, claims: &Claims) -> Result<Person, OidcError> {
        let s = &self.settings;
        let user = claims
            .get(&s.username_claim)
            .and_then(Value::as_str)
            .filter(|u| !u.is_empty())
            .ok_or_else(|| {
                OidcError::Invalid(format!(
                    "it has no `{}` claim (OIDC_USERNAME_CLAIM)",
                    s.username_claim
                ))
            })?;
        let mut groups: Vec<String> = match claims.get(&s.groups_claim) {
            Some(Value::Array(list)) => list
                .iter()
                .filter_map(Value::as_str)
                .map(|g| format!("{}{g}", s.groups_prefix))
                .collect(),
            Some(Value::String(g)) => vec![format!("{}{g}", s.groups_prefix)],
            _ => Vec::new(),
        };
        groups.sort();
        groups.dedup();
        let exp = claims.get("exp").and_then(Value::as_i64).unwrap_or(0);
        Ok(Person {
            user: format!("{}{user}", s.username_prefix),
            groups,
            expires: jiff::Timestamp::from_second(exp).unwrap_or(jiff::Timestamp::UNIX_EPOCH),
        })
    }

    /// What `OIDC_ROLE_MAP` gives these groups: the highest role of the entries matched, over
    /// the fleet when one of them is fleet-wide, else in the namespaces they name together.
    pub fn mapped(&self, groups: &[String]) -> Option<(Role, crate::store::Scope)> {
        let matched: Vec<&Mapped> = self
            .settings
            .role_map
            .iter()
            .filter(|m| groups.contains(&m.group))
            .collect();
        let role = matched.iter().map(|m| m.role).max()?;
        if matched.iter().any(|m| m.namespaces.is_none()) {
            return Some((role, crate::store::Scope::All));
        }
        let mut names: Vec<&str> = matched
            .iter()
            .flat_map(|m| m.namespaces.iter().flatten().map(String::as_str))
            .collect();
        names.sort_unstable();
        names.dedup();
        Some((
            role,
            crate::store::Scope::limited(crate::store::Grants::namespaces(&names)),
        ))
    }

    /// Where to send a browser to sign in.
    pub async fn authorize_url(
        &self,
        redirect: &str,
        state: &str,
        nonce: &str,
        verifier: &str,
    ) -> Result<String, OidcError> {
        let m = self.metadata().await?;
        let challenge = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(
            ring::digest::digest(&ring::digest::SHA256, verifier.as_bytes()),
        );
        let mut url = reqwest::Url::parse(&m.authorization_endpoint)
            .map_err(|e| OidcError::Unreachable(format!("authorization_endpoint: {e}")))?;
        url.query_pairs_mut()
            .append_pair("response_type", "code")
            .append_pair("client_id", &self.settings.client_id)
            .append_pair("redirect_uri", redirect)
            .append_pair("scope", &self.settings.scopes.join(" "))
            .append_pair("state", state)
            .append_pair("nonce", nonce)
            .append_pair("code_challenge", &challenge)
            .append_pair("code_challenge_method", "S256");
        Ok(url.to_string())
    }

    /// Exchange a sign-in's code (with its PKCE verifier) for tokens.
    pub async fn exchange(
        &self,
        code: &str,
        redirect: &str,
        verifier: &str,
    ) -> Result<Tokens, OidcError> {
        self.token_request(&[
            ("grant_type", "authorization_code"),
            ("code", code),
            ("redirect_uri", redirect),
            ("code_verifier", verifier),
        ])
        .await
    }

    /// New tokens for a refresh token.
    pub async fn refresh(&self, refresh_token: &str) -> Result<Tokens, OidcError> {
        self.token_request(&[
            ("grant_type", "refresh_token"),
            ("refresh_token", refresh_token),
        ])
        .await
    }

    async fn token_request(&self, form: &[(&str, &str)]) -> Result<Tokens, OidcError> {
        let m = self.metadata().await?;
        let mut request = self.http.post(&m.token_endpoint);
        let mut fields: Vec<(&str, &str)> = form.to_vec();
        match &self.settings.client_secret {
            // client_secret_basic: the form-encoded id and secret as user and password.
            Some(secret) => {
                request = request.basic_auth(
                    form_encode(&self.settings.client_id),
                    Some(form_encode(&secret.0)),
                );
            }
            None => fields.push(("client_id", &self.settings.client_id)),
        }
        let response = request
            .form(&fields)
            .send()
            .await
            .map_err(|e| OidcError::Unreachable(crate::outbound::error_chain(&e)))?;
        let status = response.status();
        if !status.is_success() {
            #[derive(Deserialize)]
            struct Refusal {
                error: Option<String>,
                error_description: Option<String>,
            }
            let said = response.json::<Refusal>().await.ok();
            let text = said
                .map(|r| {
                    format!(
                        "{} {}",
                        r.error.unwrap_or_default(),
                        r.error_description.unwrap_or_default()
                    )
                })
                .unwrap_or_default();
            return Err(if status.is_client_error() {
                OidcError::Refused(format!("{status}: {}", text.trim()))
            } else {
                OidcError::Unreachable(format!("the token endpoint answered {status}"))
            });
        }
        response
            .json()
            .await
            .map_err(|e| OidcError::Unreachable(format!("the token endpoint's answer: {e}")))
    }

    /// Where to send a browser signing out so the provider ends its session too (None: the
    /// provider has no end-session endpoint).
    pub async fn end_session_url(&self, id_token: Option<&str>, back_to: &str) -> Option<String> {
        let m = self.metadata().await.ok()?;
        let mut url = reqwest::Url::parse(m.end_session_endpoint.as_deref()?).ok()?;
        {
            let mut q = url.query_pairs_mut();
            q.append_pair("client_id", &self.settings.client_id)
                .append_pair("post_logout_redirect_uri", back_to);
            if let Some(t) = id_token {
                q.append_pair("id_token_hint", t);
            }
        }
        Some(url.to_string())
    }
}

/// The key in `set` for a token's `kid` and algorithm (a set of one key serves a token naming
/// none).
fn pick(set: &JwkSet, kid: Option<&str>, alg: Algorithm) -> Option<Result<DecodingKey, OidcError>> {
    let jwk = match kid {
        Some(kid) => set.find(kid)?,
        None if set.keys.len() == 1 => &set.keys[0],
        None => return None,
    };
    if let Some(declared) = jwk.common.key_algorithm
        && format!("{declared:?}") != format!("{alg:?}")
    {
        return Some(Err(OidcError::Invalid(format!(
            "its header says {alg:?} but the key is for {declared:?}"
        ))));
    }
    Some(
        DecodingKey::from_jwk(jwk)
            .map_err(|e| OidcError::Invalid(format!("the provider's key cannot be used: {e}"))),
    )
}

/// Issuers compare equal but for a trailing slash.
fn same_issuer(a: &str, b: &str) -> bool {
    a.trim_end_matches('/') == b.trim_end_matches('/')
}

fn now_seconds() -> f64 {
    jiff::Timestamp::now().as_millisecond() as f64 / 1000.0
}

/// `application/x-www-form-urlencoded`, as RFC 6749 §2.3.1 asks of the id and secret before they
/// go into Basic authentication.
fn form_encode(s: &str) -> String {
    reqwest::Url::parse_with_params("x:", [("v", s)])
        .ok()
        .and_then(|u| u.query().map(|q| q.trim_start_matches("v=").to_string()))
        .unwrap_or_else(|| s.to_string())
}
