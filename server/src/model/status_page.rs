//! The old status page's JSON (kubevirt-status-page: `/api/status`, its SSE `data:` frames and
//! the agents' `POST /api/report`), field for field. Agents keep sending [`StatusData`]; consumers
//! of the old page keep reading it (one cluster) or [`HubData`] (several datacenters).
//!
//! The old program sent Go's nil slices as `null`; these types read `null` as empty and always
//! write arrays (an empty hub's `datacenters: null` made the old page mistake it for an agent).

use serde::{Deserialize, Deserializer, Serialize};

/// A `null` or absent list is an empty list.
fn list<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Vec<T>, D::Error> {
    Ok(Option::<Vec<T>>::deserialize(d)?.unwrap_or_default())
}

/// One datacenter's hosts and VMs, as an agent reports them (and as `/api/status` answered on one
/// cluster).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StatusData {
    /// The datacenter's name (agents: `DATACENTER_NAME`); absent on a one-cluster answer.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub datacenter: String,
    /// The hosts (Kubernetes Nodes), with the VMs on each.
    #[serde(default, deserialize_with = "list")]
    pub nodes: Vec<NodeInfo>,
    /// The VMs grouped by the cluster they belong to.
    #[serde(default, deserialize_with = "list")]
    pub clusters: Vec<ClusterGroup>,
    /// When it was read (RFC 3339).
    #[serde(default)]
    pub updated: String,
}

/// A host.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeInfo {
    /// Node name.
    #[serde(default)]
    pub name: String,
    /// Its roles (`control-plane`, `worker`, …).
    #[serde(default, deserialize_with = "list")]
    pub roles: Vec<String>,
    /// `Ready` or `NotReady`.
    #[serde(default)]
    pub status: String,
    /// CPU cores.
    #[serde(default)]
    pub cpu_capacity: i64,
    /// Memory in MiB.
    #[serde(default, rename = "memoryCapMB")]
    pub memory_cap_mb: i64,
    /// Allocatable CPU cores.
    #[serde(default)]
    pub cpu_allocatable: i64,
    /// Allocatable memory in MiB.
    #[serde(default, rename = "memAllocMB")]
    pub mem_alloc_mb: i64,
    /// The VMs placed on it.
    #[serde(default, deserialize_with = "list")]
    pub vms: Vec<VmInfo>,
}

/// A VM (a running KubeVirt VirtualMachineInstance).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VmInfo {
    /// VMI name.
    #[serde(default)]
    pub name: String,
    /// VMI namespace.
    #[serde(default)]
    pub namespace: String,
    /// Its phase (`Running`, `Scheduling`, …).
    #[serde(default)]
    pub status: String,
    /// The host it runs on.
    #[serde(default)]
    pub node_name: String,
    /// vCPUs.
    #[serde(default)]
    pub cpu_cores: i64,
    /// Memory in MiB.
    #[serde(default, rename = "memoryMB")]
    pub memory_mb: i64,
    /// The cluster it belongs to (`unknown` when none could be told).
    #[serde(default)]
    pub cluster: String,
}

/// The VMs of one cluster and the hosts they run on.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ClusterGroup {
    /// Cluster name.
    #[serde(default)]
    pub name: String,
    /// Its VMs.
    #[serde(default, deserialize_with = "list")]
    pub vms: Vec<VmInfo>,
    /// The distinct hosts they run on, sorted.
    #[serde(default, deserialize_with = "list")]
    pub nodes: Vec<String>,
}

/// Every datacenter (the old hub's `/api/status`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct HubData {
    /// By name.
    #[serde(default, deserialize_with = "list")]
    pub datacenters: Vec<DcStatus>,
    /// When it was put together (RFC 3339).
    #[serde(default)]
    pub updated: String,
}

/// One datacenter of [`HubData`]: its status and whether it is current.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DcStatus {
    /// Its hosts and VMs (with `datacenter` set).
    #[serde(flatten)]
    pub status: StatusData,
    /// Its data may be behind (no report, or no answer from its cluster, for
    /// `DC_STALE_AFTER_SECONDS`).
    #[serde(default)]
    pub stale: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_old_payload_with_nulls_and_writes_arrays() {
        let old = r#"{"datacenter":"dc1","nodes":[{"name":"n1","roles":null,"status":"Ready",
            "cpuCapacity":32,"memoryCapMB":131072,"cpuAllocatable":31,"memAllocMB":130000,
            "vms":null}],"clusters":null,"updated":"2026-01-02T03:04:05Z"}"#;
        let s: StatusData = serde_json::from_str(old).expect("old payload");
        assert_eq!(s.nodes[0].memory_cap_mb, 131072);
        assert!(s.nodes[0].vms.is_empty() && s.clusters.is_empty());
        let back = serde_json::to_value(&s).expect("json");
        assert_eq!(back["nodes"][0]["memAllocMB"], 130000);
        assert_eq!(back["clusters"], serde_json::json!([]));
        let hub = HubData {
            datacenters: vec![DcStatus {
                status: s,
                stale: true,
            }],
            updated: String::new(),
        };
        let v = serde_json::to_value(&hub).expect("json");
        assert_eq!(v["datacenters"][0]["datacenter"], "dc1");
        assert_eq!(v["datacenters"][0]["stale"], true);
    }
}
