//! Each module's settings, assembled from the command line and environment.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use super::{ConfigError, ServeConfig, SourceMode};

impl ServeConfig {
    /// Say at start which settings are set and not used (each by name, never its value).
    pub fn warn_unused(&self) {
        if self.redis_url.is_some() {
            tracing::warn!(
                "REDIS_URL is set and not used: the caches are in-process and exact, and replicas share through the database"
            );
        }
        if self.cache_ttl.is_some() {
            tracing::warn!(
                setting = "CACHE_TTL",
                "set and not used: every cache here is exact (an answer is dropped the moment an object it read changes), so none waits for a lifetime; memory is bounded by the *_CACHE_MB settings"
            );
        }
        for (setting, value) in [
            (
                "PROXMOX_OPERATOR_NAMESPACE",
                &self.proxmox_operator_namespace,
            ),
            ("TALOS_OPERATOR_NAMESPACE", &self.talos_operator_namespace),
            ("KEA_OPERATOR_NAMESPACE", &self.kea_operator_namespace),
            (
                "KUBEVIRT_OPERATOR_NAMESPACE",
                &self.kubevirt_operator_namespace,
            ),
        ] {
            if value.is_some() {
                tracing::warn!(
                    setting,
                    "set and not used: the objects the operator writes are watched in every namespace (or WATCH_NAMESPACES), and its endpoint is a URL (*_OPERATOR_ENDPOINT)"
                );
            }
        }
    }

    /// How the history writer batches, bounds and expires events.
    pub fn history_settings(&self) -> crate::history::writer::HistorySettings {
        crate::history::writer::HistorySettings {
            buffer: self.history_buffer,
            batch_size: self.history_batch_size,
            flush_interval: std::time::Duration::from_millis(self.history_flush_interval_ms),
            retention: std::time::Duration::from_secs(
                self.history_retention_days.saturating_mul(24 * 3600),
            ),
            max_bytes: self.history_max_bytes,
            cache_bytes: self.history_cache_mb.saturating_mul(1 << 20),
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
            SourceMode::Auto if self.datacenters_dir.is_some() => {
                (SourceMode::Kube, "DATACENTERS_DIR is set")
            }
            SourceMode::Auto if !self.kube_contexts.is_empty() => {
                (SourceMode::Kube, "KUBE_CONTEXTS is set")
            }
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
            return (SourceSettings::Kube(self.fleet_settings()), why);
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
        let demo_datacenters = if demo.is_some() {
            crate::source::weather::datacenters(self.demo_datacenters)
        } else {
            Vec::new()
        };
        let settings = crate::source::embedded::EmbeddedSettings {
            simulate: (self.simulate && demo.is_some()).then_some(
                crate::source::simulator::SimulatorSettings {
                    steps_per_second: self.simulate_steps_per_second,
                    seed: 11,
                },
            ),
            demo,
            datacenters: (self.hub_tokens_file.is_some() || !demo_datacenters.is_empty())
                .then(|| self.datacenter_policy()),
            demo_datacenters,
            demo_outages: (self.demo_outage_seconds > 0)
                .then(|| std::time::Duration::from_secs(self.demo_outage_seconds)),
            manifests: self.manifests.clone(),
            inventory: None,
            writer: crate::db::object_writer::WriterSettings {
                flush_interval: std::time::Duration::from_millis(self.db_flush_interval_ms.max(1)),
                batch_size: self.db_batch_size.max(1),
            },
        };
        (SourceSettings::Embedded(settings), why)
    }

    /// Where the applications are pushed (HOSSTED_API_URL), with the webhooks' retries.
    pub fn push_settings(&self) -> Option<crate::inventory::push::PushSettings> {
        let url = self.hossted_api_url.as_ref()?;
        Some(crate::inventory::push::PushSettings {
            url: url.0.clone(),
            token: self.hossted_auth_token.as_ref().map(|t| t.0.clone()),
            email_id: self.hossted_email_id.clone().unwrap_or_default(),
            timeout: std::time::Duration::from_secs(self.webhook_timeout_seconds.max(1)),
            max_attempts: self.webhook_max_attempts.max(1),
            first_retry: std::time::Duration::from_millis(self.webhook_retry_ms),
        })
    }

    /// The application inventory's settings (on with the demo unless APPLICATIONS says).
    pub fn inventory_settings(&self) -> crate::inventory::InventorySettings {
        let (mode, _) = self.resolve_source();
        let demo = mode == SourceMode::Embedded && self.demo;
        crate::inventory::InventorySettings {
            enabled: self.applications.unwrap_or(demo),
            deny: self
                .applications_deny_namespaces
                .iter()
                .map(|n| n.trim().to_string())
                .filter(|n| !n.is_empty())
                .collect(),
            paused: self.applications_paused,
            namespace: self.pod_namespace.clone(),
        }
    }

    /// Which clusters to watch, one datacenter each, and what they share.
    pub fn fleet_settings(&self) -> crate::source::kube::FleetSettings {
        use crate::source::kube::Clusters;
        let contexts: Vec<String> = self
            .kube_contexts
            .iter()
            .map(|c| c.trim().to_string())
            .filter(|c| !c.is_empty())
            .collect();
        let clusters = match (&self.datacenters_dir, contexts.is_empty()) {
            (Some(dir), _) => Clusters::Directory(dir.clone()),
            (None, false) => Clusters::Contexts(contexts),
            (None, true) => Clusters::One,
        };
        crate::source::kube::FleetSettings {
            template: self.kube_settings(),
            clusters,
            rescan: std::time::Duration::from_secs(self.datacenters_rescan_seconds.max(1)),
            list_concurrency: self.list_concurrency.max(1),
            policy: self.datacenter_policy(),
            pushed: self.hub_tokens_file.is_some(),
            // Set when the source starts (the inventory is made by the server).
            inventory: None,
        }
    }

    /// How datacenters are judged (probes, staleness, readiness).
    pub fn datacenter_policy(&self) -> crate::source::datacenters::Policy {
        crate::source::datacenters::Policy {
            probe_interval: std::time::Duration::from_secs(self.dc_probe_interval_seconds.max(1)),
            stale_after: std::time::Duration::from_secs(self.dc_stale_after_seconds.max(1)),
            ready_timeout: std::time::Duration::from_secs(self.ready_timeout_seconds),
        }
    }

    /// The agents' tokens (`HUB_TOKENS_FILE`), when reports are taken.
    pub fn hub_tokens(
        &self,
    ) -> Result<Option<crate::source::hub::HubTokens>, crate::source::hub::TokensError> {
        self.hub_tokens_file
            .as_deref()
            .map(crate::source::hub::HubTokens::read)
            .transpose()
    }

    /// Watch settings (of the single cluster; what every datacenter shares).
    pub fn kube_settings(&self) -> crate::source::kube::KubeSettings {
        use std::time::Duration;
        crate::source::kube::KubeSettings {
            datacenter: Default::default(),
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
        if let Some(ttl) = &self.cache_ttl {
            positive_duration("CACHE_TTL", ttl)?;
        }
        self.health_check_interval()?;
        self.connection_limits()?;
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
        if self.leader_election {
            if self.resolve_source().0 != SourceMode::Kube {
                return Err(ConfigError::invalid(
                    "LEADER_ELECTION",
                    "needs the kube source (the embedded source runs as one replica)".into(),
                ));
            }
            if self.lease_duration_seconds < 2 {
                return Err(ConfigError::invalid(
                    "LEASE_DURATION_SECONDS",
                    format!("{} is too short: at least 2", self.lease_duration_seconds),
                ));
            }
            if self.lease_name.trim().is_empty() {
                return Err(ConfigError::invalid(
                    "LEASE_NAME",
                    "must not be empty".into(),
                ));
            }
        }
        Ok(())
    }

    /// The Lease to hold, when leader election is on; `default_namespace` is the client's.
    pub fn lease_settings(&self, default_namespace: &str) -> Option<crate::leader::LeaseSettings> {
        let nonempty = |v: &Option<String>| v.clone().filter(|v| !v.trim().is_empty());
        self.leader_election.then(|| crate::leader::LeaseSettings {
            name: self.lease_name.trim().to_string(),
            namespace: nonempty(&self.lease_namespace)
                .or_else(|| nonempty(&self.pod_namespace))
                .unwrap_or_else(|| default_namespace.to_string()),
            identity: nonempty(&self.pod_name).unwrap_or_else(host_identity),
            duration: std::time::Duration::from_secs(self.lease_duration_seconds),
        })
    }

    /// How often the health check runs (`HEALTH_CHECK_INTERVAL`).
    pub fn health_check_interval(&self) -> Result<std::time::Duration, ConfigError> {
        positive_duration("HEALTH_CHECK_INTERVAL", &self.health_check_interval)
    }

    /// What a client connection may take (`SERVER_*`).
    pub fn connection_limits(&self) -> Result<crate::http::serve::Limits, ConfigError> {
        if self.server_max_header_bytes < 1024 {
            return Err(ConfigError::invalid(
                "SERVER_MAX_HEADER_BYTES",
                format!(
                    "{} is too small for any request: at least 1024",
                    self.server_max_header_bytes
                ),
            ));
        }
        Ok(crate::http::serve::Limits {
            read: positive_duration("SERVER_READ_TIMEOUT", &self.server_read_timeout)?,
            write: positive_duration("SERVER_WRITE_TIMEOUT", &self.server_write_timeout)?,
            idle: positive_duration("SERVER_IDLE_TIMEOUT", &self.server_idle_timeout)?,
            max_header_bytes: self.server_max_header_bytes,
        })
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
            (
                Operator::Nms,
                &self.nms_operator_endpoint,
                &self.nms_sync_interval,
            ),
            (
                Operator::ManualIp,
                &self.manual_ip_operator_endpoint,
                &self.manual_ip_sync_interval,
            ),
            (
                Operator::StaticIp,
                &self.static_ip_operator_endpoint,
                &self.static_ip_sync_interval,
            ),
        ] {
            let var = operator.env_prefix();
            let interval = positive_duration(format!("{var}_SYNC_INTERVAL"), interval)?;
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

/// The duration a setting gives, above zero; the error names the setting and the value.
pub(super) fn positive_duration(
    setting: impl Into<String>,
    value: &str,
) -> Result<std::time::Duration, ConfigError> {
    parse_duration(value)
        .filter(|d| !d.is_zero())
        .ok_or_else(|| ConfigError::NotADuration {
            setting: setting.into(),
            value: value.to_string(),
        })
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

impl ServeConfig {
    /// The streaming limits and timers.
    pub fn stream_settings(&self) -> crate::http::streams::StreamSettings {
        crate::http::streams::StreamSettings {
            init_timeout: std::time::Duration::from_secs(self.ws_init_timeout_seconds),
            keepalive: std::time::Duration::from_secs(self.stream_keepalive_seconds),
            max_operations_per_socket: self.stream_max_operations_per_socket,
            max_per_client: self.stream_max_connections_per_client,
            max_total: self.stream_max_connections,
        }
    }
}

/// A replica's name when the downward API gave none: the host name (a pod's name in Kubernetes)
/// and the process id.
fn host_identity() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "vitistack".into());
    format!("{host}-{}", std::process::id())
}
