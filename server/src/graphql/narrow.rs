//! The list fields' own filters beyond `Filter`, each matching what its list shows in a column:
//! a Machine's role, pool and cluster id, a VirtualMachineInstance's host and cluster, a
//! cluster's pipeline stage and health. Applied before paging, so `totalCount` and every page
//! count only the objects that match.

use std::sync::Arc;

use crate::domain::aggregates::{Aggregates, ClusterState, worth_an_index};
use crate::domain::{hosts, pipeline};
use crate::graphql::types::NodeRole;
use crate::model::{ANNOTATION_NODE_POOL, Kind, Resource};
use crate::store::held::{BriefText, Held};
use crate::store::{Idx, ObjectKey, Snapshot, scoped};

/// Keeps an object of the list.
pub type Keep<'a> = Box<dyn Fn(&Resource) -> bool + Send + Sync + 'a>;

/// The same test of an entry of the store's ordered map, answered from its brief where it can
/// be (`brief_list.rs`).
pub type KeepHeld<'a> = Box<dyn Fn(&Held) -> bool + Send + Sync + 'a>;

/// A list's own filters, given: the objects to keep, and, where an index names every object
/// that can be kept, those objects, read instead of the whole kind.
pub struct Narrow<'a> {
    /// Whether an object is kept.
    pub keep: Keep<'a>,
    /// Every object that can be kept (more may be named), when an index tells.
    pub only: Option<Vec<&'a Arc<Resource>>>,
    /// `keep` answered from an entry's brief, when the brief holds what it reads.
    pub by_brief: Option<KeepHeld<'a>>,
}

impl<'a> Narrow<'a> {
    fn all(keep: Keep<'a>) -> Option<Self> {
        Some(Narrow {
            keep,
            only: None,
            by_brief: None,
        })
    }
}

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
) -> Option<Narrow<'a>> {
    if role.is_none() && node_pool.is_none() && cluster_id.is_none() {
        return None;
    }
    let only = cluster_id
        .as_deref()
        .and_then(|id| machines_with_cluster_id(snap, id));
    // A role alone is in each Machine's brief.
    let by_brief: Option<KeepHeld<'a>> = match (role, &node_pool, &cluster_id) {
        (Some(role), None, None) => Some(Box::new(move |held: &Held| match held.brief().role() {
            BriefText::None => false,
            BriefText::Known(text) => text == role.label(),
            BriefText::Other => held.object().node_role() == Some(role.label()),
        })),
        _ => None,
    };
    let keep: Keep<'a> = Box::new(move |m| {
        role.is_none_or(|role| m.node_role() == Some(role.label()))
            && node_pool
                .as_deref()
                .is_none_or(|pool| m.annotation(ANNOTATION_NODE_POOL) == Some(pool))
            && cluster_id
                .as_deref()
                .is_none_or(|id| snap.machine_cluster_id(m) == Some(id))
    });
    Some(Narrow {
        keep,
        only,
        by_brief,
    })
}

/// Every Machine whose `clusterId` can be `id`, through the search indexes (None for a snapshot
/// without them): those that hold it (its label), and those whose older name label names a
/// cluster of that id. A cluster's Machines out of a million objects are a few lookups where
/// reading every Machine took 79 ms (`cargo bench --bench search_query`).
fn machines_with_cluster_id<'a>(snap: &'a Snapshot, id: &str) -> Option<Vec<&'a Arc<Resource>>> {
    if id.is_empty() {
        // Every name starts with it: the index would name every object.
        return None;
    }
    let mut out = Vec::new();
    for r in snap.holding(id, worth_an_index(snap, Kind::Machine))? {
        match &**r {
            Resource::Machine(_) => out.push(r),
            Resource::KubernetesCluster(kc) if kc.spec.data.cluster_id == id => {
                out.extend(snap.lookup(
                    r.datacenter(),
                    Idx::MachineByClusterName,
                    &scoped(r.namespace(), r.name()),
                ))
            }
            _ => {}
        }
    }
    // A Machine found both ways (its name starts with the id) is read once.
    out.sort_unstable_by_key(|r| Arc::as_ptr(r));
    out.dedup_by_key(|r| Arc::as_ptr(*r));
    Some(out)
}

/// VirtualMachineInstances on this host (`status.nodeName`) and of this cluster (the
/// `membership` field's cluster id).
pub fn vm_instances<'a>(
    snap: &'a Snapshot,
    host: Option<String>,
    cluster_id: Option<String>,
) -> Option<Narrow<'a>> {
    if host.is_none() && cluster_id.is_none() {
        return None;
    }
    let only = cluster_id
        .as_deref()
        .and_then(|id| hosts::virtual_of_cluster(snap, Kind::VirtualMachineInstance, id));
    let keep: Keep<'a> = Box::new(move |r| {
        let Resource::VirtualMachineInstance(i) = r else {
            return false;
        };
        host.as_deref()
            .is_none_or(|h| crate::model::kubevirt::vmi_node(i) == Some(h))
            && cluster_id
                .as_deref()
                .is_none_or(|id| hosts::cluster_of(snap, r).is_some_and(|(of, _)| of == id))
    });
    Some(Narrow {
        keep,
        only,
        by_brief: None,
    })
}

/// Clusters at this pipeline stage and of this health (the `pipeline` and `diagnosis` fields'
/// judgment). The store's aggregates keep each cluster's judgment with the snapshot, carried
/// over for the clusters a change does not concern; a snapshot without them (none is made so
/// by the server) judges each cluster here.
pub fn clusters<'a>(
    snap: &'a Snapshot,
    stage: Option<pipeline::Stage>,
    health: Option<ClusterHealth>,
) -> Option<Narrow<'a>> {
    if stage.is_none() && health.is_none() {
        return None;
    }
    let judged = snap.derived::<Aggregates>();
    Narrow::all(Box::new(move |r| {
        let Resource::KubernetesCluster(kc) = r else {
            return false;
        };
        let (at, state) = judged
            .and_then(|a| a.cluster(&ObjectKey::of(r)))
            .unwrap_or_else(|| {
                let p = pipeline::evaluate(snap, kc);
                (p.stage, ClusterState::of(&p))
            });
        // `ClusterState` is the diagnosis's judgment: Ready is `ready` and not `degraded`,
        // Failed is `failed` (a cluster with a terminal blocker is never Ready).
        stage.is_none_or(|s| at == s)
            && health.is_none_or(|h| match h {
                ClusterHealth::Ready => state == ClusterState::Ready,
                ClusterHealth::Attention => state != ClusterState::Ready,
                ClusterHealth::Failed => state == ClusterState::Failed,
            })
    }))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use crate::model::{LABEL_CLUSTER_ID, LABEL_CLUSTER_NAME, LABEL_SOURCE_MACHINE};
    use crate::source::demo::{FleetSpec, decode, fleet};
    use crate::store::{Op, Store};

    /// The names of the Machines `narrow` keeps, read from `from`.
    fn kept<'a>(
        narrow: &Narrow<'_>,
        from: impl Iterator<Item = &'a Arc<Resource>>,
    ) -> BTreeSet<String> {
        from.filter(|r| r.kind() == Kind::Machine && (narrow.keep)(r))
            .map(|r| format!("{}/{}", r.namespace(), r.name()))
            .collect()
    }

    /// The Machines the search indexes name for a cluster id are every Machine of that id: those
    /// labelled with it, and those only the older name label ties to a cluster of that id.
    #[test]
    fn a_cluster_ids_machines_through_the_indexes_are_those_a_reading_of_every_machine_finds() {
        let mut objects = fleet(&FleetSpec::demo());
        // Every third Machine as older talos-operator releases labelled them: the cluster's
        // name, no clusterid; and named so that its name does not start with the id (the
        // demo's do, and the name's index would find them).
        let clusters: Vec<(String, String, String)> = objects
            .iter()
            .filter_map(|r| match r {
                Resource::KubernetesCluster(kc) => Some((
                    r.namespace().to_string(),
                    r.name().to_string(),
                    kc.spec.data.cluster_id.to_string(),
                )),
                _ => None,
            })
            .collect();
        let mut relabelled = 0;
        for (i, r) in objects.iter_mut().enumerate() {
            if r.kind() != Kind::Machine || i % 3 != 0 {
                continue;
            }
            let Some(id) = r.label(LABEL_CLUSTER_ID).map(str::to_owned) else {
                continue;
            };
            let Some((_, name, _)) = clusters
                .iter()
                .find(|(ns, _, of)| ns == r.namespace() && *of == id)
            else {
                continue;
            };
            let mut v = r.to_value();
            v["metadata"]["name"] = serde_json::json!(format!("older-{i}"));
            let labels = &mut v["metadata"]["labels"];
            labels[LABEL_CLUSTER_NAME] = serde_json::json!(name);
            if let Some(labels) = labels.as_object_mut() {
                labels.remove(LABEL_CLUSTER_ID);
            }
            *r = decode(v).expect("decodes");
            relabelled += 1;
        }
        assert!(relabelled > 3, "{relabelled} Machines relabelled");
        let store = Store::new();
        store.apply(objects.into_iter().map(Op::Upsert).collect());
        let snap = store.snapshot();
        let mut by_name_label = 0;
        let mut ids: Vec<String> = clusters.iter().map(|(_, _, id)| id.clone()).collect();
        ids.push("no-such-cluster".into());
        for id in ids {
            let narrow = machines(&snap, None, None, Some(id.clone())).expect("a filter");
            let only = narrow
                .only
                .as_ref()
                .expect("the store keeps search indexes");
            let through_indexes = kept(&narrow, only.iter().copied());
            let reading_all = kept(&narrow, snap.list(Kind::Machine));
            assert_eq!(through_indexes, reading_all, "cluster id {id}");
            assert_eq!(
                only.len(),
                only.iter()
                    .map(|r| Arc::as_ptr(r))
                    .collect::<BTreeSet<_>>()
                    .len(),
                "cluster id {id}: each Machine once"
            );
            by_name_label += reading_all
                .iter()
                .filter(|m| {
                    let (ns, name) = m.split_once('/').expect("ns/name");
                    snap.get(&Default::default(), Kind::Machine, ns, name)
                        .is_some_and(|r| r.label(LABEL_CLUSTER_ID).is_none())
                })
                .count();
        }
        assert!(by_name_label > 3, "{by_name_label} found by the name label");
    }

    /// The VirtualMachineInstances the indexes name for a cluster id are every one a reading of
    /// them all finds, however its cluster is told: its own label, its source Machine's label,
    /// its name, or the name its source Machine label gives when that Machine does not exist;
    /// and a cluster's VMs in figures (the clusters list's `vmTotals`), read through the indexes,
    /// are those a reading of its namespace's VMs gives (a past moment's snapshot, which keeps
    /// no search indexes).
    #[test]
    fn a_cluster_ids_vms_and_instances_through_the_indexes_are_those_a_reading_of_every_one_finds()
    {
        let objects = fleet(&FleetSpec::demo());
        let before = Store::new();
        before.apply(objects.iter().cloned().map(Op::Upsert).collect());
        let snap = before.snapshot();
        let mut ways = [0usize; 4];
        let mut vm_ways = [0usize; 4];
        let mut changed = Vec::new();
        for (i, r) in objects.iter().enumerate() {
            let virt = matches!(
                r.kind(),
                Kind::VirtualMachineInstance | Kind::VirtualMachine
            );
            let Some((id, _)) = virt.then(|| hosts::cluster_of(&snap, r)).flatten() else {
                changed.push(r.clone());
                continue;
            };
            let mut v = r.to_value();
            let way = i % 4;
            if way != 3 {
                // A name that tells nothing.
                v["metadata"]["name"] = serde_json::json!(format!("vm-{i}"));
            }
            let labels = &mut v["metadata"]["labels"];
            match way {
                // Its source Machine's label: a Machine whose name tells nothing holds the id,
                // and only that Machine leads to it.
                0 => {
                    let machine = labels[LABEL_SOURCE_MACHINE]
                        .as_str()
                        .and_then(|m| snap.get(r.datacenter(), Kind::Machine, r.namespace(), m))
                        .filter(|m| m.label(LABEL_CLUSTER_ID) == Some(id.as_str()))
                        .expect("the demo's VMs name a Machine of their cluster");
                    let mut m = machine.to_value();
                    m["metadata"]["name"] = serde_json::json!(format!("host-{i}"));
                    changed.push(decode(m).expect("decodes"));
                    labels[LABEL_SOURCE_MACHINE] = serde_json::json!(format!("host-{i}"));
                }
                // A source Machine that does not exist, whose name gives the cluster.
                1 => labels[LABEL_SOURCE_MACHINE] = serde_json::json!(format!("{id}-wrk9{i}")),
                // Its own label, and no source Machine.
                2 => {
                    labels[LABEL_CLUSTER_ID] = serde_json::json!(id);
                    if let Some(l) = labels.as_object_mut() {
                        l.remove(LABEL_SOURCE_MACHINE);
                    }
                }
                // As the demo makes it: named as its Machine.
                _ => {}
            }
            if r.kind() == Kind::VirtualMachine {
                vm_ways[way] += 1;
            } else {
                ways[way] += 1;
            }
            changed.push(decode(v).expect("decodes"));
        }
        assert!(ways.iter().all(|n| *n > 2), "VMIs each way: {ways:?}");
        assert!(vm_ways.iter().all(|n| *n > 2), "VMs each way: {vm_ways:?}");
        let store = Store::new();
        let past = store.past(changed.clone());
        store.apply(changed.into_iter().map(Op::Upsert).collect());
        let snap = store.snapshot();
        let mut ids: BTreeSet<String> = snap
            .list(Kind::VirtualMachineInstance)
            .filter_map(|r| hosts::cluster_of(&snap, r).map(|(id, _)| id))
            .collect();
        assert!(ids.len() > 3, "clusters with VMIs: {ids:?}");
        ids.insert("no-such-cluster".into());
        let mut found = 0;
        for id in ids {
            let narrow = vm_instances(&snap, None, Some(id.clone())).expect("a filter");
            let only = narrow.only.as_ref().expect("read through the indexes");
            let names = |from: &mut dyn Iterator<Item = &Arc<Resource>>| -> BTreeSet<String> {
                from.filter(|r| r.kind() == Kind::VirtualMachineInstance && (narrow.keep)(r))
                    .map(|r| format!("{}/{}", r.namespace(), r.name()))
                    .collect()
            };
            let through_indexes = names(&mut only.iter().copied());
            let reading_all = names(&mut snap.list(Kind::VirtualMachineInstance));
            assert_eq!(through_indexes, reading_all, "cluster id {id}");
            found += reading_all.len();
        }
        assert_eq!(
            found,
            ways.iter().sum::<usize>(),
            "every VMI is of one cluster"
        );
        let mut vms = 0;
        for kc in snap.list(Kind::KubernetesCluster) {
            let Resource::KubernetesCluster(c) = &**kc else {
                continue;
            };
            let id = &*c.spec.data.cluster_id;
            let named = hosts::virtual_of_cluster(&snap, Kind::VirtualMachine, id);
            assert!(named.is_some(), "{id}: read through the indexes");
            assert!(
                hosts::virtual_of_cluster(&past, Kind::VirtualMachine, id).is_none(),
                "a past moment keeps no search indexes"
            );
            let (dc, ns) = (kc.datacenter(), kc.namespace());
            let read = hosts::cluster_vm_totals(&past, dc, ns, id);
            assert_eq!(hosts::cluster_vm_totals(&snap, dc, ns, id), read, "{id}");
            vms += read.total;
        }
        assert_eq!(
            vms,
            vm_ways.iter().sum::<usize>(),
            "every VM is of a cluster"
        );
    }
}
