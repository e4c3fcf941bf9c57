//! The Query root: lookups, one connection per kind, the datacenter, and summaries.

use crate::error::ErrorCode;
use std::collections::BTreeMap;
use std::sync::Arc;

use async_graphql::{Context, ID, Object, SimpleObject};

use super::paging::{Filter, PageArgs, Sort, bad_input};
use super::types::*;
use crate::domain::aggregates::{self, Aggregates, ClusterState, Totals};
use crate::domain::pipeline;
use crate::model::{Kind, Resource};
use crate::store::{Idx, Snapshot, scoped};

/// The Query root.
pub struct Query;

/// Build version information.
#[derive(SimpleObject)]
pub struct VersionInfo {
    /// Crate version.
    pub version: String,
    /// Git commit the binary was built from, when known.
    pub commit: String,
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
    pub memory_bytes: crate::graphql::types::Long,
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

/// The whole infrastructure in numbers (the old `/infrastructure` response, typed).
#[derive(SimpleObject, Clone, Debug, PartialEq)]
pub struct InfrastructureSummary {
    /// Machines.
    pub machines: MachineSummary,
    /// Networks.
    pub networks: NetworkSummary,
    /// Storage.
    pub storage: StorageSummary,
    /// Clusters.
    pub clusters: ClusterSummary,
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
    let mut stages = Vec::new();
    let (mut ready, mut degraded, mut failed) = (0, 0, 0);
    let clusters: Vec<_> = s.list(Kind::KubernetesCluster).collect();
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
            memory_bytes: crate::graphql::types::Long(t.machine_memory_bytes()),
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
    }
}

/// The infrastructure summary computed by walking every object (the reference for the
/// aggregates).
pub fn infrastructure_summary_full(s: &Snapshot) -> InfrastructureSummary {
    let machines: Vec<_> = s.list(Kind::Machine).collect();
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
    let nns: Vec<_> = s.list(Kind::NetworkNamespace).collect();
    let ncs: Vec<_> = s.list(Kind::NetworkConfiguration).collect();
    let allocated = ncs
        .iter()
        .map(|nc| match nc.as_ref() {
            Resource::NetworkConfiguration(c) => aggregates::allocated_ips(c),
            _ => 0,
        })
        .sum();
    let vips: Vec<_> = s.list(Kind::ControlPlaneVirtualSharedIp).collect();
    let storages: Vec<_> = s.list(Kind::ClusterStorage).collect();
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
            memory_bytes: crate::graphql::types::Long(memory),
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
            storage_classes: s.count(Kind::ClusterStorageClass),
            etcd_backups: s.count(Kind::EtcdBackup),
        },
        clusters: cluster_summary_full(s),
    }
}

/// The Vitistack singleton: the one named by config (VITISTACKCRDNAME), else the first.
fn datacenter_of(ctx: &Context<'_>) -> Option<Arc<Resource>> {
    let wanted = ctx
        .data_opt::<DatacenterName>()
        .map(|d| d.0.as_str())
        .unwrap_or("vitistack");
    datacenter(&snap(ctx), wanted).cloned()
}

/// The Vitistack named `wanted` (VITISTACKCRDNAME), else the first one.
pub fn datacenter<'s>(s: &'s Snapshot, wanted: &str) -> Option<&'s Arc<Resource>> {
    s.get(Kind::Vitistack, "", wanted)
        .or_else(|| s.list(Kind::Vitistack).next())
}

/// An object by `metadata.uid`, else a cluster-scoped object of `kind` by name.
fn by_uid_or_name(
    s: &Snapshot,
    kind: Kind,
    uid: Option<String>,
    name: Option<String>,
) -> Option<&Arc<Resource>> {
    uid.as_deref()
        .and_then(|u| s.by_uid(u))
        .or_else(|| name.as_deref().and_then(|n| s.get(kind, "", n)))
}

/// Which Vitistack is "the" datacenter: the one named by config, else the only/first one.
#[derive(Clone, Debug)]
pub struct DatacenterName(pub String);

/// One connection field per kind, on their own root merged into `QueryRoot`.
pub struct ListQuery;

macro_rules! list_fields {
    ($($(#[$doc:meta])* $field:ident, $kind:expr, $wrap:ty;)*) => {
        #[Object]
        impl ListQuery {
            $(
                $(#[$doc])*
                #[allow(clippy::too_many_arguments)]
                async fn $field(
                    &self,
                    ctx: &Context<'_>,
                    filter: Option<Filter>,
                    sort: Option<Sort>,
                    after: Option<String>,
                    before: Option<String>,
                    first: Option<i32>,
                    last: Option<i32>,
                ) -> async_graphql::Result<Conn<$wrap>> {
                    let items = snap(ctx).list($kind).cloned().collect();
                    connection(ctx, items, filter.as_ref(), sort, PageArgs { after, before, first, last }, <$wrap>::new).await
                }
            )*
        }
    };
}

list_fields! {
    /// Hosts: Kubernetes Nodes running KubeVirt (control-plane nodes included).
    hosts, Kind::Node, HostObj;
    /// KubeVirt VirtualMachines, running or stopped.
    virtual_machines, Kind::VirtualMachine, VirtualMachineObj;
    /// KubeVirt VirtualMachineInstances.
    virtual_machine_instances, Kind::VirtualMachineInstance, VirtualMachineInstanceObj;
    /// Machines.
    machines, Kind::Machine, MachineObj;
    /// KubernetesClusters.
    clusters, Kind::KubernetesCluster, ClusterObj;
    /// NetworkNamespaces (both API versions).
    network_namespaces, Kind::NetworkNamespace, NetworkNamespaceObj;
    /// NetworkConfigurations.
    network_configurations, Kind::NetworkConfiguration, NetworkConfigurationObj;
    /// ControlPlaneVirtualSharedIPs.
    control_plane_vips, Kind::ControlPlaneVirtualSharedIp, VipObj;
    /// IPAllocations (v1alpha2).
    ip_allocations, Kind::IpAllocation, IpAllocationObj;
    /// MachineClasses.
    machine_classes, Kind::MachineClass, MachineClassObj;
    /// MachineProviders.
    machine_providers, Kind::MachineProvider, MachineProviderObj;
    /// KubernetesProviders.
    kubernetes_providers, Kind::KubernetesProvider, KubernetesProviderObj;
    /// KubevirtConfigs.
    kubevirt_configs, Kind::KubevirtConfig, KubevirtConfigObj;
    /// ProxmoxConfigs.
    proxmox_configs, Kind::ProxmoxConfig, ProxmoxConfigObj;
    /// EtcdBackups.
    etcd_backups, Kind::EtcdBackup, EtcdBackupObj;
    /// ClusterStorages.
    cluster_storages, Kind::ClusterStorage, ClusterStorageObj;
    /// ClusterStorageClasses.
    cluster_storage_classes, Kind::ClusterStorageClass, ClusterStorageClassObj;
    /// Vitistacks (normally one).
    vitistacks, Kind::Vitistack, VitistackObj;
}

/// The Query root: lookups and summaries plus one connection per kind.
#[derive(async_graphql::MergedObject, Default)]
#[graphql(name = "Query")]
pub struct QueryRoot(Query, ListQuery);

impl Default for Query {
    fn default() -> Self {
        Query
    }
}

impl Default for ListQuery {
    fn default() -> Self {
        ListQuery
    }
}

#[Object(name = "QueryFields")]
impl Query {
    /// Any object by global id; null when it no longer exists. A malformed id is an error.
    async fn node(&self, ctx: &Context<'_>, id: ID) -> async_graphql::Result<Option<Node>> {
        let key = decode_id(&id).map_err(|e| bad_input(ErrorCode::BadId, e.to_string()))?;
        Ok(snap(ctx).get_key(&key).cloned().map(to_node))
    }

    /// Objects by global id, in order; null for ids that no longer exist.
    async fn nodes(
        &self,
        ctx: &Context<'_>,
        ids: Vec<ID>,
    ) -> async_graphql::Result<Vec<Option<Node>>> {
        if ids.len() > 500 {
            return Err(bad_input(
                ErrorCode::TooManyIds,
                format!("nodes accepts at most 500 ids (got {})", ids.len()),
            ));
        }
        let s = snap(ctx);
        ids.iter()
            .map(|id| {
                let key = decode_id(id).map_err(|e| bad_input(ErrorCode::BadId, e.to_string()))?;
                Ok(s.get_key(&key).cloned().map(to_node))
            })
            .collect()
    }

    /// The Vitistack singleton: the zone this management cluster runs, with its providers.
    async fn datacenter(&self, ctx: &Context<'_>) -> Option<VitistackObj> {
        datacenter_of(ctx).and_then(VitistackObj::new)
    }

    /// Name of the Vitistack (parity with the old `/v1/vitistack/name`).
    async fn vitistack_name(&self, ctx: &Context<'_>) -> Option<String> {
        datacenter_of(ctx).map(|v| v.name().to_string())
    }

    /// Server version (parity with the old `/v1/info/version`).
    async fn version(&self) -> VersionInfo {
        VersionInfo {
            version: crate::VERSION.to_string(),
            commit: crate::COMMIT.to_string(),
        }
    }

    /// A Machine by namespace and name.
    async fn machine(
        &self,
        ctx: &Context<'_>,
        namespace: String,
        name: String,
    ) -> Option<MachineObj> {
        one(
            snap(ctx).get(Kind::Machine, &namespace, &name),
            MachineObj::new,
        )
    }

    /// A KubernetesCluster by namespace and either its name or its clusterId.
    async fn cluster(
        &self,
        ctx: &Context<'_>,
        namespace: String,
        name: Option<String>,
        cluster_id: Option<String>,
    ) -> async_graphql::Result<Option<ClusterObj>> {
        let s = snap(ctx);
        match (name, cluster_id) {
            (Some(n), _) => Ok(one(
                s.get(Kind::KubernetesCluster, &namespace, &n),
                ClusterObj::new,
            )),
            (None, Some(id)) => Ok(one(
                s.lookup_one(Idx::ClusterById, &scoped(&namespace, &id)),
                ClusterObj::new,
            )),
            (None, None) => Err(bad_input(
                ErrorCode::MissingArgument,
                "cluster needs `name` or `clusterId`".into(),
            )),
        }
    }

    /// A NetworkNamespace by namespace and name.
    async fn network_namespace(
        &self,
        ctx: &Context<'_>,
        namespace: String,
        name: String,
    ) -> Option<NetworkNamespaceObj> {
        one(
            snap(ctx).get(Kind::NetworkNamespace, &namespace, &name),
            NetworkNamespaceObj::new,
        )
    }

    /// A MachineClass by name.
    async fn machine_class(&self, ctx: &Context<'_>, name: String) -> Option<MachineClassObj> {
        one(
            snap(ctx).get(Kind::MachineClass, "", &name),
            MachineClassObj::new,
        )
    }

    /// A MachineProvider by uid or name (parity with the old `/v1/machineproviders/{uid}`).
    async fn machine_provider(
        &self,
        ctx: &Context<'_>,
        uid: Option<String>,
        name: Option<String>,
    ) -> Option<MachineProviderObj> {
        one(
            by_uid_or_name(&snap(ctx), Kind::MachineProvider, uid, name),
            MachineProviderObj::new,
        )
    }

    /// A KubernetesProvider by uid or name (parity with the old `/v1/kubernetesproviders/{uid}`).
    async fn kubernetes_provider(
        &self,
        ctx: &Context<'_>,
        uid: Option<String>,
        name: Option<String>,
    ) -> Option<KubernetesProviderObj> {
        one(
            by_uid_or_name(&snap(ctx), Kind::KubernetesProvider, uid, name),
            KubernetesProviderObj::new,
        )
    }

    /// Machines, networks, storage and clusters in numbers.
    async fn infrastructure(&self, ctx: &Context<'_>) -> InfrastructureSummary {
        infrastructure_summary(&snap(ctx))
    }

    /// Clusters in numbers: total, Ready, failed, by phase and by pipeline stage.
    async fn cluster_summary(&self, ctx: &Context<'_>) -> ClusterSummary {
        cluster_summary(&snap(ctx))
    }

    /// Sequence number of the last change in the snapshot this query read.
    async fn sequence(&self, ctx: &Context<'_>) -> u64 {
        snap(ctx).seq()
    }

    /// Hosts and VMs in numbers: usage against limits, and how many hosts can fail.
    async fn host_capacity(&self, ctx: &Context<'_>) -> HostCapacity {
        let o = ctx
            .data_opt::<crate::domain::hosts::Overcommit>()
            .copied()
            .unwrap_or_default();
        host_capacity(&snap(ctx), o)
    }

    /// The event log, newest first: every change of the graph with its type, phases before and
    /// after and a diff (credentials blanked), filtered by object, kind, namespace, type and time.
    async fn events(
        &self,
        ctx: &Context<'_>,
        filter: Option<crate::graphql::history::EventFilter>,
        first: Option<i32>,
        after: Option<String>,
    ) -> async_graphql::Result<
        async_graphql::connection::Connection<String, crate::graphql::history::HistoryEvent>,
    > {
        crate::graphql::history::events(ctx, filter, first, after).await
    }

    /// Machines that went `Failed`, per UTC day for the last `days` days (every day listed).
    async fn machine_failures_per_day(
        &self,
        ctx: &Context<'_>,
        #[graphql(default = 30)] days: i32,
    ) -> async_graphql::Result<Vec<crate::graphql::history::DayCount>> {
        crate::graphql::history::failures_per_day(ctx, days).await
    }

    /// Where the data comes from and how current each kind is: show staleness instead of
    /// pretending to be live.
    async fn sources(&self, ctx: &Context<'_>) -> crate::source::status::OperatorsReport {
        // Staleness depends on the clock and the watches, not only on the snapshot.
        crate::graphql::mark_volatile(ctx);
        ctx.data_unchecked::<Arc<crate::source::status::SourceStatus>>()
            .report(&snap(ctx))
    }

    /// How the infrastructure operators (proxmox, talos, kea, kubevirt) are doing: judged from
    /// what the graph shows (their kinds served and current, their objects progressing) and
    /// their endpoints' answers when probed (`*_OPERATOR_ENDPOINT`).
    async fn operators(&self, ctx: &Context<'_>) -> Vec<crate::source::operators::OperatorHealth> {
        // Depends on the clock and the probes, not only on the snapshot.
        crate::graphql::mark_volatile(ctx);
        let judge = ctx.data_unchecked::<crate::source::operators::Judge>();
        crate::source::operators::judge(
            &snap(ctx),
            ctx.data_unchecked::<Arc<crate::source::status::SourceStatus>>(),
            &judge.probes,
            judge.stall,
        )
    }

    /// Who is asking: the principal of this request and its role (the dashboard offers
    /// changes only to an operator). Null outside a request (a subscription's event).
    async fn me(&self, ctx: &Context<'_>) -> Option<Me> {
        // The answer depends on the caller, not only on the snapshot.
        crate::graphql::mark_volatile(ctx);
        ctx.data_opt::<crate::auth::Principal>().map(|p| Me {
            name: p.name.to_string(),
            role: p.role,
            anonymous: p.is_anonymous(),
        })
    }
}

/// The caller of a request.
#[derive(async_graphql::SimpleObject)]
pub struct Me {
    /// `key:NAME`, `kubernetes:USER` or `anonymous`.
    pub name: String,
    /// What it may do.
    pub role: crate::auth::Role,
    /// True when no credential was sent (read from a trusted network).
    pub anonymous: bool,
}
