use serde_json::json;

use super::*;
use crate::graphql::query::{
    cluster_summary, cluster_summary_full, infrastructure_summary, infrastructure_summary_full,
};
use crate::source::demo::{FleetSpec, Rng, decode, fleet};
use crate::source::simulator::Simulator;
use crate::store::{Op, Store};

fn store_with_fleet(spec: &FleetSpec) -> Store {
    let store = Store::new().derive_with(deriver());
    store.apply(fleet(spec).into_iter().map(Op::Upsert).collect());
    store
}

/// The kept totals equal the totals counted from scratch, and the GraphQL summaries built from
/// them equal the ones built by walking the fleet.
fn assert_consistent(store: &Store, step: usize, seed: u64) {
    let snap = store.snapshot();
    let kept = snap
        .derived::<Aggregates>()
        .expect("the store keeps aggregates");
    let fresh = Aggregates::build(&snap);
    assert_eq!(
        kept.totals(),
        fresh.totals(),
        "seed {seed}, step {step}: kept totals differ from a recount"
    );
    assert_eq!(
        infrastructure_summary(&snap),
        infrastructure_summary_full(&snap),
        "seed {seed}, step {step}"
    );
    assert_eq!(cluster_summary(&snap), cluster_summary_full(&snap));
}

/// One random edit of `r` of the kind that moves the totals or a cluster's pipeline.
fn edit(r: &Resource, rng: &mut Rng, cluster_ids: &[String], classes: &[String]) -> Option<Op> {
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

/// Random batches of edits, deletions, re-creations and simulator steps: after every batch the
/// kept aggregates equal a recount, over many seeds.
#[test]
fn kept_aggregates_equal_a_recount_after_random_changes() {
    for seed in 0..24u64 {
        let spec = FleetSpec {
            clusters: 6,
            ..FleetSpec::demo()
        };
        let store = store_with_fleet(&spec);
        assert_consistent(&store, 0, seed);
        let mut sim = Simulator::new(&spec, seed);
        let mut rng = Rng(seed.wrapping_mul(7919) + 1);
        let mut deleted: Vec<Resource> = Vec::new();
        for step in 1..=60 {
            let snap = store.snapshot();
            let all: Vec<Arc<Resource>> = Kind::ALL
                .iter()
                .flat_map(|k| snap.list(*k).cloned().collect::<Vec<_>>())
                .collect();
            let cluster_ids: Vec<String> = snap
                .list(Kind::KubernetesCluster)
                .filter_map(|c| match c.as_ref() {
                    Resource::KubernetesCluster(kc) => Some(kc.spec.data.cluster_id.clone()),
                    _ => None,
                })
                .collect();
            let classes: Vec<String> = snap
                .list(Kind::MachineClass)
                .map(|c| c.name().to_owned())
                .collect();
            let mut ops = Vec::new();
            for _ in 0..=rng.below(4) {
                match rng.below(10) {
                    0..=1 => ops.extend(sim.step()),
                    2 if !all.is_empty() => {
                        let r = &all[rng.below(all.len() as u64) as usize];
                        deleted.push((**r).clone());
                        ops.push(Op::Delete(Key::of(r)));
                    }
                    3 if !deleted.is_empty() => {
                        let i = rng.below(deleted.len() as u64) as usize;
                        ops.push(Op::Upsert(deleted.swap_remove(i)));
                    }
                    _ if !all.is_empty() => {
                        let r = &all[rng.below(all.len() as u64) as usize];
                        ops.extend(edit(r, &mut rng, &cluster_ids, &classes));
                    }
                    _ => {}
                }
            }
            store.apply(ops);
            assert_consistent(&store, step, seed);
        }
    }
}

#[test]
fn a_restore_derives_the_aggregates_from_scratch() {
    let store = Store::new().derive_with(deriver());
    store.restore(fleet(&FleetSpec::demo()));
    let snap = store.snapshot();
    let kept = snap.derived::<Aggregates>().expect("kept");
    assert!(kept.totals().count(Kind::Machine) > 10);
    assert_eq!(kept.totals(), Aggregates::build(&snap).totals());
}

#[test]
fn a_machine_class_change_moves_the_sums_of_the_machines_that_name_it() {
    let store = store_with_fleet(&FleetSpec::demo());
    let before = infrastructure_summary(&store.snapshot()).machines.vcpus;
    let snap = store.snapshot();
    let class = snap
        .list(Kind::MachineClass)
        .find(|c| snap.lookup(Idx::MachineByClass, c.name()).next().is_some())
        .expect("a class in use")
        .clone();
    let users = snap.lookup(Idx::MachineByClass, class.name()).count() as i64;
    let mut v = class.to_value();
    let cores = v["spec"]["cpu"]["cores"].as_i64().unwrap_or(1);
    v["spec"]["cpu"]["cores"] = json!(cores + 1);
    store.apply(vec![Op::Upsert(decode(v).expect("decodes"))]);
    let after = infrastructure_summary(&store.snapshot()).machines.vcpus;
    // Machines with their own cpu override do not move; every other user gains one core per
    // socket × thread (at least one vCPU each).
    assert!(after > before, "{before} → {after} for {users} machines");
    assert_consistent(&store, 1, 0);
}
