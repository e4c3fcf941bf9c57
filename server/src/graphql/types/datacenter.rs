//! The Vitistack singleton: the zone this management cluster runs, with its declared providers.

use async_graphql::{Context, SimpleObject};

use super::{KubernetesProviderObj, MachineProviderObj, node_type, one, snap};
use crate::model::{Kind, Resource, Vitistack};

/// A MachineProvider the Vitistack declares in its spec (by name).
#[derive(SimpleObject, Clone)]
pub struct MachineProviderRef {
    /// Name the spec gives.
    pub name: String,
    /// Priority (1 = first choice).
    pub priority: Option<i64>,
    /// Enabled.
    pub enabled: bool,
    /// The provider object; null when it does not exist.
    pub provider: Option<MachineProviderObj>,
}

/// A KubernetesProvider the Vitistack declares in its spec (by name).
#[derive(SimpleObject, Clone)]
pub struct KubernetesProviderRef {
    /// Name the spec gives.
    pub name: String,
    /// Priority (1 = first choice).
    pub priority: Option<i64>,
    /// Enabled.
    pub enabled: bool,
    /// The provider object; null when it does not exist.
    pub provider: Option<KubernetesProviderObj>,
}

impl VitistackObj {
    fn v(&self) -> &Vitistack {
        match &*self.0 {
            Resource::Vitistack(v) => v,
            _ => unreachable!("VitistackObj wraps Vitistacks only"),
        }
    }
}

node_type! {
    /// `Vitistack`: the zone a management cluster runs (the old name was Datacenter).
    VitistackObj, "Vitistack", Vitistack; {
        /// `spec.displayName`.
        async fn display_name(&self) -> &str { &self.v().spec.display_name }
        /// `spec.region`.
        async fn region(&self) -> &str { &self.v().spec.region }
        /// `spec.zone`.
        async fn zone(&self) -> &str { &self.v().spec.zone }
        /// `spec.infrastructure` (prod, test, mgmt).
        async fn infrastructure(&self) -> &str { &self.v().spec.infrastructure }
        /// `spec.description`.
        async fn description(&self) -> Option<&str> { self.v().spec.description.as_deref() }
        /// `spec.location.country`.
        async fn country(&self) -> Option<&str> { self.v().spec.location.as_ref()?.country.as_deref() }
        /// `spec.location.city`.
        async fn city(&self) -> Option<&str> { self.v().spec.location.as_ref()?.city.as_deref() }
        /// `spec.machineProviders`, resolved by name.
        async fn machine_providers(&self, ctx: &Context<'_>) -> Vec<MachineProviderRef> {
            self.v().spec.machine_providers.iter().flatten().map(|p| MachineProviderRef {
                name: p.name.to_string(), priority: p.priority.get(), enabled: p.enabled.unwrap_or(true),
                provider: one(snap(ctx).get(self.0.datacenter(), Kind::MachineProvider, "", &p.name), MachineProviderObj::new),
            }).collect()
        }
        /// `spec.kubernetesProviders`, resolved by name.
        async fn kubernetes_providers(&self, ctx: &Context<'_>) -> Vec<KubernetesProviderRef> {
            self.v().spec.kubernetes_providers.iter().flatten().map(|p| KubernetesProviderRef {
                name: p.name.to_string(), priority: p.priority.get(), enabled: p.enabled.unwrap_or(true),
                provider: one(snap(ctx).get(self.0.datacenter(), Kind::KubernetesProvider, "", &p.name), KubernetesProviderObj::new),
            }).collect()
        }
        /// Clusters in this management cluster (live count, not the stale status list).
        async fn cluster_count(&self, ctx: &Context<'_>) -> usize { snap(ctx).count(Kind::KubernetesCluster) }
        /// Machines in this management cluster (live count).
        async fn machine_count(&self, ctx: &Context<'_>) -> usize { snap(ctx).count(Kind::Machine) }
    }
}

/// A datacenter the server watches: its key, how current its objects are, and its Vitistack.
#[derive(SimpleObject, Clone)]
#[graphql(name = "Datacenter", complex)]
pub struct DatacenterInfo {
    /// Its key (the kubeconfig file's name or the context; empty on a single-cluster server).
    pub key: String,
    /// Connecting, synced, stale (its objects are the last known) or unreachable.
    pub state: crate::source::datacenters::DatacenterState,
    /// When its data was last proven current (RFC 3339).
    pub last_synced_at: Option<String>,
    /// Seconds since then.
    pub age_seconds: Option<f64>,
    /// What is wrong, while it is (credentials never in it).
    pub last_error: Option<String>,
}

#[async_graphql::ComplexObject]
impl DatacenterInfo {
    /// Its Vitistack object (the zone its management cluster runs).
    async fn vitistack(&self, ctx: &Context<'_>) -> Option<VitistackObj> {
        let s = snap(ctx);
        let dc = crate::model::Datacenter::new(&self.key);
        let found = s.list_datacenter(&dc, Kind::Vitistack).next().cloned();
        found.and_then(VitistackObj::new)
    }

    /// Its hosts and VMs in numbers: usage against limits, and how many of its hosts can fail
    /// (its VMs run only on its own hosts).
    async fn host_capacity(&self, ctx: &Context<'_>) -> super::hosts::HostCapacity {
        let dc = crate::model::Datacenter::new(&self.key);
        super::hosts::host_capacity(&snap(ctx), super::hosts::overcommit(ctx), Some(&dc))
    }

    /// Its clusters in numbers: total, Ready, failed, by phase and by pipeline stage.
    async fn cluster_summary(&self, ctx: &Context<'_>) -> crate::domain::summary::ClusterSummary {
        let dc = crate::model::Datacenter::new(&self.key);
        crate::domain::summary::cluster_summary_in(&snap(ctx), Some(&dc))
    }

    /// Objects it holds in the graph.
    async fn objects(&self, ctx: &Context<'_>) -> usize {
        let s = snap(ctx);
        let dc = crate::model::Datacenter::new(&self.key);
        Kind::ALL
            .iter()
            .map(|k| s.list_datacenter(&dc, *k).count())
            .sum()
    }
}

impl From<crate::source::datacenters::DatacenterReport> for DatacenterInfo {
    fn from(r: crate::source::datacenters::DatacenterReport) -> Self {
        DatacenterInfo {
            key: r.key.key().to_string(),
            state: r.state,
            last_synced_at: r.last_synced_at.map(|t| t.to_string()),
            age_seconds: r.age_seconds,
            last_error: r.last_error,
        }
    }
}
