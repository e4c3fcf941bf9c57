//! The fleet in figures: the infrastructure and cluster summaries GraphQL, REST and the metrics
//! serve (from the store's aggregates, or by walking every object: the reference the tests
//! compare the aggregates with), and the datacenter lookup they share.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_graphql::SimpleObject;

use crate::domain::aggregates::{self, Aggregates, ClusterState, Totals};
use crate::domain::pipeline::{self, Stage as PipelineStage};
use crate::model::{Kind, Resource};
use crate::store::Snapshot;
use serde_json::Value;

/// A 64-bit integer, for byte counts and their sums: GraphQL's `Int` is 32-bit, and a 16 GiB
/// machine already does not fit it (graphql-js servers and gateways refuse such an `Int`).
/// Written as a JSON number; exact up to 2^63 − 1 (JavaScript clients read it exactly up to 2^53).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Long(pub i64);

/// A 64-bit integer (byte counts and their sums; GraphQL's `Int` is 32-bit), as a JSON number.
#[async_graphql::Scalar(name = "Long")]
impl async_graphql::ScalarType for Long {
    fn parse(value: async_graphql::Value) -> async_graphql::InputValueResult<Self> {
        match &value {
            async_graphql::Value::Number(n) => n
                .as_i64()
                .map(Long)
                .ok_or_else(|| async_graphql::InputValueError::custom("not a 64-bit integer")),
            _ => Err(async_graphql::InputValueError::expected_type(value)),
        }
    }

    fn to_value(&self) -> async_graphql::Value {
        async_graphql::Value::Number(self.0.into())
    }
}

/// A count for one value.
#[derive(SimpleObject, Clone, Debug, PartialEq)]
pub struct Count {
    /// The value (a phase, provider, stage…); `""` when absent.
    pub value: String,
    /// How many.
    pub count: usize,
}

fn counts<'a>(values: impl Iterator<Item = &'a str>) -> Vec<Count> {
    let mut m: BTreeMap<&str, usize> = BTreeMap::new();
    for v in values {
        *m.entry(v).or_default() += 1;
    }
    m.into_iter()
        .map(|(value, count)| Count {
            value: value.to_string(),
            count,
        })
        .collect()
}

/// Machines in numbers.
#[derive(SimpleObject, Clone, Debug, PartialEq)]
pub struct MachineSummary {
    /// All Machines.
    pub total: usize,
    /// Running Machines.
    pub running: usize,
    /// Failed Machines.
    pub failed: usize,
    /// By `status.phase`.
    pub by_phase: Vec<Count>,
    /// By `spec.provider`.
    pub by_provider: Vec<Count>,
    /// Sum of effective vCPUs.
    pub vcpus: i64,
    /// Sum of effective memory in bytes.
    pub memory_bytes: Long,
}

/// Networks in numbers.
#[derive(SimpleObject, Clone, Debug, PartialEq)]
pub struct NetworkSummary {
    /// NetworkNamespaces.
    pub namespaces: usize,
    /// NetworkNamespaces with Ready=True.
    pub ready_namespaces: usize,
    /// NetworkNamespaces with Ready=False reason Error.
    pub failed_namespaces: usize,
    /// NetworkConfigurations.
    pub configurations: usize,
    /// IPv4 addresses allocated across NetworkConfigurations.
    pub allocated_ips: usize,
    /// Control-plane VIPs.
    pub vips: usize,
    /// VIPs with an address.
    pub ready_vips: usize,
}

/// Storage in numbers.
#[derive(SimpleObject, Clone, Debug, PartialEq)]
pub struct StorageSummary {
    /// Disk requested by Machines, in GB.
    pub machine_disk_gb: i64,
    /// ClusterStorages.
    pub cluster_storages: usize,
    /// ClusterStorages by phase.
    pub by_phase: Vec<Count>,
    /// ClusterStorageClasses.
    pub storage_classes: usize,
    /// EtcdBackups.
    pub etcd_backups: usize,
}

/// Clusters in numbers: `total` = `ready` + `degraded` + `failed` + `inProgress`.
#[derive(SimpleObject, Clone, Debug, PartialEq)]
pub struct ClusterSummary {
    /// All KubernetesClusters.
    pub total: usize,
    /// Ready clusters with nothing wrong.
    pub ready: usize,
    /// Clusters Ready by their own status whose objects are not all healthy (counted apart from
    /// `ready`).
    pub degraded: usize,
    /// Clusters with a terminal blocker.
    pub failed: usize,
    /// Clusters still progressing.
    pub in_progress: usize,
    /// By `status.phase`.
    pub by_phase: Vec<Count>,
    /// By pipeline stage.
    pub by_stage: Vec<Count>,
}

/// The whole infrastructure in numbers (the old `/infrastructure` response, typed). Its
/// `applications` field (the application inventory's counts) is resolved by the API.
#[derive(SimpleObject, Clone, Debug, PartialEq)]
#[graphql(complex)]
pub struct InfrastructureSummary {
    /// Machines.
    pub machines: MachineSummary,
    /// Networks.
    pub networks: NetworkSummary,
    /// Storage.
    pub storage: StorageSummary,
    /// Clusters.
    pub clusters: ClusterSummary,
    /// The datacenter it is of (`None`: every one); its application counts are that
    /// datacenter's.
    #[graphql(skip)]
    pub scope: Option<crate::model::Datacenter>,
    /// The application counts as they were when it was made (set by a subscription, so a
    /// change of the applications alone is a change of the summary); `None`: read when asked.
    #[graphql(skip)]
    pub application_counts: Option<BTreeMap<crate::domain::applications::Health, usize>>,
}

/// The cluster summary: from the store's aggregates when it keeps them (O(1) in the fleet),
/// else by walking every cluster.
pub fn cluster_summary(s: &Snapshot) -> ClusterSummary {
    match s.derived::<Aggregates>() {
        Some(a) => cluster_summary_of(a.totals()),
        None => cluster_summary_full(s),
    }
}

fn cluster_summary_of(t: &Totals) -> ClusterSummary {
    ClusterSummary {
        total: t.count(Kind::KubernetesCluster),
        ready: t.clusters(ClusterState::Ready),
        degraded: t.clusters(ClusterState::Degraded),
        failed: t.clusters(ClusterState::Failed),
        in_progress: t.clusters(ClusterState::InProgress),
        by_phase: from_counts(&t.cluster_phases),
        by_stage: {
            // Ordered by the stage's name, as `counts` orders values.
            let mut by: Vec<Count> = t
                .cluster_stages
                .iter()
                .map(|(stage, n)| Count {
                    value: stage_name(*stage).to_owned(),
                    count: *n,
                })
                .collect();
            by.sort_by(|a, b| a.value.cmp(&b.value));
            by
        },
    }
}

fn from_counts(c: &crate::domain::aggregates::Counts) -> Vec<Count> {
    c.iter()
        .map(|(value, count)| Count {
            value: value.clone(),
            count: *count,
        })
        .collect()
}

/// The cluster summary computed by walking every cluster (the reference for the aggregates).
pub fn cluster_summary_full(s: &Snapshot) -> ClusterSummary {
    cluster_summary_in(s, None)
}

/// [`ClusterSummary`] of one datacenter's clusters (`None`: all), by walking them.
pub fn cluster_summary_in(s: &Snapshot, dc: Option<&crate::model::Datacenter>) -> ClusterSummary {
    let mut stages = Vec::new();
    let (mut ready, mut degraded, mut failed) = (0, 0, 0);
    let clusters: Vec<_> = s.list_scope(dc, Kind::KubernetesCluster).collect();
    for c in &clusters {
        if let Resource::KubernetesCluster(kc) = c.as_ref() {
            let p = pipeline::evaluate(s, kc);
            match ClusterState::of(&p) {
                ClusterState::Degraded => degraded += 1,
                ClusterState::Ready => ready += 1,
                ClusterState::Failed => failed += 1,
                ClusterState::InProgress => {}
            }
            stages.push(stage_name(p.stage));
        }
    }
    ClusterSummary {
        total: clusters.len(),
        ready,
        degraded,
        failed,
        in_progress: clusters.len() - ready - degraded - failed,
        by_phase: counts(clusters.iter().map(|c| c.phase().unwrap_or_default())),
        by_stage: counts(stages.into_iter()),
    }
}

fn stage_name(s: PipelineStage) -> &'static str {
    match s {
        PipelineStage::Network => "NETWORK",
        PipelineStage::MachinesCreated => "MACHINES_CREATED",
        PipelineStage::IpsAllocated => "IPS_ALLOCATED",
        PipelineStage::MachinesRunning => "MACHINES_RUNNING",
        PipelineStage::VipReady => "VIP_READY",
        PipelineStage::Talos => "TALOS",
        PipelineStage::Ready => "READY",
    }
}

/// The infrastructure summary: from the store's aggregates when it keeps them (O(1) in the
/// fleet), else by walking every object.
pub fn infrastructure_summary(s: &Snapshot) -> InfrastructureSummary {
    let Some(a) = s.derived::<Aggregates>() else {
        return infrastructure_summary_full(s);
    };
    let t = a.totals();
    let phase = |p: &str| t.machine_phases.get(p).copied().unwrap_or(0);
    InfrastructureSummary {
        machines: MachineSummary {
            total: t.count(Kind::Machine),
            running: phase("Running"),
            failed: phase("Failed"),
            by_phase: from_counts(&t.machine_phases),
            by_provider: from_counts(&t.machine_providers),
            vcpus: t.machine_vcpus(),
            memory_bytes: Long(t.machine_memory_bytes()),
        },
        networks: NetworkSummary {
            namespaces: t.count(Kind::NetworkNamespace),
            ready_namespaces: t.ready_namespaces,
            failed_namespaces: t.failed_namespaces,
            configurations: t.count(Kind::NetworkConfiguration),
            allocated_ips: t.allocated_ips,
            vips: t.count(Kind::ControlPlaneVirtualSharedIp),
            ready_vips: t.ready_vips,
        },
        storage: StorageSummary {
            machine_disk_gb: t.machine_disk_gb(),
            cluster_storages: t.count(Kind::ClusterStorage),
            by_phase: from_counts(&t.storage_phases),
            storage_classes: t.count(Kind::ClusterStorageClass),
            etcd_backups: t.count(Kind::EtcdBackup),
        },
        clusters: cluster_summary_of(t),
        scope: None,
        application_counts: None,
    }
}

/// The infrastructure summary computed by walking every object (the reference for the
/// aggregates).
pub fn infrastructure_summary_full(s: &Snapshot) -> InfrastructureSummary {
    infrastructure_summary_in(s, None)
}

/// [`InfrastructureSummary`] of one datacenter's objects (`None`: all), by walking them.
pub fn infrastructure_summary_in(
    s: &Snapshot,
    dc: Option<&crate::model::Datacenter>,
) -> InfrastructureSummary {
    let machines: Vec<_> = s.list_scope(dc, Kind::Machine).collect();
    // Exact sums, clamped at the end: one absurd quantity (8Ei) must not overflow the fleet's.
    let (mut vcpus, mut memory, mut disk) = (0i128, 0i128, 0i128);
    for m in &machines {
        if let Resource::Machine(machine) = m.as_ref() {
            let r = crate::domain::resources::of(s, machine);
            vcpus += i128::from(r.vcpus);
            memory += i128::from(r.memory_bytes.unwrap_or(0));
            disk += i128::from(r.disk_gb);
        }
    }
    let clamp = aggregates::clamp;
    let (vcpus, memory, disk) = (clamp(vcpus), clamp(memory), clamp(disk));
    let nns: Vec<_> = s.list_scope(dc, Kind::NetworkNamespace).collect();
    let ncs: Vec<_> = s.list_scope(dc, Kind::NetworkConfiguration).collect();
    let allocated = ncs
        .iter()
        .map(|nc| match nc.as_ref() {
            Resource::NetworkConfiguration(c) => aggregates::allocated_ips(c),
            _ => 0,
        })
        .sum();
    let vips: Vec<_> = s
        .list_scope(dc, Kind::ControlPlaneVirtualSharedIp)
        .collect();
    let storages: Vec<_> = s.list_scope(dc, Kind::ClusterStorage).collect();
    InfrastructureSummary {
        machines: MachineSummary {
            total: machines.len(),
            running: machines
                .iter()
                .filter(|m| m.phase() == Some("Running"))
                .count(),
            failed: machines
                .iter()
                .filter(|m| m.phase() == Some("Failed"))
                .count(),
            by_phase: counts(machines.iter().map(|m| m.phase().unwrap_or_default())),
            by_provider: counts(machines.iter().map(|m| match m.as_ref() {
                Resource::Machine(mm) => mm.spec.provider.as_str(),
                _ => "",
            })),
            vcpus,
            memory_bytes: Long(memory),
        },
        networks: NetworkSummary {
            namespaces: nns.len(),
            ready_namespaces: nns.iter().filter(|n| n.readiness().ready).count(),
            failed_namespaces: nns.iter().filter(|n| n.readiness().failed).count(),
            configurations: ncs.len(),
            allocated_ips: allocated,
            vips: vips.len(),
            ready_vips: vips
                .iter()
                .filter(|v| match v.as_ref() {
                    Resource::ControlPlaneVirtualSharedIp(x) => aggregates::vip_ready(x),
                    _ => false,
                })
                .count(),
        },
        storage: StorageSummary {
            machine_disk_gb: disk,
            cluster_storages: storages.len(),
            by_phase: counts(storages.iter().map(|c| c.phase().unwrap_or_default())),
            storage_classes: s.list_scope(dc, Kind::ClusterStorageClass).count(),
            etcd_backups: s.list_scope(dc, Kind::EtcdBackup).count(),
        },
        clusters: cluster_summary_in(s, dc),
        scope: dc.cloned(),
        application_counts: None,
    }
}

/// The Vitistack named `wanted` (VITISTACKCRDNAME), else the first one.
pub fn datacenter<'s>(s: &'s Snapshot, wanted: &str) -> Option<&'s Arc<Resource>> {
    s.get(&Default::default(), Kind::Vitistack, "", wanted)
        .or_else(|| s.list(Kind::Vitistack).next())
}

/// The latest time an object says it changed: its creation, a manager's write, a condition's
/// transition, or a `lastUpdated` its operator wrote (RFC 3339).
pub fn last_updated(o: &Resource) -> String {
    let v = o.to_value();
    let mut latest: Option<jiff::Timestamp> = None;
    let mut consider = |s: Option<&str>| {
        if let Some(t) = s.and_then(|s| s.parse::<jiff::Timestamp>().ok()) {
            latest = Some(latest.map_or(t, |l| l.max(t)));
        }
    };
    consider(
        v.pointer("/metadata/creationTimestamp")
            .and_then(Value::as_str),
    );
    for m in v
        .pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        consider(m.get("time").and_then(Value::as_str));
    }
    for c in v
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        consider(c.get("lastTransitionTime").and_then(Value::as_str));
    }
    consider(
        v.pointer("/status/state/lastUpdated")
            .and_then(Value::as_str),
    );
    latest.map(|t| t.to_string()).unwrap_or_default()
}
