//! Hosts (Kubernetes Nodes running KubeVirt) and KubeVirt VirtualMachines / Instances, with the
//! allocation figures computed on the server (`domain::hosts`).

use async_graphql::{Context, SimpleObject};

use super::{ClusterObj, MachineObj, many, node_type, one, snap};
use crate::domain::hosts::{self, HostReadiness, MembershipSource, Overcommit};
use crate::model::{Kind, Resource};
use crate::store::{Idx, scoped};

/// How full a host is: the active VMs on it against what it may give.
#[derive(SimpleObject, Clone, Debug)]
pub struct HostAllocation {
    /// vCPUs of the active VMs on the host (sockets × cores × threads).
    pub vcpus_used: f64,
    /// vCPUs it may give: allocatable CPU × the CPU overcommit factor.
    pub vcpus_limit: f64,
    /// Guest memory of the active VMs (bytes).
    pub memory_used_bytes: f64,
    /// Memory it may give: allocatable memory × the memory overcommit factor (bytes).
    pub memory_limit_bytes: f64,
    /// vcpusUsed / vcpusLimit in percent.
    pub cpu_percent: f64,
    /// memoryUsedBytes / memoryLimitBytes in percent.
    pub memory_percent: f64,
    /// Active VMs on the host.
    pub vms: usize,
}

impl From<hosts::Allocation> for HostAllocation {
    fn from(a: hosts::Allocation) -> Self {
        HostAllocation {
            vcpus_used: a.vcpus_used,
            vcpus_limit: a.vcpus_limit,
            memory_used_bytes: a.memory_used,
            memory_limit_bytes: a.memory_limit,
            cpu_percent: a.cpu_percent(),
            memory_percent: a.memory_percent(),
            vms: a.vms,
        }
    }
}

/// A condition of a Node.
#[derive(SimpleObject, Clone, Debug)]
pub struct NodeCondition {
    /// `Ready`, `MemoryPressure`, `DiskPressure`, `PIDPressure`, `NetworkUnavailable`, …
    #[graphql(name = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// Machine-readable reason.
    pub reason: Option<String>,
    /// Human-readable message.
    pub message: Option<String>,
}

/// The cluster a VM belongs to and how that was found.
#[derive(SimpleObject, Clone, Debug)]
#[graphql(complex)]
pub struct VmMembership {
    /// The cluster id (`vitistack.io/clusterid`).
    pub cluster_id: String,
    /// Where it came from: an explicit label, the source Machine, or a name guess.
    pub source: MembershipSource,
    #[graphql(skip)]
    datacenter: crate::model::Datacenter,
    #[graphql(skip)]
    namespace: String,
}

#[async_graphql::ComplexObject]
impl VmMembership {
    /// The KubernetesCluster, when it is in the graph.
    async fn cluster(&self, ctx: &Context<'_>) -> Option<ClusterObj> {
        one(
            snap(ctx).lookup_one(
                &self.datacenter,
                Idx::ClusterById,
                &scoped(&self.namespace, &self.cluster_id),
            ),
            ClusterObj::new,
        )
    }
}

fn membership(ctx: &Context<'_>, r: &Resource) -> Option<VmMembership> {
    hosts::cluster_of(&snap(ctx), r).map(|(cluster_id, source)| VmMembership {
        cluster_id,
        source,
        datacenter: r.datacenter().clone(),
        namespace: r.namespace().to_string(),
    })
}

/// The overcommit factors in force (the schema's data; the defaults without it).
pub(crate) fn overcommit(ctx: &Context<'_>) -> Overcommit {
    ctx.data_opt::<Overcommit>().copied().unwrap_or_default()
}

node_type! {
    /// A host: a Kubernetes Node that runs KubeVirt VMs (control-plane nodes included).
    HostObj, "Host", Node; {
        /// Roles from `node-role.kubernetes.io/*` labels (`worker` when none).
        async fn roles(&self) -> Vec<String> { self.cap().roles }
        /// Ready, NotReady or Unknown (a kubelet that stopped reporting is Unknown, not NotReady).
        async fn readiness(&self) -> HostReadiness { self.cap().readiness }
        /// Cordoned (`spec.unschedulable`).
        async fn unschedulable(&self) -> bool { self.cap().unschedulable }
        /// NoSchedule / NoExecute taints (`key:effect`).
        async fn blocking_taints(&self) -> Vec<String> { self.cap().blocking_taints }
        /// Pressure conditions that are True (MemoryPressure, DiskPressure, PIDPressure, …).
        async fn pressures(&self) -> Vec<String> { self.cap().pressures }
        /// True when new VMs can be placed here: Ready, not cordoned, no blocking taint.
        async fn accepts_vms(&self) -> bool { self.cap().accepts_vms() }
        /// CPU cores (`status.capacity.cpu`).
        async fn cpu_capacity(&self) -> f64 { self.cap().cpu_capacity }
        /// Allocatable CPU cores (`status.allocatable.cpu`).
        async fn cpu_allocatable(&self) -> f64 { self.cap().cpu_allocatable }
        /// Memory (`status.capacity.memory`, bytes).
        async fn memory_capacity_bytes(&self) -> f64 { self.cap().memory_capacity }
        /// Allocatable memory (bytes).
        async fn memory_allocatable_bytes(&self) -> f64 { self.cap().memory_allocatable }
        /// How full it is.
        async fn allocation(&self, ctx: &Context<'_>) -> HostAllocation {
            match &*self.0 {
                Resource::Node(n) => hosts::allocation(&snap(ctx), n.as_ref(), overcommit(ctx)).into(),
                _ => hosts::Allocation::default().into(),
            }
        }
        /// Every condition of the Node.
        async fn node_conditions(&self) -> Vec<NodeCondition> {
            let Resource::Node(n) = &*self.0 else { return Vec::new() };
            n.status.as_ref().and_then(|s| s.conditions.as_ref()).map(|cs| cs.iter().map(|c| NodeCondition {
                type_: c.type_.clone(), status: c.status.clone(), reason: c.reason.clone(), message: c.message.clone(),
            }).collect()).unwrap_or_default()
        }
        /// The VM instances placed on it (any phase), by namespace and name.
        async fn vms(&self, ctx: &Context<'_>) -> Vec<VirtualMachineInstanceObj> {
            many(snap(ctx).lookup(self.0.datacenter(), Idx::VmiByNode, self.0.name()), VirtualMachineInstanceObj::new)
        }
    }
}

impl HostObj {
    fn cap(&self) -> hosts::Capacity {
        match &*self.0 {
            Resource::Node(n) => hosts::capacity(n),
            _ => hosts::capacity(&Default::default()),
        }
    }
}

node_type! {
    /// A KubeVirt VirtualMachine: exists whether it runs or not (stopped VMs are listed too).
    VirtualMachineObj, "VirtualMachine", VirtualMachine; {
        /// `spec.runStrategy` (or `Always`/`Halted` from the deprecated `spec.running`).
        async fn run_strategy(&self) -> Option<String> {
            let Resource::VirtualMachine(vm) = &*self.0 else { return None };
            vm.spec.run_strategy.as_deref().map(str::to_string).or_else(|| vm.spec.running.map(|r| if r { "Always".into() } else { "Halted".into() }))
        }
        /// True while it has an active instance.
        async fn running(&self, ctx: &Context<'_>) -> bool {
            matches!(snap(ctx).get(self.0.datacenter(), Kind::VirtualMachineInstance, self.0.namespace(), self.0.name()).map(|r| r.as_ref()),
                Some(Resource::VirtualMachineInstance(i)) if hosts::vmi_active(i))
        }
        /// Its instance, while one exists.
        async fn instance(&self, ctx: &Context<'_>) -> Option<VirtualMachineInstanceObj> {
            one(snap(ctx).get(self.0.datacenter(), Kind::VirtualMachineInstance, self.0.namespace(), self.0.name()), VirtualMachineInstanceObj::new)
        }
        /// vCPUs it asks for (sockets × cores × threads of the template).
        async fn vcpus(&self) -> f64 {
            let Resource::VirtualMachine(vm) = &*self.0 else { return 0.0 };
            hosts::demand(None, Some(vm)).vcpus
        }
        /// Guest memory it asks for (bytes).
        async fn memory_bytes(&self) -> f64 {
            let Resource::VirtualMachine(vm) = &*self.0 else { return 0.0 };
            hosts::demand(None, Some(vm)).memory_bytes
        }
        /// The cluster it belongs to, and how that is known.
        async fn membership(&self, ctx: &Context<'_>) -> Option<VmMembership> { membership(ctx, &self.0) }
        /// The Machine it realises (label `vitistack.io/source-machine`).
        async fn machine(&self, ctx: &Context<'_>) -> Option<MachineObj> {
            let m = self.0.label(crate::model::LABEL_SOURCE_MACHINE)?;
            one(snap(ctx).get(self.0.datacenter(), Kind::Machine, self.0.namespace(), m), MachineObj::new)
        }
    }
}

node_type! {
    /// A KubeVirt VirtualMachineInstance: a VM that is starting, running or just ended.
    VirtualMachineInstanceObj, "VirtualMachineInstance", VirtualMachineInstance; {
        /// `status.nodeName`.
        async fn node_name(&self) -> Option<&str> {
            let Resource::VirtualMachineInstance(i) = &*self.0 else { return None };
            crate::model::kubevirt::vmi_node(i)
        }
        /// The host it runs on.
        async fn host(&self, ctx: &Context<'_>) -> Option<HostObj> {
            let Resource::VirtualMachineInstance(i) = &*self.0 else { return None };
            one(snap(ctx).get(self.0.datacenter(), Kind::Node, "", crate::model::kubevirt::vmi_node(i)?), HostObj::new)
        }
        /// True while it holds resources on its host (not Succeeded/Failed).
        async fn active(&self) -> bool {
            matches!(&*self.0, Resource::VirtualMachineInstance(i) if hosts::vmi_active(i))
        }
        /// vCPUs (sockets × cores × threads; from the VM template or the CPU request when the
        /// instance does not say).
        async fn vcpus(&self, ctx: &Context<'_>) -> f64 { self.demand(ctx).vcpus }
        /// Guest memory (bytes): guest memory, else the memory request, else the VM template.
        async fn memory_bytes(&self, ctx: &Context<'_>) -> f64 { self.demand(ctx).memory_bytes }
        /// Addresses reported by the guest.
        async fn ip_addresses(&self) -> Vec<String> {
            let Resource::VirtualMachineInstance(i) = &*self.0 else { return Vec::new() };
            i.status.as_ref().and_then(|s| s.interfaces.as_ref()).map(|ifs| ifs.iter().flat_map(|f| f.ip_addresses.iter().flatten().map(|a| a.to_string())).collect()).unwrap_or_default()
        }
        /// Its VirtualMachine, when it has one (standalone instances do not).
        async fn vm(&self, ctx: &Context<'_>) -> Option<VirtualMachineObj> {
            one(snap(ctx).get(self.0.datacenter(), Kind::VirtualMachine, self.0.namespace(), self.0.name()), VirtualMachineObj::new)
        }
        /// The cluster it belongs to, and how that is known.
        async fn membership(&self, ctx: &Context<'_>) -> Option<VmMembership> { membership(ctx, &self.0) }
    }
}

impl VirtualMachineInstanceObj {
    fn demand(&self, ctx: &Context<'_>) -> hosts::Demand {
        let Resource::VirtualMachineInstance(i) = &*self.0 else {
            return hosts::Demand::default();
        };
        let s = snap(ctx);
        let vm = match s
            .get(
                self.0.datacenter(),
                Kind::VirtualMachine,
                self.0.namespace(),
                self.0.name(),
            )
            .map(|r| r.as_ref())
        {
            Some(Resource::VirtualMachine(vm)) => Some(vm.as_ref()),
            _ => None,
        };
        hosts::demand(Some(i), vm)
    }
}

/// The fleet's capacity in one answer: what the dashboard's overview tiles show.
#[derive(SimpleObject, Clone, Debug, PartialEq)]
pub struct HostCapacity {
    /// Hosts in the graph.
    pub hosts: usize,
    /// Hosts that are Ready.
    pub ready_hosts: usize,
    /// Hosts that accept VMs (Ready, not cordoned, no blocking taint).
    pub usable_hosts: usize,
    /// Active VM instances.
    pub active_vms: usize,
    /// VirtualMachines without an active instance (stopped or not yet started).
    pub stopped_vms: usize,
    /// VMs in an error state (`ErrorUnschedulable`, `CrashLoopBackOff`, `Failed`, …): every
    /// VirtualMachine by its status, every instance without one by its phase.
    pub failed_vms: usize,
    /// VMs on their way (`Pending`, `Provisioning`, `Starting`, `Scheduling`, …), counted alike.
    pub pending_vms: usize,
    /// vCPUs of every active VM.
    pub vcpus_used: f64,
    /// vCPUs the usable hosts may give.
    pub vcpus_limit: f64,
    /// Guest memory of every active VM (bytes).
    pub memory_used_bytes: f64,
    /// Memory the usable hosts may give (bytes).
    pub memory_limit_bytes: f64,
    /// Hosts that can fail (largest first) with every active VM still placed.
    pub hosts_that_can_fail: usize,
    /// Why one more failure would not fit.
    pub redundancy_limit: String,
    /// The CPU overcommit factor in force.
    pub cpu_overcommit: f64,
    /// The memory overcommit factor in force.
    pub memory_overcommit: f64,
}

/// [`HostCapacity`] of the fleet (`dc` None) or of one datacenter, computed once per snapshot,
/// overcommit and datacenter: every query and subscriber at the same snapshot shares it (the
/// redundancy packs every active VM).
pub fn host_capacity(
    s: &crate::store::Snapshot,
    o: Overcommit,
    dc: Option<&crate::model::Datacenter>,
) -> HostCapacity {
    match dc {
        // The fleet's in a slot of its own: the dashboard's every tab reads it, and a keyed
        // look-up costs about 11 ns more (graph_query host_capacity/memo_500: 47 against 36 ns).
        None => {
            let memo = s.memo(|s| (o, host_capacity_full(s, o)));
            if memo.0 == o {
                memo.1.clone()
            } else {
                host_capacity_full(s, o)
            }
        }
        Some(_) => s.memo_keyed((o, dc.cloned()), |s| host_capacity_in(s, o, dc)),
    }
}

/// Compute [`HostCapacity`] from a snapshot.
pub fn host_capacity_full(s: &crate::store::Snapshot, o: Overcommit) -> HostCapacity {
    host_capacity_in(s, o, None)
}

/// [`HostCapacity`] of one datacenter's hosts and VMs (`None`: all of them).
pub fn host_capacity_in(
    s: &crate::store::Snapshot,
    o: Overcommit,
    dc: Option<&crate::model::Datacenter>,
) -> HostCapacity {
    let (mut hosts_n, mut ready, mut usable, mut cpu_lim, mut mem_lim) = (0, 0, 0, 0.0, 0.0);
    for r in s.list_scope(dc, Kind::Node) {
        if let Resource::Node(n) = r.as_ref() {
            let cap = hosts::capacity(n);
            hosts_n += 1;
            if cap.readiness == HostReadiness::Ready {
                ready += 1;
            }
            if cap.accepts_vms() {
                usable += 1;
                cpu_lim += cap.cpu_limit(o);
                mem_lim += cap.memory_limit(o);
            }
        }
    }
    // One walk over the VMs beside their instances for every figure below.
    let census = hosts::vm_census(s, dc);
    let redundancy = hosts::fleet_redundancy(s, o, dc, &census);
    HostCapacity {
        hosts: hosts_n,
        ready_hosts: ready,
        usable_hosts: usable,
        active_vms: census.active.len(),
        stopped_vms: census.stopped,
        failed_vms: census.failed,
        pending_vms: census.pending,
        vcpus_used: census.active.iter().map(|a| a.demand.vcpus).sum(),
        vcpus_limit: cpu_lim,
        memory_used_bytes: census.active.iter().map(|a| a.demand.memory_bytes).sum(),
        memory_limit_bytes: mem_lim,
        hosts_that_can_fail: redundancy.hosts_that_can_fail,
        redundancy_limit: redundancy.limit,
        cpu_overcommit: o.cpu,
        memory_overcommit: o.memory,
    }
}
