//! Every VM of a scope in one ordered walk: each VirtualMachine beside its instance of the same
//! datacenter, namespace and name, found by merging the two kinds' lists (both in key order)
//! rather than by a point read per object. At 20,960 VMs the fleet's figures took four passes
//! and about 84,000 reads by key, a third of `hostCapacity`'s time (BENCHMARKS.md, "the
//! hostCapacity profile").

use std::cmp::Ordering;
use std::iter::Peekable;
use std::sync::Arc;

use super::{Demand, demand, vmi_active};
use crate::model::kubevirt::vmi_node;
use crate::model::vocab::PhaseState;
use crate::model::{Datacenter, Kind, Resource};
use crate::store::Snapshot;

/// One VM by name: its VirtualMachine, its instance, or both (never neither).
#[derive(Clone, Copy, Debug)]
pub struct VmPair<'a> {
    /// The VirtualMachine, when there is one.
    pub vm: Option<&'a Arc<Resource>>,
    /// The VirtualMachineInstance of the same name, when there is one.
    pub vmi: Option<&'a Arc<Resource>>,
}

/// Two lists of one scope merged by (datacenter, namespace, name).
struct Pairs<A: Iterator, B: Iterator> {
    vms: Peekable<A>,
    vmis: Peekable<B>,
}

fn place_of(r: &Resource) -> (&Datacenter, &str, &str) {
    (r.datacenter(), r.namespace(), r.name())
}

impl<'a, A, B> Iterator for Pairs<A, B>
where
    A: Iterator<Item = &'a Arc<Resource>>,
    B: Iterator<Item = &'a Arc<Resource>>,
{
    type Item = VmPair<'a>;

    fn next(&mut self) -> Option<VmPair<'a>> {
        let order = match (self.vms.peek(), self.vmis.peek()) {
            (None, None) => return None,
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (Some(vm), Some(vmi)) => place_of(vm).cmp(&place_of(vmi)),
        };
        Some(match order {
            Ordering::Less => VmPair {
                vm: self.vms.next(),
                vmi: None,
            },
            Ordering::Greater => VmPair {
                vm: None,
                vmi: self.vmis.next(),
            },
            Ordering::Equal => VmPair {
                vm: self.vms.next(),
                vmi: self.vmis.next(),
            },
        })
    }
}

/// Every VM of one datacenter (`None`: of all), in key order, its VirtualMachine beside its
/// instance.
pub fn vm_pairs<'a>(
    snap: &'a Snapshot,
    dc: Option<&Datacenter>,
) -> impl Iterator<Item = VmPair<'a>> + 'a {
    Pairs {
        vms: snap.list_scope(dc, Kind::VirtualMachine).peekable(),
        vmis: snap.list_scope(dc, Kind::VirtualMachineInstance).peekable(),
    }
}

/// An instance that runs: where, what it needs and on which host.
#[derive(Clone, Debug)]
pub struct ActiveVm<'a> {
    /// Its datacenter.
    pub datacenter: &'a Datacenter,
    /// vCPUs and memory.
    pub demand: Demand,
    /// The host it runs on, when known.
    pub node: Option<&'a str>,
}

/// The VMs of a scope in figures.
#[derive(Clone, Debug, Default)]
pub struct VmCensus<'a> {
    /// Every active instance, in key order.
    pub active: Vec<ActiveVm<'a>>,
    /// VirtualMachines without an active instance.
    pub stopped: usize,
    /// VMs in an error state: every VirtualMachine by its status, every instance without one
    /// by its phase.
    pub failed: usize,
    /// VMs on their way, counted alike.
    pub pending: usize,
}

impl VmCensus<'_> {
    /// The demands of the active instances of one datacenter (`None`: of all).
    pub fn demands(&self, dc: Option<&Datacenter>) -> Vec<Demand> {
        self.active
            .iter()
            .filter(|a| dc.is_none_or(|d| a.datacenter == d))
            .map(|a| a.demand)
            .collect()
    }
}

/// The active instance of a pair, with its demand (the VirtualMachine's template fills what
/// the instance does not say).
pub fn active_of<'a>(pair: VmPair<'a>) -> Option<ActiveVm<'a>> {
    let r = pair.vmi?;
    let Resource::VirtualMachineInstance(vmi) = r.as_ref() else {
        return None;
    };
    if !vmi_active(vmi) {
        return None;
    }
    let vm = pair.vm.and_then(|v| match v.as_ref() {
        Resource::VirtualMachine(vm) => Some(vm.as_ref()),
        _ => None,
    });
    Some(ActiveVm {
        datacenter: r.datacenter(),
        demand: demand(Some(vmi), vm),
        node: vmi_node(vmi),
    })
}

/// Count the VMs of one datacenter (`None`: of all) in one walk.
pub fn vm_census<'a>(snap: &'a Snapshot, dc: Option<&Datacenter>) -> VmCensus<'a> {
    let mut census = VmCensus::default();
    for pair in vm_pairs(snap, dc) {
        let active = active_of(pair);
        if pair.vm.is_some() && active.is_none() {
            census.stopped += 1;
        }
        census.active.extend(active);
        // A VirtualMachine speaks for its instance.
        if let Some(r) = pair.vm.or(pair.vmi) {
            match PhaseState::of(r.phase()) {
                PhaseState::Failed => census.failed += 1,
                PhaseState::Pending => census.pending += 1,
                _ => {}
            }
        }
    }
    census
}
