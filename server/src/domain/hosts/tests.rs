//! Allocation and redundancy against hand-computed cases, including where the old status page
//! was wrong.

use serde_json::json;

use super::*;
use crate::model::Kind;
use crate::store::{Op, Store};

const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

fn vmi(v: serde_json::Value) -> VirtualMachineInstance {
    serde_json::from_value(v).unwrap()
}

fn vm(v: serde_json::Value) -> VirtualMachine {
    serde_json::from_value(v).unwrap()
}

fn node(v: serde_json::Value) -> Node {
    serde_json::from_value(v).unwrap()
}

#[test]
fn vcpus_are_sockets_times_cores_times_threads() {
    // The old page read `cores` only: 2.
    let i = vmi(json!({"spec": {"domain": {"cpu": {"sockets": 2, "cores": 2, "threads": 2}}}}));
    assert_eq!(demand(Some(&i), None).vcpus, 8.0);
    // Missing parts default to 1, as in KubeVirt.
    let i = vmi(json!({"spec": {"domain": {"cpu": {"cores": 4}}}}));
    assert_eq!(demand(Some(&i), None).vcpus, 4.0);
    // No topology: the CPU request, rounded up; nothing at all: 1.
    let i = vmi(json!({"spec": {"domain": {"resources": {"requests": {"cpu": "1500m"}}}}}));
    assert_eq!(demand(Some(&i), None).vcpus, 2.0);
    assert_eq!(demand(Some(&vmi(json!({}))), None).vcpus, 1.0);
}

#[test]
fn memory_comes_from_the_instance_then_the_request_then_the_template_with_real_quantities() {
    // A standalone VMI with only a request: the old page counted 0.
    let i = vmi(json!({"spec": {"domain": {"resources": {"requests": {"memory": "4Gi"}}}}}));
    assert_eq!(demand(Some(&i), None).memory_bytes, 4.0 * GIB);
    // Decimals and SI suffixes: the old parser could not read 1.5Gi and took G as 1000 MiB.
    let i = vmi(json!({"spec": {"domain": {"memory": {"guest": "1.5Gi"}}}}));
    assert_eq!(demand(Some(&i), None).memory_bytes, 1.5 * GIB);
    let i = vmi(json!({"spec": {"domain": {"memory": {"guest": "2G"}}}}));
    assert_eq!(demand(Some(&i), None).memory_bytes, 2e9);
    // The instance does not say: the VM template does.
    let v = vm(
        json!({"spec": {"template": {"spec": {"domain": {"memory": {"guest": "8Gi"},
        "cpu": {"cores": 2, "sockets": 1}}}}}}),
    );
    let d = demand(Some(&vmi(json!({}))), Some(&v));
    assert_eq!((d.vcpus, d.memory_bytes), (2.0, 8.0 * GIB));
}

fn host(name: &str, cpu: &str, alloc_cpu: &str, mem: &str, alloc_mem: &str) -> Node {
    node(json!({"metadata": {"name": name},
        "status": {"capacity": {"cpu": cpu, "memory": mem}, "allocatable": {"cpu": alloc_cpu, "memory": alloc_mem},
            "conditions": [{"type": "Ready", "status": "True"}]}}))
}

#[test]
fn cpu_limit_is_allocatable_times_overcommit_not_capacity() {
    let n = host("h1", "16", "15500m", "64Gi", "62Gi");
    let c = capacity(&n);
    // Old page: 16 × 3 = 48, ignoring allocatable.
    assert_eq!(c.cpu_limit(Overcommit::default()), 46.5);
    assert_eq!(c.memory_limit(Overcommit::default()), 62.0 * GIB);
    let o = Overcommit {
        cpu: 4.0,
        memory: 1.5,
    };
    assert_eq!(c.cpu_limit(o), 62.0);
    assert_eq!(c.memory_limit(o), 93.0 * GIB);
}

#[test]
fn readiness_keeps_unknown_apart_and_reads_cordons_taints_and_pressure() {
    let n = node(
        json!({"metadata": {"name": "cp1", "labels": {"node-role.kubernetes.io/control-plane": ""}},
        "spec": {"unschedulable": true, "taints": [{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"},
            {"key": "soft", "effect": "PreferNoSchedule"}]},
        "status": {"conditions": [{"type": "Ready", "status": "Unknown"}, {"type": "MemoryPressure", "status": "True"},
            {"type": "DiskPressure", "status": "False"}]}}),
    );
    let c = capacity(&n);
    assert_eq!(
        c.readiness,
        HostReadiness::Unknown,
        "the old page said NotReady"
    );
    assert!(c.unschedulable);
    assert_eq!(
        c.blocking_taints,
        vec!["node-role.kubernetes.io/control-plane:NoSchedule"]
    );
    assert_eq!(c.pressures, vec!["MemoryPressure"]);
    assert_eq!(
        c.roles,
        vec!["control-plane"],
        "control-plane nodes are kept"
    );
    assert!(!c.accepts_vms());
    let plain = node(
        json!({"metadata": {"name": "w"}, "status": {"conditions": [{"type": "Ready", "status": "False"}]}}),
    );
    assert_eq!(capacity(&plain).readiness, HostReadiness::NotReady);
    assert_eq!(capacity(&plain).roles, vec!["worker"]);
}

fn bin(name: &str, vcpus: f64, mem_gib: f64) -> Bin {
    Bin {
        name: name.into(),
        vcpus,
        memory: mem_gib * GIB,
    }
}

fn need(vcpus: f64, mem_gib: f64) -> Demand {
    Demand {
        vcpus,
        memory_bytes: mem_gib * GIB,
    }
}

/// The old page's algorithm, for comparison: smallest first by cores + MB, aggregate only.
fn legacy(bins: &[Bin], demands: &[Demand]) -> usize {
    let mut sorted: Vec<&Bin> = bins.iter().collect();
    sorted.sort_by(|a, b| {
        (a.vcpus + a.memory / 1048576.0).total_cmp(&(b.vcpus + b.memory / 1048576.0))
    });
    let mut spare_cpu: f64 =
        bins.iter().map(|b| b.vcpus).sum::<f64>() - demands.iter().map(|d| d.vcpus).sum::<f64>();
    let mut spare_mem: f64 = bins.iter().map(|b| b.memory).sum::<f64>()
        - demands.iter().map(|d| d.memory_bytes).sum::<f64>();
    let mut n = 0;
    for b in sorted {
        if spare_cpu >= b.vcpus && spare_mem >= b.memory {
            spare_cpu -= b.vcpus;
            spare_mem -= b.memory;
            n += 1;
        } else {
            break;
        }
    }
    n
}

#[test]
fn redundancy_removes_the_largest_hosts_first() {
    // Two small hosts (32 GiB) and one large (128 GiB); VMs use 60 GiB in total.
    let bins = [
        bin("small-a", 48.0, 32.0),
        bin("small-b", 48.0, 32.0),
        bin("large", 96.0, 128.0),
    ];
    let demands: Vec<Demand> = (0..6).map(|_| need(2.0, 10.0)).collect();
    // The old page drops the two small hosts first (68 GiB spare covers them) and says 2.
    assert_eq!(legacy(&bins, &demands), 2);
    // Losing the large host leaves 64 GiB in two 32 GiB hosts: three 10 GiB VMs per host fit
    // (30 ≤ 32), so one failure is fine; losing a small one as well leaves 32 GiB for 60: no.
    let r = redundancy(&bins, &demands);
    assert_eq!(r.hosts_that_can_fail, 1, "{r:?}");
    assert_eq!(r.usable_hosts, 3);
    assert!(r.limit.contains("large"), "{}", r.limit);
}

#[test]
fn redundancy_checks_each_vm_fits_on_one_host_not_only_the_total() {
    // After losing one host, 20 GiB are free in total but split 10 + 10: a 16 GiB VM fits nowhere.
    let bins = [
        bin("a", 32.0, 26.0),
        bin("b", 32.0, 26.0),
        bin("c", 32.0, 26.0),
    ];
    let demands = [need(2.0, 16.0), need(2.0, 16.0), need(2.0, 16.0)];
    // Aggregate: 78 − 48 = 30 GiB spare ≥ 26 → the old page says one host can fail.
    assert_eq!(legacy(&bins, &demands), 1);
    let r = redundancy(&bins, &demands);
    assert_eq!(r.hosts_that_can_fail, 0, "{r:?}");
    assert!(r.limit.contains("16.0 GiB"), "{}", r.limit);
}

#[test]
fn redundancy_edge_cases() {
    // No VMs: every host can fail.
    let bins = [bin("a", 8.0, 8.0), bin("b", 8.0, 8.0)];
    assert_eq!(redundancy(&bins, &[]).hosts_that_can_fail, 2);
    // Already overcommitted with every host up: 0, and it says so.
    let r = redundancy(&bins, &[need(1.0, 12.0)]);
    assert_eq!(r.hosts_that_can_fail, 0);
    assert!(r.limit.contains("even with every host up"), "{}", r.limit);
    // No hosts at all.
    assert_eq!(redundancy(&[], &[need(1.0, 1.0)]).hosts_that_can_fail, 0);
}

fn put(store: &Store, kind: Kind, v: serde_json::Value) {
    let r = Resource::from_value(kind, "v1", v).unwrap();
    store.apply(vec![Op::Mirror(r)]);
}

#[test]
fn allocation_counts_every_active_instance_on_the_host_and_keeps_stopped_vms_out() {
    let store = Store::new();
    put(
        &store,
        Kind::Node,
        json!({"metadata": {"name": "h1"},
        "status": {"capacity": {"cpu": "8", "memory": "32Gi"}, "allocatable": {"cpu": "8", "memory": "32Gi"},
            "conditions": [{"type": "Ready", "status": "True"}]}}),
    );
    // Running and Scheduled both hold resources; Succeeded does not.
    for (name, phase) in [("a", "Running"), ("b", "Scheduled"), ("done", "Succeeded")] {
        put(
            &store,
            Kind::VirtualMachineInstance,
            json!({"metadata": {"name": name, "namespace": "t"},
            "spec": {"domain": {"cpu": {"cores": 2}, "memory": {"guest": "4Gi"}}},
            "status": {"phase": phase, "nodeName": "h1"}}),
        );
    }
    // A stopped VM: no instance, so no usage, but it is in the graph.
    put(
        &store,
        Kind::VirtualMachine,
        json!({"metadata": {"name": "stopped", "namespace": "t"},
        "spec": {"runStrategy": "Halted", "template": {"spec": {"domain": {"cpu": {"cores": 4}}}}},
        "status": {"printableStatus": "Stopped"}}),
    );
    let snap = store.snapshot();
    let n = match snap
        .get(&Default::default(), Kind::Node, "", "h1")
        .unwrap()
        .as_ref()
    {
        Resource::Node(n) => n.as_ref().clone(),
        _ => unreachable!(),
    };
    let a = allocation(&snap, &n, Overcommit::default());
    assert_eq!(a.vms, 2);
    assert_eq!(a.vcpus_used, 4.0);
    assert_eq!(a.vcpus_limit, 24.0);
    assert_eq!(a.memory_used, 8.0 * GIB);
    assert_eq!(a.cpu_percent(), 4.0 / 24.0 * 100.0);
    assert_eq!(a.memory_percent(), 25.0);
    assert_eq!(snap.count(Kind::VirtualMachine), 1);
}

#[test]
fn membership_prefers_labels_over_name_guesses() {
    let store = Store::new();
    store.apply(vec![Op::Upsert(
        Resource::from_value(
            Kind::Machine,
            "v1alpha1",
            json!({"metadata": {"name": "m-7", "namespace": "t", "labels": {"vitistack.io/clusterid": "prod-b"}},
                "spec": {"provider": "kubevirt"}}),
        )
        .unwrap(),
    )]);
    let snap = store.snapshot();
    let r =
        |v: serde_json::Value| Resource::from_value(Kind::VirtualMachineInstance, "v1", v).unwrap();
    // Explicit label wins even over a name that looks like another cluster's.
    let labelled = r(
        json!({"metadata": {"name": "prod-a-wrk0", "namespace": "t", "labels": {"vitistack.io/clusterid": "prod-c"}}}),
    );
    assert_eq!(
        cluster_of(&snap, &labelled),
        Some(("prod-c".into(), MembershipSource::ClusterLabel))
    );
    // The source Machine's cluster; the old page would have guessed "prod-a" from the name.
    let via_machine = r(
        json!({"metadata": {"name": "prod-a-wrk1", "namespace": "t", "labels": {"vitistack.io/source-machine": "m-7"}}}),
    );
    assert_eq!(
        cluster_of(&snap, &via_machine),
        Some(("prod-b".into(), MembershipSource::SourceMachine))
    );
    // Only a name: guessed, and marked as a guess.
    let guessed = r(json!({"metadata": {"name": "prod-a-ctp2", "namespace": "t"}}));
    assert_eq!(
        cluster_of(&snap, &guessed),
        Some(("prod-a".into(), MembershipSource::NameGuess))
    );
    // "-wrk" alone is too short to be a suffix; nothing to go on → none (not "unknown").
    let bare = r(json!({"metadata": {"name": "db-wrk", "namespace": "t"}}));
    assert_eq!(cluster_of(&snap, &bare), None);
}

#[test]
fn a_clusters_vms_are_counted_with_their_hosts_and_errors_and_the_problems_by_state() {
    let store = Store::new();
    let vm = |name: &str, cluster: &str, status: &str| {
        Op::Upsert(
            Resource::from_value(
                Kind::VirtualMachine,
                "v1",
                json!({"metadata": {"name": name, "namespace": "t", "labels": {"vitistack.io/clusterid": cluster}},
                    "spec": {"template": {"spec": {"domain": {"cpu": {"sockets": 1, "cores": 2, "threads": 2},
                        "memory": {"guest": "2Gi"}}}}},
                    "status": {"printableStatus": status}}),
            )
            .unwrap(),
        )
    };
    let vmi = |name: &str, node: &str, phase: &str| {
        Op::Upsert(
            Resource::from_value(
                Kind::VirtualMachineInstance,
                "v1",
                json!({"metadata": {"name": name, "namespace": "t"},
                    "status": {"phase": phase, "nodeName": node}}),
            )
            .unwrap(),
        )
    };
    store.apply(vec![
        vm("a-ctp0", "a", "Running"),
        vm("a-wrk0", "a", "Running"),
        vm("a-wrk1", "a", "ErrorUnschedulable"),
        vm("a-wrk2", "a", "Starting"),
        vm("b-wrk0", "b", "Running"),
        vmi("a-ctp0", "h1", "Running"),
        vmi("a-wrk0", "h1", "Running"),
        vmi("a-wrk2", "h2", "Scheduling"),
        vmi("b-wrk0", "h3", "Running"),
        // A standalone instance, failed: a problem too.
        vmi("loose", "h3", "Failed"),
    ]);
    let snap = store.snapshot();
    let dc = crate::model::Datacenter::default();
    assert_eq!(
        cluster_vm_totals(&snap, &dc, "t", "a"),
        VmTotals {
            total: 4,
            running: 2,
            vcpus: 16.0,
            memory_bytes: 8.0 * GIB,
            hosts: 2,
            errors: 1
        }
    );
    assert_eq!(cluster_vm_totals(&snap, &dc, "t", "b").total, 1);
    assert_eq!(cluster_vm_totals(&snap, &dc, "other", "a").total, 0);
    // Failed: a-wrk1 and the loose instance; pending: a-wrk2 (its instance has a VM and is not
    // counted again).
    assert_eq!(vm_problems(&snap, None), (2, 1));
}

/// The one-walk census pairs each VirtualMachine with the instance of the same datacenter,
/// namespace and name, as a point read per object would: names that sort between each other
/// across namespaces and datacenters, VMs without instances, instances without VMs.
#[test]
fn the_census_pairs_every_vm_with_its_instance_as_point_reads_would() {
    use crate::model::Datacenter;
    let store = Store::new();
    let object = |kind: Kind, dc: &str, ns: &str, name: &str, body: serde_json::Value| {
        let mut v = body;
        v["metadata"] = json!({"name": name, "namespace": ns});
        Op::Upsert(
            Resource::from_value(kind, "v1", v)
                .unwrap()
                .in_datacenter(&Datacenter::new(dc)),
        )
    };
    let mut ops = Vec::new();
    // (datacenter, namespace, name, VM status or none, VMI phase or none)
    let cases = [
        ("bergen", "a", "x", Some("Running"), Some("Running")),
        ("bergen", "a", "x-1", Some("Stopped"), None),
        ("bergen", "b", "x", None, Some("Running")),
        (
            "oslo",
            "a",
            "x",
            Some("ErrorUnschedulable"),
            Some("Scheduling"),
        ),
        ("oslo", "a", "x-0", None, Some("Failed")),
        ("oslo", "a", "x-1", Some("Running"), Some("Running")),
        ("oslo", "a", "y", Some("Starting"), None),
        ("oslo", "b", "a", Some("Running"), Some("Succeeded")),
        ("trondheim", "a", "x", None, Some("Pending")),
    ];
    for (i, (dc, ns, name, vm_status, phase)) in cases.iter().enumerate() {
        if let Some(status) = vm_status {
            let guest = format!("{}Gi", i + 1);
            ops.push(object(
                Kind::VirtualMachine,
                dc,
                ns,
                name,
                json!({"spec": {"template": {"spec": {"domain": {"cpu": {"cores": i + 1},
                    "memory": {"guest": guest}}}}}, "status": {"printableStatus": status}}),
            ));
        }
        if let Some(phase) = phase {
            ops.push(object(
                Kind::VirtualMachineInstance,
                dc,
                ns,
                name,
                json!({"status": {"phase": phase, "nodeName": format!("h{i}")}}),
            ));
        }
    }
    store.apply(ops);
    let snap = store.snapshot();
    let key = |r: &std::sync::Arc<Resource>| crate::store::ObjectKey::of(r);
    for dc in [
        None,
        Some(Datacenter::new("oslo")),
        Some(Datacenter::new("none")),
    ] {
        let dc = dc.as_ref();
        // The reference: a point read per object.
        let mut pairs = Vec::new();
        for vm in snap.list_scope(dc, Kind::VirtualMachine) {
            let vmi = snap.get(
                vm.datacenter(),
                Kind::VirtualMachineInstance,
                vm.namespace(),
                vm.name(),
            );
            pairs.push((key(vm), Some(key(vm)), vmi.map(key)));
        }
        for vmi in snap.list_scope(dc, Kind::VirtualMachineInstance) {
            if snap
                .get(
                    vmi.datacenter(),
                    Kind::VirtualMachine,
                    vmi.namespace(),
                    vmi.name(),
                )
                .is_none()
            {
                pairs.push((key(vmi), None, Some(key(vmi))));
            }
        }
        let place = |k: &crate::store::ObjectKey| {
            (
                k.datacenter.clone(),
                k.namespace.to_string(),
                k.name.to_string(),
            )
        };
        pairs.sort_by_key(|(k, _, _)| place(k));
        let walked: Vec<_> = vm_pairs(&snap, dc)
            .map(|p| {
                let any = p.vm.or(p.vmi).unwrap();
                (key(any), p.vm.map(key), p.vmi.map(key))
            })
            .collect();
        assert_eq!(walked, pairs, "datacenter {dc:?}");
    }
    let all = vm_census(&snap, None);
    // Active: every instance but the Succeeded and Failed ones.
    let active: Vec<(&str, f64, f64, Option<&str>)> = all
        .active
        .iter()
        .map(|a| {
            (
                a.datacenter.key(),
                a.demand.vcpus,
                a.demand.memory_bytes / GIB,
                a.node,
            )
        })
        .collect();
    // The instance says neither CPU nor memory: its VirtualMachine's template does; a
    // standalone instance needs 1 vCPU and no memory known.
    assert_eq!(
        active,
        vec![
            ("bergen", 1.0, 1.0, Some("h0")),
            ("bergen", 1.0, 0.0, Some("h2")),
            ("oslo", 4.0, 4.0, Some("h3")),
            ("oslo", 6.0, 6.0, Some("h5")),
            ("trondheim", 1.0, 0.0, Some("h8")),
        ]
    );
    // Stopped: x-1 in bergen, y in oslo, a in oslo/b (its instance Succeeded).
    assert_eq!(all.stopped, 3);
    // Failed: oslo/a/x by its VM (its instance's phase is not counted again), the standalone
    // x-0; pending: y Starting, the standalone Pending one in trondheim.
    assert_eq!((all.failed, all.pending), (2, 2));
    assert_eq!(vm_problems(&snap, None), (2, 2));
    let oslo = vm_census(&snap, Some(&Datacenter::new("oslo")));
    assert_eq!(
        (oslo.active.len(), oslo.stopped, oslo.failed, oslo.pending),
        (2, 2, 2, 1)
    );
    assert_eq!(oslo.demands(None).len(), 2);
    assert_eq!(all.demands(Some(&Datacenter::new("bergen"))).len(), 2);
}
