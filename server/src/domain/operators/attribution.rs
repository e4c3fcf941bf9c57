//! Which operator takes each object, by the rules the operators select their objects with: the
//! network provisioner of a NetworkNamespace, the IP allocator of a NetworkConfiguration, the VIP
//! provider of a ControlPlaneVirtualSharedIP, and the operators serving a KubernetesCluster.

use std::sync::Arc;

use super::Operator;
use crate::model::{Kind, Resource};
use crate::store::Snapshot;

/// The value of `NetworkNamespace.spec.ipAllocation.provider` that marks a namespace as given by
/// hand on v1alpha1 (the old manual-ip controller selects it; the v1alpha1→v1alpha2 conversion
/// reads it the same way), and that names static-ip-operator as the allocator.
const STATIC_IP_PROVIDER: &str = "static-ip-operator";

/// Who provisions a NetworkNamespace's segment (VLAN, prefix, Ready): manual-ip for
/// `spec.networkProvisioning.provider: manual` (v1alpha2) or `spec.ipAllocation.provider:
/// static-ip-operator` (v1alpha1), nms-operator through NAM for every other namespace.
pub fn network_provisioner(nn: &Resource) -> Option<Operator> {
    let manual = match nn {
        Resource::NetworkNamespaceV2(n) => n
            .spec
            .network_provisioning
            .as_ref()
            .is_some_and(|p| p.provider == "manual"),
        Resource::NetworkNamespace(n) => n
            .spec
            .ip_allocation
            .as_ref()
            .is_some_and(|a| a.provider.as_deref() == Some(STATIC_IP_PROVIDER)),
        _ => return None,
    };
    Some(if manual {
        Operator::ManualIp
    } else {
        Operator::Nms
    })
}

/// `spec.ipAllocation.type` (dhcp, static) of a NetworkNamespace; None when it has no policy.
fn allocation_type(nn: &Resource) -> Option<&str> {
    match nn {
        Resource::NetworkNamespace(n) => n.spec.ip_allocation.as_ref().map(|a| a.r#type.as_str()),
        Resource::NetworkNamespaceV2(n) => n.spec.ip_allocation.as_ref().map(|a| a.r#type.as_str()),
        _ => None,
    }
}

/// `spec.ipAllocation.provider` of a NetworkNamespace.
fn allocation_provider(nn: &Resource) -> Option<&str> {
    match nn {
        Resource::NetworkNamespace(n) => n.spec.ip_allocation.as_ref()?.provider.as_deref(),
        Resource::NetworkNamespaceV2(n) => n.spec.ip_allocation.as_ref()?.provider.as_deref(),
        _ => None,
    }
}

/// The NetworkNamespace a NetworkConfiguration draws from: `spec.networkNamespaceName`, or, as
/// the operators fall back to when it is empty, the first one in its namespace.
pub fn configuration_namespace<'s>(
    snap: &'s Snapshot,
    nc: &'s Resource,
) -> Option<&'s Arc<Resource>> {
    let Resource::NetworkConfiguration(c) = nc else {
        return None;
    };
    match c
        .spec
        .network_namespace_name
        .as_deref()
        .filter(|n| !n.is_empty())
    {
        Some(name) => snap.get(
            nc.datacenter(),
            Kind::NetworkNamespace,
            nc.namespace(),
            name,
        ),
        None => snap
            .list_in_datacenter(nc.datacenter(), Kind::NetworkNamespace, nc.namespace())
            .next(),
    }
}

/// Which allocator fills in a NetworkConfiguration's addresses, by `spec.provider` and its
/// NetworkNamespace's `ipAllocation.type`, as both allocators select: kea takes `kea` or no
/// provider on a DHCP namespace (or one without a policy), static-ip takes `static-ip-operator`
/// or no provider on a static namespace. `Err` says why neither takes it.
pub fn ip_allocator(snap: &Snapshot, nc: &Resource) -> Result<Operator, String> {
    let Resource::NetworkConfiguration(c) = nc else {
        return Err("not a NetworkConfiguration".into());
    };
    let nn = configuration_namespace(snap, nc);
    let static_nn = nn.and_then(|n| allocation_type(n)) == Some("static");
    let nn_text = || match nn {
        Some(n) => format!(
            "NetworkNamespace {}/{} allocates {}",
            n.namespace(),
            n.name(),
            allocation_type(n)
                .filter(|t| !t.is_empty())
                .unwrap_or("by DHCP (no ipAllocation)")
        ),
        None => "it has no NetworkNamespace".into(),
    };
    match c
        .spec
        .provider
        .as_deref()
        .map(str::trim)
        .unwrap_or_default()
    {
        "" if static_nn => Ok(Operator::StaticIp),
        "" => Ok(Operator::Kea),
        "kea" if !static_nn => Ok(Operator::Kea),
        "kea" => Err(format!(
            "spec.provider is kea but {}: neither allocator takes it",
            nn_text()
        )),
        STATIC_IP_PROVIDER if static_nn => Ok(Operator::StaticIp),
        STATIC_IP_PROVIDER => Err(format!(
            "spec.provider is static-ip-operator but {}: neither allocator takes it",
            nn_text()
        )),
        other => Err(format!(
            "spec.provider {other:?} is neither kea nor static-ip-operator"
        )),
    }
}

/// Who gives a ControlPlaneVirtualSharedIP its address: static-ip-operator when `spec.provider`
/// names it, or when its NetworkNamespace is static with `ipAllocation.provider:
/// static-ip-operator`; nms-operator for every other VIP.
pub fn vip_provider(snap: &Snapshot, vip: &Resource) -> Option<Operator> {
    let Resource::ControlPlaneVirtualSharedIp(v) = vip else {
        return None;
    };
    if v.spec.provider == STATIC_IP_PROVIDER {
        return Some(Operator::StaticIp);
    }
    if v.spec.provider == "nam" {
        return Some(Operator::Nms);
    }
    let static_nn = snap
        .get(
            vip.datacenter(),
            Kind::NetworkNamespace,
            vip.namespace(),
            &v.spec.network_namespace_identifier,
        )
        .is_some_and(|n| {
            allocation_type(n) == Some("static")
                && allocation_provider(n) == Some(STATIC_IP_PROVIDER)
        });
    Some(if static_nn {
        Operator::StaticIp
    } else {
        Operator::Nms
    })
}

/// The operators a KubernetesCluster depends on, in report order: talos-operator for a talos
/// cluster; the machine operators of its Machines (of its topology's control plane before they
/// exist); who provisions its NetworkNamespace; the allocators of its Machines' configurations;
/// who gives its control-plane VIP its address.
pub fn serving(snap: &Snapshot, kc: &Resource) -> Vec<Operator> {
    let Resource::KubernetesCluster(c) = kc else {
        return Vec::new();
    };
    let (dc, ns) = (kc.datacenter(), kc.namespace());
    let mut out = Vec::new();
    if c.spec.data.provider == "talos" {
        out.push(Operator::Talos);
    }
    let machines = snap.cluster_machines(kc);
    let machine_operator = |provider: &str| match provider {
        "proxmox" => Some(Operator::Proxmox),
        "kubevirt" | "" => Some(Operator::Kubevirt),
        _ => None,
    };
    if machines.is_empty() {
        out.extend(machine_operator(&c.spec.topology.controlplane.provider));
    }
    for m in &machines {
        out.extend(machine_provider(m).and_then(machine_operator));
        if let Some(nc) = snap.get(dc, Kind::NetworkConfiguration, ns, m.name()) {
            out.extend(ip_allocator(snap, nc).ok());
        }
    }
    if let Some(nn) = snap.get(
        dc,
        Kind::NetworkNamespace,
        ns,
        &c.spec.data.network_namespace_name,
    ) {
        out.extend(network_provisioner(nn));
    }
    if let Some(vip) = snap.get(
        dc,
        Kind::ControlPlaneVirtualSharedIp,
        ns,
        &c.spec.data.cluster_id,
    ) {
        out.extend(vip_provider(snap, vip));
    }
    out.sort_by_key(|o| Operator::ALL.iter().position(|a| a == o));
    out.dedup();
    out
}

pub(super) fn machine_provider(m: &Resource) -> Option<&str> {
    match m {
        Resource::Machine(machine) => Some(machine.spec.provider.as_str()),
        _ => None,
    }
}
