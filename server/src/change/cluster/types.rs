//! A cluster plan's API types: what a caller asks for (`ClusterInput`), and what the plan says
//! (the machines, the capacity verdict, the problems by field).

use async_graphql::{Enum, InputObject, SimpleObject};

use crate::model::validation::FieldError;

/// The control plane of a cluster to create.
#[derive(InputObject, Clone, Debug)]
pub struct ControlPlaneInput {
    /// Machines (odd: etcd needs a majority).
    pub replicas: i64,
    /// MachineClass (default `large`, talos-operator's default).
    pub machine_class: Option<String>,
    /// Machine provider type (`kubevirt`, `proxmox`; default `kubevirt`).
    pub provider: Option<String>,
    /// Kubernetes version of the control plane (default: the cluster's).
    pub version: Option<String>,
}

/// A worker node pool of a cluster to create.
#[derive(InputObject, Clone, Debug)]
pub struct NodePoolInput {
    /// Pool name (a DNS label).
    pub name: String,
    /// Machines.
    pub replicas: i64,
    /// MachineClass (default `medium`, talos-operator's default).
    pub machine_class: Option<String>,
    /// Machine provider type (default: the control plane's).
    pub provider: Option<String>,
    /// Kubernetes version (default: the cluster's).
    pub version: Option<String>,
}

/// A Talos Kubernetes cluster as `createKubernetesCluster` and `clusterPlan` take it.
#[derive(InputObject, Clone, Debug)]
pub struct ClusterInput {
    /// Namespace (the tenant's: its NetworkNamespace lives there).
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
    /// `spec.data.clusterId`, the value of every child's `vitistack.io/clusterid` label and the
    /// prefix of its Machines' names (default: the name).
    pub cluster_id: Option<String>,
    /// `spec.data.provider` (default `talos`; talos-operator acts on `talos` only).
    pub provider: Option<String>,
    /// `spec.data.datacenter`, e.g. `test-south-az1`.
    pub datacenter: String,
    /// `spec.data.region`.
    pub region: String,
    /// `spec.data.zone`.
    pub zone: String,
    /// `spec.data.project`.
    pub project: String,
    /// `spec.data.workspace`.
    pub workspace: String,
    /// `spec.data.workorder`.
    pub workorder: String,
    /// `spec.data.environment` (dev, test, prod, …).
    pub environment: String,
    /// `spec.data.networkNamespaceName` (default: the namespace's only NetworkNamespace).
    pub network_namespace_name: Option<String>,
    /// Kubernetes version (`topology.version`).
    pub version: String,
    /// The control plane.
    pub control_plane: ControlPlaneInput,
    /// Worker pools.
    #[graphql(default)]
    pub node_pools: Vec<NodePoolInput>,
}

/// Control-plane or worker.
#[derive(Enum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlannedRole {
    /// Runs etcd and the API server.
    ControlPlane,
    /// Runs workloads.
    Worker,
}

/// A Machine talos-operator will have for the cluster.
#[derive(SimpleObject, Clone, Debug)]
pub struct PlannedMachine {
    /// `<clusterId>-ctp<i>` or `<clusterId>-wrk<i>`.
    pub name: String,
    /// Its role.
    pub role: PlannedRole,
    /// Its node pool (workers).
    pub node_pool: Option<String>,
    /// Its MachineClass.
    pub machine_class: String,
    /// Its provider type.
    pub provider: String,
    /// vCPUs its class gives (sockets × cores × threads).
    pub vcpus: f64,
    /// Memory its class gives, in bytes.
    pub memory_bytes: f64,
    /// True when the Machine exists already.
    pub exists: bool,
    /// The Machine as talos-operator will write it (YAML, without status).
    pub yaml: String,
}

/// Whether the planned Machines fit.
#[derive(Enum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum CapacityVerdict {
    /// They fit, and hosts that can fail stays at or above the minimum.
    Fits,
    /// They fit with every host up, but fewer hosts than the minimum could then fail.
    BelowRedundancy,
    /// They do not fit on the hosts' free allocatable CPU and memory.
    DoesNotFit,
    /// The graph holds no KubeVirt hosts to place them on (e.g. Proxmox machines), or a
    /// MachineClass is missing: nothing can be said.
    Unknown,
}

/// The capacity check of a plan.
#[derive(SimpleObject, Clone, Debug)]
pub struct CapacityCheck {
    /// The verdict.
    pub verdict: CapacityVerdict,
    /// In plain words.
    pub message: String,
    /// Hosts that accept VMs.
    pub hosts: i32,
    /// vCPUs the new Machines need (on KubeVirt hosts).
    pub added_vcpus: f64,
    /// Memory the new Machines need, in bytes.
    pub added_memory_bytes: f64,
    /// Hosts that can fail now.
    pub hosts_that_can_fail_before: i32,
    /// Hosts that can fail once the new Machines are placed.
    pub hosts_that_can_fail_after: i32,
    /// The minimum configured (`MIN_HOSTS_THAT_CAN_FAIL`).
    pub minimum_hosts_that_can_fail: i32,
}

/// One field the API server (or talos-operator) would refuse.
#[derive(SimpleObject, Clone, Debug, PartialEq, Eq)]
pub struct FieldProblem {
    /// Field path in the object (`spec.topology.controlplane.replicas`) or the input.
    pub path: String,
    /// What is wrong.
    pub reason: String,
}

impl From<FieldError> for FieldProblem {
    fn from(e: FieldError) -> Self {
        FieldProblem {
            path: e.path,
            reason: e.reason,
        }
    }
}

/// What creating (or changing to) a cluster would do, computed without writing anything.
#[derive(SimpleObject, Clone, Debug)]
pub struct ClusterPlan {
    /// True when nothing would refuse it: `problems` is empty.
    pub valid: bool,
    /// Why it would be refused.
    pub problems: Vec<FieldProblem>,
    /// True when the cluster exists (the plan is then a change of it).
    pub exists: bool,
    /// The KubernetesCluster (YAML).
    pub cluster_yaml: String,
    /// Every Machine the cluster will have.
    pub machines: Vec<PlannedMachine>,
    /// Existing Machines talos-operator will remove (scaling down).
    pub removed: Vec<String>,
    /// Whether the new Machines fit.
    pub capacity: CapacityCheck,
    /// Things that will not refuse the cluster but will hold it up.
    pub warnings: Vec<String>,
}
