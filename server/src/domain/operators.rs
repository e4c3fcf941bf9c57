//! How the infrastructure operators (proxmox, talos, kea, kubevirt, and the network operators
//! nms, manual-ip and static-ip) are doing, judged from what the graph shows (their CRDs served
//! and current, their objects progressing) and, when an endpoint is configured, from probing
//! it: the `checks.operators` of `/health`, the `/health/operators` report, the `operators` of
//! `/api/v1/infrastructure`, GraphQL and `vitistack_operator_operator_status`. Which operator
//! takes a network object (`network_provisioner`, `ip_allocator`, `vip_provider`) is decided
//! here once, by the rules the operators select their objects with.

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
    /// kea-operator: NetworkConfigurations of DHCP namespaces get DHCP reservations.
    Kea,
    /// kubevirt-operator: Machines with `spec.provider: kubevirt` (or none) become KubeVirt VMs.
    Kubevirt,
    /// nms-operator (not public): provisions NetworkNamespaces through NAM (the default) and the
    /// control-plane VIPs static-ip-operator does not take.
    Nms,
    /// manual-ip-provisioning-operator: NetworkNamespaces whose network is given by hand.
    ManualIp,
    /// static-ip-operator: NetworkConfigurations of static namespaces get addresses from the
    /// namespace's range, and their control-plane VIPs.
    StaticIp,
}

impl Operator {
    /// Every operator, in the order reports list them (the old aggregator's four first, then
    /// the network operators in pipeline order).
    pub const ALL: [Operator; 7] = [
        Operator::Proxmox,
        Operator::Talos,
        Operator::Kea,
        Operator::Kubevirt,
        Operator::Nms,
        Operator::ManualIp,
        Operator::StaticIp,
    ];

    /// The name used in reports and metric labels (lower case).
    pub fn name(self) -> &'static str {
        match self {
            Operator::Proxmox => "proxmox",
            Operator::Talos => "talos",
            Operator::Kea => "kea",
            Operator::Kubevirt => "kubevirt",
            Operator::Nms => "nms",
            Operator::ManualIp => "manual-ip",
            Operator::StaticIp => "static-ip",
        }
    }

    /// The prefix of its settings: `STATIC_IP` in `STATIC_IP_OPERATOR_ENDPOINT`.
    pub fn env_prefix(self) -> String {
        self.name().replace('-', "_").to_uppercase()
    }

    /// What the operator is called where it runs, for reasons people read.
    pub fn program(self) -> &'static str {
        match self {
            Operator::Proxmox => "proxmox-operator",
            Operator::Talos => "talos-operator",
            Operator::Kea => "kea-operator",
            Operator::Kubevirt => "kubevirt-operator",
            Operator::Nms => "nms-operator",
            Operator::ManualIp => "manual-ip-provisioning-operator",
            Operator::StaticIp => "static-ip-operator",
        }
    }

    /// The kinds it works on: when one is not served or not current, it cannot be seen.
    fn kinds(self) -> &'static [Kind] {
        match self {
            Operator::Proxmox => &[Kind::Machine],
            Operator::Talos => &[Kind::KubernetesCluster, Kind::Machine],
            Operator::Kea => &[Kind::NetworkConfiguration, Kind::NetworkNamespace],
            Operator::Kubevirt => &[Kind::Machine, Kind::KubevirtConfig],
            Operator::Nms => &[Kind::NetworkNamespace, Kind::ControlPlaneVirtualSharedIp],
            Operator::ManualIp => &[Kind::NetworkNamespace],
            Operator::StaticIp => &[
                Kind::NetworkConfiguration,
                Kind::NetworkNamespace,
                Kind::ControlPlaneVirtualSharedIp,
            ],
        }
    }

    /// The objects it is expected to act on.
    fn objects<'s>(self, snap: &'s Snapshot) -> Box<dyn Iterator<Item = &'s Arc<Resource>> + 's> {
        let namespaces = move |op: Operator| {
            snap.list(Kind::NetworkNamespace)
                .filter(move |nn| network_provisioner(nn) == Some(op))
        };
        let configurations = move |op: Operator| {
            snap.list(Kind::NetworkConfiguration)
                .filter(move |nc| ip_allocator(snap, nc).ok() == Some(op))
        };
        let vips = move |op: Operator| {
            snap.list(Kind::ControlPlaneVirtualSharedIp)
                .filter(move |v| vip_provider(snap, v) == Some(op))
        };
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
            Operator::Kea => Box::new(configurations(Operator::Kea)),
            Operator::StaticIp => Box::new(
                configurations(Operator::StaticIp).chain(vips(Operator::StaticIp)),
            ),
            Operator::Nms => Box::new(namespaces(Operator::Nms).chain(vips(Operator::Nms))),
            Operator::ManualIp => Box::new(namespaces(Operator::ManualIp)),
        }
    }

    /// What it does in the pipeline, as `what:how` (the old operator model's `capabilities`).
    pub fn capabilities(self) -> &'static [&'static str] {
        match self {
            Operator::Proxmox => &["machines:proxmox"],
            Operator::Talos => &["kubernetes:talos", "machines:plan"],
            Operator::Kea => &["ip-allocation:dhcp"],
            Operator::Kubevirt => &["machines:kubevirt"],
            Operator::Nms => &["network-provisioning:nam", "control-plane-vip"],
            Operator::ManualIp => &["network-provisioning:manual"],
            Operator::StaticIp => &["ip-allocation:static", "control-plane-vip"],
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

/// The value of `NetworkNamespace.spec.ipAllocation.provider` that marks a namespace as given by
/// hand on v1alpha1 (the old manual-ip controller selects it; the v1alpha1→v1alpha2 conversion
/// reads it the same way), and that names static-ip-operator as the allocator.
const STATIC_IP_PROVIDER: &str = "static-ip-operator";

/// Who provisions a NetworkNamespace's segment (VLAN, prefix, Ready): manual-ip for
/// `spec.networkProvisioning.provider: manual` (v1alpha2) or `spec.ipAllocation.provider:
/// static-ip-operator` (v1alpha1), nms-operator through NAM for every other namespace.
pub fn network_provisioner(nn: &Resource) -> Option<Operator> {
    let manual = match nn {
        Resource::NetworkNamespaceV2(n) => n
            .spec
            .network_provisioning
            .as_ref()
            .is_some_and(|p| p.provider == "manual"),
        Resource::NetworkNamespace(n) => n
            .spec
            .ip_allocation
            .as_ref()
            .is_some_and(|a| a.provider.as_deref() == Some(STATIC_IP_PROVIDER)),
        _ => return None,
    };
    Some(if manual {
        Operator::ManualIp
    } else {
        Operator::Nms
    })
}

/// `spec.ipAllocation.type` (dhcp, static) of a NetworkNamespace; None when it has no policy.
fn allocation_type(nn: &Resource) -> Option<&str> {
    match nn {
        Resource::NetworkNamespace(n) => n.spec.ip_allocation.as_ref().map(|a| a.r#type.as_str()),
        Resource::NetworkNamespaceV2(n) => n.spec.ip_allocation.as_ref().map(|a| a.r#type.as_str()),
        _ => None,
    }
}

/// `spec.ipAllocation.provider` of a NetworkNamespace.
fn allocation_provider(nn: &Resource) -> Option<&str> {
    match nn {
        Resource::NetworkNamespace(n) => n.spec.ip_allocation.as_ref()?.provider.as_deref(),
        Resource::NetworkNamespaceV2(n) => n.spec.ip_allocation.as_ref()?.provider.as_deref(),
        _ => None,
    }
}

/// The NetworkNamespace a NetworkConfiguration draws from: `spec.networkNamespaceName`, or, as
/// the operators fall back to when it is empty, the first one in its namespace.
pub fn configuration_namespace<'s>(
    snap: &'s Snapshot,
    nc: &'s Resource,
) -> Option<&'s Arc<Resource>> {
    let Resource::NetworkConfiguration(c) = nc else {
        return None;
    };
    match c
        .spec
        .network_namespace_name
        .as_deref()
        .filter(|n| !n.is_empty())
    {
        Some(name) => snap.get(
            nc.datacenter(),
            Kind::NetworkNamespace,
            nc.namespace(),
            name,
        ),
        None => snap
            .list_in_datacenter(nc.datacenter(), Kind::NetworkNamespace, nc.namespace())
            .next(),
    }
}

/// Which allocator fills in a NetworkConfiguration's addresses, by `spec.provider` and its
/// NetworkNamespace's `ipAllocation.type`, as both allocators select: kea takes `kea` or no
/// provider on a DHCP namespace (or one without a policy), static-ip takes `static-ip-operator`
/// or no provider on a static namespace. `Err` says why neither takes it.
pub fn ip_allocator(snap: &Snapshot, nc: &Resource) -> Result<Operator, String> {
    let Resource::NetworkConfiguration(c) = nc else {
        return Err("not a NetworkConfiguration".into());
    };
    let nn = configuration_namespace(snap, nc);
    let static_nn = nn.and_then(|n| allocation_type(n)) == Some("static");
    let nn_text = || match nn {
        Some(n) => format!(
            "NetworkNamespace {}/{} allocates {}",
            n.namespace(),
            n.name(),
            allocation_type(n)
                .filter(|t| !t.is_empty())
                .unwrap_or("by DHCP (no ipAllocation)")
        ),
        None => "it has no NetworkNamespace".into(),
    };
    match c
        .spec
        .provider
        .as_deref()
        .map(str::trim)
        .unwrap_or_default()
    {
        "" if static_nn => Ok(Operator::StaticIp),
        "" => Ok(Operator::Kea),
        "kea" if !static_nn => Ok(Operator::Kea),
        "kea" => Err(format!(
            "spec.provider is kea but {}: neither allocator takes it",
            nn_text()
        )),
        STATIC_IP_PROVIDER if static_nn => Ok(Operator::StaticIp),
        STATIC_IP_PROVIDER => Err(format!(
            "spec.provider is static-ip-operator but {}: neither allocator takes it",
            nn_text()
        )),
        other => Err(format!(
            "spec.provider {other:?} is neither kea nor static-ip-operator"
        )),
    }
}

/// Who gives a ControlPlaneVirtualSharedIP its address: static-ip-operator when `spec.provider`
/// names it, or when its NetworkNamespace is static with `ipAllocation.provider:
/// static-ip-operator`; nms-operator for every other VIP.
pub fn vip_provider(snap: &Snapshot, vip: &Resource) -> Option<Operator> {
    let Resource::ControlPlaneVirtualSharedIp(v) = vip else {
        return None;
    };
    if v.spec.provider == STATIC_IP_PROVIDER {
        return Some(Operator::StaticIp);
    }
    if v.spec.provider == "nam" {
        return Some(Operator::Nms);
    }
    let static_nn = snap
        .get(
            vip.datacenter(),
            Kind::NetworkNamespace,
            vip.namespace(),
            &v.spec.network_namespace_identifier,
        )
        .is_some_and(|n| {
            allocation_type(n) == Some("static")
                && allocation_provider(n) == Some(STATIC_IP_PROVIDER)
        });
    Some(if static_nn {
        Operator::StaticIp
    } else {
        Operator::Nms
    })
}

/// The operators a KubernetesCluster depends on, in report order: talos-operator for a talos
/// cluster; the machine operators of its Machines (of its topology's control plane before they
/// exist); who provisions its NetworkNamespace; the allocators of its Machines' configurations;
/// who gives its control-plane VIP its address.
pub fn serving(snap: &Snapshot, kc: &Resource) -> Vec<Operator> {
    let Resource::KubernetesCluster(c) = kc else {
        return Vec::new();
    };
    let (dc, ns) = (kc.datacenter(), kc.namespace());
    let mut out = Vec::new();
    if c.spec.data.provider == "talos" {
        out.push(Operator::Talos);
    }
    let machines = snap.cluster_machines(kc);
    let machine_operator = |provider: &str| match provider {
        "proxmox" => Some(Operator::Proxmox),
        "kubevirt" | "" => Some(Operator::Kubevirt),
        _ => None,
    };
    if machines.is_empty() {
        out.extend(machine_operator(&c.spec.topology.controlplane.provider));
    }
    for m in &machines {
        out.extend(machine_provider(m).and_then(machine_operator));
        if let Some(nc) = snap.get(dc, Kind::NetworkConfiguration, ns, m.name()) {
            out.extend(ip_allocator(snap, nc).ok());
        }
    }
    if let Some(nn) = snap.get(
        dc,
        Kind::NetworkNamespace,
        ns,
        &c.spec.data.network_namespace_name,
    ) {
        out.extend(network_provisioner(nn));
    }
    if let Some(vip) = snap.get(
        dc,
        Kind::ControlPlaneVirtualSharedIp,
        ns,
        &c.spec.data.cluster_id,
    ) {
        out.extend(vip_provider(snap, vip));
    }
    out.sort_by_key(|o| Operator::ALL.iter().position(|a| a == o));
    out.dedup();
    out
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
    /// When it last answered 2xx (RFC 3339), kept across failed probes.
    pub last_ok: Option<String>,
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

    fn set(&self, operator: Operator, mut probe: Probe) {
        let mut latest = self.latest.lock();
        if let Some(slot) = latest.iter_mut().find(|(o, _)| *o == operator) {
            probe.last_ok = if probe.error.is_none() {
                probe.at.clone()
            } else {
                slot.1.last_ok.take()
            };
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
                last_ok: None,
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
            last_ok: None,
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
    /// `proxmox`, `talos`, `kea`, `kubevirt`, `nms`, `manual-ip` or `static-ip`.
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
    /// Healthy, but some of its objects failed (`resources.failed`): it acts, not on everything
    /// (the old operator model's `degraded`, beside the three states `/health` documents).
    pub degraded: bool,
    /// The last time it was seen at work (RFC 3339): its endpoint's last 2xx answer, or the
    /// newest condition transition on one of its objects (written by it), whichever is later;
    /// null when neither is known.
    pub last_seen: Option<String>,
    /// What it does in the pipeline (`machines:kubevirt`, `ip-allocation:static`, …).
    pub capabilities: Vec<String>,
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
            let mut seen: Option<jiff::Timestamp> = None;
            let mut saw = |t: Option<&str>| {
                if let Some(t) = t.and_then(|t| t.parse::<jiff::Timestamp>().ok()) {
                    seen = Some(seen.map_or(t, |s| s.max(t)));
                }
            };
            for o in op.objects(snap) {
                resources.total += 1;
                for c in o.conditions().unwrap_or_default() {
                    saw(c.last_transition_time.as_deref());
                }
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
            saw(probe.as_ref().and_then(|p| p.last_ok.as_deref()));
            OperatorHealth {
                operator: op.name().into(),
                degraded: status == OperatorState::Healthy && resources.failed > 0,
                status,
                reason,
                version,
                resources,
                endpoint: probe.as_ref().map(|p| p.endpoint.clone()),
                last_probe_at: probe.and_then(|p| p.at),
                last_seen: seen.map(|t| t.to_string()),
                capabilities: op.capabilities().iter().map(|c| c.to_string()).collect(),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{Op, Store};
    use serde_json::{Value, json};

    fn object(kind: Kind, version: &str, v: Value) -> Resource {
        Resource::from_value(kind, version, v).expect("valid object")
    }

    fn nn(name: &str, ip_allocation: Value) -> Resource {
        let mut spec = json!({"datacenterIdentifier": "dc", "supervisorIdentifier": "sv"});
        if !ip_allocation.is_null() {
            spec["ipAllocation"] = ip_allocation;
        }
        object(
            Kind::NetworkNamespace,
            "v1alpha1",
            json!({"metadata": {"name": name, "namespace": "t"}, "spec": spec}),
        )
    }

    fn nc(name: &str, nn: Option<&str>, provider: Option<&str>) -> Resource {
        let mut spec = json!({"name": name});
        if let Some(nn) = nn {
            spec["networkNamespaceName"] = json!(nn);
        }
        if let Some(p) = provider {
            spec["provider"] = json!(p);
        }
        object(
            Kind::NetworkConfiguration,
            "v1alpha1",
            json!({"metadata": {"name": name, "namespace": "t"}, "spec": spec}),
        )
    }

    fn vip(name: &str, nn: &str, provider: &str) -> Resource {
        object(
            Kind::ControlPlaneVirtualSharedIp,
            "v1alpha1",
            json!({"metadata": {"name": name, "namespace": "t"},
                "spec": {"datacenterIdentifier": "dc", "networkNamespaceIdentifier": nn,
                    "clusterIdentifier": name, "supervisorIdentifier": "sv",
                    "provider": provider, "environment": "dev"}}),
        )
    }

    fn store(objects: Vec<Resource>) -> Store {
        let s = Store::new();
        s.apply_loaded(objects.into_iter().map(Op::Upsert).collect());
        s
    }

    fn get<'s>(snap: &'s Snapshot, kind: Kind, name: &str) -> &'s Arc<Resource> {
        snap.get(&Default::default(), kind, "t", name)
            .expect("object")
    }

    #[test]
    fn configurations_go_to_the_allocator_their_namespace_and_provider_select() {
        let s = store(vec![
            // "a-dhcp" sorts first: the fallback for a configuration that names no namespace.
            nn("a-dhcp", Value::Null),
            nn(
                "static",
                json!({"type": "static", "provider": "static-ip-operator",
                "static": {"ipv4CIDR": "10.0.0.0/24", "ipv4Gateway": "10.0.0.1"}}),
            ),
            nn("dhcp", json!({"type": "dhcp"})),
            nc("in-static", Some("static"), None),
            nc("in-dhcp", Some("dhcp"), None),
            nc("no-namespace", None, None),
            nc("kea-in-static", Some("static"), Some("kea")),
            nc("static-in-dhcp", Some("dhcp"), Some("static-ip-operator")),
            nc("named-static", Some("static"), Some("static-ip-operator")),
            nc("other", Some("dhcp"), Some("infoblox")),
        ]);
        let snap = s.snapshot();
        let alloc = |name: &str| ip_allocator(&snap, get(&snap, Kind::NetworkConfiguration, name));
        assert_eq!(alloc("in-static"), Ok(Operator::StaticIp));
        assert_eq!(alloc("named-static"), Ok(Operator::StaticIp));
        assert_eq!(alloc("in-dhcp"), Ok(Operator::Kea));
        assert_eq!(alloc("no-namespace"), Ok(Operator::Kea));
        let refused = alloc("kea-in-static").expect_err("neither takes it");
        assert!(
            refused.contains("provider is kea") && refused.contains("t/static allocates static"),
            "{refused}"
        );
        assert!(alloc("static-in-dhcp").is_err());
        assert!(
            alloc("other")
                .expect_err("unknown")
                .contains("\"infoblox\"")
        );

        // Judged: kea counts only what it allocates, static-ip the static ones.
        let lag = |_: Kind| None;
        let report = judge(&snap, &lag, &Probes::default(), Duration::from_secs(300));
        let total = |name: &str| {
            report
                .iter()
                .find(|o| o.operator == name)
                .map(|o| o.resources.total)
                .expect("reported")
        };
        assert_eq!(total("kea"), 2);
        assert_eq!(total("static-ip"), 2);
        // `ipAllocation.provider: static-ip-operator` marks "static" as given by hand; nms
        // provisions the other two.
        assert_eq!(total("nms"), 2);
        assert_eq!(total("manual-ip"), 1);
    }

    #[test]
    fn namespaces_given_by_hand_go_to_manual_ip_and_vips_follow_their_namespace() {
        let manual_v2 = object(
            Kind::NetworkNamespace,
            "v1alpha2",
            json!({"metadata": {"name": "by-hand", "namespace": "t"},
                "spec": {"datacenterIdentifier": "dc", "supervisorIdentifier": "sv",
                    "networkProvisioning": {"provider": "manual", "manual": {"ipv4CIDR": "10.1.0.0/24"}}}}),
        );
        assert_eq!(network_provisioner(&manual_v2), Some(Operator::ManualIp));
        let nam_v2 = object(
            Kind::NetworkNamespace,
            "v1alpha2",
            json!({"metadata": {"name": "nam", "namespace": "t"},
                "spec": {"datacenterIdentifier": "dc", "supervisorIdentifier": "sv"}}),
        );
        assert_eq!(network_provisioner(&nam_v2), Some(Operator::Nms));
        let s = store(vec![
            nn(
                "static",
                json!({"type": "static", "provider": "static-ip-operator",
                "static": {"ipv4CIDR": "10.0.0.0/24", "ipv4Gateway": "10.0.0.1"}}),
            ),
            nn("dhcp", Value::Null),
            vip("c1", "static", ""),
            vip("c2", "dhcp", ""),
            vip("c3", "dhcp", "static-ip-operator"),
            vip("c4", "static", "nam"),
        ]);
        let snap = s.snapshot();
        assert_eq!(
            network_provisioner(get(&snap, Kind::NetworkNamespace, "static")),
            Some(Operator::ManualIp)
        );
        let by =
            |name: &str| vip_provider(&snap, get(&snap, Kind::ControlPlaneVirtualSharedIp, name));
        assert_eq!(by("c1"), Some(Operator::StaticIp));
        assert_eq!(by("c2"), Some(Operator::Nms));
        assert_eq!(by("c3"), Some(Operator::StaticIp));
        assert_eq!(by("c4"), Some(Operator::Nms));
        assert_eq!(Operator::ManualIp.env_prefix(), "MANUAL_IP");
        // A failed namespace leaves its provisioner healthy but degraded.
        let failed = object(
            Kind::NetworkNamespace,
            "v1alpha1",
            json!({"metadata": {"name": "broken", "namespace": "t"},
                "spec": {"datacenterIdentifier": "dc", "supervisorIdentifier": "sv"},
                "status": {"phase": "Error", "conditions": [{"type": "Ready", "status": "False",
                    "reason": "Error", "message": "VLAN taken", "lastTransitionTime": "2026-03-01T10:00:00Z"}]}}),
        );
        let s = store(vec![failed]);
        let report = judge(
            &s.snapshot(),
            &|_| None,
            &Probes::default(),
            Duration::from_secs(300),
        );
        let nms = report.iter().find(|o| o.operator == "nms").expect("nms");
        assert_eq!((nms.status, nms.degraded), (OperatorState::Healthy, true));
        assert_eq!(nms.last_seen.as_deref(), Some("2026-03-01T10:00:00Z"));
        let kea = report.iter().find(|o| o.operator == "kea").expect("kea");
        assert_eq!((kea.degraded, kea.last_seen.as_deref()), (false, None));
        assert_eq!(Operator::StaticIp.program(), "static-ip-operator");
    }
}
