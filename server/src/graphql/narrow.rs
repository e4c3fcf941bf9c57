//! The list fields' own filters beyond `Filter`, each matching what its list shows in a column:
//! a Machine's role, pool and cluster id, a VirtualMachineInstance's host and cluster, a
//! cluster's pipeline stage and health. Applied before paging, so `totalCount` and every page
//! count only the objects that match.

use crate::domain::{hosts, pipeline};
use crate::graphql::types::NodeRole;
use crate::model::{ANNOTATION_NODE_POOL, Resource};
use crate::store::Snapshot;

/// Keeps an object of the list (`None`: the field's own filters are not given).
pub type Keep<'a> = Box<dyn Fn(&Resource) -> bool + Send + Sync + 'a>;

/// A cluster's health as the dashboard's lists and the overview group it.
#[derive(async_graphql::Enum, Copy, Clone, Debug, PartialEq, Eq)]
pub enum ClusterHealth {
    /// Ready, and nothing it depends on unhealthy (`diagnosis.ready` and not `degraded`).
    Ready,
    /// Not Ready, or Ready but degraded: the overview's "needs attention".
    Attention,
    /// Something that holds it up will not recover by itself (`diagnosis.failed`).
    Failed,
}

/// Machines of this role, this node pool (`vitistack.io/nodepool`) and this cluster id (the
/// `clusterId` field: its label, else that of the cluster its older name label names).
pub fn machines<'a>(
    snap: &'a Snapshot,
    role: Option<NodeRole>,
    node_pool: Option<String>,
    cluster_id: Option<String>,
) -> Option<Keep<'a>> {
    if role.is_none() && node_pool.is_none() && cluster_id.is_none() {
        return None;
    }
    Some(Box::new(move |m| {
        role.is_none_or(|role| m.node_role() == Some(role.label()))
            && node_pool
                .as_deref()
                .is_none_or(|pool| m.annotation(ANNOTATION_NODE_POOL) == Some(pool))
            && cluster_id
                .as_deref()
                .is_none_or(|id| snap.machine_cluster_id(m) == Some(id))
    }))
}

/// VirtualMachineInstances on this host (`status.nodeName`) and of this cluster (the
/// `membership` field's cluster id).
pub fn vm_instances<'a>(
    snap: &'a Snapshot,
    host: Option<String>,
    cluster_id: Option<String>,
) -> Option<Keep<'a>> {
    if host.is_none() && cluster_id.is_none() {
        return None;
    }
    Some(Box::new(move |r| {
        let Resource::VirtualMachineInstance(i) = r else {
            return false;
        };
        host.as_deref()
            .is_none_or(|h| crate::model::kubevirt::vmi_node(i) == Some(h))
            && cluster_id
                .as_deref()
                .is_none_or(|id| hosts::cluster_of(snap, r).is_some_and(|(of, _)| of == id))
    }))
}

/// Clusters at this pipeline stage and of this health (the `pipeline` and `diagnosis` fields'
/// judgment, evaluated once per cluster).
pub fn clusters<'a>(
    snap: &'a Snapshot,
    stage: Option<pipeline::Stage>,
    health: Option<ClusterHealth>,
) -> Option<Keep<'a>> {
    if stage.is_none() && health.is_none() {
        return None;
    }
    Some(Box::new(move |r| {
        let Resource::KubernetesCluster(kc) = r else {
            return false;
        };
        let p = pipeline::evaluate(snap, kc);
        stage.is_none_or(|s| p.stage == s)
            && health.is_none_or(|h| match h {
                ClusterHealth::Ready => p.ready() && !p.degraded(),
                ClusterHealth::Attention => !p.ready() || p.degraded(),
                ClusterHealth::Failed => p.failed(),
            })
    }))
}
