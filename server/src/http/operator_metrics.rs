//! The old aggregator's `vitistack_operator_*` metrics, with its names and labels, so the alerts
//! and panels written for it keep working: gauges computed from the graph at scrape time,
//! counters kept in step with ours. Every label value comes from a closed set or from the
//! clusters themselves (never a request path or a free-form status).

use prometheus::{HistogramOpts, HistogramVec, IntCounterVec, IntGaugeVec, Opts, Registry};

use crate::domain::aggregates::ClusterState;
use crate::domain::operators::{OperatorHealth, OperatorState};
use crate::history::event_type;
use crate::history::webhooks::DEFAULT_EVENTS as NAMED_EVENT_TYPES;
use crate::model::{Kind, Resource};
use crate::store::{ChangeCounts, ChangeType, Snapshot};

/// The old aggregator's base URL: its routes, probes and metrics are also answered under it, and
/// its request metrics name routes relative to it.
pub const BASE_URL: &str = "/api/v1";

/// The methods the request metrics name; any other is `other` (the label stays bounded).
const METHODS: [&str; 7] = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"];

/// What a scrape reads besides the snapshot.
pub struct Scrape<'a> {
    /// Every operator, judged now.
    pub operators: &'a [OperatorHealth],
    /// Changes applied to the store since start, by kind and type.
    pub applied: &'a ChangeCounts,
    /// Source objects that could not be read, by kind and the change they would have been.
    pub undecodable: &'a ChangeCounts,
    /// The database pool's (idle, in use, max), when connected.
    pub connections: Option<(u32, u32, u32)>,
    /// Changes of an operator's state announced (`infrastructure.operator.status`).
    pub operator_changes: u64,
    /// Health checks made.
    pub health_checks: u64,
}

/// The `vitistack_operator_*` family.
pub struct OperatorMetrics {
    clusters: IntGaugeVec,
    machines: IntGaugeVec,
    requests: IntCounterVec,
    duration: HistogramVec,
    cache_hits: IntCounterVec,
    cache_misses: IntCounterVec,
    operator_status: IntGaugeVec,
    events: IntCounterVec,
    connections: IntGaugeVec,
}

impl OperatorMetrics {
    /// Register the family in `registry`; `info` carries this build's version and commit.
    pub fn new(registry: &Registry) -> Result<Self, prometheus::Error> {
        let info = IntGaugeVec::new(
            Opts::new(
                "vitistack_operator_info",
                "Build information: always 1, with the version and commit as labels",
            ),
            &["version", "commit"],
        )?;
        info.with_label_values(&[crate::VERSION, crate::COMMIT])
            .set(1);
        let gauge = |name: &str, help: &str, labels: &[&str]| {
            IntGaugeVec::new(Opts::new(name, help), labels)
        };
        let counter = |name: &str, help: &str, labels: &[&str]| {
            IntCounterVec::new(Opts::new(name, help), labels)
        };
        let m = OperatorMetrics {
            clusters: gauge(
                // It and `_machines_total` are gauges with `_total` names, typed `gauge` as the
                // old operator exposed them (promtool's lint of the suffix is expected).
                "vitistack_operator_clusters_total",
                "Kubernetes clusters now, by status (active, inactive, failed) and provider type",
                &["status", "type"],
            )?,
            machines: gauge(
                "vitistack_operator_machines_total",
                "Machines now, by operator (provider), status and cluster id",
                &["operator", "status", "cluster"],
            )?,
            requests: counter(
                "vitistack_operator_api_requests_total",
                "HTTP requests answered, by method, route template and status code",
                &["method", "endpoint", "status"],
            )?,
            duration: HistogramVec::new(
                HistogramOpts::new(
                    "vitistack_operator_api_request_duration_seconds",
                    "Time to answer an HTTP request, by method and route template",
                )
                .buckets(vec![
                    0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
                ]),
                &["method", "endpoint"],
            )?,
            cache_hits: counter(
                "vitistack_operator_cache_hits_total",
                "Cache hits, by cache (response, part, document)",
                &["cache_type"],
            )?,
            cache_misses: counter(
                "vitistack_operator_cache_misses_total",
                "Cache misses, by cache (response, part, document)",
                &["cache_type"],
            )?,
            operator_status: gauge(
                "vitistack_operator_operator_status",
                "1 for each operator's current status (healthy, unhealthy, unreachable), else 0",
                &["operator", "status"],
            )?,
            events: counter(
                "vitistack_operator_events_processed_total",
                "Object events processed, by the old operator's event type (infrastructure.machine.created, …; others as <kind>.<change>) and outcome (success, error: the object could not be read)",
                &["event_type", "status"],
            )?,
            connections: gauge(
                "vitistack_operator_database_connections",
                "Database pool connections, by state (idle, in_use, max)",
                &["state"],
            )?,
        };
        registry.register(Box::new(info))?;
        registry.register(Box::new(m.clusters.clone()))?;
        registry.register(Box::new(m.machines.clone()))?;
        registry.register(Box::new(m.requests.clone()))?;
        registry.register(Box::new(m.duration.clone()))?;
        registry.register(Box::new(m.cache_hits.clone()))?;
        registry.register(Box::new(m.cache_misses.clone()))?;
        registry.register(Box::new(m.operator_status.clone()))?;
        registry.register(Box::new(m.events.clone()))?;
        registry.register(Box::new(m.connections.clone()))?;
        Ok(m)
    }

    /// Count one answered request. `endpoint` is the route template (never the raw path); under
    /// the old base URL `/api/v1` it is named relative to it, as the old operator did
    /// (`/clusters`, `/health`).
    pub fn observe_request(&self, method: &str, endpoint: &str, status: u16, seconds: f64) {
        let endpoint = endpoint
            .strip_prefix(BASE_URL)
            .filter(|rest| rest.starts_with('/'))
            .unwrap_or(endpoint);
        let method = METHODS
            .iter()
            .find(|m| **m == method)
            .copied()
            .unwrap_or("other");
        // The code's three digits, written on the stack (a String per request before).
        let digits = [status / 100 % 10, status / 10 % 10, status % 10].map(|d| b'0' + d as u8);
        let status = match std::str::from_utf8(&digits) {
            Ok(text) if (100..1000).contains(&status) => text,
            _ => "other",
        };
        self.requests
            .with_label_values(&[method, endpoint, status])
            .inc();
        self.duration
            .with_label_values(&[method, endpoint])
            .observe(seconds);
    }

    /// Bring every scrape-time value up to date (callers serialize scrapes: counters advance by
    /// the difference to ours).
    /// `caches` are our cache counters by the old `cache_type`: (type, hits, misses).
    pub fn update(&self, snap: &Snapshot, s: &Scrape<'_>, caches: [(&'static str, u64, u64); 3]) {
        self.clusters.reset();
        for kc in snap.list(Kind::KubernetesCluster) {
            let Resource::KubernetesCluster(c) = kc.as_ref() else {
                continue;
            };
            let status = cluster_status(ClusterState::of(&crate::domain::pipeline::evaluate(
                snap, c,
            )));
            let kind = known(
                &c.spec.data.provider,
                &["talos", "rke2", "k3s", "kubeadm", "aks", "eks", "gke"],
            );
            self.clusters.with_label_values(&[status, kind]).inc();
        }
        self.machines.reset();
        for m in snap.list(Kind::Machine) {
            let Resource::Machine(machine) = m.as_ref() else {
                continue;
            };
            let operator = match machine.spec.provider.as_str() {
                "" => "kubevirt",
                p => known(p, &["kubevirt", "proxmox"]),
            };
            let cluster = snap.machine_cluster_id(m).unwrap_or_default();
            self.machines
                .with_label_values(&[
                    operator,
                    crate::model::vocab::PhaseState::of(m.phase()).as_str(),
                    cluster,
                ])
                .inc();
        }
        for o in s.operators {
            for state in OperatorState::ALL {
                self.operator_status
                    .with_label_values(&[o.operator.as_str(), state.name()])
                    .set(i64::from(o.status == state));
            }
        }
        // By the old operator's event types (`infrastructure.machine.created`, …; its five are
        // always present), other changes by `<kind>.<change>`: a closed set either way.
        let mut events: std::collections::BTreeMap<String, (u64, u64)> = NAMED_EVENT_TYPES
            .iter()
            .map(|t| ((*t).to_string(), (0, 0)))
            .collect();
        for kind in Kind::ALL {
            for change in [ChangeType::Added, ChangeType::Modified, ChangeType::Deleted] {
                let (ok, bad) = (
                    s.applied.get(*kind, change),
                    s.undecodable.get(*kind, change),
                );
                if ok + bad > 0 {
                    let e = events.entry(event_type(*kind, change)).or_default();
                    e.0 += ok;
                    e.1 += bad;
                }
            }
        }
        // An operator's change of state is an event of that type too.
        if let Some(e) = events.get_mut(super::checker::OPERATOR_STATUS) {
            e.0 += s.operator_changes;
        }
        for (name, (ok, bad)) in &events {
            catch_up(&self.events, &[name, "success"], *ok);
            catch_up(&self.events, &[name, "error"], *bad);
        }
        for (cache, hits, misses) in caches {
            catch_up(&self.cache_hits, &[cache], hits);
            catch_up(&self.cache_misses, &[cache], misses);
        }
        self.connections.reset();
        if let Some((idle, in_use, max)) = s.connections {
            for (state, n) in [("idle", idle), ("in_use", in_use), ("max", max)] {
                self.connections
                    .with_label_values(&[state])
                    .set(i64::from(n));
            }
        }
    }
}

/// Advance a counter to `value` (counters only go up).
fn catch_up(vec: &IntCounterVec, labels: &[&str], value: u64) {
    let c = vec.with_label_values(labels);
    c.inc_by(value.saturating_sub(c.get()));
}

/// `value` when it is one of `known`, else `other`.
fn known(value: &str, known: &[&'static str]) -> &'static str {
    known
        .iter()
        .find(|k| **k == value)
        .copied()
        .unwrap_or("other")
}

/// `active`, `failed` or `inactive`: a cluster's state in the old API's words (the REST
/// `status` and the `status` label of `vitistack_operator_clusters_total`).
pub fn cluster_status(state: ClusterState) -> &'static str {
    match state {
        ClusterState::Ready | ClusterState::Degraded => "active",
        ClusterState::Failed => "failed",
        ClusterState::InProgress => "inactive",
    }
}
