//! Networks: NetworkNamespace (v1alpha1 and v1alpha2), NetworkConfiguration, the control-plane VIP,
//! and IPAllocation.

use async_graphql::{Context, SimpleObject};

use super::{ClusterObj, Conn, MachineObj, connection, many, node_type, one, snap};
use crate::graphql::paging::{Filter, PageArgs, Sort};
use crate::model::{Kind, LABEL_CLUSTER_ID, LABEL_PURPOSE, NetworkConfiguration, Resource};
use crate::store::{Idx, scoped};

/// How a NetworkNamespace hands out IPs (`spec.ipAllocation`).
#[derive(SimpleObject, Clone, Debug, Default)]
pub struct IpAllocationPolicy {
    /// dhcp or static; null means the legacy default (DHCP through NAM and kea).
    #[graphql(name = "type")]
    pub type_: Option<String>,
    /// kea, static-ip-operator.
    pub provider: Option<String>,
    /// Static range CIDR.
    pub ipv4_cidr: Option<String>,
    /// Static gateway.
    pub ipv4_gateway: Option<String>,
    /// First address handed out.
    pub ipv4_range_start: Option<String>,
    /// Last address handed out.
    pub ipv4_range_end: Option<String>,
    /// VLAN of the static range.
    pub vlan_id: Option<i64>,
    /// DNS servers.
    pub dns: Vec<String>,
}

/// An IP a NetworkNamespace has allocated, and to which NetworkConfiguration.
#[derive(SimpleObject, Clone, Debug)]
pub struct AllocatedIp {
    /// The address.
    pub ip: String,
    /// Name of the NetworkConfiguration holding it.
    pub network_configuration_name: String,
}

impl NetworkNamespaceObj {
    /// A field of its status, whichever version it was read as.
    pub(crate) fn status_field<T>(
        &self,
        v1: impl Fn(&crate::model::NetworkNamespaceStatus) -> Option<T>,
        v2: impl Fn(&crate::model::NetworkNamespaceV2Status) -> Option<T>,
    ) -> Option<T> {
        match &*self.0 {
            Resource::NetworkNamespace(n) => n.status.as_deref().and_then(v1),
            Resource::NetworkNamespaceV2(n) => n.status.as_deref().and_then(v2),
            _ => None,
        }
    }
}

node_type! {
    /// `NetworkNamespace`: a network segment (VLAN, prefix) and its IP allocation policy.
    NetworkNamespaceObj, "NetworkNamespace", NetworkNamespace | NetworkNamespaceV2; {
        /// `spec.datacenterIdentifier`.
        async fn datacenter_identifier(&self) -> &str {
            match &*self.0 { Resource::NetworkNamespace(n) => &n.spec.datacenter_identifier, Resource::NetworkNamespaceV2(n) => &n.spec.datacenter_identifier, _ => "" }
        }
        /// `spec.supervisorIdentifier`.
        async fn supervisor_identifier(&self) -> &str {
            match &*self.0 { Resource::NetworkNamespace(n) => &n.spec.supervisor_identifier, Resource::NetworkNamespaceV2(n) => &n.spec.supervisor_identifier, _ => "" }
        }
        /// v1alpha2 `spec.networkProvisioning.provider` (nam, manual); null on v1alpha1.
        async fn provisioning_provider(&self) -> Option<&str> {
            match &*self.0 { Resource::NetworkNamespaceV2(n) => n.spec.network_provisioning.as_ref().map(|p| &*p.provider), _ => None }
        }
        /// `status.provisioningPhase` (Pending, Ready, Error): whether the segment is
        /// provisioned; kea and static-ip wait for Ready, and `ready` is false until it is.
        /// Null where it is not written (operators on common before v1.0.0).
        async fn provisioning_phase(&self) -> Option<&str> {
            self.0.provisioning_phase()
        }
        /// `spec.ipAllocation`.
        async fn ip_allocation(&self) -> Option<IpAllocationPolicy> {
            let (type_, provider, st) = match &*self.0 {
                Resource::NetworkNamespace(n) => {
                    let a = n.spec.ip_allocation.as_ref()?;
                    (a.r#type.clone(), a.provider.clone(), a.r#static.as_ref().map(|s| (s.ipv4_cidr.clone(), s.ipv4_gateway.clone(), s.ipv4_range_start.clone(), s.ipv4_range_end.clone(), s.vlan_id, s.dns.clone())))
                }
                Resource::NetworkNamespaceV2(n) => {
                    let a = n.spec.ip_allocation.as_ref()?;
                    (a.r#type.clone(), a.provider.clone(), a.r#static.as_ref().map(|s| (s.ipv4_cidr.clone(), s.ipv4_gateway.clone(), s.ipv4_range_start.clone(), s.ipv4_range_end.clone(), s.vlan_id, s.dns.clone())))
                }
                _ => return None,
            };
            let mut p = IpAllocationPolicy { type_: Some(type_.into()), provider: provider.map(String::from), ..Default::default() };
            if let Some((cidr, gw, start, end, vlan, dns)) = st {
                p.ipv4_cidr = Some(cidr.into());
                p.ipv4_gateway = Some(gw.into());
                p.ipv4_range_start = start.map(String::from);
                p.ipv4_range_end = end.map(String::from);
                p.vlan_id = vlan.get();
                p.dns = dns.as_deref().map(crate::model::to_strings).unwrap_or_default();
            }
            Some(p)
        }
        /// Ready: condition Ready=True (what talos-operator waits for), or phase Ready when the
        /// object has no conditions; and `provisioningPhase` not Pending or Error.
        async fn ready(&self) -> bool {
            self.0.readiness().ready
        }
        /// `status.status` (Synced, InvalidSpec, …).
        async fn status_text(&self) -> Option<String> { self.status_field(|s| s.status.clone(), |s| s.status.clone()).map(String::from) }
        /// `status.message`.
        async fn message(&self) -> Option<String> { self.status_field(|s| s.message.clone(), |s| s.message.clone()).map(String::from) }
        /// `status.vlanId`.
        async fn vlan_id(&self) -> Option<i64> { self.status_field(|s| s.vlan_id.get(), |s| s.vlan_id.get()) }
        /// `status.ipv4Prefix`.
        async fn ipv4_prefix(&self) -> Option<String> { self.status_field(|s| s.ipv4_prefix.clone(), |s| s.ipv4_prefix.clone()).map(String::from) }
        /// `status.ipv6Prefix`.
        async fn ipv6_prefix(&self) -> Option<String> { self.status_field(|s| s.ipv6_prefix.clone(), |s| s.ipv6_prefix.clone()).map(String::from) }
        /// `status.ipv4EgressIp`.
        async fn ipv4_egress_ip(&self) -> Option<String> { self.status_field(|s| s.ipv4_egress_ip.clone(), |s| s.ipv4_egress_ip.clone()).map(String::from) }
        /// `status.namespaceId`.
        async fn namespace_id(&self) -> Option<String> { self.status_field(|s| s.namespace_id.clone(), |s| s.namespace_id.clone()).map(String::from) }
        /// `status.associatedKubernetesClusterIds` (can go stale; `clusters` is live).
        async fn associated_cluster_ids(&self) -> Vec<String> {
            self.status_field(|s| s.associated_kubernetes_cluster_ids.as_deref().map(crate::model::to_strings), |s| s.associated_kubernetes_cluster_ids.as_deref().map(crate::model::to_strings)).unwrap_or_default()
        }
        /// Clusters whose `spec.data.networkNamespaceName` is this namespace.
        async fn clusters(&self, ctx: &Context<'_>) -> Vec<ClusterObj> {
            many(snap(ctx).lookup(self.0.datacenter(), Idx::ClusterByNetworkNamespace, &scoped(self.0.namespace(), self.0.name())), ClusterObj::new)
        }
        /// Machines whose `spec.network.networkNamespaceName` is this namespace.
        #[allow(clippy::too_many_arguments)]
        async fn machines(&self, ctx: &Context<'_>, filter: Option<Filter>, sort: Option<Sort>, after: Option<String>, before: Option<String>, first: Option<i32>, last: Option<i32>) -> async_graphql::Result<Conn<MachineObj>> {
            let items = snap(ctx).lookup(self.0.datacenter(), Idx::MachineByNetworkNamespace, &scoped(self.0.namespace(), self.0.name())).cloned().collect();
            connection(ctx, items, filter.as_ref(), sort, PageArgs { after, before, first, last }, MachineObj::new).await
        }
        /// NetworkConfigurations whose `spec.networkNamespaceName` is this namespace.
        #[allow(clippy::too_many_arguments)]
        async fn network_configurations(&self, ctx: &Context<'_>, filter: Option<Filter>, sort: Option<Sort>, after: Option<String>, before: Option<String>, first: Option<i32>, last: Option<i32>) -> async_graphql::Result<Conn<NetworkConfigurationObj>> {
            let items = snap(ctx).lookup(self.0.datacenter(), Idx::ConfigByNetworkNamespace, &scoped(self.0.namespace(), self.0.name())).cloned().collect();
            connection(ctx, items, filter.as_ref(), sort, PageArgs { after, before, first, last }, NetworkConfigurationObj::new).await
        }
        /// Every IPv4 address allocated on this namespace: from `status.ipAllocationStatus` and from
        /// the status of its NetworkConfigurations, de-duplicated.
        async fn allocated_ips(&self, ctx: &Context<'_>) -> Vec<AllocatedIp> {
            let mut out: Vec<AllocatedIp> = match &*self.0 {
                Resource::NetworkNamespace(n) => n.status.as_ref().and_then(|s| s.ip_allocation_status.as_ref()).and_then(|a| a.allocated_ips.as_ref())
                    .map(|ips| ips.iter().map(|i| AllocatedIp { ip: i.ip.to_string(), network_configuration_name: i.network_configuration.to_string() }).collect())
                    .unwrap_or_default(),
                _ => Vec::new(),
            };
            for nc in snap(ctx).lookup(self.0.datacenter(), Idx::ConfigByNetworkNamespace, &scoped(self.0.namespace(), self.0.name())) {
                if let Resource::NetworkConfiguration(c) = nc.as_ref() {
                    for ip in status_ipv4(c) {
                        if !out.iter().any(|a| a.ip == ip) {
                            out.push(AllocatedIp { ip, network_configuration_name: nc.name().to_string() });
                        }
                    }
                }
            }
            out
        }
        /// Control-plane VIPs on this namespace.
        async fn control_plane_vips(&self, ctx: &Context<'_>) -> Vec<VipObj> {
            many(snap(ctx).lookup(self.0.datacenter(), Idx::VipByNetworkNamespace, &scoped(self.0.namespace(), self.0.name())), VipObj::new)
        }
        /// IPAllocations on this namespace (v1alpha2).
        async fn ip_allocations(&self, ctx: &Context<'_>) -> Vec<IpAllocationObj> {
            many(snap(ctx).lookup(self.0.datacenter(), Idx::AllocationByNetworkNamespace, &scoped(self.0.namespace(), self.0.name())), IpAllocationObj::new)
        }
    }
}

fn status_ipv4(c: &NetworkConfiguration) -> Vec<String> {
    c.status
        .as_ref()
        .and_then(|s| s.network_interfaces.as_ref())
        .into_iter()
        .flatten()
        .flat_map(|i| i.ipv4_addresses.iter().flatten())
        .map(|a| a.to_string())
        .collect()
}

/// A NIC's IP request and result.
#[derive(SimpleObject, Clone, Debug, Default)]
pub struct NetworkInterface {
    /// Interface name (`vlan<id>`, `default`, `net0`, `vip`).
    pub name: Option<String>,
    /// MAC address.
    pub mac_address: Option<String>,
    /// VLAN tag.
    pub vlan: Option<String>,
    /// IPv4 addresses.
    pub ipv4_addresses: Vec<String>,
    /// IPv6 addresses.
    pub ipv6_addresses: Vec<String>,
    /// IPv4 subnet.
    pub ipv4_subnet: Option<String>,
    /// IPv4 gateway.
    pub ipv4_gateway: Option<String>,
    /// DNS servers.
    pub dns: Vec<String>,
    /// Kea reserved the address.
    pub dhcp_reserved: bool,
    /// static-ip-operator allocated the address.
    pub ip_allocated: bool,
    /// dhcp or static.
    pub allocation_method: Option<String>,
}

macro_rules! iface {
    ($i:expr) => {
        NetworkInterface {
            name: $i.name.as_deref().map(String::from),
            mac_address: $i.mac_address.as_deref().map(String::from),
            vlan: $i.vlan.as_deref().map(String::from),
            ipv4_addresses: crate::model::to_strings(
                $i.ipv4_addresses.as_deref().unwrap_or_default(),
            ),
            ipv6_addresses: crate::model::to_strings(
                $i.ipv6_addresses.as_deref().unwrap_or_default(),
            ),
            ipv4_subnet: $i.ipv4_subnet.as_deref().map(String::from),
            ipv4_gateway: $i.ipv4_gateway.as_deref().map(String::from),
            dns: crate::model::to_strings($i.dns.as_deref().unwrap_or_default()),
            dhcp_reserved: $i.dhcp_reserved.unwrap_or(false),
            ip_allocated: $i.ip_allocated.unwrap_or(false),
            allocation_method: $i.allocation_method.as_deref().map(String::from),
        }
    };
}

impl NetworkConfigurationObj {
    fn nc(&self) -> &NetworkConfiguration {
        match &*self.0 {
            Resource::NetworkConfiguration(n) => n,
            _ => unreachable!("NetworkConfigurationObj wraps NetworkConfigurations only"),
        }
    }
}

node_type! {
    /// `NetworkConfiguration`: the IP request and result for one Machine's NICs (same name as the Machine).
    NetworkConfigurationObj, "NetworkConfiguration", NetworkConfiguration; {
        /// `spec.name` (≤32 characters; not metadata.name).
        async fn spec_name(&self) -> &str { &self.nc().spec.name }
        /// `spec.provider` (kea, static-ip-operator; empty = by the NetworkNamespace's policy).
        async fn provider(&self) -> Option<&str> { self.nc().spec.provider.as_deref() }
        /// `spec.networkNamespaceName`.
        async fn network_namespace_name(&self) -> Option<&str> { self.nc().spec.network_namespace_name.as_deref() }
        /// Label `vitistack.io/purpose` (`control-plane-vip` for VIP configurations).
        async fn purpose(&self) -> Option<&str> { self.0.label(LABEL_PURPOSE) }
        /// `status.status`.
        async fn status_text(&self) -> Option<&str> { self.nc().status.as_ref()?.status.as_deref() }
        /// `status.message`.
        async fn message(&self) -> Option<&str> { self.nc().status.as_ref()?.message.as_deref() }
        /// Interfaces with their allocated addresses (status), falling back to the request (spec).
        async fn interfaces(&self) -> Vec<NetworkInterface> {
            let nc = self.nc();
            match nc.status.as_ref().and_then(|s| s.network_interfaces.as_ref()) {
                Some(ifs) if !ifs.is_empty() => ifs.iter().map(|i| iface!(i)).collect(),
                _ => nc.spec.network_interfaces.iter().flatten().map(|i| iface!(i)).collect(),
            }
        }
        /// Interfaces as requested in the spec.
        async fn requested_interfaces(&self) -> Vec<NetworkInterface> {
            self.nc().spec.network_interfaces.iter().flatten().map(|i| iface!(i)).collect()
        }
        /// Every allocated IPv4 address.
        async fn ipv4_addresses(&self) -> Vec<String> { status_ipv4(self.nc()) }
        /// The Machine with the same name.
        async fn machine(&self, ctx: &Context<'_>) -> Option<MachineObj> {
            one(snap(ctx).get(self.0.datacenter(), Kind::Machine, self.0.namespace(), self.0.name()), MachineObj::new)
        }
        /// The NetworkNamespace named by `spec.networkNamespaceName`.
        async fn network_namespace(&self, ctx: &Context<'_>) -> Option<NetworkNamespaceObj> {
            one(snap(ctx).get(self.0.datacenter(), Kind::NetworkNamespace, self.0.namespace(), self.nc().spec.network_namespace_name.as_deref()?), NetworkNamespaceObj::new)
        }
        /// The cluster, through the Machine or the `vitistack.io/clusterid` label (VIP configurations).
        async fn cluster(&self, ctx: &Context<'_>) -> Option<ClusterObj> {
            let s = snap(ctx);
            if let Some(id) = self.0.label(LABEL_CLUSTER_ID) {
                return one(s.lookup_one(self.0.datacenter(), Idx::ClusterById, &scoped(self.0.namespace(), id)), ClusterObj::new);
            }
            let machine = s.get(self.0.datacenter(), Kind::Machine, self.0.namespace(), self.0.name())?;
            one(s.machine_cluster(machine), ClusterObj::new)
        }
        /// IPAllocations of this configuration (v1alpha2).
        async fn ip_allocations(&self, ctx: &Context<'_>) -> Vec<IpAllocationObj> {
            many(snap(ctx).lookup(self.0.datacenter(), Idx::AllocationByConfig, &scoped(self.0.namespace(), self.0.name())), IpAllocationObj::new)
        }
    }
}

node_type! {
    /// `ControlPlaneVirtualSharedIP`: the API-server VIP of a cluster (named after its clusterId).
    VipObj, "ControlPlaneVirtualSharedIP", ControlPlaneVirtualSharedIp; {
        /// `spec.clusterIdentifier`.
        async fn cluster_identifier(&self) -> Option<&str> { match &*self.0 { Resource::ControlPlaneVirtualSharedIp(v) => Some(&v.spec.cluster_identifier), _ => None } }
        /// `spec.networkNamespaceIdentifier`.
        async fn network_namespace_identifier(&self) -> Option<&str> { match &*self.0 { Resource::ControlPlaneVirtualSharedIp(v) => Some(&v.spec.network_namespace_identifier), _ => None } }
        /// `spec.provider`.
        async fn provider(&self) -> Option<&str> { match &*self.0 { Resource::ControlPlaneVirtualSharedIp(v) => Some(&v.spec.provider), _ => None } }
        /// `spec.method`.
        async fn method(&self) -> Option<&str> { match &*self.0 { Resource::ControlPlaneVirtualSharedIp(v) => v.spec.method.as_deref(), _ => None } }
        /// `spec.environment`.
        async fn environment(&self) -> Option<&str> { match &*self.0 { Resource::ControlPlaneVirtualSharedIp(v) => Some(&v.spec.environment), _ => None } }
        /// `spec.poolMembers` (control-plane IPs).
        async fn pool_members(&self) -> Vec<String> { match &*self.0 { Resource::ControlPlaneVirtualSharedIp(v) => crate::model::to_strings(v.spec.pool_members.as_deref().unwrap_or_default()), _ => Vec::new() } }
        /// `status.loadBalancerIps`: the VIP address(es).
        async fn load_balancer_ips(&self) -> Vec<String> {
            match &*self.0 { Resource::ControlPlaneVirtualSharedIp(v) => crate::model::to_strings(v.status.as_ref().and_then(|s| s.load_balancer_ips.as_deref()).unwrap_or_default()), _ => Vec::new() }
        }
        /// `status.status`.
        async fn status_text(&self) -> Option<&str> { match &*self.0 { Resource::ControlPlaneVirtualSharedIp(v) => v.status.as_ref()?.status.as_deref(), _ => None } }
        /// `status.message`.
        async fn message(&self) -> Option<&str> { match &*self.0 { Resource::ControlPlaneVirtualSharedIp(v) => v.status.as_ref()?.message.as_deref(), _ => None } }
        /// The cluster whose clusterId is `spec.clusterIdentifier`.
        async fn cluster(&self, ctx: &Context<'_>) -> Option<ClusterObj> {
            let Resource::ControlPlaneVirtualSharedIp(v) = &*self.0 else { return None };
            one(snap(ctx).lookup_one(self.0.datacenter(), Idx::ClusterById, &scoped(self.0.namespace(), &v.spec.cluster_identifier)), ClusterObj::new)
        }
        /// The NetworkNamespace named by `spec.networkNamespaceIdentifier`.
        async fn network_namespace(&self, ctx: &Context<'_>) -> Option<NetworkNamespaceObj> {
            let Resource::ControlPlaneVirtualSharedIp(v) = &*self.0 else { return None };
            one(snap(ctx).get(self.0.datacenter(), Kind::NetworkNamespace, self.0.namespace(), &v.spec.network_namespace_identifier), NetworkNamespaceObj::new)
        }
    }
}

node_type! {
    /// `IPAllocation` (v1alpha2): one NIC's address on a NetworkNamespace.
    IpAllocationObj, "IPAllocation", IpAllocation; {
        /// `spec.networkNamespaceName`.
        async fn network_namespace_name(&self) -> Option<&str> { match &*self.0 { Resource::IpAllocation(a) => Some(&a.spec.network_namespace_name), _ => None } }
        /// `spec.networkConfigurationName`.
        async fn network_configuration_name(&self) -> Option<&str> { match &*self.0 { Resource::IpAllocation(a) => Some(&a.spec.network_configuration_name), _ => None } }
        /// `spec.interfaceName`.
        async fn interface_name(&self) -> Option<&str> { match &*self.0 { Resource::IpAllocation(a) => a.spec.interface_name.as_deref(), _ => None } }
        /// `status.address`.
        async fn address(&self) -> Option<&str> { match &*self.0 { Resource::IpAllocation(a) => a.status.as_ref()?.address.as_deref(), _ => None } }
        /// `status.gateway`.
        async fn gateway(&self) -> Option<&str> { match &*self.0 { Resource::IpAllocation(a) => a.status.as_ref()?.gateway.as_deref(), _ => None } }
        /// The NetworkConfiguration.
        async fn network_configuration(&self, ctx: &Context<'_>) -> Option<NetworkConfigurationObj> {
            let Resource::IpAllocation(a) = &*self.0 else { return None };
            one(snap(ctx).get(self.0.datacenter(), Kind::NetworkConfiguration, self.0.namespace(), &a.spec.network_configuration_name), NetworkConfigurationObj::new)
        }
        /// The NetworkNamespace.
        async fn network_namespace(&self, ctx: &Context<'_>) -> Option<NetworkNamespaceObj> {
            let Resource::IpAllocation(a) = &*self.0 else { return None };
            one(snap(ctx).get(self.0.datacenter(), Kind::NetworkNamespace, self.0.namespace(), &a.spec.network_namespace_name), NetworkNamespaceObj::new)
        }
    }
}
