//! Who may call, how much and from where: authentication, rate limits, origins, TLS.

use std::net::IpAddr;
use std::path::PathBuf;

use clap::Args;

use super::ConfigError;
use crate::http::tls::TlsMinVersion;

/// Who may call, how much, and from where.
#[derive(Args, Clone, Debug)]
pub struct AccessConfig {
    /// API keys: one per line, `NAME ROLE KEY [expires=RFC3339]`, ROLE viewer, operator or admin,
    /// KEY the key (at least 16 characters) or `sha256:<hex>` of it. Sent as
    /// `Authorization: Bearer <key>`. Re-read every API_KEYS_RELOAD_SECONDS.
    #[arg(long, env = "API_KEYS_FILE")]
    pub api_keys_file: Option<PathBuf>,

    /// How often the keys file is re-read: a removed or expired key's open sockets are closed
    /// (4403) within this.
    #[arg(long, env = "API_KEYS_RELOAD_SECONDS", default_value_t = 5.0)]
    pub api_keys_reload_seconds: f64,

    /// Accept Kubernetes bearer tokens: TokenReview authenticates, SubjectAccessReviews on
    /// vitistack.io resources give the role (create vitistacks: admin; patch kubernetesclusters:
    /// operator; get kubernetesclusters: viewer).
    #[arg(long, env = "AUTH_KUBERNETES", default_value_t = false, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub auth_kubernetes: bool,

    /// Seconds a request trusts a token review's or RBAC's answer; open sockets ask again every
    /// half of it, so a removed RoleBinding stops a subscription within about this (default 4).
    #[arg(long, env = "AUTH_CACHE_SECONDS", default_value_t = 4)]
    pub auth_cache_seconds: u64,

    /// The OpenID provider people sign in with (its issuer URL, where
    /// `/.well-known/openid-configuration` is). With it, the dashboard offers sign-in and bearer
    /// tokens the provider signed are accepted.
    #[arg(long, env = "OIDC_ISSUER_URL")]
    pub oidc_issuer_url: Option<String>,

    /// This server's client id at the provider (ID tokens must be meant for it).
    #[arg(long, env = "OIDC_CLIENT_ID")]
    pub oidc_client_id: Option<String>,

    /// A file holding the client secret (dashboard sign-in needs a confidential client; bearer
    /// tokens do not).
    #[arg(long, env = "OIDC_CLIENT_SECRET_FILE")]
    pub oidc_client_secret_file: Option<PathBuf>,

    /// Scopes asked at sign-in (comma-separated). Add `offline_access` for providers that give a
    /// refresh token only then (Dex).
    #[arg(
        long,
        env = "OIDC_SCOPES",
        value_delimiter = ',',
        default_value = "openid,profile,email,groups"
    )]
    pub oidc_scopes: Vec<String>,

    /// The claim naming the user (as the API server's `--oidc-username-claim`).
    #[arg(long, env = "OIDC_USERNAME_CLAIM", default_value = "sub")]
    pub oidc_username_claim: String,

    /// Put before the user name (as `--oidc-username-prefix`), so RBAC subjects match.
    #[arg(long, env = "OIDC_USERNAME_PREFIX", default_value = "")]
    pub oidc_username_prefix: String,

    /// The claim listing the groups (as `--oidc-groups-claim`).
    #[arg(long, env = "OIDC_GROUPS_CLAIM", default_value = "groups")]
    pub oidc_groups_claim: String,

    /// Put before each group (as `--oidc-groups-prefix`).
    #[arg(long, env = "OIDC_GROUPS_PREFIX", default_value = "")]
    pub oidc_groups_prefix: String,

    /// Audiences a bearer token may be meant for besides the client id (comma-separated).
    #[arg(long, env = "OIDC_AUDIENCES", value_delimiter = ',')]
    pub oidc_audiences: Vec<String>,

    /// Where the provider sends people back: `https://HOST/auth/callback` (registered with the
    /// provider). Unset: from the request's host.
    #[arg(long, env = "OIDC_REDIRECT_URL")]
    pub oidc_redirect_url: Option<String>,

    /// Groups given a role, `GROUP=ROLE` over the whole fleet or `GROUP=ROLE@NS+NS` in those
    /// namespaces (viewer and operator), comma-separated (`platform=admin,team-1=viewer@team-1`);
    /// people in none are asked of RBAC (on a Kubernetes fleet) or refused.
    #[arg(long, env = "OIDC_ROLE_MAP", value_delimiter = ',')]
    pub oidc_role_map: Vec<String>,

    /// Clock difference allowed on a token's expiry and not-before, in seconds.
    #[arg(long, env = "OIDC_CLOCK_SKEW_SECONDS", default_value_t = 30)]
    pub oidc_clock_skew_seconds: u64,

    /// Longest a sign-in session lasts, refreshes included, in hours.
    #[arg(long, env = "OIDC_SESSION_MAX_HOURS", default_value_t = 12.0)]
    pub oidc_session_max_hours: f64,

    /// The provider's name on the sign-in button ("Sign in with Keycloak").
    #[arg(long, env = "OIDC_PROVIDER_NAME", default_value = "single sign-on")]
    pub oidc_provider_name: String,

    /// CA certificates (PEM) the provider's TLS certificate is checked against, besides the
    /// system's.
    #[arg(long, env = "OIDC_CA_FILE")]
    pub oidc_ca_file: Option<PathBuf>,

    /// Audiences a Kubernetes token must be meant for (comma-separated; empty: the API server's).
    #[arg(long, env = "AUTH_AUDIENCES", value_delimiter = ',')]
    pub auth_audiences: Vec<String>,

    /// Networks (CIDRs, comma-separated) whose clients may read (viewer) without a key. Empty
    /// (the default): every GraphQL request needs a key. `scripts/run.sh` sets 127.0.0.0/8,::1/128.
    #[arg(long, env = "ANONYMOUS_READ_FROM", value_delimiter = ',')]
    pub anonymous_read_from: Vec<String>,

    /// Proxies (CIDRs, comma-separated) whose `X-Forwarded-For` names the client (for rate limits
    /// and anonymous read). Other peers' `X-Forwarded-For` is ignored.
    #[arg(long, env = "TRUSTED_PROXIES", value_delimiter = ',')]
    pub trusted_proxies: Vec<String>,

    /// `/metrics` needs a key (any role) too.
    #[arg(long, env = "METRICS_REQUIRE_KEY", default_value_t = false, action = clap::ArgAction::Set)]
    pub metrics_require_key: bool,

    /// Operations per minute and burst for every role, `PER_MINUTE/BURST` (0: unlimited). Counted
    /// per principal, per client address when anonymous. (The old operator: 60/10.)
    #[arg(long, env = "RATE_LIMIT", default_value = "600/100")]
    pub rate_limit: String,

    /// The viewer role's limit, when not RATE_LIMIT.
    #[arg(long, env = "RATE_LIMIT_VIEWER")]
    pub rate_limit_viewer: Option<String>,

    /// The operator role's limit, when not RATE_LIMIT.
    #[arg(long, env = "RATE_LIMIT_OPERATOR")]
    pub rate_limit_operator: Option<String>,

    /// The admin role's limit, when not RATE_LIMIT.
    #[arg(long, env = "RATE_LIMIT_ADMIN")]
    pub rate_limit_admin: Option<String>,

    /// Longest time one operation (a GraphQL operation, a REST request) may run, in seconds,
    /// before it is answered with a TIMEOUT error (default 30).
    #[arg(long, env = "OPERATION_TIMEOUT_SECONDS")]
    pub operation_timeout_seconds: Option<f64>,

    /// The same limit under the old operator's name, as a duration (`30s`, `2m`, `500ms`); set
    /// it or OPERATION_TIMEOUT_SECONDS, not both.
    #[arg(long, env = "API_TIMEOUT")]
    pub api_timeout: Option<String>,

    /// Answer introspection queries (`__schema`, `__type`).
    #[arg(long, env = "INTROSPECTION", default_value_t = true, action = clap::ArgAction::Set)]
    pub introspection: bool,

    /// Serve GraphiQL on a bare GET of /graphql.
    #[arg(long, env = "GRAPHIQL", default_value_t = true, action = clap::ArgAction::Set)]
    pub graphiql: bool,

    /// Origins (comma-separated, e.g. https://ops.example.com) other pages may call the API from
    /// (CORS), and open WebSockets from. Empty: the page's own origin only.
    #[arg(long, env = "CORS_ALLOWED_ORIGINS", value_delimiter = ',')]
    pub cors_allowed_origins: Vec<String>,

    /// PEM certificate chain: with TLS_KEY_FILE, serve HTTPS and WSS (rustls).
    #[arg(long, env = "TLS_CERT_FILE")]
    pub tls_cert_file: Option<PathBuf>,

    /// PEM private key of TLS_CERT_FILE.
    #[arg(long, env = "TLS_KEY_FILE")]
    pub tls_key_file: Option<PathBuf>,

    /// PEM CA certificates: with TLS, every client must present a certificate signed by one of
    /// them (mutual TLS) before anything is served; keys and tokens still give the role.
    #[arg(long, env = "TLS_CA_FILE")]
    pub tls_ca_file: Option<PathBuf>,

    /// Oldest TLS version accepted: `1.2` or `1.3`.
    #[arg(long, env = "TLS_MIN_VERSION", default_value = "1.2")]
    pub tls_min_version: String,
}

impl AccessConfig {
    /// The authentication settings; the error names the variable and the bad value.
    pub fn auth_settings(&self) -> Result<crate::auth::AuthSettings, ConfigError> {
        let nets = |name: &'static str, values: &[String]| {
            values
                .iter()
                .map(|v| v.trim())
                .filter(|v| !v.is_empty())
                .map(|v| {
                    v.parse::<ipnet::IpNet>()
                        .or_else(|_| v.parse::<IpAddr>().map(ipnet::IpNet::from))
                        .map_err(|_| {
                            ConfigError::invalid(
                                name,
                                format!("`{v}` is not an address or a CIDR (10.0.0.0/8)"),
                            )
                        })
                })
                .collect::<Result<Vec<_>, ConfigError>>()
        };
        if !(self.api_keys_reload_seconds.is_finite() && self.api_keys_reload_seconds > 0.0) {
            return Err(ConfigError::NotPositive {
                setting: "API_KEYS_RELOAD_SECONDS",
                value: self.api_keys_reload_seconds,
            });
        }
        Ok(crate::auth::AuthSettings {
            keys_file: self.api_keys_file.clone(),
            reload: std::time::Duration::from_secs_f64(self.api_keys_reload_seconds),
            kubernetes: self
                .auth_kubernetes
                .then(|| crate::auth::review::ReviewSettings {
                    ttl: std::time::Duration::from_secs(self.auth_cache_seconds),
                    audiences: self
                        .auth_audiences
                        .iter()
                        .map(|a| a.trim().to_string())
                        .filter(|a| !a.is_empty())
                        .collect(),
                }),
            review_ttl: std::time::Duration::from_secs(self.auth_cache_seconds.max(1)),
            oidc: self.oidc_settings()?,
            anonymous_from: nets("ANONYMOUS_READ_FROM", &self.anonymous_read_from)?,
            trusted_proxies: nets("TRUSTED_PROXIES", &self.trusted_proxies)?,
        })
    }

    /// The OpenID provider's settings (None without OIDC_ISSUER_URL); the error names the variable.
    pub fn oidc_settings(&self) -> Result<Option<crate::auth::oidc::OidcSettings>, ConfigError> {
        let Some(issuer) = self
            .oidc_issuer_url
            .as_deref()
            .map(str::trim)
            .filter(|i| !i.is_empty())
        else {
            return Ok(None);
        };
        if !(issuer.starts_with("https://") || issuer.starts_with("http://")) {
            return Err(ConfigError::invalid(
                "OIDC_ISSUER_URL",
                format!("`{issuer}` must be an https:// URL"),
            ));
        }
        let client_id = self
            .oidc_client_id
            .as_deref()
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .ok_or_else(|| {
                ConfigError::invalid("OIDC_CLIENT_ID", "OIDC_ISSUER_URL needs a client id".into())
            })?;
        let read = |name: &'static str, path: &PathBuf| {
            std::fs::read(path).map_err(|e| {
                ConfigError::invalid(name, format!("{} cannot be read: {e}", path.display()))
            })
        };
        let client_secret = match &self.oidc_client_secret_file {
            Some(path) => {
                let bytes = read("OIDC_CLIENT_SECRET_FILE", path)?;
                let text = String::from_utf8(bytes).map_err(|_| {
                    ConfigError::invalid(
                        "OIDC_CLIENT_SECRET_FILE",
                        format!("{} is not UTF-8 text", path.display()),
                    )
                })?;
                let text = text.trim();
                if text.is_empty() {
                    return Err(ConfigError::invalid(
                        "OIDC_CLIENT_SECRET_FILE",
                        format!("{} is empty", path.display()),
                    ));
                }
                Some(crate::auth::oidc::Secret(text.into()))
            }
            None => None,
        };
        let mut role_map = Vec::new();
        for entry in self
            .oidc_role_map
            .iter()
            .map(|e| e.trim())
            .filter(|e| !e.is_empty())
        {
            let (group, role) = entry.rsplit_once('=').ok_or_else(|| {
                ConfigError::invalid(
                    "OIDC_ROLE_MAP",
                    format!("`{entry}` must be GROUP=ROLE (platform=admin)"),
                )
            })?;
            let (role, namespaces) = match role.split_once('@') {
                Some((r, list)) => (r, Some(list)),
                None => (role, None),
            };
            let role: crate::auth::Role =
                role.trim().parse().map_err(|e: crate::auth::UnknownRole| {
                    ConfigError::invalid("OIDC_ROLE_MAP", format!("`{entry}`: {e}"))
                })?;
            let namespaces = match namespaces {
                None => None,
                Some(_) if role == crate::auth::Role::Admin => {
                    return Err(ConfigError::invalid(
                        "OIDC_ROLE_MAP",
                        format!(
                            "`{entry}`: an admin sees everything; namespaces are for viewers and operators"
                        ),
                    ));
                }
                Some(list) => {
                    let names: Vec<String> =
                        list.split('+').map(|n| n.trim().to_string()).collect();
                    if let Some(bad) = names
                        .iter()
                        .find(|n| !crate::auth::keys::is_namespace_name(n))
                    {
                        return Err(ConfigError::invalid(
                            "OIDC_ROLE_MAP",
                            format!("`{entry}`: `{bad}` is not a namespace name"),
                        ));
                    }
                    Some(names)
                }
            };
            role_map.push(crate::auth::oidc::Mapped {
                group: group.trim().to_string(),
                role,
                namespaces,
            });
        }
        if let Some(r) = &self.oidc_redirect_url
            && !(r.starts_with("https://") || r.starts_with("http://"))
        {
            return Err(ConfigError::invalid(
                "OIDC_REDIRECT_URL",
                format!("`{r}` must be a URL like https://vitistack.example.com/auth/callback"),
            ));
        }
        if !(self.oidc_session_max_hours.is_finite() && self.oidc_session_max_hours > 0.0) {
            return Err(ConfigError::NotPositive {
                setting: "OIDC_SESSION_MAX_HOURS",
                value: self.oidc_session_max_hours,
            });
        }
        let ca_pem = match &self.oidc_ca_file {
            Some(p) => Some(read("OIDC_CA_FILE", p)?),
            None => None,
        };
        let list = |v: &[String]| {
            v.iter()
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
                .collect::<Vec<_>>()
        };
        Ok(Some(crate::auth::oidc::OidcSettings {
            issuer: issuer.to_string(),
            client_id: client_id.to_string(),
            client_secret,
            scopes: list(&self.oidc_scopes),
            username_claim: self.oidc_username_claim.clone(),
            username_prefix: self.oidc_username_prefix.clone(),
            groups_claim: self.oidc_groups_claim.clone(),
            groups_prefix: self.oidc_groups_prefix.clone(),
            audiences: list(&self.oidc_audiences),
            redirect_url: self.oidc_redirect_url.clone(),
            role_map,
            clock_skew: std::time::Duration::from_secs(self.oidc_clock_skew_seconds),
            session_max: std::time::Duration::from_secs_f64(self.oidc_session_max_hours * 3600.0),
            provider_name: self.oidc_provider_name.clone(),
            ca_pem,
        }))
    }

    /// The rate limit of each role.
    pub fn rate_limits(
        &self,
    ) -> Result<Vec<(crate::auth::Role, crate::http::rate::RateLimit)>, ConfigError> {
        use crate::auth::Role;
        let base = self
            .rate_limit
            .parse()
            .map_err(|e| ConfigError::RateLimit {
                setting: "RATE_LIMIT",
                source: e,
            })?;
        [
            (Role::Viewer, "RATE_LIMIT_VIEWER", &self.rate_limit_viewer),
            (
                Role::Operator,
                "RATE_LIMIT_OPERATOR",
                &self.rate_limit_operator,
            ),
            (Role::Admin, "RATE_LIMIT_ADMIN", &self.rate_limit_admin),
        ]
        .into_iter()
        .map(|(role, name, v)| match v {
            Some(v) => v
                .parse()
                .map(|l| (role, l))
                .map_err(|e| ConfigError::RateLimit {
                    setting: name,
                    source: e,
                }),
            None => Ok((role, base)),
        })
        .collect()
    }

    /// The longest an operation may run.
    pub fn operation_timeout(&self) -> Result<std::time::Duration, ConfigError> {
        match (&self.api_timeout, self.operation_timeout_seconds) {
            (Some(_), Some(_)) => Err(ConfigError::invalid(
                "API_TIMEOUT",
                "it is OPERATION_TIMEOUT_SECONDS under the old operator's name: set one of them"
                    .into(),
            )),
            (Some(t), None) => super::settings::positive_duration("API_TIMEOUT", t),
            (None, Some(s)) if !(s.is_finite() && s > 0.0) => Err(ConfigError::NotPositive {
                setting: "OPERATION_TIMEOUT_SECONDS",
                value: s,
            }),
            (None, Some(s)) => Ok(std::time::Duration::from_secs_f64(s)),
            (None, None) => Ok(std::time::Duration::from_secs(30)),
        }
    }

    /// Check what clap cannot.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.auth_settings()?;
        self.rate_limits()?;
        self.operation_timeout()?;
        for o in &self.cors_allowed_origins {
            let o = o.trim();
            if !(o.is_empty() || o.starts_with("http://") || o.starts_with("https://")) {
                return Err(ConfigError::invalid(
                    "CORS_ALLOWED_ORIGINS",
                    format!("`{o}` must be an origin like https://ops.example.com"),
                ));
            }
        }
        if self.tls_cert_file.is_some() != self.tls_key_file.is_some() {
            return Err(ConfigError::TlsPair);
        }
        if self.tls_ca_file.is_some() && self.tls_cert_file.is_none() {
            return Err(ConfigError::invalid(
                "TLS_CA_FILE",
                "client certificates need TLS: set TLS_CERT_FILE and TLS_KEY_FILE too".into(),
            ));
        }
        self.tls_min_version()?;
        Ok(())
    }

    /// TLS_MIN_VERSION as a version rustls serves.
    pub fn tls_min_version(&self) -> Result<TlsMinVersion, ConfigError> {
        let v = self.tls_min_version.trim().to_ascii_lowercase();
        match v.trim_start_matches("tls").trim_start_matches('v') {
            "1.2" | "12" => Ok(TlsMinVersion::Tls12),
            "1.3" | "13" => Ok(TlsMinVersion::Tls13),
            "1.0" | "1.1" | "10" | "11" => Err(ConfigError::invalid(
                "TLS_MIN_VERSION",
                format!(
                    "`{}` is not served: TLS 1.0 and 1.1 are broken and rustls has neither; use 1.2 or 1.3",
                    self.tls_min_version
                ),
            )),
            _ => Err(ConfigError::invalid(
                "TLS_MIN_VERSION",
                format!("must be 1.2 or 1.3, not `{}`", self.tls_min_version),
            )),
        }
    }

    /// The allowed origins, without a trailing slash.
    pub fn origins(&self) -> Vec<String> {
        self.cors_allowed_origins
            .iter()
            .map(|o| o.trim().trim_end_matches('/').to_string())
            .filter(|o| !o.is_empty())
            .collect()
    }
}
