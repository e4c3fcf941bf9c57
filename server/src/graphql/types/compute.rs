//! Machines and what they are made from: MachineClass, MachineProvider, KubevirtConfig, ProxmoxConfig.

use async_graphql::{Context, SimpleObject};

use super::{
    ClusterObj, Conn, NetworkConfigurationObj, NetworkNamespaceObj, connection, many, node_type,
    one, snap,
};
use crate::graphql::paging::{Filter, PageArgs, Sort};
use crate::model::{
    ANNOTATION_KUBEVIRT_CONFIG, ANNOTATION_NODE_POOL, Kind, Machine, MachineClass, MachineProvider,
    Resource,
};
use crate::store::{Idx, Snapshot};

/// CPU topology.
#[derive(SimpleObject, Clone, Debug, Default)]
pub struct CpuTopology {
    /// Cores per socket.
    pub cores: i64,
    /// Sockets.
    pub sockets: i64,
    /// Threads per core.
    pub threads: i64,
    /// sockets × cores × threads.
    pub vcpus: i64,
}

impl CpuTopology {
    fn new(cores: i64, sockets: i64, threads: i64) -> Self {
        CpuTopology {
            cores: cores.max(1),
            sockets: sockets.max(1),
            threads: threads.max(1),
            vcpus: crate::domain::resources::vcpus(cores, sockets, threads),
        }
    }
}

/// A disk as requested in the Machine spec.
#[derive(SimpleObject, Clone, Debug)]
pub struct MachineDisk {
    /// Disk name.
    pub name: Option<String>,
    /// Size in GB.
    pub size_gb: Option<i64>,
    /// Bus type (virtio, sata, scsi).
    #[graphql(name = "type")]
    pub type_: Option<String>,
    /// Boot disk.
    pub boot: bool,
    /// Encrypted.
    pub encrypted: bool,
}

/// Operating system of a Machine.
#[derive(SimpleObject, Clone, Debug, Default)]
pub struct OperatingSystem {
    /// Family (linux).
    pub family: Option<String>,
    /// Distribution (talos, debian).
    pub distribution: Option<String>,
    /// Version.
    pub version: Option<String>,
    /// Architecture.
    pub architecture: Option<String>,
}

/// A NIC as the machine operator observed it.
#[derive(SimpleObject, Clone, Debug)]
pub struct MachineInterface {
    /// Interface name.
    pub name: Option<String>,
    /// MAC address.
    pub mac_address: Option<String>,
    /// IPv4 addresses.
    pub ip_addresses: Vec<String>,
    /// IPv6 addresses.
    pub ipv6_addresses: Vec<String>,
    /// Link state.
    pub state: Option<String>,
}

/// Node role of a Machine in its cluster.
#[derive(async_graphql::Enum, Copy, Clone, Debug, PartialEq, Eq)]
pub enum NodeRole {
    /// `vitistack.io/node-role: control-plane`.
    ControlPlane,
    /// `vitistack.io/node-role: worker`.
    Worker,
}

impl NodeRole {
    /// The label value.
    pub fn label(self) -> &'static str {
        match self {
            NodeRole::ControlPlane => "control-plane",
            NodeRole::Worker => "worker",
        }
    }
}

/// The effective resources of a Machine: spec overrides, else its MachineClass.
#[derive(SimpleObject, Clone, Debug, Default)]
pub struct MachineResources {
    /// Virtual CPUs (sockets × cores × threads).
    pub vcpus: i64,
    /// Memory in bytes.
    pub memory_bytes: Option<super::Long>,
    /// Sum of disk sizes in GB.
    pub disk_gb: i64,
}

impl MachineObj {
    fn m(&self) -> &Machine {
        match &*self.0 {
            Resource::Machine(m) => m,
            _ => unreachable!("MachineObj wraps Machines only"),
        }
    }

    /// Effective resources, with the MachineClass looked up in `snapshot`.
    pub fn resources_in(&self, snapshot: &Snapshot) -> MachineResources {
        let r = crate::domain::resources::of(snapshot, self.m());
        MachineResources {
            vcpus: r.vcpus,
            memory_bytes: r.memory_bytes.map(super::Long),
            disk_gb: r.disk_gb,
        }
    }
}

node_type! {
    /// `Machine`: one VM, created by talos-operator for a cluster, realised by a machine operator.
    MachineObj, "Machine", Machine; {
        /// Its newest events, newest first (from the event log; `first` up to MAX_PAGE_SIZE).
        async fn history(&self, ctx: &Context<'_>, #[graphql(default = 20)] first: i32) -> async_graphql::Result<Vec<crate::graphql::history::HistoryEvent>> {
            crate::graphql::history::object_history(ctx, &self.0.uid(), first).await
        }
        /// The phases it went through (Pending, Running, Failed, …), from the event log.
        async fn phase_timeline(&self, ctx: &Context<'_>) -> async_graphql::Result<Vec<crate::graphql::history::PhaseSpan>> {
            crate::graphql::history::object_timeline(ctx, &self.0.uid()).await
        }
        /// Seconds from creation until it first ran (null while it never has).
        async fn time_to_running_seconds(&self, ctx: &Context<'_>) -> async_graphql::Result<Option<f64>> {
            crate::graphql::history::object_time_to(ctx, &self.0, "Running").await
        }
        /// `spec.name` (the VM name; not always metadata.name).
        async fn spec_name(&self) -> Option<&str> { self.m().spec.name.as_deref() }
        /// `spec.provider`: which machine operator handles it (kubevirt, proxmox).
        async fn provider(&self) -> &str { &self.m().spec.provider }
        /// `spec.machineClass`.
        async fn machine_class_name(&self) -> Option<&str> { self.m().spec.machine_class.as_deref() }
        /// Role in its cluster, from label `vitistack.io/node-role` (or the older
        /// `cluster.vitistack.io/role`).
        async fn role(&self) -> Option<NodeRole> {
            match self.0.node_role()? {
                "control-plane" => Some(NodeRole::ControlPlane),
                "worker" => Some(NodeRole::Worker),
                _ => None,
            }
        }
        /// Node pool, from annotation `vitistack.io/nodepool`.
        async fn node_pool(&self) -> Option<&str> { self.0.annotation(ANNOTATION_NODE_POOL) }
        /// The clusterId of its cluster: its `vitistack.io/clusterid` label, else that of the
        /// cluster its `cluster.vitistack.io/cluster-name` label names.
        async fn cluster_id(&self, ctx: &Context<'_>) -> Option<String> {
            snap(ctx).machine_cluster_id(&self.0).map(String::from)
        }
        /// `status.state` (KubeVirt printable status, Proxmox state).
        async fn state(&self) -> Option<&str> { self.m().status.as_ref()?.state.as_deref() }
        /// `status.message`.
        async fn message(&self) -> Option<&str> { self.m().status.as_ref()?.message.as_deref() }
        /// `status.failureReason`.
        async fn failure_reason(&self) -> Option<&str> { self.m().status.as_ref()?.failure_reason.as_deref() }
        /// `status.failureMessage`.
        async fn failure_message(&self) -> Option<&str> { self.m().status.as_ref()?.failure_message.as_deref() }
        /// `status.hostname`.
        async fn hostname(&self) -> Option<&str> { self.m().status.as_ref()?.hostname.as_deref() }
        /// `status.ipAddresses`.
        async fn ip_addresses(&self) -> Vec<String> { crate::model::to_strings(self.m().status.as_ref().and_then(|s| s.ip_addresses.as_deref()).unwrap_or_default()) }
        /// `status.publicIPAddresses` (IPs of named interfaces; not necessarily public).
        async fn public_ip_addresses(&self) -> Vec<String> { crate::model::to_strings(self.m().status.as_ref().and_then(|s| s.public_ip_addresses.as_deref()).unwrap_or_default()) }
        /// `status.privateIPAddresses`.
        async fn private_ip_addresses(&self) -> Vec<String> { crate::model::to_strings(self.m().status.as_ref().and_then(|s| s.private_ip_addresses.as_deref()).unwrap_or_default()) }
        /// `status.networkInterfaces`.
        async fn network_interfaces(&self) -> Vec<MachineInterface> {
            self.m().status.as_ref().and_then(|s| s.network_interfaces.as_ref()).into_iter().flatten().map(|i| MachineInterface {
                name: i.name.as_deref().map(String::from), mac_address: i.mac_address.as_deref().map(String::from), ip_addresses: crate::model::to_strings(i.ip_addresses.as_deref().unwrap_or_default()),
                ipv6_addresses: crate::model::to_strings(i.ipv6_addresses.as_deref().unwrap_or_default()), state: i.state.as_deref().map(String::from),
            }).collect()
        }
        /// `spec.cpu` as requested (null when the MachineClass decides).
        async fn cpu(&self) -> Option<CpuTopology> {
            let c = self.m().spec.cpu.as_ref()?;
            Some(CpuTopology::new(c.cores.get().unwrap_or(1), c.sockets.get().unwrap_or(1), c.threads_per_core.get().unwrap_or(1)))
        }
        /// `spec.memory` override in bytes.
        async fn memory_bytes(&self) -> Option<super::Long> { self.m().spec.memory.get().map(super::Long) }
        /// Effective vCPUs, memory and disk: spec overrides, else the MachineClass.
        async fn resources(&self, ctx: &Context<'_>) -> MachineResources { self.resources_in(&snap(ctx)) }
        /// `spec.disks`.
        async fn disks(&self) -> Vec<MachineDisk> {
            self.m().spec.disks.iter().flatten().map(|d| MachineDisk {
                name: d.name.as_deref().map(String::from), size_gb: d.size_gb.get(), type_: d.r#type.as_deref().map(String::from), boot: d.boot.unwrap_or(false), encrypted: d.encrypted.unwrap_or(false),
            }).collect()
        }
        /// `spec.os`.
        async fn os(&self) -> Option<OperatingSystem> {
            let o = self.m().spec.os.as_ref()?;
            Some(OperatingSystem { family: o.family.as_deref().map(String::from), distribution: o.distribution.as_deref().map(String::from), version: o.version.as_deref().map(String::from), architecture: o.architecture.as_deref().map(String::from) })
        }
        /// The KubernetesCluster, by label `vitistack.io/clusterid` in the same namespace (or
        /// `cluster.vitistack.io/cluster-name`, its name).
        async fn cluster(&self, ctx: &Context<'_>) -> Option<ClusterObj> {
            one(snap(ctx).machine_cluster(&self.0), ClusterObj::new)
        }
        /// The MachineClass named by `spec.machineClass`.
        async fn machine_class(&self, ctx: &Context<'_>) -> Option<MachineClassObj> {
            let name = self.m().spec.machine_class.as_deref()?;
            one(snap(ctx).get(self.0.datacenter(), Kind::MachineClass, "", name), MachineClassObj::new)
        }
        /// The NetworkConfiguration with the same name (the Machine's IP request and result).
        async fn network_configuration(&self, ctx: &Context<'_>) -> Option<NetworkConfigurationObj> {
            one(snap(ctx).get(self.0.datacenter(), Kind::NetworkConfiguration, self.0.namespace(), self.0.name()), NetworkConfigurationObj::new)
        }
        /// The NetworkNamespace named by `spec.network.networkNamespaceName`.
        async fn network_namespace(&self, ctx: &Context<'_>) -> Option<NetworkNamespaceObj> {
            let nn = self.m().spec.network.as_ref()?.network_namespace_name.as_deref()?;
            one(snap(ctx).get(self.0.datacenter(), Kind::NetworkNamespace, self.0.namespace(), nn), NetworkNamespaceObj::new)
        }
        /// The KubevirtConfig named by annotation `vitistack.io/kubevirt-config`.
        async fn kubevirt_config(&self, ctx: &Context<'_>) -> Option<KubevirtConfigObj> {
            let name = self.0.annotation(ANNOTATION_KUBEVIRT_CONFIG)?;
            one(snap(ctx).get(self.0.datacenter(), Kind::KubevirtConfig, "", name), KubevirtConfigObj::new)
        }
        /// MachineProviders whose `providerType` equals `spec.provider`.
        async fn machine_providers(&self, ctx: &Context<'_>) -> Vec<MachineProviderObj> {
            many(snap(ctx).lookup(self.0.datacenter(), Idx::MachineProviderByType, &self.m().spec.provider), MachineProviderObj::new)
        }
    }
}

impl MachineClassObj {
    fn c(&self) -> &MachineClass {
        match &*self.0 {
            Resource::MachineClass(c) => c,
            _ => unreachable!("MachineClassObj wraps MachineClasses only"),
        }
    }
}

/// Memory of a MachineClass.
#[derive(SimpleObject, Clone, Debug)]
pub struct ClassMemory {
    /// As written (`16Gi`).
    pub quantity: String,
    /// In bytes.
    pub bytes: Option<super::Long>,
    /// Lower bound in bytes.
    pub min_bytes: Option<super::Long>,
    /// Upper bound in bytes.
    pub max_bytes: Option<super::Long>,
}

/// GPU of a MachineClass.
#[derive(SimpleObject, Clone, Debug)]
pub struct Gpu {
    /// GPU cores.
    pub cores: i64,
    /// Manufacturer.
    pub manufacturer: Option<String>,
}

node_type! {
    /// `MachineClass`: a size in the catalogue (cluster-scoped).
    MachineClassObj, "MachineClass", MachineClass; {
        /// `spec.displayName`.
        async fn display_name(&self) -> Option<&str> { self.c().spec.display_name.as_deref() }
        /// `spec.description`.
        async fn description(&self) -> Option<&str> { self.c().spec.description.as_deref() }
        /// `spec.category`.
        async fn category(&self) -> &str { &self.c().spec.category }
        /// `spec.enabled`: consumers refuse a disabled class.
        async fn enabled(&self) -> bool { self.c().spec.enabled }
        /// `spec.default`.
        async fn is_default(&self) -> bool { self.c().spec.default }
        /// `spec.cpu`.
        async fn cpu(&self) -> CpuTopology {
            let c = &self.c().spec.cpu;
            CpuTopology::new(c.cores, c.sockets.get().unwrap_or(1), c.threads.get().unwrap_or(1))
        }
        /// `spec.memory`, parsed.
        async fn memory(&self) -> ClassMemory {
            let m = &self.c().spec.memory;
            let bytes = |q: &crate::model::Quantity| q.bytes().map(super::Long);
            ClassMemory { quantity: m.quantity.raw(), bytes: bytes(&m.quantity),
                min_bytes: m.min_quantity.as_ref().and_then(bytes), max_bytes: m.max_quantity.as_ref().and_then(bytes) }
        }
        /// `spec.gpu`.
        async fn gpu(&self) -> Option<Gpu> {
            self.c().spec.gpu.as_ref().map(|g| Gpu { cores: g.cores, manufacturer: g.manufacturer.as_deref().map(String::from) })
        }
        /// `spec.machineProviders`.
        async fn machine_provider_types(&self) -> Vec<String> { crate::model::to_strings(&self.c().spec.machine_providers) }
        /// Machines of this class.
        #[allow(clippy::too_many_arguments)]
        async fn machines(&self, ctx: &Context<'_>, filter: Option<Filter>, sort: Option<Sort>, after: Option<String>, before: Option<String>, first: Option<i32>, last: Option<i32>) -> async_graphql::Result<Conn<MachineObj>> {
            let items = snap(ctx).lookup(self.0.datacenter(), Idx::MachineByClass, self.0.name()).cloned().collect();
            connection(ctx, items, filter.as_ref(), sort, PageArgs { after, before, first, last }, MachineObj::new).await
        }
        /// KubernetesClusters whose topology uses this class.
        async fn clusters(&self, ctx: &Context<'_>) -> Vec<ClusterObj> {
            many(snap(ctx).lookup(self.0.datacenter(), Idx::ClusterByClass, self.0.name()), ClusterObj::new)
        }
    }
}

impl MachineProviderObj {
    fn p(&self) -> &MachineProvider {
        match &*self.0 {
            Resource::MachineProvider(p) => p,
            _ => unreachable!("MachineProviderObj wraps MachineProviders only"),
        }
    }
}

node_type! {
    /// `MachineProvider`: a place machines can be made (cluster-scoped).
    MachineProviderObj, "MachineProvider", MachineProvider; {
        /// `spec.providerType`.
        async fn provider_type(&self) -> &str { &self.p().spec.provider_type }
        /// `spec.displayName`.
        async fn display_name(&self) -> &str { &self.p().spec.display_name }
        /// `spec.region`.
        async fn region(&self) -> &str { &self.p().spec.region }
        /// `spec.zones`.
        async fn zones(&self) -> Vec<String> { crate::model::to_strings(self.p().spec.zones.as_deref().unwrap_or_default()) }
        /// `spec.endpoint.url`.
        async fn endpoint_url(&self) -> Option<&str> { self.p().spec.endpoint.as_ref()?.url.as_deref() }
        /// `spec.authentication.type` (the credentials themselves never leave the server).
        async fn authentication_type(&self) -> &str { &self.p().spec.authentication.r#type }
        /// `status.message`.
        async fn message(&self) -> Option<&str> { self.p().status.as_ref()?.message.as_deref() }
        /// Machines whose `spec.provider` is this provider's type.
        #[allow(clippy::too_many_arguments)]
        async fn machines(&self, ctx: &Context<'_>, filter: Option<Filter>, sort: Option<Sort>, after: Option<String>, before: Option<String>, first: Option<i32>, last: Option<i32>) -> async_graphql::Result<Conn<MachineObj>> {
            let items = snap(ctx).lookup(self.0.datacenter(), Idx::MachineByProvider, &self.p().spec.provider_type).cloned().collect();
            connection(ctx, items, filter.as_ref(), sort, PageArgs { after, before, first, last }, MachineObj::new).await
        }
        /// The KubevirtConfig this provider was registered from (label `vitistack.io/kubevirt-config`).
        async fn kubevirt_config(&self, ctx: &Context<'_>) -> Option<KubevirtConfigObj> {
            let name = self.0.label(ANNOTATION_KUBEVIRT_CONFIG)?;
            one(snap(ctx).get(self.0.datacenter(), Kind::KubevirtConfig, "", name), KubevirtConfigObj::new)
        }
        /// KubernetesProviders that reference this provider.
        async fn kubernetes_providers(&self, ctx: &Context<'_>) -> Vec<super::KubernetesProviderObj> {
            many(snap(ctx).lookup(self.0.datacenter(), Idx::KubernetesProviderByMachineProvider, self.0.name()), super::KubernetesProviderObj::new)
        }
    }
}

node_type! {
    /// `KubevirtConfig`: how to reach a remote KubeVirt cluster (cluster-scoped).
    KubevirtConfigObj, "KubevirtConfig", KubevirtConfig; {
        /// `spec.name`.
        async fn spec_name(&self) -> Option<&str> { match &*self.0 { Resource::KubevirtConfig(k) => Some(&k.spec.name), _ => None } }
        /// `spec.secretNamespace`.
        async fn secret_namespace(&self) -> Option<&str> { match &*self.0 { Resource::KubevirtConfig(k) => Some(&k.spec.secret_namespace), _ => None } }
        /// Name of the Secret holding the kubeconfig (its contents are never read or served).
        async fn kubeconfig_secret_name(&self) -> Option<&str> { match &*self.0 { Resource::KubevirtConfig(k) => Some(&k.spec.kubeconfig_secret_ref), _ => None } }
        /// Machines annotated with this config.
        #[allow(clippy::too_many_arguments)]
        async fn machines(&self, ctx: &Context<'_>, filter: Option<Filter>, sort: Option<Sort>, after: Option<String>, before: Option<String>, first: Option<i32>, last: Option<i32>) -> async_graphql::Result<Conn<MachineObj>> {
            let items = snap(ctx).lookup(self.0.datacenter(), Idx::MachineByKubevirtConfig, self.0.name()).cloned().collect();
            connection(ctx, items, filter.as_ref(), sort, PageArgs { after, before, first, last }, MachineObj::new).await
        }
        /// The MachineProvider registered from this config.
        async fn machine_provider(&self, ctx: &Context<'_>) -> Option<MachineProviderObj> {
            one(snap(ctx).lookup_one(self.0.datacenter(), Idx::MachineProviderByKubevirtConfig, self.0.name()), MachineProviderObj::new)
        }
    }
}

node_type! {
    /// `ProxmoxConfig`: a Proxmox endpoint (cluster-scoped). The token is never served.
    ProxmoxConfigObj, "ProxmoxConfig", ProxmoxConfig; {
        /// `spec.name`.
        async fn spec_name(&self) -> Option<&str> { match &*self.0 { Resource::ProxmoxConfig(p) => Some(&p.spec.name), _ => None } }
        /// `spec.endpoint`.
        async fn endpoint(&self) -> Option<&str> { match &*self.0 { Resource::ProxmoxConfig(p) => Some(&p.spec.endpoint), _ => None } }
        /// `spec.port`.
        async fn port(&self) -> Option<&str> { match &*self.0 { Resource::ProxmoxConfig(p) => Some(&p.spec.port), _ => None } }
        /// `spec.username`.
        async fn username(&self) -> Option<&str> { match &*self.0 { Resource::ProxmoxConfig(p) => Some(&p.spec.username), _ => None } }
        /// Whether a token is configured (its value never leaves the server).
        async fn has_token(&self) -> bool { matches!(&*self.0, Resource::ProxmoxConfig(p) if !p.spec.token.is_empty()) }
    }
}
