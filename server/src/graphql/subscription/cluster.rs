//! `clusterChanged`: one cluster as it is now, sent again whenever it or an object that belongs
//! to it changes.

use std::sync::Arc;

use async_graphql::Context;
use futures::StreamExt;
use tokio::sync::broadcast;

use super::events::{After, ClusterEvent, Mode, ResourceEvent, ResourceEventType, Seq};
use super::metrics::{Active, counted};
use crate::error::ErrorCode;
use crate::model::{Kind, Resource};
use crate::store::{ChangeType, Snapshot};

/// What decides whether a change concerns a cluster: its identity and the references it has now
/// (read from the graph at each change, so a renamed NetworkNamespace reference is followed).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct ClusterRefs {
    datacenter: crate::model::Datacenter,
    namespace: String,
    name: String,
    cluster_id: String,
    network_namespace: String,
}

impl ClusterRefs {
    fn of(kc: &crate::model::KubernetesCluster) -> Self {
        ClusterRefs {
            datacenter: kc.datacenter.clone(),
            namespace: kc
                .metadata
                .namespace
                .as_deref()
                .unwrap_or_default()
                .to_string(),
            name: kc.metadata.name.as_deref().unwrap_or_default().to_string(),
            cluster_id: kc.spec.data.cluster_id.to_string(),
            network_namespace: kc.spec.data.network_namespace_name.to_string(),
        }
    }
}

/// True when `r` is the cluster or one of its objects: matched by exact names and label values
/// (never by prefix: cluster `t-1` is not `t-10`). A NetworkConfiguration belongs to the cluster
/// through its clusterid label, or through the Machine it is for (same name, or its
/// `vitistack.io/source-machine` label) when that Machine is the cluster's in `snap`.
pub(super) fn related(r: &Resource, refs: &ClusterRefs, snap: &Snapshot) -> bool {
    if r.namespace() != refs.namespace || r.datacenter() != &refs.datacenter {
        return false;
    }
    let id = refs.cluster_id.as_str();
    let labelled = r.label(crate::model::LABEL_CLUSTER_ID) == Some(id);
    match r {
        Resource::KubernetesCluster(_) => r.name() == refs.name,
        Resource::NetworkNamespace(_) | Resource::NetworkNamespaceV2(_) => {
            r.name() == refs.network_namespace
        }
        Resource::ControlPlaneVirtualSharedIp(_) => r.name() == id || labelled,
        Resource::Machine(_) => r.labelled_for_cluster(id, &refs.name),
        Resource::NetworkConfiguration(_) => {
            labelled || {
                let machine = r
                    .label(crate::model::LABEL_SOURCE_MACHINE)
                    .unwrap_or(r.name());
                snap.get(&refs.datacenter, Kind::Machine, &refs.namespace, machine)
                    .is_some_and(|m| m.labelled_for_cluster(id, &refs.name))
            }
        }
        Resource::EtcdBackup(b) => {
            labelled || b.spec.cluster_name == refs.name || b.spec.cluster_name == id
        }
        Resource::ClusterStorage(c) => labelled || c.spec.cluster_id == id,
        _ => false,
    }
}

/// The cluster `key` as it is in `snap`, as an event of `clusterChanged`.
pub(super) fn cluster_now(
    snap: &Snapshot,
    key: &crate::store::ObjectKey,
    changed: Option<ResourceEvent>,
) -> Seq<ClusterEvent> {
    let ev = ClusterEvent {
        sequence: snap.seq(),
        cluster: snap
            .get_key(key)
            .cloned()
            .and_then(crate::graphql::types::ClusterObj::new),
        changed,
    };
    Seq::new(snap.seq(), ev)
}

/// `clusterChanged`: the cluster now, then again on every change to it or its objects; `mode`
/// picks the part.
pub(super) fn cluster_changed(
    ctx: &Context<'_>,
    id: async_graphql::ID,
    mode: Mode,
) -> async_graphql::Result<futures::stream::BoxStream<'static, Seq<ClusterEvent>>> {
    let key = crate::graphql::types::decode_id(&id)
        .map_err(|e| ErrorCode::BadId.graphql(e.to_string()))?;
    if key.kind != Kind::KubernetesCluster {
        return Err(
            ErrorCode::BadId.graphql(format!("{id:?} is a {}, not a KubernetesCluster", key.kind))
        );
    }
    let store = super::open::scoped(ctx);
    let active = Active::new(counted(ctx), "clusterChanged");
    let rx = store.subscribe();
    let snap = store.snapshot();
    let current = snap.get_key(&key).cloned();
    let Some(Resource::KubernetesCluster(kc)) = current.as_deref() else {
        return Err(ErrorCode::NotFound.graphql(format!("no KubernetesCluster {key}")));
    };
    let refs = ClusterRefs::of(kc);
    After::note(ctx.data_opt::<Arc<After>>(), snap.seq());
    let after = snap.seq();
    let first = match mode {
        Mode::Whole | Mode::Opening => Some(cluster_now(&snap, &key, None)),
        Mode::Resync => Some(cluster_now(
            &snap,
            &key,
            Some(ResourceEvent::marker(ResourceEventType::Resync, snap.seq())),
        )),
        Mode::Live => None,
    };
    drop(snap);
    if first.is_some() {
        active.event(mode == Mode::Resync);
    }
    let first = futures::stream::iter(first);
    if matches!(mode, Mode::Opening | Mode::Resync) {
        return Ok(first.boxed());
    }
    Ok(first
        .chain(futures::stream::unfold(
            (rx, store, active, after, refs),
            move |(mut rx, store, active, after, mut refs)| {
                let key = key.clone();
                async move {
                    loop {
                        match rx.recv().await {
                            // What the subscriber may not see is not its news.
                            Ok(c) if c.seq > after && store.sees(&c.object) => {
                                let snap = store.snapshot();
                                // The cluster's references as of this change (followed through
                                // the stream, in order): a renamed NetworkNamespace reference is
                                // followed from the change that renames it on.
                                if let Resource::KubernetesCluster(kc) = c.object.as_ref()
                                    && crate::store::ObjectKey::of(&c.object) == key
                                    && c.change != ChangeType::Deleted
                                {
                                    refs = ClusterRefs::of(kc);
                                }
                                let concerns = related(&c.object, &refs, &snap)
                                    || c.previous
                                        .as_deref()
                                        .is_some_and(|p| related(p, &refs, &snap));
                                if !concerns {
                                    continue;
                                }
                                let t = match c.change {
                                    ChangeType::Added => ResourceEventType::Added,
                                    ChangeType::Modified => ResourceEventType::Modified,
                                    ChangeType::Deleted => ResourceEventType::Deleted,
                                };
                                active.event(false);
                                let changed = ResourceEvent::of(t, c.seq, &c.object);
                                let mut ev = cluster_now(&snap, &key, Some(changed)).event;
                                ev.sequence = c.seq;
                                return Some((
                                    Seq::new(c.seq, ev),
                                    (rx, store, active, after, refs),
                                ));
                            }
                            Ok(_) => continue,
                            Err(broadcast::error::RecvError::Lagged(_)) => {
                                // Missed some changes: send the cluster as it is now.
                                active.event(true);
                                let snap = store.snapshot();
                                let ev = cluster_now(
                                    &snap,
                                    &key,
                                    Some(ResourceEvent::marker(
                                        ResourceEventType::Resync,
                                        snap.seq(),
                                    )),
                                );
                                return Some((ev, (rx, store, active, snap.seq(), refs)));
                            }
                            Err(broadcast::error::RecvError::Closed) => return None,
                        }
                    }
                }
            },
        ))
        .boxed())
}
