//! The graph as the old status page showed it: each datacenter's hosts with the VMs placed on
//! them, and its VMs grouped by cluster, in the old `StatusData`/`HubData` shapes (for consumers of
//! the old page's `/api/status` and its event stream). Figures come from the same rules as the
//! rest of the product (`hosts`: vCPUs as sockets × cores × threads, real quantity parsing).

use std::collections::BTreeMap;
use std::sync::Arc;

use super::hosts::{HostReadiness, capacity, cluster_of, demand};
use crate::model::kubevirt::vmi_node;
use crate::model::status_page::{ClusterGroup, DcStatus, HubData, NodeInfo, StatusData, VmInfo};
use crate::model::{Datacenter, Kind, Resource};
use crate::store::Snapshot;

const MIB: f64 = 1024.0 * 1024.0;

/// The name the old page shows for a datacenter: its key, or for the one datacenter of a
/// single-cluster server, `fallback` (its Vitistack's name).
fn shown(dc: &Datacenter, fallback: &str) -> String {
    if dc.is_single() {
        fallback.to_string()
    } else {
        dc.key().to_string()
    }
}

fn vm_info(snap: &Snapshot, r: &Arc<Resource>) -> Option<VmInfo> {
    let Resource::VirtualMachineInstance(vmi) = r.as_ref() else {
        return None;
    };
    let d = demand(Some(vmi), None);
    Some(VmInfo {
        name: r.name().to_string(),
        namespace: r.namespace().to_string(),
        status: r.phase().unwrap_or_default().to_string(),
        node_name: vmi_node(vmi).unwrap_or_default().to_string(),
        cpu_cores: d.vcpus as i64,
        memory_mb: (d.memory_bytes / MIB) as i64,
        cluster: cluster_of(snap, r)
            .map(|(c, _)| c)
            .unwrap_or_else(|| "unknown".into()),
    })
}

/// One datacenter's hosts and VMs, sorted by name; `name` goes in `datacenter` (empty: left out,
/// as the old agent's own answer did).
pub fn status_data(snap: &Snapshot, dc: &Datacenter, name: &str, updated: &str) -> StatusData {
    let mut vms: Vec<VmInfo> = snap
        .list_datacenter(dc, Kind::VirtualMachineInstance)
        .filter_map(|r| vm_info(snap, r))
        .collect();
    vms.sort_by(|a, b| (&a.name, &a.namespace).cmp(&(&b.name, &b.namespace)));
    let mut on_node: BTreeMap<&str, Vec<VmInfo>> = BTreeMap::new();
    let mut clusters: BTreeMap<&str, ClusterGroup> = BTreeMap::new();
    for vm in &vms {
        on_node.entry(&vm.node_name).or_default().push(vm.clone());
        let group = clusters.entry(&vm.cluster).or_insert_with(|| ClusterGroup {
            name: vm.cluster.clone(),
            ..ClusterGroup::default()
        });
        group.vms.push(vm.clone());
        if !vm.node_name.is_empty() && !group.nodes.contains(&vm.node_name) {
            group.nodes.push(vm.node_name.clone());
        }
    }
    let mut nodes: Vec<NodeInfo> = snap
        .list_datacenter(dc, Kind::Node)
        .filter_map(|r| match r.as_ref() {
            Resource::Node(n) => Some(n),
            _ => None,
        })
        .map(|n| {
            let c = capacity(n);
            let name = n.metadata.name.as_deref().unwrap_or_default().to_string();
            NodeInfo {
                vms: on_node.get(name.as_str()).cloned().unwrap_or_default(),
                name,
                roles: c.roles.clone(),
                status: if c.readiness == HostReadiness::Ready {
                    "Ready".into()
                } else {
                    "NotReady".into()
                },
                cpu_capacity: c.cpu_capacity as i64,
                memory_cap_mb: (c.memory_capacity / MIB) as i64,
                cpu_allocatable: c.cpu_allocatable as i64,
                mem_alloc_mb: (c.memory_allocatable / MIB) as i64,
            }
        })
        .collect();
    nodes.sort_by(|a, b| a.name.cmp(&b.name));
    StatusData {
        datacenter: name.to_string(),
        nodes,
        clusters: clusters
            .into_values()
            .map(|mut g| {
                g.nodes.sort();
                g
            })
            .collect(),
        updated: updated.to_string(),
    }
}

/// Every datacenter (`stale`: those whose data may be behind), sorted by the name shown; the
/// single-cluster datacenter (key "") appears under `single_name` when it holds hosts or VMs.
pub fn hub_data(
    snap: &Snapshot,
    datacenters: &[(Datacenter, bool)],
    single_name: &str,
    updated: &str,
) -> HubData {
    let mut out: Vec<DcStatus> = datacenters
        .iter()
        .filter(|(dc, _)| {
            !dc.is_single()
                || snap.list_datacenter(dc, Kind::Node).next().is_some()
                || snap
                    .list_datacenter(dc, Kind::VirtualMachineInstance)
                    .next()
                    .is_some()
        })
        .map(|(dc, stale)| DcStatus {
            status: status_data(snap, dc, &shown(dc, single_name), updated),
            stale: *stale,
        })
        .collect();
    out.sort_by(|a, b| a.status.datacenter.cmp(&b.status.datacenter));
    HubData {
        datacenters: out,
        updated: updated.to_string(),
    }
}
