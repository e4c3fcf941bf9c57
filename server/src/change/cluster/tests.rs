use serde_json::json;

use super::*;
use crate::store::{Op, Store};

const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

fn obj(kind: Kind, version: &str, v: Value) -> Resource {
    Resource::from_value(kind, version, v).expect("object")
}

fn class(name: &str, cores: i64, memory: &str, enabled: bool) -> Op {
    Op::Upsert(obj(
        Kind::MachineClass,
        "v1alpha1",
        json!({"metadata": {"name": name},
               "spec": {"displayName": name, "enabled": enabled, "category": "standard",
                        "cpu": {"cores": cores}, "memory": {"quantity": memory}}}),
    ))
}

fn host(name: &str, cpu: &str, memory: &str) -> Op {
    Op::Upsert(obj(
        Kind::Node,
        "v1",
        json!({"metadata": {"name": name, "labels": {"kubevirt.io/schedulable": "true"}},
               "status": {"allocatable": {"cpu": cpu, "memory": memory},
                          "capacity": {"cpu": cpu, "memory": memory},
                          "conditions": [{"type": "Ready", "status": "True"}]}}),
    ))
}

fn machine(ns: &str, name: &str, cluster: &str, role: &str, pool: Option<&str>) -> Op {
    let mut annotations = json!({});
    if let Some(p) = pool {
        annotations[ANNOTATION_NODE_POOL] = json!(p);
    }
    Op::Upsert(obj(
        Kind::Machine,
        "v1alpha1",
        json!({"metadata": {"name": name, "namespace": ns,
                            "labels": {LABEL_CLUSTER_ID: cluster, LABEL_NODE_ROLE: role},
                            "annotations": annotations},
               "spec": {"provider": "kubevirt", "machineClass": "medium"}}),
    ))
}

fn input(cp: i64, pools: &[(&str, i64)]) -> ClusterInput {
    ClusterInput {
        namespace: "tenant".into(),
        name: "alpha".into(),
        cluster_id: None,
        provider: None,
        datacenter: "test-south-az1".into(),
        region: "south".into(),
        zone: "az1".into(),
        project: "p".into(),
        workspace: "w".into(),
        workorder: "wo-1".into(),
        environment: "dev".into(),
        network_namespace_name: Some("tenant-net".into()),
        version: "1.33.1".into(),
        control_plane: ControlPlaneInput {
            replicas: cp,
            machine_class: Some("medium".into()),
            provider: None,
            version: None,
        },
        node_pools: pools
            .iter()
            .map(|(n, r)| NodePoolInput {
                name: (*n).into(),
                replicas: *r,
                machine_class: None,
                provider: None,
                version: None,
            })
            .collect(),
    }
}

fn store(ops: Vec<Op>) -> Store {
    let s = Store::new();
    let mut all = vec![
        class("medium", 2, "4Gi", true),
        class("off", 2, "4Gi", false),
    ];
    all.extend(ops);
    s.apply(all);
    s
}

fn names(p: &ClusterPlan) -> Vec<String> {
    p.machines.iter().map(|m| m.name.clone()).collect()
}

#[test]
fn a_new_cluster_gets_talos_machine_names_labels_and_classes() {
    let s = store(vec![host("h1", "16", "64Gi"), host("h2", "16", "64Gi")]);
    let p = plan(
        &s.snapshot(),
        &Default::default(),
        &input(3, &[("a", 2), ("b", 1)]),
        Overcommit::default(),
        1,
    );
    assert!(p.valid, "{:?}", p.problems);
    assert!(!p.exists);
    assert_eq!(
        names(&p),
        [
            "alpha-ctp0",
            "alpha-ctp1",
            "alpha-ctp2",
            "alpha-wrk0",
            "alpha-wrk1",
            "alpha-wrk2"
        ]
    );
    let w2 = &p.machines[5];
    assert_eq!(w2.node_pool.as_deref(), Some("b"));
    assert_eq!((w2.vcpus, w2.memory_bytes), (2.0, 4.0 * GIB));
    assert!(
        w2.yaml.contains("vitistack.io/clusterid: alpha"),
        "{}",
        w2.yaml
    );
    assert!(
        w2.yaml.contains("vitistack.io/node-role: worker"),
        "{}",
        w2.yaml
    );
    assert!(w2.yaml.contains("vitistack.io/nodepool: b"), "{}", w2.yaml);
    assert!(p.cluster_yaml.contains("replicas: 3"), "{}", p.cluster_yaml);
    assert_eq!(
        p.capacity.verdict,
        CapacityVerdict::Fits,
        "{}",
        p.capacity.message
    );
    assert_eq!(p.capacity.added_vcpus, 12.0);
    // The NetworkNamespace does not exist (yet): said, not refused.
    assert!(
        p.warnings[0].contains("tenant/tenant-net does not exist"),
        "{:?}",
        p.warnings
    );
    // Without a name, and none in the namespace to take: the CRD requires one.
    let mut i = input(1, &[]);
    i.network_namespace_name = None;
    let p = plan(
        &s.snapshot(),
        &Default::default(),
        &i,
        Overcommit::default(),
        1,
    );
    assert!(
        p.problems
            .iter()
            .any(|e| e.path == "spec.data.networkNamespaceName"),
        "{:?}",
        p.problems
    );
    assert!(
        p.warnings[0].contains("no NetworkNamespace"),
        "{:?}",
        p.warnings
    );
}

#[test]
fn even_control_planes_bad_names_and_missing_or_disabled_classes_are_field_errors() {
    let s = store(vec![]);
    let mut i = input(2, &[("Bad_Pool", 1), ("x", -1)]);
    i.zone = " ".into();
    i.control_plane.machine_class = Some("nope".into());
    i.node_pools[1].machine_class = Some("off".into());
    let p = plan(
        &s.snapshot(),
        &Default::default(),
        &i,
        Overcommit::default(),
        1,
    );
    assert!(!p.valid);
    let paths: Vec<&str> = p.problems.iter().map(|e| e.path.as_str()).collect();
    for want in [
        "nodePools[0].name",
        "nodePools[1].replicas",
        "zone",
        "spec.topology.controlplane.machineClass",
        "spec.topology.workers.nodePools[1].machineClass",
    ] {
        assert!(paths.contains(&want), "{want} missing from {paths:?}");
    }
    // The CRD's own rule (CEL: odd replicas), found by the embedded schema.
    assert!(
        p.problems
            .iter()
            .any(|e| e.path.starts_with("spec.topology.controlplane") && e.reason.contains("odd")),
        "{:?}",
        p.problems
    );
    assert_eq!(p.capacity.verdict, CapacityVerdict::Unknown);
}

#[test]
fn scaling_keeps_existing_machines_and_reuses_the_lowest_free_worker_index() {
    // wrk1 is gone (a gap): pool b's new worker takes it; pool a shrinks from its highest index.
    let s = store(vec![
        host("h1", "64", "256Gi"),
        machine("tenant", "alpha-ctp0", "alpha", "control-plane", None),
        machine("tenant", "alpha-wrk0", "alpha", "worker", Some("a")),
        machine("tenant", "alpha-wrk2", "alpha", "worker", Some("a")),
        machine("tenant", "alpha-wrk3", "alpha", "worker", Some("b")),
    ]);
    let p = plan(
        &s.snapshot(),
        &Default::default(),
        &input(1, &[("a", 1), ("b", 2)]),
        Overcommit::default(),
        0,
    );
    assert_eq!(
        names(&p),
        ["alpha-ctp0", "alpha-wrk0", "alpha-wrk3", "alpha-wrk1"]
    );
    assert_eq!(p.removed, ["alpha-wrk2"]);
    let new: Vec<&str> = p
        .machines
        .iter()
        .filter(|m| !m.exists)
        .map(|m| m.name.as_str())
        .collect();
    assert_eq!(new, ["alpha-wrk1"]);
    assert_eq!(p.capacity.added_vcpus, 2.0);
}

#[test]
fn capacity_says_when_machines_do_not_fit_or_leave_too_few_hosts_able_to_fail() {
    // Two hosts of 4 allocatable cores (12 vCPU with the default 3× overcommit) and 16 GiB.
    let small = || store(vec![host("h1", "4", "16Gi"), host("h2", "4", "16Gi")]);
    // 5 machines of 4 GiB = 20 GiB: fit on both, but not on one: no host can fail.
    let p = plan(
        &small().snapshot(),
        &Default::default(),
        &input(5, &[]),
        Overcommit::default(),
        1,
    );
    assert_eq!(
        p.capacity.verdict,
        CapacityVerdict::BelowRedundancy,
        "{}",
        p.capacity.message
    );
    assert_eq!(p.capacity.hosts_that_can_fail_after, 0);
    assert!(p.capacity.message.contains("MIN_HOSTS_THAT_CAN_FAIL is 1"));
    // With a minimum of 0 they fit.
    let p = plan(
        &small().snapshot(),
        &Default::default(),
        &input(5, &[]),
        Overcommit::default(),
        0,
    );
    assert_eq!(p.capacity.verdict, CapacityVerdict::Fits);
    // 9 machines of 4 GiB = 36 GiB on 32 GiB: do not fit.
    let p = plan(
        &small().snapshot(),
        &Default::default(),
        &input(9, &[]),
        Overcommit::default(),
        0,
    );
    assert_eq!(
        p.capacity.verdict,
        CapacityVerdict::DoesNotFit,
        "{}",
        p.capacity.message
    );
    assert!(
        p.capacity.message.contains("do not fit"),
        "{}",
        p.capacity.message
    );
    // Machines on Proxmox: their hosts are not in the graph.
    let mut i = input(1, &[]);
    i.control_plane.provider = Some("proxmox".into());
    let p = plan(
        &small().snapshot(),
        &Default::default(),
        &i,
        Overcommit::default(),
        0,
    );
    assert_eq!(p.capacity.verdict, CapacityVerdict::Unknown);
    assert!(
        p.capacity.message.contains("proxmox"),
        "{}",
        p.capacity.message
    );
    assert_eq!(p.capacity.added_vcpus.to_string(), "0");
    // No host at all: unknown, not a made-up answer.
    let p = plan(
        &store(vec![]).snapshot(),
        &Default::default(),
        &input(1, &[]),
        Overcommit::default(),
        0,
    );
    assert_eq!(p.capacity.verdict, CapacityVerdict::Unknown);
}

#[test]
fn the_stored_cluster_shows_every_field_its_creation_applied() {
    // The write waits for a change showing the applied fields: a field the model drops or
    // rewrites would make every create wait in vain.
    let s = store(vec![]);
    let mut config = input(3, &[("a", 2)]).object(&s.snapshot(), &Default::default());
    let stored = crate::change::validate(Kind::KubernetesCluster, "v1alpha1", config.clone())
        .expect("valid");
    if let Some(m) = config.as_object_mut() {
        m.remove("apiVersion");
        m.remove("kind");
    }
    let back = stored.to_value();
    let missing: Vec<String> = config["spec"]
        .as_object()
        .into_iter()
        .flatten()
        .flat_map(|(k, v)| {
            v.as_object()
                .into_iter()
                .flatten()
                .map(move |(k2, v2)| (k, k2, v2))
        })
        .filter(|(k, k2, v)| !crate::change::merge::shows(&back["spec"][k][k2], v))
        .map(|(k, k2, v)| format!("spec.{k}.{k2}: {v} vs {}", back["spec"][k][k2]))
        .collect();
    assert!(missing.is_empty(), "{missing:?}");
    assert!(crate::change::merge::shows(&back, &config));
}
