//! KubeVirt's `VirtualMachine` and `VirtualMachineInstance` (kubevirt.io/v1), reduced to what the
//! graph uses: identity, run state, CPU topology, memory, placement and addresses. Unknown fields
//! are ignored (these objects come from the API server, not from this product's files). Kept as
//! compactly as the generated model: strings as `Str`, lists as boxed slices, resource maps as
//! sorted pairs (a `BTreeMap` of one quantity took 720 bytes; a million objects hold hundreds of
//! thousands of these).

use super::meta::ObjectMeta;
use super::pairs::Pairs;
use super::text::Str;
use serde::{Deserialize, Serialize};

use super::Quantity;
use super::datacenter::Datacenter;

/// `spec.domain.cpu`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CpuTopology {
    /// Sockets (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sockets: Option<i64>,
    /// Cores per socket (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cores: Option<i64>,
    /// Threads per core (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads: Option<i64>,
}

/// `spec.domain.memory`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GuestMemory {
    /// Memory the guest sees.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guest: Option<Quantity>,
}

/// `spec.domain.resources`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DomainResources {
    /// Requests (`cpu`, `memory`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests: Option<Pairs<Quantity>>,
    /// Limits (`cpu`, `memory`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<Pairs<Quantity>>,
}

/// `spec.domain`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Domain {
    /// CPU topology.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<CpuTopology>,
    /// Guest memory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<GuestMemory>,
    /// Resource requests and limits of the virt-launcher pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<DomainResources>,
}

/// A VMI spec (also the VM's `spec.template.spec`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VmiSpec {
    /// The virtual hardware.
    #[serde(default)]
    pub domain: Domain,
}

/// `spec.template.metadata` of a VM: the labels and annotations its VMIs get (a whole
/// `ObjectMeta`, name and uid and times that a template leaves empty, took 144 bytes in every VM).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TemplateMeta {
    /// Labels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<Pairs>,
    /// Annotations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Pairs>,
}

/// `spec.template` of a VM.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VmiTemplate {
    /// Labels the VMI gets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<TemplateMeta>,
    /// The VMI spec.
    #[serde(default)]
    pub spec: VmiSpec,
}

/// `VirtualMachine.spec`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VirtualMachineSpec {
    /// Deprecated on/off switch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub running: Option<bool>,
    /// `Always`, `Halted`, `Manual`, `RerunOnFailure`, `Once`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_strategy: Option<Str>,
    /// The VMI it starts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<VmiTemplate>,
}

/// `VirtualMachine.status`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VirtualMachineStatus {
    /// `Running`, `Stopped`, `Starting`, `Provisioning`, `ErrorUnschedulable`, …
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub printable_status: Option<Str>,
    /// The VMI is ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready: Option<bool>,
}

/// A KubeVirt VirtualMachine: exists whether or not it runs.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VirtualMachine {
    /// Standard object metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// Where it was read (set by its source, never serialised).
    #[serde(skip)]
    pub datacenter: Datacenter,
    /// Desired state.
    #[serde(default)]
    pub spec: VirtualMachineSpec,
    /// Observed state (not boxed: 24 bytes, where a box took 8 and an allocation of 24).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<VirtualMachineStatus>,
}

/// One network interface of a running VMI.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VmiInterface {
    /// Interface name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<Str>,
    /// Every address reported by the guest agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip_addresses: Option<Box<[Str]>>,
}

/// `VirtualMachineInstance.status`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VmiStatus {
    /// `Pending`, `Scheduling`, `Scheduled`, `Running`, `Succeeded`, `Failed`, `Unknown`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<Str>,
    /// The node it runs on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_name: Option<Str>,
    /// Interfaces and their addresses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interfaces: Option<Box<[VmiInterface]>>,
}

/// A running (or starting) KubeVirt VirtualMachineInstance.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VirtualMachineInstance {
    /// Standard object metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// Where it was read (set by its source, never serialised).
    #[serde(skip)]
    pub datacenter: Datacenter,
    /// The virtual hardware.
    #[serde(default)]
    pub spec: VmiSpec,
    /// Observed state (not boxed: nearly every VMI has one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<VmiStatus>,
}

/// A core Node (with `status.images` dropped at ingest: it is large and unused): the fields of
/// `k8s_openapi`'s Node, and the datacenter it was read from.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Node {
    /// Standard object metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// Where it was read (set by its source, never serialised).
    #[serde(skip)]
    pub datacenter: Datacenter,
    /// Desired state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<k8s_openapi::api::core::v1::NodeSpec>,
    /// Observed state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<k8s_openapi::api::core::v1::NodeStatus>,
}

/// The cluster a VM's or VMI's name, or its source Machine's, suggests when no label says which:
/// the name before a last word starting with `ctp` or `wrk` (`c1-ctp0` is of `c1`), as the old
/// status page guessed. May be wrong.
pub fn guessed_cluster(name: &str) -> Option<&str> {
    let (prefix, last) = name.rsplit_once('-')?;
    ((last.starts_with("ctp") || last.starts_with("wrk")) && last.len() >= 4 && !prefix.is_empty())
        .then_some(prefix)
}

/// The node a VMI is placed on.
pub fn vmi_node(vmi: &VirtualMachineInstance) -> Option<&str> {
    vmi.status
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .filter(|n| !n.is_empty())
}
