use serde_json::json;

use super::*;
use crate::domain::summary::{
    cluster_summary, cluster_summary_full, infrastructure_summary, infrastructure_summary_full,
};
use crate::source::churn::Churn;
use crate::source::demo::{FleetSpec, decode, fleet};
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
    // Each cluster's kept judgment (what the clusters list filters by) is the one its
    // `pipeline` field gives now.
    for r in snap.list(Kind::KubernetesCluster) {
        let Resource::KubernetesCluster(kc) = &**r else {
            continue;
        };
        let p = pipeline::evaluate(&snap, kc);
        assert_eq!(
            kept.cluster(&ObjectKey::of(r)),
            Some((p.stage, ClusterState::of(&p))),
            "seed {seed}, step {step}: the kept judgment of {}",
            r.name()
        );
    }
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
        let mut churn = Churn::new(&spec, seed);
        for step in 1..=60 {
            let ops = churn.batch(&store.snapshot());
            store.apply(ops);
            assert_consistent(&store, step, seed);
        }
    }
}

/// Hundreds of changes in one write (a sync's batch, a past moment carried forward): the kept
/// aggregates still equal a recount.
#[test]
fn one_write_of_many_changes_keeps_the_aggregates_a_recount_gives() {
    let spec = FleetSpec {
        clusters: 6,
        ..FleetSpec::demo()
    };
    let store = store_with_fleet(&spec);
    let mut churn = Churn::new(&spec, 11);
    let mut ops = Vec::new();
    for _ in 0..100 {
        ops.extend(churn.batch(&store.snapshot()));
        if ops.len() >= 300 {
            break;
        }
    }
    assert!(ops.len() >= 300, "{} changes", ops.len());
    let changes = store.apply(ops);
    assert!(changes.len() >= 64, "{} changed", changes.len());
    assert_consistent(&store, 1, 11);
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
        .find(|c| {
            snap.lookup(&Default::default(), Idx::MachineByClass, c.name())
                .next()
                .is_some()
        })
        .expect("a class in use")
        .clone();
    let users = snap
        .lookup(&Default::default(), Idx::MachineByClass, class.name())
        .count() as i64;
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
