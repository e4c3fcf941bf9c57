//! How the infrastructure operators (proxmox, talos, kea, kubevirt) are doing, judged from what
//! the graph shows (their CRDs served and current, their objects progressing) and, when an
//! endpoint is configured, from probing it: the `checks.operators` of `/health`, the
//! `/health/operators` report, the `operators` of `/api/v1/infrastructure`, GraphQL and
//! `vitistack_operator_operator_status`.

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use serde::Serialize;

use crate::model::{Kind, Resource};
use crate::store::Snapshot;

/// An operator of the pipeline.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Operator {
    /// proxmox-operator: Machines with `spec.provider: proxmox` become Proxmox VMs.
    Proxmox,
    /// talos-operator: KubernetesClusters with `spec.data.provider: talos` become Machines and a
    /// Talos cluster.
    Talos,
    /// kea-operator: NetworkConfigurations get DHCP reservations.
    Kea,
    /// kubevirt-operator: Machines with `spec.provider: kubevirt` (or none) become KubeVirt VMs.
    Kubevirt,
}

impl Operator {
    /// Every operator, in the order reports list them.
    pub const ALL: [Operator; 4] = [
        Operator::Proxmox,
        Operator::Talos,
        Operator::Kea,
        Operator::Kubevirt,
    ];

    /// The name used in reports, metric labels and environment variables (lower case).
    pub fn name(self) -> &'static str {
        match self {
            Operator::Proxmox => "proxmox",
            Operator::Talos => "talos",
            Operator::Kea => "kea",
            Operator::Kubevirt => "kubevirt",
        }
    }

    /// The kinds it works on: when one is not served or not current, it cannot be seen.
    fn kinds(self) -> &'static [Kind] {
        match self {
            Operator::Proxmox => &[Kind::Machine],
            Operator::Talos => &[Kind::KubernetesCluster, Kind::Machine],
            Operator::Kea => &[Kind::NetworkConfiguration, Kind::NetworkNamespace],
            Operator::Kubevirt => &[Kind::Machine, Kind::KubevirtConfig],
        }
    }

    /// The objects it is expected to act on.
    fn objects<'s>(self, snap: &'s Snapshot) -> Box<dyn Iterator<Item = &'s Arc<Resource>> + 's> {
        match self {
            Operator::Proxmox => Box::new(
                snap.list(Kind::Machine)
                    .filter(|m| machine_provider(m) == Some("proxmox")),
            ),
            Operator::Kubevirt => Box::new(
                // kubevirt-operator takes `kubevirt` and the empty provider.
                snap.list(Kind::Machine)
                    .filter(|m| matches!(machine_provider(m), Some("kubevirt" | ""))),
            ),
            Operator::Talos => Box::new(snap.list(Kind::KubernetesCluster).filter(|c| {
                matches!(c.as_ref(), Resource::KubernetesCluster(kc) if kc.spec.data.provider == "talos")
            })),
            Operator::Kea => Box::new(snap.list(Kind::NetworkConfiguration).filter(|nc| {
                matches!(nc.as_ref(), Resource::NetworkConfiguration(c)
                    if matches!(c.spec.provider.as_deref(), None | Some("") | Some("kea")))
            })),
        }
    }

    /// The provider object that announces it (`providerType`), for its version label.
    fn provider_kind(self) -> Kind {
        match self {
            Operator::Talos => Kind::KubernetesProvider,
            _ => Kind::MachineProvider,
        }
    }
}

fn machine_provider(m: &Resource) -> Option<&str> {
    match m {
        Resource::Machine(machine) => Some(machine.spec.provider.as_str()),
        _ => None,
    }
}

/// What the last probe of an operator's endpoint found.
#[derive(Clone, Debug, Default)]
pub struct Probe {
    /// Scheme, host and port probed (no path, no credentials).
    pub endpoint: String,
    /// When it was last probed (RFC 3339); None before the first probe ended.
    pub at: Option<String>,
    /// The HTTP status it answered; None when it did not answer.
    pub status: Option<u16>,
    /// Why it is not healthy (connection refused, timeout, HTTP 500).
    pub error: Option<String>,
    /// The `version` of a JSON answer, when it gave one.
    pub version: Option<String>,
}

/// What judging the operators needs besides the graph: the probes and the stall time.
#[derive(Clone, Debug)]
pub struct Judge {
    /// The latest probes.
    pub probes: Arc<Probes>,
    /// How long an object may go without status before its operator is unhealthy.
    pub stall: Duration,
}

impl Default for Judge {
    fn default() -> Self {
        Judge {
            probes: Probes::none(),
            stall: Duration::from_secs(300),
        }
    }
}

/// Where and how often to probe one operator.
#[derive(Clone, Debug)]
pub struct ProbeTarget {
    /// The operator.
    pub operator: Operator,
    /// Its endpoint URL.
    pub url: String,
    /// How often.
    pub interval: Duration,
}

/// The latest probe of each operator with a configured endpoint.
#[derive(Debug, Default)]
pub struct Probes {
    latest: Mutex<Vec<(Operator, Probe)>>,
}

impl Probes {
    /// No endpoint configured: operators are judged from the graph alone.
    pub fn none() -> Arc<Self> {
        Arc::new(Probes::default())
    }

    /// Probe each target every `interval` until `stop` turns true.
    pub fn start(targets: Vec<ProbeTarget>, stop: tokio::sync::watch::Receiver<bool>) -> Arc<Self> {
        let probes = Arc::new(Probes {
            latest: Mutex::new(
                targets
                    .iter()
                    .map(|t| {
                        (
                            t.operator,
                            Probe {
                                endpoint: origin(&t.url),
                                ..Probe::default()
                            },
                        )
                    })
                    .collect(),
            ),
        });
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(5))
            .build();
        let client = match client {
            Ok(c) => c,
            Err(e) => {
                tracing::error!(error = %e, "operator probes cannot start");
                return probes;
            }
        };
        for t in targets {
            let (probes, client, mut stop) = (probes.clone(), client.clone(), stop.clone());
            tokio::spawn(async move {
                loop {
                    let found = probe(&client, &t.url).await;
                    if found.error.is_some() {
                        tracing::warn!(operator = t.operator.name(), endpoint = %found.endpoint, error = ?found.error, "operator probe failed");
                    }
                    probes.set(t.operator, found);
                    tokio::select! {
                        _ = tokio::time::sleep(t.interval) => {}
                        _ = stop.wait_for(|s| *s) => return,
                    }
                }
            });
        }
        probes
    }

    fn set(&self, operator: Operator, probe: Probe) {
        let mut latest = self.latest.lock();
        if let Some(slot) = latest.iter_mut().find(|(o, _)| *o == operator) {
            slot.1 = probe;
        }
    }

    /// The latest probe of `operator`; None when its endpoint is not configured.
    pub fn get(&self, operator: Operator) -> Option<Probe> {
        self.latest
            .lock()
            .iter()
            .find(|(o, _)| *o == operator)
            .map(|(_, p)| p.clone())
    }
}

/// `scheme://host:port` of a URL: what may be shown of an endpoint (a path or user info may
/// carry a token).
fn origin(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(u) => {
            let host = u.host_str().unwrap_or_default();
            match u.port() {
                Some(p) => format!("{}://{host}:{p}", u.scheme()),
                None => format!("{}://{host}", u.scheme()),
            }
        }
        Err(_) => "(not a URL)".into(),
    }
}

async fn probe(client: &reqwest::Client, url: &str) -> Probe {
    let endpoint = origin(url);
    let at = Some(jiff::Timestamp::now().to_string());
    match client.get(url).send().await {
        Ok(response) => {
            let status = response.status();
            let version = if status.is_success() {
                response
                    .json::<serde_json::Value>()
                    .await
                    .ok()
                    .and_then(|v| {
                        v.get("version")?
                            .as_str()
                            .map(|s| s.chars().take(64).collect())
                    })
            } else {
                None
            };
            Probe {
                endpoint,
                at,
                status: Some(status.as_u16()),
                error: (!status.is_success()).then(|| format!("answered HTTP {}", status.as_u16())),
                version,
            }
        }
        Err(e) => Probe {
            endpoint,
            at,
            status: None,
            error: Some(if e.is_timeout() {
                "no answer within 5 s".to_string()
            } else if e.is_connect() {
                "cannot connect".to_string()
            } else {
                "request failed".to_string()
            }),
            version: None,
        },
    }
}

/// An operator's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, async_graphql::Enum)]
#[serde(rename_all = "lowercase")]
#[graphql(name = "OperatorState")]
pub enum OperatorState {
    /// Its kinds are served and current, its endpoint (if probed) answers, nothing waits on it.
    Healthy,
    /// Objects have waited on it for longer than the stall time, or its endpoint answers with
    /// an error.
    Unhealthy,
    /// It cannot be seen: its CRDs are not installed, its kinds' watches are behind, or its
    /// endpoint does not answer.
    Unreachable,
}

impl OperatorState {
    /// Every state, for metrics that list each.
    pub const ALL: [OperatorState; 3] = [
        OperatorState::Healthy,
        OperatorState::Unhealthy,
        OperatorState::Unreachable,
    ];

    /// Lower-case name, as the health contract spells it.
    pub fn name(self) -> &'static str {
        match self {
            OperatorState::Healthy => "healthy",
            OperatorState::Unhealthy => "unhealthy",
            OperatorState::Unreachable => "unreachable",
        }
    }
}

/// Counts of the objects an operator acts on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, async_graphql::SimpleObject)]
#[graphql(name = "OperatorResources")]
pub struct OperatorResources {
    /// Objects it acts on.
    pub total: usize,
    /// Ready (Machines: Running).
    pub healthy: usize,
    /// Failed (phase Failed/Error, or a Ready condition with reason Error).
    pub failed: usize,
    /// Without any status for longer than the stall time: nothing acted on them.
    pub waiting: usize,
}

/// How one operator is doing.
#[derive(Clone, Debug, Serialize, async_graphql::SimpleObject)]
#[serde(rename_all = "camelCase")]
#[graphql(name = "OperatorHealth")]
pub struct OperatorHealth {
    /// `proxmox`, `talos`, `kea` or `kubevirt`.
    pub operator: String,
    /// Its state.
    pub status: OperatorState,
    /// Why, when it is not healthy.
    pub reason: Option<String>,
    /// Its version: from its endpoint's answer, else the `app.kubernetes.io/version` label of
    /// the provider object it registered; `unknown` when neither says.
    pub version: String,
    /// The objects it acts on.
    pub resources: OperatorResources,
    /// The endpoint probed (scheme, host, port); null when none is configured.
    pub endpoint: Option<String>,
    /// When the endpoint was last probed (RFC 3339).
    pub last_probe_at: Option<String>,
}

/// Judge every operator from a snapshot, the source's kind states (`lag`: why the graph is not
/// current on a kind, `not installed` or `behind`; None when it is) and the latest probes.
/// Objects without status for longer than `stall` count as waiting on the operator.
pub fn judge(
    snap: &Snapshot,
    lag: &dyn Fn(Kind) -> Option<&'static str>,
    probes: &Probes,
    stall: Duration,
) -> Vec<OperatorHealth> {
    let now = jiff::Timestamp::now();
    let stall_secs = i64::try_from(stall.as_secs()).unwrap_or(i64::MAX);
    Operator::ALL
        .iter()
        .map(|&op| {
            let mut resources = OperatorResources::default();
            for o in op.objects(snap) {
                resources.total += 1;
                let waiting_since = match o.phase() {
                    None | Some("") => o.created(),
                    Some(_) => None,
                };
                let r = match o.as_ref() {
                    // A Machine is healthy when it runs (it has no Ready condition).
                    Resource::Machine(_) => crate::model::Readiness {
                        ready: o.phase() == Some("Running"),
                        failed: matches!(o.phase(), Some("Failed" | "Error")),
                        detail: None,
                    },
                    _ => o.readiness(),
                };
                resources.healthy += usize::from(r.ready);
                resources.failed += usize::from(r.failed);
                if waiting_since.is_some_and(|t| (now - t).get_seconds() > stall_secs) {
                    resources.waiting += 1;
                }
            }
            let probe = probes.get(op);
            let unseen: Vec<&str> = op
                .kinds()
                .iter()
                .filter_map(|k| lag(*k).map(|_| k.name()))
                .collect();
            let (status, reason) = if let Some(error) = probe.as_ref().and_then(|p| {
                p.error
                    .clone()
                    .filter(|_| p.status.is_none())
                    .map(|e| format!("its endpoint {}: {e}", p.endpoint))
            }) {
                (OperatorState::Unreachable, Some(error))
            } else if !unseen.is_empty() {
                (
                    OperatorState::Unreachable,
                    Some(format!(
                        "the kinds it works on are not installed or not current: {}",
                        unseen.join(", ")
                    )),
                )
            } else if let Some(error) = probe.as_ref().and_then(|p| {
                p.error
                    .clone()
                    .map(|e| format!("its endpoint {}: {e}", p.endpoint))
            }) {
                (OperatorState::Unhealthy, Some(error))
            } else if resources.waiting > 0 {
                (
                    OperatorState::Unhealthy,
                    Some(format!(
                        "{} of its objects have had no status for more than {} s",
                        resources.waiting,
                        stall.as_secs()
                    )),
                )
            } else {
                (OperatorState::Healthy, None)
            };
            let version = probe
                .as_ref()
                .and_then(|p| p.version.clone())
                .or_else(|| announced_version(snap, op))
                .unwrap_or_else(|| "unknown".into());
            OperatorHealth {
                operator: op.name().into(),
                status,
                reason,
                version,
                resources,
                endpoint: probe.as_ref().map(|p| p.endpoint.clone()),
                last_probe_at: probe.and_then(|p| p.at),
            }
        })
        .collect()
}

/// The version label of the provider object the operator registered (`providerType` = its name).
fn announced_version(snap: &Snapshot, op: Operator) -> Option<String> {
    let idx = match op.provider_kind() {
        Kind::KubernetesProvider => crate::store::Idx::KubernetesProviderByType,
        _ => crate::store::Idx::MachineProviderByType,
    };
    // Operators are judged for the one datacenter of a single-cluster server.
    snap.lookup(&Default::default(), idx, op.name())
        .find_map(|p| p.label("app.kubernetes.io/version").map(String::from))
}

/// The worst state over the operators (`healthy` when there are none).
pub fn worst(operators: &[OperatorHealth]) -> OperatorState {
    if operators
        .iter()
        .any(|o| o.status == OperatorState::Unreachable)
    {
        OperatorState::Unreachable
    } else if operators
        .iter()
        .any(|o| o.status == OperatorState::Unhealthy)
    {
        OperatorState::Unhealthy
    } else {
        OperatorState::Healthy
    }
}
