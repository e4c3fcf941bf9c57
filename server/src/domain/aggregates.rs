//! The fleet in numbers (what `infrastructure` and `clusterSummary` answer), kept up to date as
//! the store applies changes: each write re-derives the contribution of the objects it touched
//! (and of the clusters whose pipeline reads them), never the whole fleet.
//!
//! Every contributing object has a [`Part`]; the totals are the sum of the parts, updated by
//! taking a part's old value out and putting its new value in. The parts live in a persistent map
//! (cheap to clone), so each snapshot carries its own consistent totals.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use imbl::OrdMap;

use crate::domain::{pipeline, resources};
use crate::model::{Kind, LABEL_CLUSTER_ID, LABEL_CLUSTER_NAME, Resource};
use crate::store::{Change, DerivedState, Idx, ObjectKey, Snapshot, scoped};

/// What one object adds to the totals.
#[derive(Clone, Debug, PartialEq)]
enum Part {
    Machine {
        phase: Option<String>,
        provider: String,
        vcpus: i64,
        memory_bytes: i64,
        disk_gb: i64,
    },
    NetworkNamespace {
        ready: bool,
        failed: bool,
    },
    NetworkConfiguration {
        ips: usize,
    },
    Vip {
        ready: bool,
    },
    Storage {
        phase: Option<String>,
    },
    Cluster {
        phase: Option<String>,
        stage: pipeline::Stage,
        state: ClusterState,
    },
}

/// A cluster's health as the summary counts it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClusterState {
    /// Ready with nothing wrong.
    Ready,
    /// Ready by its own status, but some of its objects are not healthy.
    Degraded,
    /// A terminal blocker.
    Failed,
    /// Still progressing.
    InProgress,
}

/// Counts by a string value (phase, provider, stage), ordered by value.
pub type Counts = BTreeMap<String, usize>;

/// The sums behind the summaries. Money-like sums are exact (i128) and clamped when read, so
/// taking a part out is the exact inverse of putting it in.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Totals {
    /// Objects per kind.
    pub kinds: BTreeMap<Kind, usize>,
    /// Machines by `status.phase` (the empty string for none).
    pub machine_phases: Counts,
    /// Machines by `spec.provider`.
    pub machine_providers: Counts,
    machine_vcpus: i128,
    machine_memory: i128,
    machine_disk: i128,
    /// NetworkNamespaces with Ready=True.
    pub ready_namespaces: usize,
    /// NetworkNamespaces failed (Ready=False, reason Error).
    pub failed_namespaces: usize,
    /// IPv4 addresses across NetworkConfigurations.
    pub allocated_ips: usize,
    /// VIPs with an address.
    pub ready_vips: usize,
    /// ClusterStorages by phase.
    pub storage_phases: Counts,
    /// KubernetesClusters by phase.
    pub cluster_phases: Counts,
    /// KubernetesClusters by pipeline stage.
    pub cluster_stages: BTreeMap<pipeline::Stage, usize>,
    /// KubernetesClusters by health, indexed by [`ClusterState::index`].
    cluster_states: [usize; 4],
}

impl ClusterState {
    /// How a cluster with this pipeline is counted (degraded before ready before failed).
    pub fn of(p: &pipeline::Pipeline) -> Self {
        if p.degraded() {
            ClusterState::Degraded
        } else if p.ready() {
            ClusterState::Ready
        } else if p.failed() {
            ClusterState::Failed
        } else {
            ClusterState::InProgress
        }
    }

    fn index(self) -> usize {
        match self {
            ClusterState::Ready => 0,
            ClusterState::Degraded => 1,
            ClusterState::Failed => 2,
            ClusterState::InProgress => 3,
        }
    }
}

/// How many objects the search indexes may name for a list of `kind` before reading the whole
/// kind is cheaper: an eighth of the kind (each object found through them costs several times
/// what reading one does; see [`Snapshot::holding`]). The kind's count is the aggregates' where
/// the store keeps them, else every object's.
pub fn worth_an_index(snap: &Snapshot, kind: Kind) -> usize {
    let of_kind = snap
        .derived::<Aggregates>()
        .map_or_else(|| snap.len(), |a| a.totals().count(kind));
    of_kind / 8
}

/// An exact sum as i64, clamped at its bounds.
pub fn clamp(v: i128) -> i64 {
    v.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64
}

fn bump<K: Ord>(map: &mut BTreeMap<K, usize>, key: K, add: bool) {
    if add {
        *map.entry(key).or_default() += 1;
    } else if let std::collections::btree_map::Entry::Occupied(mut e) = map.entry(key) {
        *e.get_mut() -= 1;
        if *e.get() == 0 {
            e.remove();
        }
    }
}

impl Totals {
    /// Objects of a kind.
    pub fn count(&self, kind: Kind) -> usize {
        self.kinds.get(&kind).copied().unwrap_or(0)
    }

    /// Sum of the Machines' vCPUs (clamped to i64).
    pub fn machine_vcpus(&self) -> i64 {
        clamp(self.machine_vcpus)
    }

    /// Sum of the Machines' memory in bytes (clamped to i64).
    pub fn machine_memory_bytes(&self) -> i64 {
        clamp(self.machine_memory)
    }

    /// Sum of the Machines' disks in GB (clamped to i64).
    pub fn machine_disk_gb(&self) -> i64 {
        clamp(self.machine_disk)
    }

    /// Clusters in a state.
    pub fn clusters(&self, state: ClusterState) -> usize {
        self.cluster_states[state.index()]
    }

    fn apply(&mut self, part: &Part, add: bool) {
        let sign: i128 = if add { 1 } else { -1 };
        let one: isize = if add { 1 } else { -1 };
        let flag = |on: bool| if on { one } else { 0 };
        let shift = |n: &mut usize, by: isize| *n = n.saturating_add_signed(by);
        match part {
            Part::Machine {
                phase,
                provider,
                vcpus,
                memory_bytes,
                disk_gb,
            } => {
                bump(
                    &mut self.machine_phases,
                    phase.clone().unwrap_or_default(),
                    add,
                );
                bump(&mut self.machine_providers, provider.clone(), add);
                self.machine_vcpus += sign * i128::from(*vcpus);
                self.machine_memory += sign * i128::from(*memory_bytes);
                self.machine_disk += sign * i128::from(*disk_gb);
            }
            Part::NetworkNamespace { ready, failed } => {
                shift(&mut self.ready_namespaces, flag(*ready));
                shift(&mut self.failed_namespaces, flag(*failed));
            }
            Part::NetworkConfiguration { ips } => {
                let by = isize::try_from(*ips).unwrap_or(isize::MAX);
                shift(&mut self.allocated_ips, one * by);
            }
            Part::Vip { ready } => shift(&mut self.ready_vips, flag(*ready)),
            Part::Storage { phase } => bump(
                &mut self.storage_phases,
                phase.clone().unwrap_or_default(),
                add,
            ),
            Part::Cluster {
                phase,
                stage,
                state,
            } => {
                bump(
                    &mut self.cluster_phases,
                    phase.clone().unwrap_or_default(),
                    add,
                );
                bump(&mut self.cluster_stages, *stage, add);
                shift(&mut self.cluster_states[state.index()], one);
            }
        }
    }
}

/// The totals and the parts they are made of, as of one snapshot.
#[derive(Clone, Debug, Default)]
pub struct Aggregates {
    parts: OrdMap<ObjectKey, Part>,
    totals: Totals,
}

impl Aggregates {
    /// Everything counted from scratch.
    pub fn build(snap: &Snapshot) -> Self {
        let mut a = Aggregates::default();
        for kind in Kind::ALL {
            let n = snap.count(*kind);
            if n > 0 {
                a.totals.kinds.insert(*kind, n);
            }
            for r in snap.list(*kind) {
                a.set(ObjectKey::of(r), part(snap, r));
            }
        }
        a
    }

    /// The totals.
    pub fn totals(&self) -> &Totals {
        &self.totals
    }

    /// A cluster's pipeline stage and health as judged for these totals (None: no cluster of
    /// that key is counted here). The judgment is carried from snapshot to snapshot and made
    /// again only for the clusters a change concerns, so reading it costs a lookup.
    pub fn cluster(&self, key: &ObjectKey) -> Option<(pipeline::Stage, ClusterState)> {
        match self.parts.get(key)? {
            Part::Cluster { stage, state, .. } => Some((*stage, *state)),
            _ => None,
        }
    }

    /// These aggregates brought up to `snap`, which is the snapshot they were made for plus
    /// `changes`.
    pub fn advanced(&self, snap: &Snapshot, changes: &[Arc<Change>]) -> Self {
        let mut next = self.clone();
        let mut dirty: BTreeSet<ObjectKey> = BTreeSet::new();
        for c in changes {
            let key = ObjectKey::of(&c.object);
            match c.change {
                crate::store::ChangeType::Added => bump(&mut next.totals.kinds, key.kind, true),
                crate::store::ChangeType::Deleted => bump(&mut next.totals.kinds, key.kind, false),
                crate::store::ChangeType::Modified => {}
            }
            for r in std::iter::once(&c.object).chain(c.previous.as_ref()) {
                dependents(snap, r, &mut dirty);
            }
            dirty.insert(key);
        }
        for key in dirty {
            let now = snap.get_key(&key).and_then(|r| part(snap, r));
            next.set(key, now);
        }
        next
    }

    /// Replace the part of `key` (None: it contributes nothing).
    fn set(&mut self, key: ObjectKey, part: Option<Part>) {
        let old = match part {
            Some(p) => {
                self.totals.apply(&p, true);
                self.parts.insert(key, p)
            }
            None => self.parts.remove(&key),
        };
        if let Some(old) = old {
            self.totals.apply(&old, false);
        }
    }
}

/// Keys of the objects whose part reads `r` (besides `r` itself): the clusters whose pipeline
/// looks at it, and for a MachineClass the Machines that name it.
fn dependents(snap: &Snapshot, r: &Resource, out: &mut BTreeSet<ObjectKey>) {
    let (dc, ns) = (r.datacenter(), r.namespace());
    let clusters_by = |idx: Idx, value: &str, out: &mut BTreeSet<ObjectKey>| {
        out.extend(
            snap.lookup(dc, idx, &scoped(ns, value))
                .map(|c| ObjectKey::of(c)),
        );
    };
    // Every cluster a Machine's labels name: each with its clusterId, or the one named by
    // `cluster.vitistack.io/cluster-name`.
    let machine_clusters =
        |m: &Resource, out: &mut BTreeSet<ObjectKey>| match m.label(LABEL_CLUSTER_ID) {
            Some(id) => clusters_by(Idx::ClusterById, id, out),
            None => {
                if let Some(name) = m.label(LABEL_CLUSTER_NAME) {
                    out.insert(ObjectKey::new(dc, Kind::KubernetesCluster, ns, name));
                }
            }
        };
    match r {
        // A cluster reads its own NetworkNamespace, and the one each of its configurations and
        // its VIP draw from (which allocator takes them), all in its namespace: a namespace's
        // change may concern every cluster there.
        Resource::NetworkNamespace(_) | Resource::NetworkNamespaceV2(_) => out.extend(
            snap.list_in_datacenter(dc, Kind::KubernetesCluster, ns)
                .map(|c| ObjectKey::of(c)),
        ),
        Resource::Machine(_) => machine_clusters(r, out),
        // A cluster reads the configuration named after each of its Machines.
        Resource::NetworkConfiguration(_) => {
            if let Some(m) = snap.get(dc, Kind::Machine, ns, r.name()) {
                machine_clusters(m, out);
            }
        }
        // A cluster reads the VIP named after its cluster id.
        Resource::ControlPlaneVirtualSharedIp(_) => clusters_by(Idx::ClusterById, r.name(), out),
        Resource::MachineClass(_) => {
            out.extend(
                snap.lookup(dc, Idx::MachineByClass, r.name())
                    .map(|m| ObjectKey::of(m)),
            );
        }
        _ => {}
    }
}

/// What `r` adds to the totals (None for kinds that only count).
fn part(snap: &Snapshot, r: &Resource) -> Option<Part> {
    let phase = || r.phase().map(str::to_owned);
    Some(match r {
        Resource::Machine(m) => {
            let res = resources::of(snap, m);
            Part::Machine {
                phase: phase(),
                provider: m.spec.provider.to_string(),
                vcpus: res.vcpus,
                memory_bytes: res.memory_bytes.unwrap_or(0),
                disk_gb: res.disk_gb,
            }
        }
        Resource::NetworkNamespace(_) => {
            let r = r.readiness();
            Part::NetworkNamespace {
                ready: r.ready,
                failed: r.failed,
            }
        }
        Resource::NetworkConfiguration(c) => Part::NetworkConfiguration {
            ips: allocated_ips(c),
        },
        Resource::ControlPlaneVirtualSharedIp(v) => Part::Vip {
            ready: vip_ready(v),
        },
        Resource::ClusterStorage(_) => Part::Storage { phase: phase() },
        Resource::KubernetesCluster(kc) => {
            let p = pipeline::evaluate(snap, kc);
            Part::Cluster {
                phase: phase(),
                stage: p.stage,
                state: ClusterState::of(&p),
            }
        }
        _ => return None,
    })
}

/// IPv4 addresses a NetworkConfiguration's interfaces were given.
pub fn allocated_ips(c: &crate::model::NetworkConfiguration) -> usize {
    c.status
        .as_ref()
        .and_then(|st| st.network_interfaces.as_ref())
        .map(|ifs| {
            ifs.iter()
                .map(|i| i.ipv4_addresses.as_ref().map_or(0, |a| a.len()))
                .sum::<usize>()
        })
        .unwrap_or(0)
}

/// A control-plane VIP has an address.
pub fn vip_ready(v: &crate::model::ControlPlaneVirtualSharedIp) -> bool {
    v.status
        .as_ref()
        .and_then(|st| st.load_balancer_ips.as_ref())
        .is_some_and(|l| !l.is_empty())
}

/// How the store keeps [`Aggregates`] with every snapshot (see `Store::derive_with`).
pub fn deriver() -> crate::store::Deriver {
    Box::new(
        |before: Option<&DerivedState>, snap: &Snapshot, changes: &[Arc<Change>]| {
            let next = match before.and_then(|b| b.downcast_ref::<Aggregates>()) {
                Some(a) => a.advanced(snap, changes),
                None => Aggregates::build(snap),
            };
            Arc::new(next) as DerivedState
        },
    )
}

#[cfg(test)]
mod tests;
