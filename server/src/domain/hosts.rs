//! Hosts (Kubernetes Nodes running KubeVirt) and the virtual machines on them: what each VM
//! needs, what each host can give, how full each host is, and how many hosts can fail before the
//! running VMs no longer fit. Computed once, on the server, with the old status page's mistakes
//! fixed:
//!
//! - vCPUs are sockets × cores × threads (the old page read `cores` only);
//! - memory comes from the VMI (guest memory, else the memory request), then the VM template,
//!   with real Kubernetes quantity parsing (the old page read only the VM's `memory.guest`, so
//!   standalone or request-only VMs counted 0, and `1.5Gi`, `T`, `K` were misread);
//! - the CPU limit is the node's *allocatable* CPU × the overcommit factor (the old page took
//!   capacity × 3 and ignored allocatable);
//! - usage counts the same VMs everywhere (every active VMI on the host);
//! - control-plane nodes and stopped VMs are kept, node readiness distinguishes Unknown;
//! - redundancy removes the largest hosts first and re-places every VM on the remaining hosts one
//!   by one (first-fit decreasing), instead of smallest-first on aggregate capacity.

use crate::model::{Datacenter, Node};

use crate::model::kubevirt::{Domain, VirtualMachine, VirtualMachineInstance, guessed_cluster};
use crate::model::{LABEL_CLUSTER_ID, LABEL_SOURCE_MACHINE, Quantity, Resource};
use crate::store::Snapshot;

/// How much more than the host has may be promised to VMs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Overcommit {
    /// vCPUs per allocatable core (the old page's fixed 3).
    pub cpu: f64,
    /// Guest memory per allocatable byte (1 = none).
    pub memory: f64,
}

impl Default for Overcommit {
    fn default() -> Self {
        Overcommit {
            cpu: 3.0,
            memory: 1.0,
        }
    }
}

/// What a VM needs.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Demand {
    /// vCPUs.
    pub vcpus: f64,
    /// Guest memory in bytes.
    pub memory_bytes: f64,
}

fn quantity_value(q: Option<&Quantity>) -> Option<f64> {
    q.and_then(Quantity::value)
        .filter(|v| v.is_finite() && *v > 0.0)
}

/// vCPUs and memory a domain asks for, when it says.
fn domain_demand(d: &Domain) -> (Option<f64>, Option<f64>) {
    let requests = d.resources.as_ref().and_then(|r| r.requests.as_ref());
    let vcpus = d
        .cpu
        .as_ref()
        .map(|c| {
            let n = |v: Option<i64>| v.filter(|v| *v > 0).unwrap_or(1) as f64;
            n(c.sockets) * n(c.cores) * n(c.threads)
        })
        .or_else(|| quantity_value(requests.and_then(|r| r.value("cpu"))).map(f64::ceil));
    let memory = quantity_value(d.memory.as_ref().and_then(|m| m.guest.as_ref()))
        .or_else(|| quantity_value(requests.and_then(|r| r.value("memory"))));
    (vcpus, memory)
}

/// What a VM needs: the running instance's spec first, then the VM's template; 1 vCPU when
/// nothing says (KubeVirt's default).
pub fn demand(vmi: Option<&VirtualMachineInstance>, vm: Option<&VirtualMachine>) -> Demand {
    let (a_cpu, a_mem) = vmi
        .map(|i| domain_demand(&i.spec.domain))
        .unwrap_or_default();
    let (b_cpu, b_mem) = vm
        .and_then(|v| v.spec.template.as_ref())
        .map(|t| domain_demand(&t.spec.domain))
        .unwrap_or_default();
    Demand {
        vcpus: a_cpu.or(b_cpu).unwrap_or(1.0),
        memory_bytes: a_mem.or(b_mem).unwrap_or(0.0),
    }
}

/// True while a VMI holds resources on its node.
pub fn vmi_active(vmi: &VirtualMachineInstance) -> bool {
    !matches!(
        vmi.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

/// A node's Ready condition, three ways (the old page folded Unknown into NotReady).
#[derive(Clone, Copy, Debug, PartialEq, Eq, async_graphql::Enum)]
#[graphql(name = "HostReadiness")]
pub enum HostReadiness {
    /// Ready=True.
    Ready,
    /// Ready=False.
    NotReady,
    /// Ready=Unknown or no condition (the kubelet stopped reporting).
    Unknown,
}

/// What a host can give and whether VMs can be placed on it.
#[derive(Clone, Debug, PartialEq)]
pub struct Capacity {
    /// CPU cores the node has.
    pub cpu_capacity: f64,
    /// CPU cores allocatable to workloads (capacity when the node does not say).
    pub cpu_allocatable: f64,
    /// Memory bytes the node has.
    pub memory_capacity: f64,
    /// Memory bytes allocatable (capacity when the node does not say).
    pub memory_allocatable: f64,
    /// Ready condition.
    pub readiness: HostReadiness,
    /// `spec.unschedulable` (cordoned).
    pub unschedulable: bool,
    /// Taints with effect NoSchedule or NoExecute (VMs do not tolerate them by default).
    pub blocking_taints: Vec<String>,
    /// Condition types other than Ready that are True (MemoryPressure, DiskPressure, …).
    pub pressures: Vec<String>,
    /// Roles from `node-role.kubernetes.io/<role>` labels; `worker` when none.
    pub roles: Vec<String>,
}

impl Capacity {
    /// True when new VMs can be placed here.
    pub fn accepts_vms(&self) -> bool {
        self.readiness == HostReadiness::Ready
            && !self.unschedulable
            && self.blocking_taints.is_empty()
    }

    /// vCPUs that may be promised to VMs.
    pub fn cpu_limit(&self, o: Overcommit) -> f64 {
        self.cpu_allocatable * o.cpu
    }

    /// Guest memory that may be promised to VMs.
    pub fn memory_limit(&self, o: Overcommit) -> f64 {
        self.memory_allocatable * o.memory
    }
}

fn node_quantity(
    map: Option<
        &std::collections::BTreeMap<
            String,
            k8s_openapi::apimachinery::pkg::api::resource::Quantity,
        >,
    >,
    key: &str,
) -> Option<f64> {
    map.and_then(|m| m.get(key))
        .and_then(|q| Quantity::parse(&q.0).ok())
        .and_then(|q| q.value())
        .filter(|v| v.is_finite())
}

/// What a node can give.
pub fn capacity(node: &Node) -> Capacity {
    let status = node.status.as_ref();
    let cap = status.and_then(|s| s.capacity.as_ref());
    let alloc = status.and_then(|s| s.allocatable.as_ref());
    let cpu_capacity = node_quantity(cap, "cpu").unwrap_or(0.0);
    let memory_capacity = node_quantity(cap, "memory").unwrap_or(0.0);
    let conditions = status.and_then(|s| s.conditions.as_ref());
    let readiness = match conditions
        .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"))
        .map(|c| c.status.as_str())
    {
        Some("True") => HostReadiness::Ready,
        Some("False") => HostReadiness::NotReady,
        _ => HostReadiness::Unknown,
    };
    let pressures = conditions
        .map(|cs| {
            cs.iter()
                .filter(|c| c.type_ != "Ready" && c.status == "True")
                .map(|c| c.type_.clone())
                .collect()
        })
        .unwrap_or_default();
    let spec = node.spec.as_ref();
    let blocking_taints = spec
        .and_then(|s| s.taints.as_ref())
        .map(|ts| {
            ts.iter()
                .filter(|t| t.effect == "NoSchedule" || t.effect == "NoExecute")
                .map(|t| format!("{}:{}", t.key, t.effect))
                .collect()
        })
        .unwrap_or_default();
    let mut roles: Vec<String> = node
        .metadata
        .labels
        .as_ref()
        .map(|l| {
            l.iter()
                .filter_map(|(k, _)| k.strip_prefix("node-role.kubernetes.io/"))
                .filter(|r| !r.is_empty())
                .map(String::from)
                .collect()
        })
        .unwrap_or_default();
    if roles.is_empty() {
        roles.push("worker".into());
    }
    Capacity {
        cpu_capacity,
        cpu_allocatable: node_quantity(alloc, "cpu").unwrap_or(cpu_capacity),
        memory_capacity,
        memory_allocatable: node_quantity(alloc, "memory").unwrap_or(memory_capacity),
        readiness,
        unschedulable: spec.and_then(|s| s.unschedulable).unwrap_or(false),
        blocking_taints,
        pressures,
        roles,
    }
}

/// How full a host is.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Allocation {
    /// vCPUs of the active VMs on it.
    pub vcpus_used: f64,
    /// vCPUs it may give (allocatable × overcommit).
    pub vcpus_limit: f64,
    /// Guest memory of the active VMs on it (bytes).
    pub memory_used: f64,
    /// Memory it may give (bytes).
    pub memory_limit: f64,
    /// Active VMs on it.
    pub vms: usize,
}

impl Allocation {
    /// Used / limit, in percent (0 when there is no limit).
    pub fn cpu_percent(&self) -> f64 {
        percent(self.vcpus_used, self.vcpus_limit)
    }

    /// Used / limit, in percent.
    pub fn memory_percent(&self) -> f64 {
        percent(self.memory_used, self.memory_limit)
    }
}

fn percent(used: f64, limit: f64) -> f64 {
    if limit > 0.0 {
        used / limit * 100.0
    } else {
        0.0
    }
}

fn vm_of<'a>(snap: &'a Snapshot, vmi: &Resource) -> Option<&'a VirtualMachine> {
    match snap
        .get(
            vmi.datacenter(),
            crate::model::Kind::VirtualMachine,
            vmi.namespace(),
            vmi.name(),
        )?
        .as_ref()
    {
        Resource::VirtualMachine(vm) => Some(vm),
        _ => None,
    }
}

/// Every active VMI with its demand and node.
pub fn active_vmis(snap: &Snapshot) -> Vec<(Demand, Option<String>)> {
    active_vmis_in(snap, None)
}

/// [`active_vmis`] of one datacenter (`None`: all).
pub fn active_vmis_in(snap: &Snapshot, dc: Option<&Datacenter>) -> Vec<(Demand, Option<String>)> {
    vm_pairs(snap, dc)
        .filter_map(active_of)
        .map(|a| (a.demand, a.node.map(String::from)))
        .collect()
}

/// Allocation of one host from the snapshot.
pub fn allocation(snap: &Snapshot, node: &Node, o: Overcommit) -> Allocation {
    let cap = capacity(node);
    let name = node.metadata.name.as_deref().unwrap_or_default();
    let mut a = Allocation {
        vcpus_limit: cap.cpu_limit(o),
        memory_limit: cap.memory_limit(o),
        ..Default::default()
    };
    for r in snap.lookup(&node.datacenter, crate::store::Idx::VmiByNode, name) {
        if let Resource::VirtualMachineInstance(vmi) = r.as_ref()
            && vmi_active(vmi)
        {
            let d = demand(Some(vmi), vm_of(snap, r));
            a.vcpus_used += d.vcpus;
            a.memory_used += d.memory_bytes;
            a.vms += 1;
        }
    }
    a
}

/// How many hosts can fail, and why not more.
#[derive(Clone, Debug, PartialEq)]
pub struct Redundancy {
    /// Hosts that can fail (largest first) with every active VM still placed.
    pub hosts_that_can_fail: usize,
    /// Hosts that accept VMs (Ready, schedulable, no blocking taint).
    pub usable_hosts: usize,
    /// Why one more failure would not fit, in plain words.
    pub limit: String,
}

/// A host for the placement check: name and limits.
#[derive(Clone, Debug)]
pub struct Bin {
    /// Host name.
    pub name: String,
    /// vCPUs it may give.
    pub vcpus: f64,
    /// Memory it may give (bytes).
    pub memory: f64,
}

/// Place every demand on the bins (first-fit, largest demand first); the first that fits
/// nowhere, if any.
pub fn place(demands: &[Demand], bins: &[Bin]) -> Option<Demand> {
    let total_cpu: f64 = bins.iter().map(|b| b.vcpus).sum::<f64>().max(1.0);
    let total_mem: f64 = bins.iter().map(|b| b.memory).sum::<f64>().max(1.0);
    let mut order: Vec<&Demand> = demands.iter().collect();
    let weight = |d: &Demand| (d.vcpus / total_cpu).max(d.memory_bytes / total_mem);
    order.sort_by(|a, b| weight(b).total_cmp(&weight(a)));
    let mut free: Vec<(f64, f64)> = bins.iter().map(|b| (b.vcpus, b.memory)).collect();
    for d in order {
        let slot = free
            .iter_mut()
            .find(|(c, m)| *c + 1e-9 >= d.vcpus && *m + 1e-9 >= d.memory_bytes);
        match slot {
            Some((c, m)) => {
                *c -= d.vcpus;
                *m -= d.memory_bytes;
            }
            None => return Some(*d),
        }
    }
    None
}

fn gib(bytes: f64) -> String {
    format!("{:.1} GiB", bytes / (1024.0 * 1024.0 * 1024.0))
}

/// How many hosts can fail: remove the largest hosts one at a time and check that every active
/// VM still fits somewhere, one VM per host slot (not just in aggregate).
pub fn redundancy(bins: &[Bin], demands: &[Demand]) -> Redundancy {
    let total_cpu: f64 = bins.iter().map(|b| b.vcpus).sum::<f64>().max(1.0);
    let total_mem: f64 = bins.iter().map(|b| b.memory).sum::<f64>().max(1.0);
    let mut sorted: Vec<Bin> = bins.to_vec();
    let size = |b: &Bin| b.vcpus / total_cpu + b.memory / total_mem;
    sorted.sort_by(|a, b| {
        size(b)
            .total_cmp(&size(a))
            .then_with(|| a.name.cmp(&b.name))
    });
    if let Some(d) = place(demands, &sorted) {
        return Redundancy {
            hosts_that_can_fail: 0,
            usable_hosts: sorted.len(),
            limit: format!(
                "the running VMs do not fit even with every host up (a VM of {} vCPU / {} fits on no host)",
                d.vcpus,
                gib(d.memory_bytes)
            ),
        };
    }
    for k in 1..=sorted.len() {
        let remaining = &sorted[k..];
        if let Some(d) = place(demands, remaining) {
            let lost: Vec<&str> = sorted[..k].iter().map(|b| b.name.as_str()).collect();
            return Redundancy {
                hosts_that_can_fail: k - 1,
                usable_hosts: sorted.len(),
                limit: format!(
                    "without {}, a VM of {} vCPU / {} fits on no remaining host",
                    lost.join(", "),
                    d.vcpus,
                    gib(d.memory_bytes)
                ),
            };
        }
    }
    Redundancy {
        hosts_that_can_fail: sorted.len(),
        usable_hosts: sorted.len(),
        limit: "no active VMs".into(),
    }
}

/// Redundancy of one datacenter's hosts (`None`: of the whole snapshot), for the active VMs of
/// `census` (taken of the same scope). A VM runs only on its own datacenter's hosts, so with
/// several datacenters the fleet's figure is its weakest datacenter's, named in the limit.
pub fn fleet_redundancy(
    snap: &Snapshot,
    o: Overcommit,
    dc: Option<&Datacenter>,
    census: &VmCensus,
) -> Redundancy {
    let of = |dc: Option<&Datacenter>| redundancy(&fleet_bins(snap, o, dc), &census.demands(dc));
    if dc.is_some() {
        return of(dc);
    }
    let mut with_hosts: Vec<&Datacenter> = snap
        .list(crate::model::Kind::Node)
        .map(|r| r.datacenter())
        .collect();
    with_hosts.dedup();
    if with_hosts.len() < 2 {
        return of(None);
    }
    let mut usable = 0;
    let mut weakest: Option<Redundancy> = None;
    for d in with_hosts {
        let r = of(Some(d));
        usable += r.usable_hosts;
        if weakest
            .as_ref()
            .is_none_or(|w| r.hosts_that_can_fail < w.hosts_that_can_fail)
        {
            weakest = Some(Redundancy {
                limit: format!("{}: {}", d.key(), r.limit),
                ..r
            });
        }
    }
    let mut fleet = weakest.unwrap_or_else(|| of(None));
    fleet.usable_hosts = usable;
    fleet
}

/// The hosts that accept VMs, with what each may give, in one datacenter (`None`: all).
pub fn fleet_bins(snap: &Snapshot, o: Overcommit, dc: Option<&Datacenter>) -> Vec<Bin> {
    snap.list_scope(dc, crate::model::Kind::Node)
        .filter_map(|r| match r.as_ref() {
            Resource::Node(n) => {
                let cap = capacity(n);
                cap.accepts_vms().then(|| Bin {
                    name: r.name().to_string(),
                    vcpus: cap.cpu_limit(o),
                    memory: cap.memory_limit(o),
                })
            }
            _ => None,
        })
        .collect()
}

/// How a VM's cluster was found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, async_graphql::Enum)]
pub enum MembershipSource {
    /// Label `vitistack.io/clusterid` on the VM/VMI.
    ClusterLabel,
    /// Label `vitistack.io/source-machine` → that Machine's cluster label.
    SourceMachine,
    /// Guessed from a `-ctp…`/`-wrk…` name suffix (as the old page did); may be wrong.
    NameGuess,
}

/// The cluster a VM or VMI belongs to: explicit labels first, a name guess last.
pub fn cluster_of(snap: &Snapshot, r: &Resource) -> Option<(String, MembershipSource)> {
    if let Some(c) = r.label(LABEL_CLUSTER_ID).filter(|c| !c.is_empty()) {
        return Some((c.to_string(), MembershipSource::ClusterLabel));
    }
    if let Some(m) = r.label(LABEL_SOURCE_MACHINE)
        && let Some(machine) = snap.get(
            r.datacenter(),
            crate::model::Kind::Machine,
            r.namespace(),
            m,
        )
        && let Some(c) = machine.label(LABEL_CLUSTER_ID).filter(|c| !c.is_empty())
    {
        return Some((c.to_string(), MembershipSource::SourceMachine));
    }
    guessed_cluster(r.name())
        .or_else(|| r.label(LABEL_SOURCE_MACHINE).and_then(guessed_cluster))
        .map(|c| (c.to_string(), MembershipSource::NameGuess))
}

/// A cluster's KubeVirt VMs in figures (the old status page's clusters table).
#[derive(Clone, Debug, Default, PartialEq, async_graphql::SimpleObject)]
#[graphql(name = "ClusterVmTotals")]
pub struct VmTotals {
    /// VirtualMachines of the cluster (by its clusterid label, else the source Machine's, else
    /// the `-ctp`/`-wrk` name).
    pub total: usize,
    /// Of those, `Running`.
    pub running: usize,
    /// vCPUs they ask for (sockets × cores × threads).
    pub vcpus: f64,
    /// Guest memory they ask for (bytes).
    pub memory_bytes: f64,
    /// Hosts their instances run on.
    pub hosts: usize,
    /// Of those, in an error state (`ErrorUnschedulable`, `CrashLoopBackOff`, `Failed`, …).
    pub errors: usize,
}

/// VMs in an error state and VMs on their way (`Pending`, `Provisioning`, `Starting`, …), as
/// the old page's Problems tile counted them: every VirtualMachine by its status, and every
/// instance without one by its phase.
pub fn vm_problems(snap: &Snapshot, dc: Option<&crate::model::Datacenter>) -> (usize, usize) {
    let census = vm_census(snap, dc);
    (census.failed, census.pending)
}

mod census;
pub use census::{ActiveVm, VmCensus, VmPair, active_of, vm_census, vm_pairs};
mod of_cluster;
pub use of_cluster::{cluster_vm_totals, virtual_of_cluster};

#[cfg(test)]
mod tests;
