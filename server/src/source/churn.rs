//! Random changes to a fleet, for the tests that check what the store keeps across changes
//! (aggregates, parts of answers) against computing it afresh.

use std::sync::Arc;

use serde_json::json;

use crate::model::{Kind, LABEL_CLUSTER_ID, Resource};
use crate::source::demo::{FleetSpec, Rng, decode};
use crate::source::simulator::Simulator;
use crate::store::{ObjectKey, Op, Snapshot};

/// One random edit of `r` of the kind that moves the totals, a cluster's pipeline or a
/// relationship.
pub(crate) fn edit(
    r: &Resource,
    rng: &mut Rng,
    cluster_ids: &[String],
    classes: &[String],
) -> Option<Op> {
    let mut v = r.to_value();
    let pick = |rng: &mut Rng, xs: &[&str]| xs[rng.below(xs.len() as u64) as usize].to_owned();
    match r.kind() {
        Kind::Machine => match rng.below(4) {
            0 => {
                v["status"] =
                    json!({"phase": pick(rng, &["Running", "Failed", "Pending", "Stopped"])})
            }
            1 if !cluster_ids.is_empty() => {
                let id = &cluster_ids[rng.below(cluster_ids.len() as u64) as usize];
                v["metadata"]["labels"][LABEL_CLUSTER_ID] = json!(id);
            }
            2 if !classes.is_empty() => {
                v["spec"]["machineClass"] =
                    json!(classes[rng.below(classes.len() as u64) as usize]);
            }
            _ => v["spec"]["cpu"] = json!({"cores": rng.below(64) + 1, "sockets": 2}),
        },
        Kind::MachineClass => v["spec"]["cpu"]["cores"] = json!(rng.below(32) + 1),
        Kind::NetworkConfiguration => {
            v["status"] = json!({"phase": "Ready", "networkInterfaces": [
                {"name": "eth0", "ipv4Addresses": (0..rng.below(3)).map(|i| format!("10.9.0.{i}")).collect::<Vec<_>>()}]})
        }
        Kind::NetworkNamespace => {
            let ok = rng.below(2) == 0;
            v["status"] = json!({"phase": if ok { "Ready" } else { "Error" }, "conditions": [{"type": "Ready",
                "status": if ok { "True" } else { "False" }, "reason": if ok { "Ready" } else { "Error" },
                "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]})
        }
        Kind::ControlPlaneVirtualSharedIp => {
            v["status"] = if rng.below(2) == 0 {
                json!({"loadBalancerIps": ["10.1.1.1"], "phase": "Ready"})
            } else {
                json!({"phase": "Pending"})
            }
        }
        Kind::KubernetesCluster => {
            v["status"] = json!({"phase": pick(rng, &["Ready", "Provisioning", "Failed"])})
        }
        Kind::ClusterStorage => v["status"] = json!({"phase": pick(rng, &["Bound", "Pending"])}),
        _ => return None,
    }
    decode(v).map(Op::Upsert)
}

/// Random batches of edits, deletions, re-creations and simulator steps.
pub(crate) struct Churn {
    sim: Simulator,
    rng: Rng,
    deleted: Vec<Resource>,
}

impl Churn {
    /// Changes to the fleet `spec` describes, from `seed`.
    pub(crate) fn new(spec: &FleetSpec, seed: u64) -> Churn {
        Churn {
            sim: Simulator::new(spec, seed),
            rng: Rng(seed.wrapping_mul(7919) + 1),
            deleted: Vec::new(),
        }
    }

    /// The next batch (one to five changes) for the graph in `snap`.
    pub(crate) fn batch(&mut self, snap: &Snapshot) -> Vec<Op> {
        let all: Vec<Arc<Resource>> = Kind::ALL
            .iter()
            .flat_map(|k| snap.list(*k).cloned().collect::<Vec<_>>())
            .collect();
        let cluster_ids: Vec<String> = snap
            .list(Kind::KubernetesCluster)
            .filter_map(|c| match c.as_ref() {
                Resource::KubernetesCluster(kc) => Some(kc.spec.data.cluster_id.to_string()),
                _ => None,
            })
            .collect();
        let classes: Vec<String> = snap
            .list(Kind::MachineClass)
            .map(|c| c.name().to_owned())
            .collect();
        let rng = &mut self.rng;
        let mut ops = Vec::new();
        for _ in 0..=rng.below(4) {
            match rng.below(10) {
                0..=1 => ops.extend(self.sim.step()),
                2 if !all.is_empty() => {
                    let r = &all[rng.below(all.len() as u64) as usize];
                    self.deleted.push((**r).clone());
                    ops.push(Op::Delete(ObjectKey::of(r)));
                }
                3 if !self.deleted.is_empty() => {
                    let i = rng.below(self.deleted.len() as u64) as usize;
                    ops.push(Op::Upsert(self.deleted.swap_remove(i)));
                }
                _ if !all.is_empty() => {
                    let r = &all[rng.below(all.len() as u64) as usize];
                    ops.extend(edit(r, rng, &cluster_ids, &classes));
                }
                _ => {}
            }
        }
        ops
    }
}
