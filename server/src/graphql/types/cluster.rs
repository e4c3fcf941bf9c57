//! Tenant clusters and what hangs off them: KubernetesCluster with its pipeline and diagnosis,
//! KubernetesProvider, EtcdBackup, ClusterStorage, ClusterStorageClass.

use async_graphql::{Context, SimpleObject};

use super::{
    Conn, MachineClassObj, MachineObj, NetworkConfigurationObj, NetworkNamespaceObj, Node,
    NodeRole, VipObj, connection, many, node_type, one, snap, to_node,
};
use crate::domain::pipeline::{self, Stage, StepState};

/// The pipeline stage enum, as GraphQL names it.
pub type PipelineStage = Stage;
use crate::graphql::paging::{Filter, PageArgs, Sort};
use crate::model::{ANNOTATION_NODE_POOL, KubernetesCluster, Resource};
use crate::store::{Idx, scoped};

impl ClusterObj {
    /// The typed cluster.
    pub fn kc(&self) -> &KubernetesCluster {
        match &*self.0 {
            Resource::KubernetesCluster(k) => k,
            _ => unreachable!("ClusterObj wraps KubernetesClusters only"),
        }
    }
}

/// Control-plane topology.
#[derive(SimpleObject, Clone, Debug)]
#[graphql(complex)]
pub struct ControlPlane {
    /// Replicas (odd).
    pub replicas: i64,
    /// Kubernetes version.
    pub version: String,
    /// MachineClass name.
    pub machine_class_name: String,
    /// Machine provider type copied into each Machine (`kubevirt`).
    pub provider: String,
    #[graphql(skip)]
    datacenter: crate::model::Datacenter,
}

#[async_graphql::ComplexObject]
impl ControlPlane {
    /// The MachineClass.
    async fn machine_class(&self, ctx: &Context<'_>) -> Option<MachineClassObj> {
        class_named(ctx, &self.datacenter, &self.machine_class_name)
    }
}

/// The MachineClass with this name (cluster-scoped) in a datacenter.
fn class_named(
    ctx: &Context<'_>,
    datacenter: &crate::model::Datacenter,
    name: &str,
) -> Option<MachineClassObj> {
    one(
        snap(ctx).get(datacenter, crate::model::Kind::MachineClass, "", name),
        MachineClassObj::new,
    )
}

/// Autoscaling bounds of a node pool.
#[derive(SimpleObject, Clone, Debug)]
pub struct Autoscaling {
    /// Enabled.
    pub enabled: bool,
    /// Lower bound.
    pub min_replicas: i64,
    /// Upper bound.
    pub max_replicas: i64,
}

/// A worker node pool.
#[derive(SimpleObject, Clone, Debug)]
#[graphql(complex)]
pub struct NodePool {
    /// Pool name.
    pub name: String,
    /// Desired replicas.
    pub replicas: i64,
    /// MachineClass name.
    pub machine_class_name: String,
    /// Machine provider type.
    pub provider: String,
    /// Kubernetes version.
    pub version: String,
    /// Autoscaling bounds.
    pub autoscaling: Autoscaling,
    #[graphql(skip)]
    cluster: ClusterObj,
}

#[async_graphql::ComplexObject]
impl NodePool {
    /// The MachineClass.
    async fn machine_class(&self, ctx: &Context<'_>) -> Option<MachineClassObj> {
        class_named(ctx, self.cluster.0.datacenter(), &self.machine_class_name)
    }

    /// Machines of this pool (annotation `vitistack.io/nodepool`).
    async fn machines(&self, ctx: &Context<'_>) -> Vec<MachineObj> {
        cluster_machines(ctx, &self.cluster)
            .into_iter()
            .filter(|m| m.0.annotation(ANNOTATION_NODE_POOL) == Some(self.name.as_str()))
            .collect()
    }

    /// Machines of this pool that exist right now.
    async fn ready_replicas(&self, ctx: &Context<'_>) -> usize {
        cluster_machines(ctx, &self.cluster)
            .iter()
            .filter(|m| {
                m.0.annotation(ANNOTATION_NODE_POOL) == Some(self.name.as_str())
                    && m.0.phase() == Some("Running")
            })
            .count()
    }
}

fn cluster_machines(ctx: &Context<'_>, c: &ClusterObj) -> Vec<MachineObj> {
    many(
        snap(ctx).cluster_machines(&c.0).into_iter(),
        MachineObj::new,
    )
}

/// A cluster's Machines as nodes.
#[derive(SimpleObject, Clone, Debug)]
pub struct ClusterNodes {
    /// Machines.
    pub total: usize,
    /// Running.
    pub ready: usize,
    /// Not Running.
    pub unready: usize,
}

/// A cluster's network.
#[derive(SimpleObject, Clone, Debug)]
pub struct ClusterNetworking {
    /// `spec.data.networkNamespaceName`.
    pub network_namespace: String,
    /// The NetworkNamespace's `status.ipv4Prefix`.
    pub ipv4_prefix: Option<String>,
    /// The NetworkNamespace's `status.vlanId`.
    pub vlan_id: Option<i64>,
    /// The control-plane VIP's `status.loadBalancerIps`.
    pub control_plane_addresses: Vec<String>,
}

/// The operators a cluster depends on.
#[derive(SimpleObject, Clone, Debug)]
#[graphql(name = "ClusterOperatorSet")]
pub struct ClusterOperators {
    /// Every operator it depends on (`talos`, `kubevirt`, `nms`, `static-ip`, …).
    pub installed: Vec<String>,
    /// Those of them healthy now.
    pub healthy: Vec<String>,
}

/// An API endpoint of the cluster.
#[derive(SimpleObject, Clone, Debug)]
pub struct Endpoint {
    /// Name.
    pub name: String,
    /// Address.
    pub address: String,
}

/// One stage of the pipeline.
#[derive(SimpleObject, Clone, Debug)]
pub struct PipelineStep {
    /// The stage.
    pub stage: PipelineStage,
    /// Its state.
    pub state: StepState,
    /// What was seen.
    pub detail: String,
}

/// Where the cluster is in the operators' pipeline.
#[derive(SimpleObject, Clone, Debug)]
pub struct Pipeline {
    /// The first stage not done (READY when all are).
    pub stage: PipelineStage,
    /// Every stage in order.
    pub steps: Vec<PipelineStep>,
}

/// What holds a cluster up (or, for a Ready cluster, what is not healthy).
#[derive(SimpleObject, Clone)]
#[graphql(complex)]
pub struct Blocker {
    /// The pipeline stage it belongs to.
    pub stage: PipelineStage,
    /// Kind of the blocking object.
    pub kind: String,
    /// Its namespace.
    pub namespace: Option<String>,
    /// Its name.
    pub name: String,
    /// Why it blocks, in plain words.
    pub reason: String,
    /// True when the operators will not retry without a change (Ready=False/Error, Failed).
    pub terminal: bool,
    #[graphql(skip)]
    object: Option<std::sync::Arc<Resource>>,
}

#[async_graphql::ComplexObject]
impl Blocker {
    /// The blocking object; null when it does not exist (which is then the reason).
    async fn object(&self) -> Option<Node> {
        self.object.clone().map(to_node)
    }
}

/// Why a cluster is (not) Ready.
#[derive(SimpleObject, Clone)]
pub struct Diagnosis {
    /// The cluster is Ready (its own status says so).
    pub ready: bool,
    /// Ready, but an object it depends on is not healthy now (see `warnings`).
    pub degraded: bool,
    /// The stage it is at.
    pub stage: PipelineStage,
    /// Some blocker is terminal.
    pub failed: bool,
    /// One sentence.
    pub summary: String,
    /// Every blocking object with its stage and reason, terminal ones first, then in pipeline
    /// order (past the current stage only real problems, not objects the operators have not
    /// reached yet). Empty when Ready.
    pub blockers: Vec<Blocker>,
    /// For a Ready cluster: the objects it depends on that are not healthy now.
    pub warnings: Vec<Blocker>,
}

fn blocker(b: pipeline::Blocker) -> Blocker {
    Blocker {
        stage: b.stage,
        kind: b.key.kind.name().to_string(),
        namespace: Some(b.key.namespace.to_string()).filter(|n| !n.is_empty()),
        name: b.key.name.to_string(),
        reason: b.reason,
        terminal: b.terminal,
        object: b.object,
    }
}

/// Build the GraphQL diagnosis of a cluster.
pub fn diagnose(snapshot: &crate::store::Snapshot, c: &ClusterObj) -> Diagnosis {
    let p = pipeline::evaluate(snapshot, c.kc());
    Diagnosis {
        ready: p.ready(),
        degraded: p.degraded(),
        stage: p.stage,
        failed: p.failed(),
        summary: p.summary(
            &c.0.meta()
                .namespace
                .as_deref()
                .map(|ns| format!("KubernetesCluster {ns}/{}", c.0.name()))
                .unwrap_or_default(),
        ),
        blockers: p.blockers.into_iter().map(blocker).collect(),
        warnings: p.warnings.into_iter().map(blocker).collect(),
    }
}

node_type! {
    /// `KubernetesCluster`: a tenant cluster talos-operator builds from Machines.
    ClusterObj, "KubernetesCluster", KubernetesCluster; {
        /// Its newest events, newest first (from the event log; `first` up to MAX_PAGE_SIZE).
        async fn history(&self, ctx: &Context<'_>, #[graphql(default = 20)] first: i32) -> async_graphql::Result<Vec<crate::graphql::history::HistoryEvent>> {
            crate::graphql::history::object_history(ctx, &self.0.uid(), first).await
        }
        /// The phases it went through, from the event log.
        async fn phase_timeline(&self, ctx: &Context<'_>) -> async_graphql::Result<Vec<crate::graphql::history::PhaseSpan>> {
            crate::graphql::history::object_timeline(ctx, &self.0.uid()).await
        }
        /// Seconds from creation until it first became `Ready` (null while it never has).
        async fn time_to_ready_seconds(&self, ctx: &Context<'_>) -> async_graphql::Result<Option<f64>> {
            crate::graphql::history::object_time_to(ctx, &self.0, "Ready").await
        }
        /// `spec.data.clusterId`: the value of the `vitistack.io/clusterid` label on its children.
        async fn cluster_id(&self) -> &str { &self.kc().spec.data.cluster_id }
        /// `spec.data.clusterUid`.
        async fn cluster_uid(&self) -> &str { &self.kc().spec.data.cluster_uid }
        /// `spec.data.provider` (the Kubernetes provider: talos, aks).
        async fn provider(&self) -> &str { &self.kc().spec.data.provider }
        /// `spec.data.environment`.
        async fn environment(&self) -> &str { &self.kc().spec.data.environment }
        /// `spec.data.datacenter`.
        async fn datacenter_name(&self) -> &str { &self.kc().spec.data.datacenter }
        /// `spec.data.region`.
        async fn region(&self) -> &str { &self.kc().spec.data.region }
        /// `spec.data.zone`.
        async fn zone(&self) -> &str { &self.kc().spec.data.zone }
        /// `spec.data.project`.
        async fn project(&self) -> &str { &self.kc().spec.data.project }
        /// `spec.data.workspace`.
        async fn workspace(&self) -> &str { &self.kc().spec.data.workspace }
        /// `spec.data.workorder`.
        async fn workorder(&self) -> &str { &self.kc().spec.data.workorder }
        /// `spec.topology.version`.
        async fn version(&self) -> &str { &self.kc().spec.topology.version }
        /// `status.message`.
        async fn message(&self) -> Option<&str> { self.kc().status.as_ref()?.message.as_deref() }
        /// `status.workers`.
        async fn workers_ready(&self) -> Option<i64> { self.kc().status.as_ref()?.workers.get() }
        /// Control-plane topology.
        async fn control_plane(&self) -> ControlPlane {
            let cp = &self.kc().spec.topology.controlplane;
            ControlPlane { replicas: cp.replicas, version: cp.version.to_string(), machine_class_name: cp.machine_class.to_string(), provider: cp.provider.to_string(), datacenter: self.0.datacenter().clone() }
        }
        /// Worker node pools.
        async fn node_pools(&self) -> Vec<NodePool> {
            self.kc().spec.topology.workers.node_pools.iter().map(|p| NodePool {
                name: p.name.to_string(), replicas: p.replicas, machine_class_name: p.machine_class.to_string(), provider: p.provider.to_string(),
                version: p.version.to_string(),
                autoscaling: Autoscaling { enabled: p.autoscaling.enabled, min_replicas: p.autoscaling.min_replicas, max_replicas: p.autoscaling.max_replicas },
                cluster: self.clone(),
            }).collect()
        }
        /// Desired machines: control-plane replicas plus every pool's replicas.
        async fn desired_machines(&self) -> i64 {
            let t = &self.kc().spec.topology;
            t.controlplane.replicas.saturating_add(t.worker_replicas())
        }
        /// Its Machines as nodes: how many, how many Running, how many not (the old cluster
        /// model's `nodes`; named so here because `nodes` is a connection's list in GraphQL).
        async fn node_counts(&self, ctx: &Context<'_>) -> ClusterNodes {
            let s = snap(ctx);
            let machines = s.cluster_machines(&self.0);
            let ready = machines.iter().filter(|m| m.phase() == Some("Running")).count();
            ClusterNodes { total: machines.len(), ready, unready: machines.len() - ready }
        }
        /// Its KubeVirt VMs in figures: how many, running, vCPUs, memory, hosts, in error.
        async fn vm_totals(&self, ctx: &Context<'_>) -> crate::domain::hosts::VmTotals {
            crate::domain::hosts::cluster_vm_totals(&snap(ctx), self.0.datacenter(), self.0.namespace(), &self.kc().spec.data.cluster_id)
        }
        /// Its network (the old cluster model's `networking`): the NetworkNamespace's prefix and
        /// VLAN and the control-plane VIP's addresses. The KubernetesCluster carries no pod or
        /// service CIDR; Talos picks those.
        async fn networking(&self, ctx: &Context<'_>) -> ClusterNetworking {
            let s = snap(ctx);
            let (dc, ns) = (self.0.datacenter(), self.0.namespace());
            let nn = s.get(dc, crate::model::Kind::NetworkNamespace, ns, &self.kc().spec.data.network_namespace_name).cloned().and_then(NetworkNamespaceObj::new);
            let vip = s.get(dc, crate::model::Kind::ControlPlaneVirtualSharedIp, ns, &self.kc().spec.data.cluster_id);
            ClusterNetworking {
                network_namespace: self.kc().spec.data.network_namespace_name.to_string(),
                ipv4_prefix: nn.as_ref().and_then(|n| n.status_field(|s| s.ipv4_prefix.clone(), |s| s.ipv4_prefix.clone())).map(String::from),
                vlan_id: nn.as_ref().and_then(|n| n.status_field(|s| s.vlan_id.get(), |s| s.vlan_id.get())),
                control_plane_addresses: vip.and_then(|v| match v.as_ref() {
                    Resource::ControlPlaneVirtualSharedIp(v) => v.status.as_ref()?.load_balancer_ips.as_deref().map(crate::model::to_strings),
                    _ => None,
                }).unwrap_or_default(),
            }
        }
        /// The operators it depends on (talos, its machines', its network's provisioner and
        /// allocators, its VIP's) and those of them healthy now (the old cluster model's
        /// `operators`).
        async fn operators(&self, ctx: &Context<'_>) -> ClusterOperators {
            let installed = crate::domain::operators::serving(&snap(ctx), &self.0);
            let report = crate::graphql::operators_now(ctx);
            let healthy = installed.iter().filter(|o| report.iter().any(|r| r.operator == o.name() && r.status == crate::domain::operators::OperatorState::Healthy)).map(|o| o.name().to_string()).collect();
            ClusterOperators { installed: installed.iter().map(|o| o.name().to_string()).collect(), healthy }
        }
        /// The latest time it says it changed (RFC 3339): its creation, a condition's
        /// transition or the `status.state.lastUpdated` its operator wrote (the old cluster
        /// model's `updatedAt`).
        async fn updated_at(&self) -> Option<String> {
            Some(crate::domain::summary::last_updated(&self.0)).filter(|t| !t.is_empty())
        }
        /// `status.state.endpoints`.
        async fn endpoints(&self) -> Vec<Endpoint> {
            self.kc().status.as_ref().map(|s| s.state.endpoints.iter().map(|e| Endpoint { name: e.name.to_string(), address: e.address.to_string() }).collect()).unwrap_or_default()
        }
        /// Machines labelled `vitistack.io/clusterid=<clusterId>` in the cluster's namespace (or,
        /// as older talos-operator releases labelled them, `cluster.vitistack.io/cluster-name=<name>`).
        #[allow(clippy::too_many_arguments)]
        async fn machines(&self, ctx: &Context<'_>, role: Option<NodeRole>, node_pool: Option<String>, filter: Option<Filter>, sort: Option<Sort>,
                          after: Option<String>, before: Option<String>, first: Option<i32>, last: Option<i32>) -> async_graphql::Result<Conn<MachineObj>> {
            let s = snap(ctx);
            let mut items: Vec<_> = s.cluster_machines(&self.0).into_iter().cloned().collect();
            if let Some(narrow) = crate::graphql::narrow::machines(&s, role, node_pool, None) {
                items.retain(|m| (narrow.keep)(m));
            }
            connection(ctx, items, filter.as_ref(), sort, PageArgs { after, before, first, last }, MachineObj::new).await
        }
        /// The Helm applications running on it, where the inventory watches it: those of the
        /// cluster whose `kube-system` UID its `vitistack.io/kube-system-uid` annotation names.
        async fn applications(&self, ctx: &Context<'_>) -> async_graphql::Result<Vec<crate::graphql::applications::ApplicationObj>> {
            crate::graphql::applications::on_cluster(ctx, self.0.annotation(crate::model::ANNOTATION_KUBE_SYSTEM_UID))
        }
        /// The NetworkNamespace named by `spec.data.networkNamespaceName`.
        async fn network_namespace(&self, ctx: &Context<'_>) -> Option<NetworkNamespaceObj> {
            one(snap(ctx).get(self.0.datacenter(), crate::model::Kind::NetworkNamespace, self.0.namespace(), &self.kc().spec.data.network_namespace_name), NetworkNamespaceObj::new)
        }
        /// The ControlPlaneVirtualSharedIP named after the clusterId.
        async fn control_plane_vip(&self, ctx: &Context<'_>) -> Option<VipObj> {
            let s = snap(ctx);
            one(s.get(self.0.datacenter(), crate::model::Kind::ControlPlaneVirtualSharedIp, self.0.namespace(), &self.kc().spec.data.cluster_id)
                .or_else(|| s.lookup_one(self.0.datacenter(), Idx::VipByCluster, &scoped(self.0.namespace(), &self.kc().spec.data.cluster_id))), VipObj::new)
        }
        /// NetworkConfigurations labelled with the cluster id (VIP configurations).
        async fn vip_network_configurations(&self, ctx: &Context<'_>) -> Vec<NetworkConfigurationObj> {
            many(snap(ctx).lookup(self.0.datacenter(), Idx::ConfigByCluster, &scoped(self.0.namespace(), &self.kc().spec.data.cluster_id)), NetworkConfigurationObj::new)
        }
        /// EtcdBackups naming this cluster.
        async fn etcd_backups(&self, ctx: &Context<'_>) -> Vec<EtcdBackupObj> {
            let s = snap(ctx);
            let mut out = many(s.lookup(self.0.datacenter(), Idx::BackupByCluster, &scoped(self.0.namespace(), &self.kc().spec.data.cluster_id)), EtcdBackupObj::new);
            if self.0.name() != &*self.kc().spec.data.cluster_id {
                out.extend(many(s.lookup(self.0.datacenter(), Idx::BackupByCluster, &scoped(self.0.namespace(), self.0.name())), EtcdBackupObj::new));
            }
            out
        }
        /// ClusterStorages for this cluster id.
        async fn cluster_storages(&self, ctx: &Context<'_>) -> Vec<ClusterStorageObj> {
            many(snap(ctx).lookup(self.0.datacenter(), Idx::StorageByCluster, &scoped(self.0.namespace(), &self.kc().spec.data.cluster_id)), ClusterStorageObj::new)
        }
        /// KubernetesProviders of this cluster's provider type (matched by type, never by name).
        async fn kubernetes_providers(&self, ctx: &Context<'_>) -> Vec<KubernetesProviderObj> {
            many(snap(ctx).lookup(self.0.datacenter(), Idx::KubernetesProviderByType, &self.kc().spec.data.provider), KubernetesProviderObj::new)
        }
        /// Where the cluster is in the operators' pipeline.
        async fn pipeline(&self, ctx: &Context<'_>) -> Pipeline {
            let p = pipeline::evaluate(&snap(ctx), self.kc());
            Pipeline {
                stage: p.stage,
                steps: p.steps.into_iter().map(|s| PipelineStep { stage: s.stage, state: s.state, detail: s.detail }).collect(),
            }
        }
        /// Why the cluster is not Ready: the blocking objects and the reasons in plain words.
        async fn diagnosis(&self, ctx: &Context<'_>) -> Diagnosis {
            diagnose(&snap(ctx), self)
        }
    }
}

node_type! {
    /// `KubernetesProvider`: a kind of Kubernetes the stack can build (cluster-scoped).
    KubernetesProviderObj, "KubernetesProvider", KubernetesProvider; {
        /// `spec.providerType` (aks, talos).
        async fn provider_type(&self) -> Option<&str> { match &*self.0 { Resource::KubernetesProvider(p) => Some(&p.spec.provider_type), _ => None } }
        /// `spec.displayName`.
        async fn display_name(&self) -> Option<&str> { match &*self.0 { Resource::KubernetesProvider(p) => Some(&p.spec.display_name), _ => None } }
        /// `spec.version`.
        async fn version(&self) -> Option<&str> { match &*self.0 { Resource::KubernetesProvider(p) => Some(&p.spec.version), _ => None } }
        /// `spec.region`.
        async fn region(&self) -> Option<&str> { match &*self.0 { Resource::KubernetesProvider(p) => Some(&p.spec.region), _ => None } }
        /// `status.nodeCount`.
        async fn node_count(&self) -> Option<i64> { match &*self.0 { Resource::KubernetesProvider(p) => p.status.as_ref()?.node_count.get(), _ => None } }
        /// The MachineProvider named by `spec.machineProviderRef`.
        async fn machine_provider(&self, ctx: &Context<'_>) -> Option<super::MachineProviderObj> {
            let Resource::KubernetesProvider(p) = &*self.0 else { return None };
            one(snap(ctx).get(self.0.datacenter(), crate::model::Kind::MachineProvider, "", &p.spec.machine_provider_ref.as_ref()?.name), super::MachineProviderObj::new)
        }
        /// Clusters whose `spec.data.provider` is this provider's type.
        async fn clusters(&self, ctx: &Context<'_>, filter: Option<Filter>, sort: Option<Sort>, after: Option<String>, first: Option<i32>) -> async_graphql::Result<Conn<ClusterObj>> {
            let Resource::KubernetesProvider(p) = &*self.0 else { return Err("not a KubernetesProvider".into()) };
            let items = snap(ctx).lookup(self.0.datacenter(), Idx::ClusterByProvider, &p.spec.provider_type).cloned().collect();
            connection(ctx, items, filter.as_ref(), sort, PageArgs { after, first, ..Default::default() }, ClusterObj::new).await
        }
    }
}

node_type! {
    /// `EtcdBackup`: a backup schedule for a cluster's etcd.
    EtcdBackupObj, "EtcdBackup", EtcdBackup; {
        /// `spec.clusterName`.
        async fn cluster_name(&self) -> Option<&str> { match &*self.0 { Resource::EtcdBackup(b) => Some(&b.spec.cluster_name), _ => None } }
        /// `spec.schedule` (cron).
        async fn schedule(&self) -> Option<&str> { match &*self.0 { Resource::EtcdBackup(b) => b.spec.schedule.as_deref(), _ => None } }
        /// `spec.retention`.
        async fn retention(&self) -> Option<i64> { match &*self.0 { Resource::EtcdBackup(b) => b.spec.retention.get(), _ => None } }
        /// `spec.storageLocation.type`.
        async fn storage_type(&self) -> Option<&str> { match &*self.0 { Resource::EtcdBackup(b) => Some(&b.spec.storage_location.r#type), _ => None } }
        /// `status.lastBackupTime`.
        async fn last_backup_time(&self) -> Option<String> { match &*self.0 { Resource::EtcdBackup(b) => b.status.as_ref()?.last_backup_time.get().map(|t| t.to_string()), _ => None } }
        /// `status.backupCount`.
        async fn backup_count(&self) -> Option<i64> { match &*self.0 { Resource::EtcdBackup(b) => b.status.as_ref()?.backup_count.get(), _ => None } }
        /// The cluster, by clusterId or metadata.name in the same namespace.
        async fn cluster(&self, ctx: &Context<'_>) -> Option<ClusterObj> {
            let Resource::EtcdBackup(b) = &*self.0 else { return None };
            let s = snap(ctx);
            one(s.lookup_one(self.0.datacenter(), Idx::ClusterById, &scoped(self.0.namespace(), &b.spec.cluster_name))
                .or_else(|| s.get(self.0.datacenter(), crate::model::Kind::KubernetesCluster, self.0.namespace(), &b.spec.cluster_name)), ClusterObj::new)
        }
    }
}

node_type! {
    /// `ClusterStorage`: storage deployed for a cluster.
    ClusterStorageObj, "ClusterStorage", ClusterStorage; {
        /// `spec.clusterId`.
        async fn cluster_id(&self) -> Option<&str> { match &*self.0 { Resource::ClusterStorage(s) => Some(&s.spec.cluster_id), _ => None } }
        /// `spec.type`.
        async fn storage_type(&self) -> Option<&str> { match &*self.0 { Resource::ClusterStorage(s) => Some(&s.spec.r#type), _ => None } }
        /// `status.message`.
        async fn message(&self) -> Option<&str> { match &*self.0 { Resource::ClusterStorage(s) => s.status.as_ref()?.message.as_deref(), _ => None } }
        /// The cluster.
        async fn cluster(&self, ctx: &Context<'_>) -> Option<ClusterObj> {
            let Resource::ClusterStorage(s) = &*self.0 else { return None };
            one(snap(ctx).lookup_one(self.0.datacenter(), Idx::ClusterById, &scoped(self.0.namespace(), &s.spec.cluster_id)), ClusterObj::new)
        }
        /// The ClusterStorageClass.
        async fn storage_class(&self, ctx: &Context<'_>) -> Option<ClusterStorageClassObj> {
            let Resource::ClusterStorage(s) = &*self.0 else { return None };
            one(snap(ctx).get(self.0.datacenter(), crate::model::Kind::ClusterStorageClass, "", &s.spec.cluster_storage_class), ClusterStorageClassObj::new)
        }
    }
}

node_type! {
    /// `ClusterStorageClass`: a kind of storage clusters can get (cluster-scoped).
    ClusterStorageClassObj, "ClusterStorageClass", ClusterStorageClass; {
        /// `spec.enabled`.
        async fn enabled(&self) -> bool { matches!(&*self.0, Resource::ClusterStorageClass(c) if c.spec.enabled) }
        /// `spec.type`.
        async fn storage_type(&self) -> Option<&str> { match &*self.0 { Resource::ClusterStorageClass(c) => Some(&c.spec.r#type), _ => None } }
        /// `spec.version`.
        async fn version(&self) -> Option<&str> { match &*self.0 { Resource::ClusterStorageClass(c) => Some(&c.spec.version), _ => None } }
        /// ClusterStorages of this class.
        async fn cluster_storages(&self, ctx: &Context<'_>) -> Vec<ClusterStorageObj> {
            many(snap(ctx).lookup(self.0.datacenter(), Idx::StorageByClass, self.0.name()), ClusterStorageObj::new)
        }
    }
}
