//! How the infrastructure operators (proxmox, talos, kea, kubevirt, and the network operators
//! nms, manual-ip and static-ip) are doing, judged from what the graph shows (their CRDs served
//! and current, their objects progressing) and, when an endpoint is configured, from probing
//! it: the `checks.operators` of `/health`, the `/health/operators` report, the `operators` of
//! `/api/v1/infrastructure`, GraphQL and `vitistack_operator_operator_status`. Which operator
//! takes a network object (`network_provisioner`, `ip_allocator`, `vip_provider`) is decided
//! here once, by the rules the operators select their objects with.

use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;

use crate::model::{Kind, Resource};
use crate::store::Snapshot;

mod attribution;
mod probes;

use attribution::machine_provider;
pub use attribution::{
    configuration_namespace, ip_allocator, network_provisioner, serving, vip_provider,
};
pub use probes::{Judge, Probe, ProbeTarget, Probes};

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
mod tests;
