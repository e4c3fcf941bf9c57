//! What previewing a cluster costs on a large fleet: `clusterPlan`'s work (the cluster object
//! validated as the API server would, its Machines named, and the capacity check placing every
//! running VM plus the new Machines on the hosts, once with every host up and again with the
//! largest hosts removed one by one), on the 500-cluster demo fleet with its hosts and VMs.

use criterion::{Criterion, criterion_group, criterion_main};
use vitistack::change::cluster::{ClusterInput, ControlPlaneInput, NodePoolInput, plan};
use vitistack::domain::hosts::Overcommit;
use vitistack::source::demo::{FleetSpec, fleet};
use vitistack::store::{Op, Store};

fn input(workers: i64) -> ClusterInput {
    ClusterInput {
        namespace: "team-0".into(),
        name: "bench".into(),
        cluster_id: None,
        provider: None,
        datacenter: "test-south-az1".into(),
        region: "south".into(),
        zone: "az1".into(),
        project: "p".into(),
        workspace: "w".into(),
        workorder: "wo".into(),
        environment: "dev".into(),
        network_namespace_name: Some("net-000".into()),
        version: "1.33.1".into(),
        control_plane: ControlPlaneInput {
            replicas: 3,
            machine_class: Some("medium".into()),
            provider: None,
            version: None,
        },
        node_pools: vec![NodePoolInput {
            name: "w".into(),
            replicas: workers,
            machine_class: Some("medium".into()),
            provider: None,
            version: None,
        }],
    }
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("cluster_plan");
    for clusters in [14usize, 500] {
        let store = Store::new();
        let spec = if clusters == 14 {
            FleetSpec::demo()
        } else {
            FleetSpec::large_demo(clusters)
        };
        store.apply(fleet(&spec).into_iter().map(Op::Upsert).collect());
        let snap = store.snapshot();
        for workers in [2i64, 50] {
            let i = input(workers);
            g.bench_function(
                format!("fleet_{clusters}_new_cluster_3cp_{workers}w"),
                |b| b.iter(|| plan(&snap, &Default::default(), &i, Overcommit::default(), 1)),
            );
        }
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
