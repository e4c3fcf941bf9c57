//! A cluster's KubeVirt VMs and VMIs, found through the store's indexes where it keeps them:
//! a cluster's few dozen where every VM of its namespace (or every VMI of every datacenter) was
//! read and each one's cluster found.

use std::sync::Arc;

use super::{VmTotals, cluster_of, demand};
use crate::domain::aggregates::worth_an_index;
use crate::model::{Datacenter, Kind, Resource};
use crate::store::{Idx, Snapshot, scoped};

/// Every object of `kind` (VirtualMachine or VirtualMachineInstance) whose cluster
/// ([`cluster_of`]) can be `id`, through the search indexes (None for a snapshot without them, or
/// when they name too many): those that hold it (the cluster id label, a name it starts, a source
/// Machine's name that suggests it), and those of a Machine that holds it. More may be named
/// than belong: the caller checks each with [`cluster_of`].
pub fn virtual_of_cluster<'a>(
    snap: &'a Snapshot,
    kind: Kind,
    id: &str,
) -> Option<Vec<&'a Arc<Resource>>> {
    if id.is_empty() {
        // Every name starts with it: the index would name every object.
        return None;
    }
    let at_most = worth_an_index(snap, kind);
    let mut out = Vec::new();
    for r in snap.holding(id, at_most)? {
        match r.kind() {
            k if k == kind => out.push(r),
            Kind::Machine => out.extend(
                snap.lookup(
                    r.datacenter(),
                    Idx::VirtualByMachine,
                    &scoped(r.namespace(), r.name()),
                )
                .filter(|v| v.kind() == kind),
            ),
            _ => {}
        }
        if out.len() > at_most {
            return None;
        }
    }
    // An object found both ways is read once.
    out.sort_unstable_by_key(|r| Arc::as_ptr(r));
    out.dedup_by_key(|r| Arc::as_ptr(*r));
    Some(out)
}

/// The VirtualMachines of the cluster `cluster_id` in `namespace` of `dc` (membership as
/// [`cluster_of`] finds it), in figures. Read through the indexes where the snapshot keeps them
/// (the clusters list asks this of 500 clusters at once: reading each one's namespace took 2.7 s
/// for a page of 500 out of 100,000 objects), else from the namespace's VMs.
pub fn cluster_vm_totals(
    snap: &Snapshot,
    dc: &Datacenter,
    namespace: &str,
    cluster_id: &str,
) -> VmTotals {
    let candidates: Vec<&Arc<Resource>> =
        match virtual_of_cluster(snap, Kind::VirtualMachine, cluster_id) {
            Some(mut found) => {
                found.retain(|r| r.datacenter() == dc && r.namespace() == namespace);
                // In the namespace's order, as read from it: the sums of vCPUs and memory are
                // the same to the last bit.
                found.sort_unstable_by(|a, b| a.name().cmp(b.name()));
                found
            }
            None => snap
                .list_in_datacenter(dc, Kind::VirtualMachine, namespace)
                .collect(),
        };
    let mut totals = VmTotals::default();
    let mut hosts = std::collections::BTreeSet::new();
    for r in candidates {
        let Resource::VirtualMachine(vm) = r.as_ref() else {
            continue;
        };
        if cluster_of(snap, r).is_none_or(|(c, _)| c != cluster_id) {
            continue;
        }
        totals.total += 1;
        totals.running += usize::from(r.phase() == Some("Running"));
        totals.errors += usize::from(
            crate::model::vocab::PhaseState::of(r.phase())
                == crate::model::vocab::PhaseState::Failed,
        );
        let d = demand(None, Some(vm));
        totals.vcpus += d.vcpus;
        totals.memory_bytes += d.memory_bytes;
        if let Some(Resource::VirtualMachineInstance(i)) = snap
            .get(dc, Kind::VirtualMachineInstance, namespace, r.name())
            .map(|i| i.as_ref())
            && let Some(node) = crate::model::kubevirt::vmi_node(i)
        {
            hosts.insert(node.to_string());
        }
    }
    totals.hosts = hosts.len();
    totals
}
