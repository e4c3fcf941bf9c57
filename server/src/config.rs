//! Typed settings from the environment (and flags), with the old operator's names and defaults.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;

use clap::Args;

/// Settings of `vitistack serve`. Every flag can also be set by the environment variable shown.
#[derive(Args, Clone, Debug)]
pub struct ServeConfig {
    /// Port to listen on (the old vitistack-operator's port).
    #[arg(long, env = "PORT", default_value_t = 9991)]
    pub port: u16,

    /// Address to bind. Default: all interfaces, or 127.0.0.1 when DEVELOPMENT=true (as the old operator did).
    #[arg(long, env = "BIND_ADDRESS")]
    pub bind_address: Option<IpAddr>,

    /// Development mode: bind to localhost only unless BIND_ADDRESS says otherwise.
    #[arg(long, env = "DEVELOPMENT", default_value_t = false)]
    pub development: bool,

    /// Log level filter (error, warn, info, debug, trace, or a tracing directive like `vitistack=debug`).
    #[arg(long, env = "LOG_LEVEL", default_value = "info")]
    pub log_level: String,

    /// Log as JSON lines (the old operator's default); `false` for human-readable text.
    #[arg(long, env = "LOG_JSON_LOGGING", default_value_t = true, action = clap::ArgAction::Set)]
    pub log_json: bool,

    /// The database.
    #[command(flatten)]
    pub db: DbConfig,

    /// Write pending objects at most this many milliseconds after the first change.
    #[arg(long, env = "DB_FLUSH_INTERVAL_MS", default_value_t = 200)]
    pub db_flush_interval_ms: u64,

    /// Write at once when this many objects are pending.
    #[arg(long, env = "DB_BATCH_SIZE", default_value_t = 1000)]
    pub db_batch_size: usize,

    /// History events held in memory while the database is away; past this they are dropped,
    /// counted, and a gap marker is recorded.
    #[arg(long, env = "HISTORY_BUFFER", default_value_t = 100_000)]
    pub history_buffer: usize,

    /// History events per database transaction.
    #[arg(long, env = "HISTORY_BATCH_SIZE", default_value_t = 5000)]
    pub history_batch_size: usize,

    /// Write history events at most this many milliseconds after they happen.
    #[arg(long, env = "HISTORY_FLUSH_INTERVAL_MS", default_value_t = 500)]
    pub history_flush_interval_ms: u64,

    /// Delete history events older than this many days.
    #[arg(long, env = "HISTORY_RETENTION_DAYS", default_value_t = 30)]
    pub history_retention_days: u64,

    /// Webhook endpoints (comma-separated URLs) that receive the event types in WEBHOOK_EVENTS.
    /// Secret (chat-style webhook URLs carry their key): shown and logged as scheme and host only.
    #[arg(
        long,
        env = "WEBHOOK_URLS",
        value_delimiter = ',',
        hide_env_values = true
    )]
    pub webhook_urls: Vec<WebhookUrl>,

    /// Key of the HMAC-SHA256 signature sent in `X-Vitistack-Signature: sha256=<hex>`.
    #[arg(long, env = "WEBHOOK_SECRET", hide_env_values = true)]
    pub webhook_secret: Option<Secret>,

    /// Event types sent to webhooks (comma-separated).
    #[arg(long, env = "WEBHOOK_EVENTS", value_delimiter = ',', default_values_t = crate::history::webhooks::DEFAULT_EVENTS.map(String::from))]
    pub webhook_events: Vec<String>,

    /// Seconds one webhook attempt may take.
    #[arg(long, env = "WEBHOOK_TIMEOUT_SECONDS", default_value_t = 5)]
    pub webhook_timeout_seconds: u64,

    /// Attempts per event before its delivery is marked failed.
    #[arg(long, env = "WEBHOOK_MAX_ATTEMPTS", default_value_t = 6)]
    pub webhook_max_attempts: u32,

    /// Milliseconds before the first retry (doubling, at most a minute).
    #[arg(long, env = "WEBHOOK_RETRY_MS", default_value_t = 1000)]
    pub webhook_retry_ms: u64,

    /// Events queued per webhook endpoint; past this they are dropped and counted.
    #[arg(long, env = "WEBHOOK_QUEUE", default_value_t = 10_000)]
    pub webhook_queue: usize,

    /// Name of the Vitistack singleton (the old operator's VITISTACKCRDNAME).
    #[arg(long, env = "VITISTACKCRDNAME", default_value = "vitistack")]
    pub vitistack_name: String,

    /// Load the generated demo fleet (every pipeline stage represented) into the embedded store.
    #[arg(long, env = "DEMO", default_value_t = false)]
    pub demo: bool,

    /// Play the operators' pipeline on the demo fleet (clusters move through the stages, are
    /// scaled, deleted and created), so subscriptions and the dashboard are live. Needs `--demo`.
    #[arg(long, env = "SIMULATE", default_value_t = false, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub simulate: bool,

    /// Simulator steps per second (each changes one cluster's objects).
    #[arg(long, env = "SIMULATE_STEPS_PER_SECOND", default_value_t = 2.0)]
    pub simulate_steps_per_second: f64,

    /// Number of clusters in the demo fleet (0 = the small dashboard demo).
    #[arg(long, env = "DEMO_CLUSTERS", default_value_t = 0)]
    pub demo_clusters: usize,

    /// Largest `first`/`last` a connection accepts.
    #[arg(long, env = "MAX_PAGE_SIZE", default_value_t = 500)]
    pub max_page_size: usize,

    /// Deepest query selection accepted.
    #[arg(long, env = "MAX_QUERY_DEPTH", default_value_t = 16)]
    pub max_query_depth: usize,

    /// Most lexical tokens a document may have (counted before it is parsed).
    #[arg(long, env = "MAX_QUERY_TOKENS", default_value_t = 10_000)]
    pub max_query_tokens: usize,

    /// Most aliased fields a document may have.
    #[arg(long, env = "MAX_QUERY_ALIASES", default_value_t = 100)]
    pub max_query_aliases: usize,

    /// Highest complexity a document may have: every field costs 1, and a list field multiplies
    /// what it selects by the items it may return (`first`/`last`, else the default page of 50).
    #[arg(long, env = "MAX_QUERY_COMPLEXITY", default_value_t = 200_000)]
    pub max_query_complexity: usize,

    /// Changes the change stream holds: a subscriber further behind than this (a slow reader)
    /// gets RESYNC and a fresh snapshot. Also bounds the memory kept for slow subscribers.
    #[arg(long, env = "CHANGE_BUFFER", default_value_t = vitistack_default_change_buffer())]
    pub change_buffer: usize,

    /// Changes queued per subscription for a slow reader; when it overflows the subscription
    /// sends RESYNC and a fresh snapshot.
    #[arg(long, env = "SUBSCRIPTION_BUFFER", default_value_t = 1024)]
    pub subscription_buffer: usize,

    /// Seconds a WebSocket client has to send `connection_init` (then closed with 4408).
    #[arg(long, env = "WS_INIT_TIMEOUT_SECONDS", default_value_t = 3)]
    pub ws_init_timeout_seconds: u64,

    /// Seconds between server keep-alives on WebSockets (`ping` / `ka`) and SSE streams.
    #[arg(long, env = "STREAM_KEEPALIVE_SECONDS", default_value_t = 12)]
    pub stream_keepalive_seconds: u64,

    /// Operations (subscriptions) running at once on one WebSocket.
    #[arg(long, env = "STREAM_MAX_OPERATIONS_PER_SOCKET", default_value_t = 100)]
    pub stream_max_operations_per_socket: usize,

    /// Open WebSockets and SSE streams per client address.
    #[arg(
        long,
        env = "STREAM_MAX_CONNECTIONS_PER_CLIENT",
        default_value_t = 1000
    )]
    pub stream_max_connections_per_client: usize,

    /// Open WebSockets and SSE streams in total.
    #[arg(long, env = "STREAM_MAX_CONNECTIONS", default_value_t = 20000)]
    pub stream_max_connections: usize,

    /// Memory kept for answers to repeated queries on an unchanged graph, in MiB (0 = off).
    /// Answers are exact: the cache is dropped whenever the graph changes.
    #[arg(long, env = "RESPONSE_CACHE_MB", default_value_t = 32)]
    pub response_cache_mb: usize,

    /// Memory kept for parts of answers, in MiB (0 = off): each item of a connection (a cluster
    /// with its machines, a machine with its class) is kept with the objects it read and reused
    /// by the same query while those objects are unchanged, so a page that a change touched in
    /// one place is not executed again everywhere. Exact, like the response cache.
    #[arg(long, env = "PART_CACHE_MB", default_value_t = 64)]
    pub part_cache_mb: usize,

    /// Memory kept for parsed query documents, in MiB (0 = off): a query text is parsed once,
    /// and a request (operation and variables) validated strictly once; later requests copy the
    /// parsed document and check only the limits. Exact: no answer changes.
    #[arg(long, env = "DOCUMENT_CACHE_MB", default_value_t = 16)]
    pub document_cache_mb: usize,

    /// Where objects come from: `kube` (watch a cluster), `embedded` (files, demo, database), or
    /// `auto`: kube when KUBECONFIG, KUBE_CONTEXT or an in-cluster service account is present
    /// (and no demo was asked for), embedded otherwise.
    #[arg(long, env = "SOURCE", value_enum, default_value_t = SourceMode::Auto)]
    pub source: SourceMode,

    /// Kubeconfig file(s), `:`-separated as for kubectl. Unset: in-cluster, then ~/.kube/config.
    #[arg(long, env = "KUBECONFIG")]
    pub kubeconfig: Option<String>,

    /// Kubeconfig context to use (default: the current context).
    #[arg(long, env = "KUBE_CONTEXT")]
    pub kube_context: Option<String>,

    /// Namespaces to watch namespaced kinds in, comma-separated (default: all namespaces).
    #[arg(long, env = "WATCH_NAMESPACES", value_delimiter = ',')]
    pub watch_namespaces: Vec<String>,

    /// Server-side watch timeout; a watch silent for this plus 5 s is restarted.
    #[arg(long, env = "WATCH_TIMEOUT_SECONDS", default_value_t = 290)]
    pub watch_timeout_seconds: u64,

    /// First retry delay after a watch error (doubles with jitter up to the maximum).
    #[arg(long, env = "WATCH_BACKOFF_MIN_MS", default_value_t = 500)]
    pub watch_backoff_min_ms: u64,

    /// Longest retry delay after a watch error.
    #[arg(long, env = "WATCH_BACKOFF_MAX_SECONDS", default_value_t = 30)]
    pub watch_backoff_max_seconds: u64,

    /// Retry delay for a kind whose CRD is not installed.
    #[arg(long, env = "ABSENT_KIND_RETRY_SECONDS", default_value_t = 60)]
    pub absent_kind_retry_seconds: u64,

    /// vCPUs that may be promised per allocatable host core (the old status page's fixed 3).
    #[arg(long, env = "CPU_OVERCOMMIT", default_value_t = 3.0)]
    pub cpu_overcommit: f64,

    /// Guest memory that may be promised per allocatable host byte (1 = no overcommit).
    #[arg(long, env = "MEMORY_OVERCOMMIT", default_value_t = 1.0)]
    pub memory_overcommit: f64,

    /// Accept the mutations (cluster lifecycle, manifest import); false: each answers READ_ONLY.
    #[arg(long, env = "MUTATIONS", default_value_t = true, action = clap::ArgAction::Set)]
    pub mutations: bool,

    /// Hosts that must still be able to fail once a planned cluster's new Machines are placed;
    /// creating or scaling below it is refused unless the caller passes `allowOverCapacity`.
    #[arg(long, env = "MIN_HOSTS_THAT_CAN_FAIL", default_value_t = 1)]
    pub min_hosts_that_can_fail: usize,

    /// How long a mutation waits for its write to come back through the store (the Kubernetes
    /// watch) before it answers NOT_YET_VISIBLE.
    #[arg(long, env = "CHANGE_WAIT_SECONDS", default_value_t = 20)]
    pub change_wait_seconds: u64,

    /// At SIGTERM, keep serving this long (seconds) with `/ready` answering 503, so load
    /// balancers stop sending new requests before the listener closes.
    #[arg(long, env = "SHUTDOWN_DELAY_SECONDS", default_value_t = 0)]
    pub shutdown_delay_seconds: u64,

    /// At SIGTERM, the longest wait (seconds) for requests in flight once the listener is closed;
    /// then pending history and objects are written (up to 5 s more) and the process exits.
    #[arg(long, env = "SHUTDOWN_TIMEOUT_SECONDS", default_value_t = 20)]
    pub shutdown_timeout_seconds: u64,

    /// Serve `/metrics` and count requests for it; false: `/metrics` answers 404.
    #[arg(long, env = "METRICS_ENABLED", default_value_t = true, action = clap::ArgAction::Set)]
    pub metrics_enabled: bool,

    /// An operator's object without any status for longer than this (seconds) counts as waiting
    /// on it: the operator is then reported unhealthy.
    #[arg(long, env = "OPERATOR_STALL_SECONDS", default_value_t = 300)]
    pub operator_stall_seconds: u64,

    /// proxmox-operator's endpoint (any URL answering 2xx when it is well), probed every
    /// PROXMOX_SYNC_INTERVAL; unset: judged from the graph alone.
    #[arg(long, env = "PROXMOX_OPERATOR_ENDPOINT")]
    pub proxmox_operator_endpoint: Option<String>,
    /// How often to probe PROXMOX_OPERATOR_ENDPOINT (`60s`, `2m`, `500ms`, or seconds).
    #[arg(long, env = "PROXMOX_SYNC_INTERVAL", default_value = "60s")]
    pub proxmox_sync_interval: String,
    /// talos-operator's endpoint, probed every TALOS_SYNC_INTERVAL.
    #[arg(long, env = "TALOS_OPERATOR_ENDPOINT")]
    pub talos_operator_endpoint: Option<String>,
    /// How often to probe TALOS_OPERATOR_ENDPOINT.
    #[arg(long, env = "TALOS_SYNC_INTERVAL", default_value = "60s")]
    pub talos_sync_interval: String,
    /// kea-operator's endpoint, probed every KEA_SYNC_INTERVAL.
    #[arg(long, env = "KEA_OPERATOR_ENDPOINT")]
    pub kea_operator_endpoint: Option<String>,
    /// How often to probe KEA_OPERATOR_ENDPOINT.
    #[arg(long, env = "KEA_SYNC_INTERVAL", default_value = "30s")]
    pub kea_sync_interval: String,
    /// kubevirt-operator's endpoint, probed every KUBEVIRT_SYNC_INTERVAL.
    #[arg(long, env = "KUBEVIRT_OPERATOR_ENDPOINT")]
    pub kubevirt_operator_endpoint: Option<String>,
    /// How often to probe KUBEVIRT_OPERATOR_ENDPOINT.
    #[arg(long, env = "KUBEVIRT_SYNC_INTERVAL", default_value = "45s")]
    pub kubevirt_sync_interval: String,

    /// Access: API keys, Kubernetes reviews, anonymous read, limits.
    #[command(flatten)]
    pub access: AccessConfig,

    /// Manifest files or directories to load at start-up (multi-document YAML or JSON).
    #[arg(env = "MANIFESTS", value_delimiter = ',')]
    pub manifests: Vec<PathBuf>,
}

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

    /// Seconds a token review's answer is kept.
    #[arg(long, env = "AUTH_CACHE_SECONDS", default_value_t = 10)]
    pub auth_cache_seconds: u64,

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

    /// Longest time one operation may run (seconds) before it is answered with a TIMEOUT error.
    #[arg(long, env = "OPERATION_TIMEOUT_SECONDS", default_value_t = 30.0)]
    pub operation_timeout_seconds: f64,

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
            anonymous_from: nets("ANONYMOUS_READ_FROM", &self.anonymous_read_from)?,
            trusted_proxies: nets("TRUSTED_PROXIES", &self.trusted_proxies)?,
        })
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
        let s = self.operation_timeout_seconds;
        if !(s.is_finite() && s > 0.0) {
            return Err(ConfigError::NotPositive {
                setting: "OPERATION_TIMEOUT_SECONDS",
                value: s,
            });
        }
        Ok(std::time::Duration::from_secs_f64(s))
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
        Ok(())
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
    fn invalid(setting: &'static str, reason: String) -> Self {
        ConfigError::Invalid { setting, reason }
    }
}

/// Which source feeds the store.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum SourceMode {
    /// Kube when a cluster is configured, embedded otherwise.
    Auto,
    /// Files, the demo fleet and the database.
    Embedded,
    /// Watches on a Kubernetes API server.
    Kube,
}

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

    /// Database connections kept open when idle.
    #[arg(long, env = "DB_MAX_IDLE_CONNS", default_value_t = 2)]
    pub db_max_idle_conns: u32,

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
            min_idle: self.db_max_idle_conns,
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
        Ok(())
    }
}

impl ServeConfig {
    /// How the history writer batches, bounds and expires events.
    pub fn history_settings(&self) -> crate::history::writer::HistorySettings {
        crate::history::writer::HistorySettings {
            buffer: self.history_buffer,
            batch_size: self.history_batch_size,
            flush_interval: std::time::Duration::from_millis(self.history_flush_interval_ms),
            retention: std::time::Duration::from_secs(
                self.history_retention_days.saturating_mul(24 * 3600),
            ),
        }
    }

    /// Webhook endpoints and delivery policy.
    pub fn webhook_settings(&self) -> crate::history::webhooks::WebhookSettings {
        crate::history::webhooks::WebhookSettings {
            urls: self
                .webhook_urls
                .iter()
                .filter(|u| !u.0.trim().is_empty())
                .map(|u| u.0.clone())
                .collect(),
            secret: self
                .webhook_secret
                .as_ref()
                .map(|s| s.0.clone())
                .filter(|s| !s.is_empty()),
            events: self.webhook_events.clone(),
            timeout: std::time::Duration::from_secs(self.webhook_timeout_seconds.max(1)),
            max_attempts: self.webhook_max_attempts.max(1),
            first_retry: std::time::Duration::from_millis(self.webhook_retry_ms),
            queue: self.webhook_queue.max(1),
        }
    }

    /// The source to use, and why (for the start-up message).
    pub fn resolve_source(&self) -> (SourceMode, &'static str) {
        match self.source {
            SourceMode::Kube => (SourceMode::Kube, "SOURCE=kube"),
            SourceMode::Embedded => (SourceMode::Embedded, "SOURCE=embedded"),
            SourceMode::Auto if self.demo => (SourceMode::Embedded, "demo requested"),
            SourceMode::Auto if self.kubeconfig.is_some() => {
                (SourceMode::Kube, "KUBECONFIG is set")
            }
            SourceMode::Auto if self.kube_context.is_some() => {
                (SourceMode::Kube, "KUBE_CONTEXT is set")
            }
            SourceMode::Auto if std::env::var_os("KUBERNETES_SERVICE_HOST").is_some() => {
                (SourceMode::Kube, "running in a cluster")
            }
            SourceMode::Auto => (
                SourceMode::Embedded,
                "no cluster configured (set KUBECONFIG or SOURCE=kube to watch one)",
            ),
        }
    }

    /// The source chosen (and why), with its settings; settings the other source would read are
    /// said to be ignored.
    pub fn source_settings(&self) -> (crate::source::SourceSettings, &'static str) {
        use crate::source::SourceSettings;
        let (mode, why) = self.resolve_source();
        if mode == SourceMode::Kube {
            if self.demo || !self.manifests.is_empty() {
                tracing::warn!("demo and manifest files are ignored with the kube source");
            }
            if self.simulate {
                tracing::warn!("SIMULATE needs the embedded source with --demo: not simulating");
            }
            return (SourceSettings::Kube(self.kube_settings()), why);
        }
        if self.simulate && !self.demo {
            tracing::warn!("SIMULATE needs the embedded source with --demo: not simulating");
        }
        let demo = self.demo.then(|| {
            if self.demo_clusters == 0 {
                crate::source::demo::FleetSpec::demo()
            } else {
                crate::source::demo::FleetSpec::large_demo(self.demo_clusters)
            }
        });
        let settings = crate::source::embedded::EmbeddedSettings {
            simulate: (self.simulate && demo.is_some()).then_some(
                crate::source::simulator::SimulatorSettings {
                    steps_per_second: self.simulate_steps_per_second,
                    seed: 11,
                },
            ),
            demo,
            manifests: self.manifests.clone(),
            writer: crate::db::object_writer::WriterSettings {
                flush_interval: std::time::Duration::from_millis(self.db_flush_interval_ms.max(1)),
                batch_size: self.db_batch_size.max(1),
            },
        };
        (SourceSettings::Embedded(settings), why)
    }

    /// Watch settings.
    pub fn kube_settings(&self) -> crate::source::kube::KubeSettings {
        use std::time::Duration;
        crate::source::kube::KubeSettings {
            kubeconfig: self.kubeconfig.clone(),
            context: self.kube_context.clone(),
            namespaces: self
                .watch_namespaces
                .iter()
                .map(|n| n.trim().to_string())
                .filter(|n| !n.is_empty())
                .collect(),
            watch_timeout: Duration::from_secs(self.watch_timeout_seconds.max(1)),
            min_backoff: Duration::from_millis(self.watch_backoff_min_ms.max(10)),
            max_backoff: Duration::from_secs(self.watch_backoff_max_seconds.max(1)),
            absent_retry: Duration::from_secs(self.absent_kind_retry_seconds.max(1)),
        }
    }

    /// The query cost limits.
    pub fn query_limits(&self) -> crate::graphql::limits::QueryLimits {
        crate::graphql::limits::QueryLimits {
            max_tokens: self.max_query_tokens,
            max_aliases: self.max_query_aliases,
            max_complexity: self.max_query_complexity,
            introspection: self.access.introspection,
            max_depth: self.max_query_depth,
        }
    }

    /// The socket address to listen on.
    pub fn listen_addr(&self) -> SocketAddr {
        let ip = self.bind_address.unwrap_or(if self.development {
            IpAddr::V4(Ipv4Addr::LOCALHOST)
        } else {
            IpAddr::V4(Ipv4Addr::UNSPECIFIED)
        });
        SocketAddr::new(ip, self.port)
    }

    /// Check settings that clap cannot; the error names the variable and what it accepts.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.db.validate()?;
        self.access.validate()?;
        for u in self.webhook_urls.iter().map(|u| u.0.as_str()) {
            if u.trim().is_empty() {
                continue;
            }
            if !(u.starts_with("http://") || u.starts_with("https://")) {
                return Err(ConfigError::invalid(
                    "WEBHOOK_URLS",
                    format!(
                        "`{}` must start with http:// or https://",
                        crate::history::webhooks::endpoint_label(u)
                    ),
                ));
            }
        }
        for (name, v) in [
            ("SIMULATE_STEPS_PER_SECOND", self.simulate_steps_per_second),
            ("CPU_OVERCOMMIT", self.cpu_overcommit),
            ("MEMORY_OVERCOMMIT", self.memory_overcommit),
        ] {
            if !(v.is_finite() && v > 0.0) {
                return Err(ConfigError::NotPositive {
                    setting: name,
                    value: v,
                });
            }
        }
        if self.max_page_size == 0 {
            return Err(ConfigError::Zero("MAX_PAGE_SIZE"));
        }
        for (name, v) in [
            (
                "WS_INIT_TIMEOUT_SECONDS",
                self.ws_init_timeout_seconds as usize,
            ),
            (
                "STREAM_KEEPALIVE_SECONDS",
                self.stream_keepalive_seconds as usize,
            ),
            (
                "STREAM_MAX_OPERATIONS_PER_SOCKET",
                self.stream_max_operations_per_socket,
            ),
            (
                "STREAM_MAX_CONNECTIONS_PER_CLIENT",
                self.stream_max_connections_per_client,
            ),
            ("STREAM_MAX_CONNECTIONS", self.stream_max_connections),
            ("CHANGE_BUFFER", self.change_buffer),
            ("MAX_QUERY_TOKENS", self.max_query_tokens),
            ("MAX_QUERY_COMPLEXITY", self.max_query_complexity),
            ("SUBSCRIPTION_BUFFER", self.subscription_buffer),
            ("HISTORY_BUFFER", self.history_buffer),
            ("HISTORY_BATCH_SIZE", self.history_batch_size),
            (
                "HISTORY_FLUSH_INTERVAL_MS",
                self.history_flush_interval_ms as usize,
            ),
            (
                "HISTORY_RETENTION_DAYS",
                self.history_retention_days as usize,
            ),
        ] {
            if v == 0 {
                return Err(ConfigError::Zero(name));
            }
        }
        self.probe_targets()?;
        Ok(())
    }

    /// The operator endpoints to probe, each with its interval.
    pub fn probe_targets(&self) -> Result<Vec<crate::domain::operators::ProbeTarget>, ConfigError> {
        use crate::domain::operators::{Operator, ProbeTarget};
        let mut targets = Vec::new();
        for (operator, url, interval) in [
            (
                Operator::Proxmox,
                &self.proxmox_operator_endpoint,
                &self.proxmox_sync_interval,
            ),
            (
                Operator::Talos,
                &self.talos_operator_endpoint,
                &self.talos_sync_interval,
            ),
            (
                Operator::Kea,
                &self.kea_operator_endpoint,
                &self.kea_sync_interval,
            ),
            (
                Operator::Kubevirt,
                &self.kubevirt_operator_endpoint,
                &self.kubevirt_sync_interval,
            ),
        ] {
            let var = operator.name().to_uppercase();
            let interval = parse_duration(interval)
                .filter(|d| !d.is_zero())
                .ok_or_else(|| ConfigError::NotADuration {
                    setting: format!("{var}_SYNC_INTERVAL"),
                    value: interval.to_string(),
                })?;
            let Some(url) = url.as_deref().map(str::trim).filter(|u| !u.is_empty()) else {
                continue;
            };
            if !(url.starts_with("http://") || url.starts_with("https://"))
                || reqwest::Url::parse(url).is_err()
            {
                return Err(ConfigError::NotAUrl(format!("{var}_OPERATOR_ENDPOINT")));
            }
            targets.push(ProbeTarget {
                operator,
                url: url.to_string(),
                interval,
            });
        }
        Ok(targets)
    }
}

/// A duration written as `500ms`, `60s`, `2m`, `1h`, or a plain number of seconds.
pub fn parse_duration(s: &str) -> Option<std::time::Duration> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (number, unit) = s.split_at(split);
    let n: f64 = number.parse().ok()?;
    let seconds = match unit.trim() {
        "" | "s" => n,
        "ms" => n / 1000.0,
        "m" => n * 60.0,
        "h" => n * 3600.0,
        _ => return None,
    };
    (0.0..1e9)
        .contains(&seconds)
        .then(|| std::time::Duration::from_secs_f64(seconds))
}

fn vitistack_default_change_buffer() -> usize {
    crate::store::CHANGE_BUFFER
}

impl ServeConfig {
    /// The streaming limits and timers.
    pub fn stream_settings(&self) -> crate::http::ws::StreamSettings {
        crate::http::ws::StreamSettings {
            init_timeout: std::time::Duration::from_secs(self.ws_init_timeout_seconds),
            keepalive: std::time::Duration::from_secs(self.stream_keepalive_seconds),
            max_operations_per_socket: self.stream_max_operations_per_socket,
            max_per_client: self.stream_max_connections_per_client,
            max_total: self.stream_max_connections,
        }
    }
}

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

#[cfg(test)]
mod tests;
