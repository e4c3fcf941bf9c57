//! Who is calling and what they may do: API keys (hashed, from a file), Kubernetes token
//! reviews, and anonymous read from trusted networks. Every transport (HTTP, WebSocket, SSE, the
//! dashboard) asks [`Auth::authenticate`] and gets the same [`Principal`].

pub mod keys;
pub mod oidc;
mod principal;
mod refusal;
pub mod review;
pub mod session;
mod watcher;

pub use principal::{Credential, Principal, RateKey, Signed, Token, Via};
pub use refusal::Refusal;

use crate::store::Scope;
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use ipnet::IpNet;
use tokio::sync::watch;

pub use keys::KeySet;

/// What a principal may do. Each role may do everything the ones below it may.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, async_graphql::Enum,
)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Queries and subscriptions.
    Viewer,
    /// Also the cluster lifecycle mutations.
    Operator,
    /// Everything, manifest imports included.
    Admin,
}

impl Role {
    /// Every role, lowest first.
    pub const ALL: [Role; 3] = [Role::Viewer, Role::Operator, Role::Admin];

    /// The role's name as written in key files and settings.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Viewer => "viewer",
            Role::Operator => "operator",
            Role::Admin => "admin",
        }
    }
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A role name that is none of the three.
#[derive(Debug, PartialEq, thiserror::Error)]
#[error("unknown role `{0}` (viewer, operator or admin)")]
pub struct UnknownRole(pub String);

impl std::str::FromStr for Role {
    type Err = UnknownRole;

    fn from_str(s: &str) -> Result<Self, UnknownRole> {
        Role::ALL
            .into_iter()
            .find(|r| r.as_str().eq_ignore_ascii_case(s))
            .ok_or_else(|| UnknownRole(s.to_string()))
    }
}

/// Why authentication could not be set up (the server does not start).
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    #[error(transparent)]
    Keys(#[from] keys::KeysError),
    #[error("AUTH_KUBERNETES needs a cluster (KUBECONFIG or in-cluster)")]
    NoCluster,
    #[error("{0}")]
    Oidc(String),
}

/// How callers are authenticated.
#[derive(Clone, Debug, Default)]
pub struct AuthSettings {
    /// API keys file (see [`keys`]); re-read every `reload`.
    pub keys_file: Option<PathBuf>,
    /// How often the keys file is re-read (a revoked key's sockets close within this).
    pub reload: Duration,
    /// Kubernetes token reviews (with the role from subject access reviews).
    pub kubernetes: Option<review::ReviewSettings>,
    /// How long RBAC's answers about a person are kept (`AUTH_CACHE_SECONDS`).
    pub review_ttl: Duration,
    /// The OpenID provider people sign in with.
    pub oidc: Option<oidc::OidcSettings>,
    /// Networks whose clients may read without a credential.
    pub anonymous_from: Vec<IpNet>,
    /// Proxies whose `X-Forwarded-For` is believed.
    pub trusted_proxies: Vec<IpNet>,
}

/// Where an open socket's caller stands when its credential is asked again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Standing {
    /// The same role and the same scope: the socket goes on.
    Kept,
    /// Still let in, with another role or scope (a RoleBinding or a group came or went, a key's
    /// role or namespaces were edited): the socket ends, and the client's next one is given
    /// what the caller may see and do now.
    Changed,
    /// No longer let in (revoked, expired, signed out, nothing left to see).
    Ended,
}

/// Authenticates callers; tells open sockets when credentials change.
pub struct Auth {
    settings: AuthSettings,
    keys: ArcSwap<KeySet>,
    reviewer: Option<review::Reviewer>,
    provider: Option<Arc<oidc::Provider>>,
    sessions: arc_swap::ArcSwapOption<session::Sessions>,
    changes: watch::Sender<u64>,
}

impl Auth {
    /// Load the keys file (a refused file stops the start, naming line and reason).
    pub fn new(settings: AuthSettings, kube: Option<kube::Client>) -> Result<Arc<Auth>, AuthError> {
        let keys = match &settings.keys_file {
            Some(path) => KeySet::read(path)?,
            None => KeySet::default(),
        };
        // A client means RBAC is asked: for Kubernetes tokens, and for people the provider
        // signs in.
        let reviewer = match (&settings.kubernetes, kube) {
            (s, Some(client)) => Some(review::Reviewer::new(
                client,
                s.clone().unwrap_or(review::ReviewSettings {
                    ttl: settings.review_ttl,
                    audiences: Vec::new(),
                }),
            )),
            (Some(_), None) => {
                return Err(AuthError::NoCluster);
            }
            (None, None) => None,
        };
        let provider = match &settings.oidc {
            Some(o) => Some(Arc::new(
                oidc::Provider::new(o.clone()).map_err(AuthError::Oidc)?,
            )),
            None => None,
        };
        Ok(Arc::new(Auth {
            settings,
            keys: ArcSwap::from_pointee(keys),
            reviewer,
            provider,
            sessions: arc_swap::ArcSwapOption::empty(),
            changes: watch::channel(0).0,
        }))
    }

    /// Anyone may do anything (only for tests and tools that build a router without settings).
    pub fn open() -> Arc<Auth> {
        Arc::new(Auth {
            settings: AuthSettings {
                anonymous_from: vec![
                    IpNet::V4(ipnet::Ipv4Net::new_assert(
                        std::net::Ipv4Addr::UNSPECIFIED,
                        0,
                    )),
                    IpNet::V6(ipnet::Ipv6Net::new_assert(
                        std::net::Ipv6Addr::UNSPECIFIED,
                        0,
                    )),
                ],
                ..Default::default()
            },
            keys: ArcSwap::from_pointee(KeySet::default()),
            reviewer: None,
            provider: None,
            sessions: arc_swap::ArcSwapOption::empty(),
            changes: watch::channel(0).0,
        })
    }

    /// The settings.
    pub fn settings(&self) -> &AuthSettings {
        &self.settings
    }

    /// Keys accepted now.
    pub fn key_count(&self) -> usize {
        self.keys.load().len()
    }

    /// The client's address: the peer's, or, when the peer is a trusted proxy, the last address
    /// in `X-Forwarded-For` that is not itself a trusted proxy.
    pub fn client_address(&self, peer: IpAddr, forwarded_for: Option<&str>) -> IpAddr {
        let trusted = |ip: &IpAddr| self.settings.trusted_proxies.iter().any(|n| n.contains(ip));
        if !trusted(&peer) {
            return peer;
        }
        let Some(list) = forwarded_for else {
            return peer;
        };
        let mut client = peer;
        for hop in list.rsplit(',') {
            match hop.trim().parse::<IpAddr>() {
                Ok(ip) => {
                    client = ip;
                    if !trusted(&ip) {
                        break;
                    }
                }
                // A hop that is not an address: stop believing the list there.
                Err(_) => break,
            }
        }
        client
    }

    /// [`Auth::authenticate`] within the operation limit: a review the Kubernetes API has not
    /// answered by then is refused `TIMEOUT`, as an operation running as long would be.
    pub async fn authenticate_within(
        &self,
        token: Option<&str>,
        address: IpAddr,
        limit: Duration,
    ) -> Result<Principal, Refusal> {
        tokio::time::timeout(limit, self.authenticate(token, address))
            .await
            .unwrap_or(Err(Refusal::TimedOut(limit)))
    }

    /// Who presents `token` (None: no credential) from `address`.
    pub async fn authenticate(
        &self,
        token: Option<&str>,
        address: IpAddr,
    ) -> Result<Principal, Refusal> {
        let Some(token) = token.map(str::trim).filter(|t| !t.is_empty()) else {
            if self
                .settings
                .anonymous_from
                .iter()
                .any(|n| n.contains(&address))
            {
                return Ok(Principal::anonymous(address));
            }
            return Err(Refusal::Missing);
        };
        let hash = keys::hash(token);
        if let Some(key) = self.keys.load().find(&hash, jiff::Timestamp::now()) {
            return Ok(Principal {
                name: format!("key:{}", key.name).into(),
                role: key.role,
                credential: Credential::Key(hash),
                address,
                scope: key.scope.clone(),
            });
        }
        if let Some(provider) = self.provider.as_ref().filter(|p| p.claims_issuer(token)) {
            return Box::pin(self.bearer(provider, token, address)).await;
        }
        match self
            .reviewer
            .as_ref()
            .filter(|_| self.settings.kubernetes.is_some())
        {
            // Boxed: a review's state is large, and every request would carry it otherwise.
            Some(r) => Box::pin(r.review(token, hash)).await.map(|r| Principal {
                name: r.name.clone(),
                role: r.role,
                credential: Credential::Kubernetes(hash, Token(token.into()), r.groups.clone()),
                address,
                scope: r.scope.clone(),
            }),
            None => Err(Refusal::Invalid),
        }
    }

    /// A bearer token the OpenID provider signed.
    async fn bearer(
        &self,
        provider: &oidc::Provider,
        token: &str,
        address: IpAddr,
    ) -> Result<Principal, Refusal> {
        let claims = provider
            .verify(token, None, None)
            .await
            .map_err(oidc_refusal)?;
        let person = provider.person(&claims).map_err(oidc_refusal)?;
        self.person_principal(person, Via::Bearer, address).await
    }

    /// The principal of a person the provider vouches for, come `via`, with what they may do
    /// and see.
    async fn person_principal(
        &self,
        person: oidc::Person,
        via: Via,
        address: IpAddr,
    ) -> Result<Principal, Refusal> {
        let (role, scope) = self.access_of(&person).await?;
        Ok(Principal {
            name: format!("oidc:{}", person.user).into(),
            role,
            credential: Credential::Oidc(Arc::new(Signed { person, via })),
            address,
            scope,
        })
    }

    /// Who holds the sign-in session whose cookie carries `token`, from `address`.
    pub async fn authenticate_session(
        &self,
        token: &str,
        address: IpAddr,
    ) -> Result<Principal, Refusal> {
        let Some(sessions) = self.sessions.load_full() else {
            return Err(Refusal::Invalid);
        };
        let found = sessions
            .find(token)
            .await
            .map_err(|e| {
                tracing::warn!(error = %e, "sessions could not be read");
                Refusal::Unavailable
            })?
            .ok_or(Refusal::Token(
                "the sign-in session has ended (signed out, expired or refused by the provider): sign in again".into(),
            ))?;
        self.person_principal(found.person, Via::Session(Token(token.into())), address)
            .await
    }

    /// Whether a person the provider just signed in is let in here (a role from the role map
    /// or RBAC), before their session is handed out.
    pub async fn admits(&self, person: &oidc::Person) -> Result<(), Refusal> {
        self.access_of(person).await.map(|_| ())
    }

    /// What a person the provider vouches for may do and see: `OIDC_ROLE_MAP` first (a role over
    /// the whole fleet), else what RBAC says in each datacenter.
    async fn access_of(&self, person: &oidc::Person) -> Result<(Role, Scope), Refusal> {
        self.access_within(person, false).await
    }

    /// [`Auth::access_of`]; `recheck`: for an open socket's check (fresher RBAC answers).
    async fn access_within(
        &self,
        person: &oidc::Person,
        recheck: bool,
    ) -> Result<(Role, Scope), Refusal> {
        if let Some(mapped) = self
            .provider
            .as_ref()
            .and_then(|p| p.mapped(&person.groups))
        {
            return Ok(mapped);
        }
        match &self.reviewer {
            Some(r) if recheck => Box::pin(r.recheck_person(&person.user, &person.groups))
                .await
                .map(|r| (r.role, r.scope.clone())),
            Some(r) => Box::pin(r.review_person(&person.user, &person.groups))
                .await
                .map(|r| (r.role, r.scope.clone())),
            None => Err(Refusal::NoRole(format!(
                "oidc:{} (groups: {})",
                person.user,
                if person.groups.is_empty() {
                    "none".to_string()
                } else {
                    person.groups.join(", ")
                }
            ))),
        }
    }

    /// The OpenID provider, when one is configured.
    pub fn provider(&self) -> Option<&Arc<oidc::Provider>> {
        self.provider.as_ref()
    }

    /// Sign-in sessions, once the database is there (None: no sign-in).
    pub fn sessions(&self) -> Option<Arc<session::Sessions>> {
        self.sessions.load_full()
    }

    /// Keep sign-in sessions in `store` (the app gives it once the database is open).
    pub fn set_session_store(&self, store: Arc<dyn session::SessionStore>) {
        if let Some(provider) = &self.provider {
            self.sessions
                .store(session::Sessions::new(provider.clone(), store).map(Arc::new));
        }
    }

    /// Where `principal` stands now that its credential is asked again: open sockets ask this
    /// whenever [`Auth::changes`] moves (and every half of `AUTH_CACHE_SECONDS` for reviewed
    /// people).
    pub async fn standing(&self, principal: &Principal) -> Standing {
        let now = match &principal.credential {
            Credential::Anonymous => return Standing::Kept,
            Credential::Key(hash) => match self.keys.load().find(hash, jiff::Timestamp::now()) {
                Some(k) => Ok((k.role, k.scope.clone())),
                None => return Standing::Ended,
            },
            Credential::Oidc(signed) => {
                let person = match &signed.via {
                    Via::Bearer => {
                        let skew = self
                            .provider
                            .as_ref()
                            .map_or(Duration::ZERO, |p| p.settings().clock_skew);
                        if jiff::Timestamp::now() >= signed.person.expires + skew {
                            return Standing::Ended;
                        }
                        signed.person.clone()
                    }
                    Via::Session(token) => match self.sessions.load_full() {
                        Some(s) => match s.find(&token.0).await {
                            Ok(Some(found)) => found.person,
                            Ok(None) => return Standing::Ended,
                            // The database not answering does not end a session it let in.
                            Err(_) => return Standing::Kept,
                        },
                        None => return Standing::Ended,
                    },
                };
                self.access_within(&person, true).await
            }
            Credential::Kubernetes(hash, token, _) => match &self.reviewer {
                Some(r) => r
                    .recheck_token(&token.0, *hash)
                    .await
                    .map(|r| (r.role, r.scope.clone())),
                None => return Standing::Ended,
            },
        };
        match now {
            Ok((role, scope)) if role == principal.role && scope == principal.scope => {
                Standing::Kept
            }
            Ok(_) => Standing::Changed,
            // The API server not answering does not end a session it let in.
            Err(r) if r.is_temporary() => Standing::Kept,
            Err(_) => Standing::Ended,
        }
    }

    /// Whether `principal` may `verb` (`patch`, `create`, `delete`) the object `key`: a
    /// Kubernetes user as its own RBAC says for that object, asked of its datacenter's API
    /// server; a key or an anonymous reader within what it sees (its role is checked apart).
    pub async fn may(
        &self,
        principal: &Principal,
        verb: &str,
        key: &crate::store::ObjectKey,
    ) -> Result<bool, Refusal> {
        match (&principal.credential, &self.reviewer) {
            (Credential::Kubernetes(hash, token, _), Some(r)) => {
                Box::pin(r.may(&token.0, *hash, verb, key)).await
            }
            (Credential::Kubernetes(..), None) => Ok(false),
            (Credential::Oidc(signed), Some(r))
                if self
                    .provider
                    .as_ref()
                    .and_then(|p| p.mapped(&signed.person.groups))
                    .is_none() =>
            {
                Box::pin(r.may_person(&signed.person.user, &signed.person.groups, verb, key)).await
            }
            _ => Ok(principal.scope.sees_key(key)),
        }
    }

    /// Ask these datacenters for what Kubernetes users may see, namespace by namespace (the
    /// app gives them once its sources run); without them only cluster-wide grants count.
    pub fn set_targets(&self, targets: review::Targets) {
        if let Some(r) = &self.reviewer {
            r.set_targets(targets);
        }
    }

    /// Moves whenever a credential may have stopped working (the keys changed, a key expired,
    /// a review's cached answer ran out).
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }

    fn bump(&self) {
        self.changes.send_modify(|g| *g += 1);
    }

    /// Replace the keys (as a reload does); open sockets re-check their principal.
    pub fn set_keys(&self, keys: KeySet) {
        self.keys.store(Arc::new(keys));
        self.bump();
    }
}

/// The refusal of a provider's token, saying why.
fn oidc_refusal(e: oidc::OidcError) -> Refusal {
    match e {
        oidc::OidcError::Unreachable(why) => {
            tracing::warn!(error = %why, "the OpenID provider could not be reached");
            Refusal::Unavailable
        }
        oidc::OidcError::Invalid(why) | oidc::OidcError::Refused(why) => Refusal::Token(why),
    }
}

/// The token of an `Authorization: Bearer <token>` value (scheme case-insensitive).
pub fn bearer(value: &str) -> Option<&str> {
    let (scheme, token) = value.trim().split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then_some(token.trim())
        .filter(|t| !t.is_empty())
}

#[cfg(test)]
mod tests;
