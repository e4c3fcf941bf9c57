//! Typed settings from the environment (and flags), with the old operator's names and defaults.

use std::net::IpAddr;
use std::path::PathBuf;

use clap::Args;

mod access;
mod db;
mod error;
mod secret_values;
mod settings;

pub use access::AccessConfig;
pub use db::DbConfig;
pub use error::ConfigError;
pub use secret_values::{DatabaseUrl, Secret, WebhookUrl};
pub use settings::parse_duration;

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

    /// The most bytes the timeline (every object at every kept moment) may take; the oldest
    /// moments are trimmed beyond it. 0: bounded by HISTORY_RETENTION_DAYS only.
    #[arg(long, env = "HISTORY_MAX_BYTES", default_value_t = 1 << 30)]
    pub history_max_bytes: u64,

    /// Memory for the graphs rebuilt at past moments (`at(time:)`, `changes`), in MiB.
    #[arg(long, env = "HISTORY_CACHE_MB", default_value_t = 256)]
    pub history_cache_mb: usize,

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

    /// Datacenters in the demo (2 or more: each with a fleet and a simulator of its own, named
    /// oslo, bergen, …), so several datacenters can be seen without a cluster.
    #[arg(long, env = "DEMO_DATACENTERS", default_value_t = 1)]
    pub demo_datacenters: usize,

    /// With DEMO_DATACENTERS: every this many seconds one of them goes away for the last third
    /// (taking turns) and comes back (0 = never).
    #[arg(long, env = "DEMO_OUTAGE_SECONDS", default_value_t = 180)]
    pub demo_outage_seconds: u64,

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

    /// The old operator's cache lifetime (a duration): accepted so its deployments start, checked,
    /// and said at start to be unused. The caches here are exact (an answer or part is dropped the
    /// moment an object it read changes), so no entry outlives the graph it answers from and
    /// nothing waits for a lifetime to end.
    #[arg(long, env = "CACHE_TTL")]
    pub cache_ttl: Option<String>,

    /// The old operator's Redis cache: not used (the caches are in-process and exact; replicas
    /// share through the database). Set, it is said so at start; its value is never printed.
    #[arg(long, env = "REDIS_URL", hide_env_values = true)]
    pub redis_url: Option<Secret>,

    /// The old operator's `PROXMOX_OPERATOR_NAMESPACE` (where proxmox-operator runs): not used.
    /// The objects it writes are watched in every namespace (or WATCH_NAMESPACES), and its
    /// endpoint is a URL. Set, it is said so at start.
    #[arg(long, env = "PROXMOX_OPERATOR_NAMESPACE")]
    pub proxmox_operator_namespace: Option<String>,
    /// The same for talos-operator: not used.
    #[arg(long, env = "TALOS_OPERATOR_NAMESPACE")]
    pub talos_operator_namespace: Option<String>,
    /// The same for kea-operator: not used.
    #[arg(long, env = "KEA_OPERATOR_NAMESPACE")]
    pub kea_operator_namespace: Option<String>,
    /// The same for kubevirt-operator: not used.
    #[arg(long, env = "KUBEVIRT_OPERATOR_NAMESPACE")]
    pub kubevirt_operator_namespace: Option<String>,

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

    /// Several datacenters: a directory with one kubeconfig file per datacenter (each mounted
    /// from its own Secret); the file name is the datacenter's key. Read again every
    /// DATACENTERS_RESCAN_SECONDS: files added or removed are datacenters added or removed.
    #[arg(long, env = "DATACENTERS_DIR")]
    pub datacenters_dir: Option<std::path::PathBuf>,

    /// Several datacenters: contexts of the kubeconfig, comma-separated, one datacenter each
    /// (the context is the datacenter's key).
    #[arg(long, env = "KUBE_CONTEXTS", value_delimiter = ',')]
    pub kube_contexts: Vec<String>,

    /// How often DATACENTERS_DIR is read again (and an unreachable datacenter tried again).
    #[arg(long, env = "DATACENTERS_RESCAN_SECONDS", default_value_t = 10)]
    pub datacenters_rescan_seconds: u64,

    /// Several datacenters: how often each one's API server is asked whether it answers.
    #[arg(long, env = "DC_PROBE_INTERVAL_SECONDS", default_value_t = 5)]
    pub dc_probe_interval_seconds: u64,

    /// Several datacenters: one whose API server has not answered for this long is STALE.
    #[arg(long, env = "DC_STALE_AFTER_SECONDS", default_value_t = 15)]
    pub dc_stale_after_seconds: u64,

    /// The old status page's agents: a file with one line per datacenter, `DATACENTER TOKEN`
    /// (TOKEN the token, at least 16 characters, or `sha256:<hex>` of it). Agents POST their
    /// reports to `/api/report` with `Authorization: Bearer TOKEN`; each token writes only its
    /// own datacenter. Unset: reports are refused.
    #[arg(long, env = "HUB_TOKENS_FILE")]
    pub hub_tokens_file: Option<std::path::PathBuf>,

    /// The old status page's readers: `GET /api/status` and the `/events` stream answer without
    /// a key, from any address, as the old hub served them (read-only; every other route still
    /// needs a key or an `ANONYMOUS_READ_FROM` network). A key sent is still checked.
    #[arg(long, env = "HUB_OPEN_READ", action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true", default_value_t = false)]
    pub hub_open_read: bool,

    /// The application inventory: Helm releases and the pods, services, volumes and ingresses
    /// they run (reads Secrets of type `helm.sh/release.v1`, ConfigMaps labelled `owner=helm`,
    /// Pods, Services, PersistentVolumeClaims, Ingresses and Namespaces). Unset: on with the
    /// demo, off with the kube source.
    #[arg(long, env = "APPLICATIONS", action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub applications: Option<bool>,

    /// Namespaces the inventory never reads, comma-separated (a name, or a prefix ending in `*`).
    #[arg(
        long,
        env = "APPLICATIONS_DENY_NAMESPACES",
        value_delimiter = ',',
        default_value = "kube-system,kube-public,kube-node-lease,local-path-storage"
    )]
    pub applications_deny_namespaces: Vec<String>,

    /// Start with the pushes to the inventory API stopped (the hossted design's `stop: true`);
    /// an admin can stop and resume them at runtime (`setApplicationsPaused`).
    #[arg(long, env = "APPLICATIONS_PAUSED", default_value_t = false, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub applications_paused: bool,

    /// The inventory API the applications are pushed to (the hossted design's): each
    /// application's document is POSTed when its revision or its pods' readiness changes. Secret:
    /// shown and logged as scheme and host only. Unset: nothing is pushed. Retries, timeouts and
    /// attempts are the webhooks' (WEBHOOK_TIMEOUT_SECONDS, WEBHOOK_MAX_ATTEMPTS, WEBHOOK_RETRY_MS).
    #[arg(long, env = "HOSSTED_API_URL", hide_env_values = true)]
    pub hossted_api_url: Option<WebhookUrl>,

    /// Sent as `Authorization: Bearer …` with each push; never logged.
    #[arg(long, env = "HOSSTED_AUTH_TOKEN", hide_env_values = true)]
    pub hossted_auth_token: Option<Secret>,

    /// The account's e-mail the inventory API files the pushes under, sent as `email_id` in each
    /// document's `app_api_info` (the design's `EMAIL_ID`); unset: sent empty.
    #[arg(long, env = "HOSSTED_EMAIL_ID")]
    pub hossted_email_id: Option<String>,

    /// Several replicas: only the holder of a `coordination.k8s.io` Lease delivers webhooks and
    /// trims the history (every replica watches and serves). Needs the kube source; the Lease
    /// lives in the cluster the replica runs in (or KUBECONFIG's).
    #[arg(long, env = "LEADER_ELECTION", default_value_t = false, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub leader_election: bool,

    /// The Lease's name.
    #[arg(long, env = "LEASE_NAME", default_value = "vitistack-graphql")]
    pub lease_name: String,

    /// The Lease's namespace (default: POD_NAMESPACE, else the kubeconfig's namespace).
    #[arg(long, env = "LEASE_NAMESPACE")]
    pub lease_namespace: Option<String>,

    /// How long (seconds) a replica that stopped renewing the Lease keeps it; a new leader takes
    /// over at most this long after the old one died (at once when it stopped normally).
    #[arg(long, env = "LEASE_DURATION_SECONDS", default_value_t = 15)]
    pub lease_duration_seconds: u64,

    /// This replica's name in the Lease (the chart sets it from the downward API; default: the
    /// host name).
    #[arg(long, env = "POD_NAME")]
    pub pod_name: Option<String>,

    /// The namespace this replica runs in (the chart sets it from the downward API).
    #[arg(long, env = "POD_NAMESPACE")]
    pub pod_namespace: Option<String>,

    /// Several datacenters: `/ready` waits this long at most for every one's first sync.
    #[arg(long, env = "READY_TIMEOUT_SECONDS", default_value_t = 120)]
    pub ready_timeout_seconds: u64,

    /// How many first lists of a kind run at once, over every datacenter.
    #[arg(long, env = "LIST_CONCURRENCY", default_value_t = 4)]
    pub list_concurrency: usize,

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

    /// The longest a client may take to send a request's headers, counted from when the
    /// connection waits for them (a new connection, or a request begun on a kept-alive one);
    /// the connection is closed after it (`500ms`, `20s`, `1m`, or seconds).
    #[arg(long, env = "SERVER_READ_TIMEOUT", default_value = "20s")]
    pub server_read_timeout: String,

    /// The longest a write to a client may wait (a client that stopped reading its answer or
    /// its stream); the connection is closed after it.
    #[arg(long, env = "SERVER_WRITE_TIMEOUT", default_value = "20s")]
    pub server_write_timeout: String,

    /// How long a kept-alive connection with no request in flight stays open.
    #[arg(long, env = "SERVER_IDLE_TIMEOUT", default_value = "120s")]
    pub server_idle_timeout: String,

    /// The largest request head (request line and headers) in bytes; larger ones are answered
    /// 431.
    #[arg(long, env = "SERVER_MAX_HEADER_BYTES", default_value_t = 1_048_576)]
    pub server_max_header_bytes: usize,

    /// Keep the status of the datacenter's Vitistack (`VITISTACKCRDNAME`) as the old aggregator
    /// kept it: providers, machine classes, clusters and counts, from the graph. Kubernetes
    /// only; with several replicas only the Lease holder writes.
    #[arg(long, env = "WRITE_VITISTACK_STATUS", default_value_t = false, action = clap::ArgAction::Set)]
    pub write_vitistack_status: bool,

    /// How often the health check runs (`30s`, `500ms`, `2m`, or seconds): it asks the database
    /// and judges the operators, announcing each operator whose state changed
    /// (`infrastructure.operator.status`, a Kubernetes Event on the Vitistack).
    #[arg(long, env = "HEALTH_CHECK_INTERVAL", default_value = "30s")]
    pub health_check_interval: String,

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
    /// nms-operator's endpoint, probed every NMS_SYNC_INTERVAL.
    #[arg(long, env = "NMS_OPERATOR_ENDPOINT")]
    pub nms_operator_endpoint: Option<String>,
    /// How often to probe NMS_OPERATOR_ENDPOINT.
    #[arg(long, env = "NMS_SYNC_INTERVAL", default_value = "60s")]
    pub nms_sync_interval: String,
    /// manual-ip-provisioning-operator's endpoint, probed every MANUAL_IP_SYNC_INTERVAL.
    #[arg(long, env = "MANUAL_IP_OPERATOR_ENDPOINT")]
    pub manual_ip_operator_endpoint: Option<String>,
    /// How often to probe MANUAL_IP_OPERATOR_ENDPOINT.
    #[arg(long, env = "MANUAL_IP_SYNC_INTERVAL", default_value = "60s")]
    pub manual_ip_sync_interval: String,
    /// static-ip-operator's endpoint, probed every STATIC_IP_SYNC_INTERVAL.
    #[arg(long, env = "STATIC_IP_OPERATOR_ENDPOINT")]
    pub static_ip_operator_endpoint: Option<String>,
    /// How often to probe STATIC_IP_OPERATOR_ENDPOINT.
    #[arg(long, env = "STATIC_IP_SYNC_INTERVAL", default_value = "60s")]
    pub static_ip_sync_interval: String,

    /// Access: API keys, Kubernetes reviews, anonymous read, limits.
    #[command(flatten)]
    pub access: AccessConfig,

    /// Manifest files or directories to load at start-up (multi-document YAML or JSON).
    #[arg(env = "MANIFESTS", value_delimiter = ',')]
    pub manifests: Vec<PathBuf>,
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

fn vitistack_default_change_buffer() -> usize {
    crate::store::CHANGE_BUFFER
}

#[cfg(test)]
mod tests;
