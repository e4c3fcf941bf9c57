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
                name: p.name.clone(), priority: p.priority, enabled: p.enabled.unwrap_or(true),
                provider: one(snap(ctx).get(self.0.datacenter(), Kind::MachineProvider, "", &p.name), MachineProviderObj::new),
            }).collect()
        }
        /// `spec.kubernetesProviders`, resolved by name.
        async fn kubernetes_providers(&self, ctx: &Context<'_>) -> Vec<KubernetesProviderRef> {
            self.v().spec.kubernetes_providers.iter().flatten().map(|p| KubernetesProviderRef {
                name: p.name.clone(), priority: p.priority, enabled: p.enabled.unwrap_or(true),
                provider: one(snap(ctx).get(self.0.datacenter(), Kind::KubernetesProvider, "", &p.name), KubernetesProviderObj::new),
            }).collect()
        }
        /// Clusters in this management cluster (live count, not the stale status list).
        async fn cluster_count(&self, ctx: &Context<'_>) -> usize { snap(ctx).count(Kind::KubernetesCluster) }
        /// Machines in this management cluster (live count).
        async fn machine_count(&self, ctx: &Context<'_>) -> usize { snap(ctx).count(Kind::Machine) }
    }
}
