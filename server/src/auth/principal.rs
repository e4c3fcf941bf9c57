//! Who calls: a principal, how it proved it (its credential), and whom rate limits count it
//! against.

use std::net::IpAddr;
use std::sync::Arc;

use super::{Role, oidc};
use crate::store::Scope;

/// How a principal proved who it is.
#[derive(Clone, Debug)]
pub enum Credential {
    /// An API key (by its hash).
    Key([u8; 32]),
    /// A Kubernetes token, reviewed by the API server (kept to review it again), and the
    /// groups the API server named (but `system:authenticated`, which everyone has).
    Kubernetes([u8; 32], Token, Arc<[String]>),
    /// A person the OpenID provider signed in: by a bearer token it signed, or by a sign-in
    /// session's cookie.
    Oidc(Arc<Signed>),
    /// No credential: a client on a trusted network.
    Anonymous,
}

/// A person the OpenID provider vouches for, and how they came.
#[derive(Clone, Debug)]
pub struct Signed {
    /// Who (user name and groups, as the token says; the session's, refreshed).
    pub person: oidc::Person,
    /// How they came.
    pub via: Via,
}

/// How a person signed in.
#[derive(Clone, Debug)]
pub enum Via {
    /// A bearer token the provider signed (until it expires).
    Bearer,
    /// A sign-in session (its cookie's token, kept to find it again).
    Session(Token),
}

impl Credential {
    /// How the caller proved who it is, as the history and `me` say it.
    pub fn method(&self) -> &'static str {
        match self {
            Credential::Key(_) => "api-key",
            Credential::Kubernetes(..) => "kubernetes-token",
            Credential::Oidc(s) => match s.via {
                Via::Bearer => "oidc-token",
                Via::Session(_) => "oidc-session",
            },
            Credential::Anonymous => "anonymous",
        }
    }

    /// The groups the caller's provider or API server named (empty for keys).
    pub fn groups(&self) -> &[String] {
        match self {
            Credential::Oidc(s) => &s.person.groups,
            Credential::Kubernetes(_, _, groups) => groups,
            _ => &[],
        }
    }
}

/// A token kept in memory to be reviewed again; never shown.
#[derive(Clone)]
pub struct Token(pub(super) Arc<str>);

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<redacted>")
    }
}

/// The caller of a request or a socket.
#[derive(Clone, Debug)]
pub struct Principal {
    /// Who: `key:NAME`, `kubernetes:USER`, or `anonymous`.
    pub name: Arc<str>,
    /// What it may do.
    pub role: Role,
    /// How it proved it.
    pub credential: Credential,
    /// The client's address (after trusted proxies).
    pub address: IpAddr,
    /// What it may see (everything, or namespaces per datacenter).
    pub scope: Scope,
}

/// Whom rate limits count against (made per request: no text is formatted for it).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum RateKey {
    /// An anonymous caller, by its address.
    Anonymous(IpAddr),
    /// A principal, by name.
    Named(Arc<str>),
}

impl std::fmt::Display for RateKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RateKey::Anonymous(address) => write!(f, "anonymous@{address}"),
            RateKey::Named(name) => f.write_str(name),
        }
    }
}

impl Principal {
    /// Whom rate limits count against: the principal, or its address when anonymous.
    pub fn rate_key(&self) -> RateKey {
        match self.credential {
            Credential::Anonymous => RateKey::Anonymous(self.address),
            _ => RateKey::Named(self.name.clone()),
        }
    }

    /// True when no credential was given.
    pub fn is_anonymous(&self) -> bool {
        matches!(self.credential, Credential::Anonymous)
    }

    /// A reader without a credential (a viewer), counted by its address.
    pub fn anonymous(address: IpAddr) -> Principal {
        static ANONYMOUS: std::sync::LazyLock<Arc<str>> =
            std::sync::LazyLock::new(|| "anonymous".into());
        Principal {
            name: ANONYMOUS.clone(),
            role: Role::Viewer,
            credential: Credential::Anonymous,
            address,
            scope: Scope::All,
        }
    }

    /// A principal for work the server does itself (tests, tools): admin, from nowhere.
    pub fn internal(name: &str) -> Principal {
        Principal {
            name: name.into(),
            role: Role::Admin,
            credential: Credential::Anonymous,
            address: IpAddr::from([127, 0, 0, 1]),
            scope: Scope::All,
        }
    }
}
