//! Secondary indexes: one per relationship in the domain (labels, name references, spec references).
//! Each object yields the index entries it belongs to; the store keeps them in step on every write.

use crate::model::{
    ANNOTATION_KUBE_SYSTEM_UID, ANNOTATION_KUBEVIRT_CONFIG, LABEL_CLUSTER_ID, LABEL_CLUSTER_NAME,
    LABEL_SOURCE_MACHINE, Resource,
};

/// The relationships the store indexes. Values are `namespace/value` for namespaced kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Idx {
    /// Machine by label `vitistack.io/clusterid` (ns/clusterId).
    MachineByCluster,
    /// Machine without that label by label `cluster.vitistack.io/cluster-name` (ns/name of the
    /// KubernetesCluster), as older talos-operator releases labelled them.
    MachineByClusterName,
    /// Machine by `spec.machineClass`.
    MachineByClass,
    /// Machine by `spec.network.networkNamespaceName` (ns/nn).
    MachineByNetworkNamespace,
    /// Machine by `spec.provider` (kubevirt, proxmox, …).
    MachineByProvider,
    /// Machine by annotation `vitistack.io/kubevirt-config`.
    MachineByKubevirtConfig,
    /// KubernetesCluster by `spec.data.clusterId` (ns/clusterId).
    ClusterById,
    /// KubernetesCluster by `spec.data.networkNamespaceName` (ns/nn).
    ClusterByNetworkNamespace,
    /// KubernetesCluster by any MachineClass its topology names.
    ClusterByClass,
    /// KubernetesCluster by `spec.data.provider` (talos, aks).
    ClusterByProvider,
    /// KubernetesCluster by annotation `vitistack.io/kube-system-uid` (its kube-system's UID).
    ClusterByKubeSystemUid,
    /// NetworkConfiguration by `spec.networkNamespaceName` (ns/nn).
    ConfigByNetworkNamespace,
    /// NetworkConfiguration by label `vitistack.io/clusterid` (VIP configurations).
    ConfigByCluster,
    /// ControlPlaneVirtualSharedIP by `spec.clusterIdentifier` (ns/clusterId).
    VipByCluster,
    /// ControlPlaneVirtualSharedIP by `spec.networkNamespaceIdentifier` (ns/nn).
    VipByNetworkNamespace,
    /// IPAllocation by `spec.networkConfigurationName` (ns/nc).
    AllocationByConfig,
    /// IPAllocation by `spec.networkNamespaceName` (ns/nn).
    AllocationByNetworkNamespace,
    /// EtcdBackup by `spec.clusterName` (ns/name).
    BackupByCluster,
    /// ClusterStorage by `spec.clusterId` (ns/clusterId).
    StorageByCluster,
    /// ClusterStorage by `spec.clusterStorageClass`.
    StorageByClass,
    /// MachineProvider by `spec.providerType`.
    MachineProviderByType,
    /// MachineProvider by label `vitistack.io/kubevirt-config`.
    MachineProviderByKubevirtConfig,
    /// KubernetesProvider by `spec.providerType`.
    KubernetesProviderByType,
    /// KubernetesProvider by `spec.machineProviderRef.name`.
    KubernetesProviderByMachineProvider,
    /// VirtualMachineInstance by `status.nodeName` (the host it runs on).
    VmiByNode,
    /// VirtualMachine and VirtualMachineInstance by label `vitistack.io/source-machine` (ns/machine).
    VirtualByMachine,
}

/// `namespace/value`, the shape of index values for namespaced relationships.
pub fn scoped(namespace: &str, value: &str) -> String {
    format!("{namespace}/{value}")
}

/// Every index entry an object belongs to.
pub fn index_entries(r: &Resource) -> Vec<(Idx, String)> {
    let ns = r.namespace();
    let mut out = Vec::new();
    let mut add = |idx: Idx, value: &str, namespaced: bool| {
        if !value.is_empty() {
            out.push((
                idx,
                if namespaced {
                    scoped(ns, value)
                } else {
                    value.to_string()
                },
            ));
        }
    };
    match r {
        Resource::Machine(m) => {
            if let Some(c) = r.label(LABEL_CLUSTER_ID) {
                add(Idx::MachineByCluster, c, true);
            } else if let Some(c) = r.label(LABEL_CLUSTER_NAME) {
                add(Idx::MachineByClusterName, c, true);
            }
            if let Some(c) = &m.spec.machine_class {
                add(Idx::MachineByClass, c, false);
            }
            if let Some(nn) = m
                .spec
                .network
                .as_ref()
                .and_then(|n| n.network_namespace_name.as_deref())
            {
                add(Idx::MachineByNetworkNamespace, nn, true);
            }
            add(Idx::MachineByProvider, &m.spec.provider, false);
            if let Some(kvc) = r.annotation(ANNOTATION_KUBEVIRT_CONFIG) {
                add(Idx::MachineByKubevirtConfig, kvc, false);
            }
        }
        Resource::KubernetesCluster(kc) => {
            add(Idx::ClusterById, &kc.spec.data.cluster_id, true);
            add(
                Idx::ClusterByNetworkNamespace,
                &kc.spec.data.network_namespace_name,
                true,
            );
            add(Idx::ClusterByProvider, &kc.spec.data.provider, false);
            if let Some(uid) = r.annotation(ANNOTATION_KUBE_SYSTEM_UID) {
                add(Idx::ClusterByKubeSystemUid, uid, false);
            }
            let mut classes = vec![kc.spec.topology.controlplane.machine_class.clone()];
            classes.extend(
                kc.spec
                    .topology
                    .workers
                    .node_pools
                    .iter()
                    .map(|p| p.machine_class.clone()),
            );
            classes.sort();
            classes.dedup();
            for c in classes {
                add(Idx::ClusterByClass, &c, false);
            }
        }
        Resource::NetworkConfiguration(nc) => {
            if let Some(nn) = &nc.spec.network_namespace_name {
                add(Idx::ConfigByNetworkNamespace, nn, true);
            }
            if let Some(c) = r.label(LABEL_CLUSTER_ID) {
                add(Idx::ConfigByCluster, c, true);
            }
        }
        Resource::ControlPlaneVirtualSharedIp(v) => {
            add(Idx::VipByCluster, &v.spec.cluster_identifier, true);
            add(
                Idx::VipByNetworkNamespace,
                &v.spec.network_namespace_identifier,
                true,
            );
        }
        Resource::IpAllocation(a) => {
            add(
                Idx::AllocationByConfig,
                &a.spec.network_configuration_name,
                true,
            );
            add(
                Idx::AllocationByNetworkNamespace,
                &a.spec.network_namespace_name,
                true,
            );
        }
        Resource::EtcdBackup(b) => add(Idx::BackupByCluster, &b.spec.cluster_name, true),
        Resource::ClusterStorage(s) => {
            add(Idx::StorageByCluster, &s.spec.cluster_id, true);
            add(Idx::StorageByClass, &s.spec.cluster_storage_class, false);
        }
        Resource::MachineProvider(p) => {
            add(Idx::MachineProviderByType, &p.spec.provider_type, false);
            if let Some(kvc) = r.label(ANNOTATION_KUBEVIRT_CONFIG) {
                add(Idx::MachineProviderByKubevirtConfig, kvc, false);
            }
        }
        Resource::KubernetesProvider(p) => {
            add(Idx::KubernetesProviderByType, &p.spec.provider_type, false);
            if let Some(mp) = &p.spec.machine_provider_ref {
                add(Idx::KubernetesProviderByMachineProvider, &mp.name, false);
            }
        }
        Resource::VirtualMachineInstance(vmi) => {
            if let Some(node) = crate::model::kubevirt::vmi_node(vmi) {
                add(Idx::VmiByNode, node, false);
            }
            if let Some(m) = r.label(LABEL_SOURCE_MACHINE) {
                add(Idx::VirtualByMachine, m, true);
            }
        }
        Resource::VirtualMachine(_) => {
            if let Some(m) = r.label(LABEL_SOURCE_MACHINE) {
                add(Idx::VirtualByMachine, m, true);
            }
        }
        _ => {}
    }
    out
}
