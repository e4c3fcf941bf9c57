use super::*;
use crate::model::validation::schema_for;

#[test]
fn every_generated_object_passes_its_crd_schema() {
    // (Nodes, VMs and VMIs have no CRD here; the next test checks they decode fully.)
    let objects = fleet(&FleetSpec::demo());
    assert!(objects.len() > 100, "{}", objects.len());
    for r in objects.iter().filter(|r| r.kind().is_vitistack()) {
        let mut v = r.to_value();
        let s = schema_for(r.kind(), r.version()).expect("schema");
        let result = s.validate(&mut v);
        assert!(
            result.errors.is_empty(),
            "{} {}: {:?}",
            r.kind(),
            r.name(),
            result.errors
        );
        assert!(
            result.unknown_fields.is_empty(),
            "{} {}: {:?}",
            r.kind(),
            r.name(),
            result.unknown_fields
        );
    }
}

#[test]
fn demo_hosts_carry_the_running_kubevirt_machines() {
    let objects = fleet(&FleetSpec::demo());
    let count = |k: Kind| objects.iter().filter(|r| r.kind() == k).count();
    assert_eq!(count(Kind::Node), 7);
    // Every running kubevirt Machine has a VM and a VMI; other kubevirt Machines a VM only.
    let kubevirt_machines: Vec<&Resource> = objects
        .iter()
        .filter(|r| matches!(r, Resource::Machine(m) if m.spec.provider == "kubevirt"))
        .collect();
    let running = kubevirt_machines
        .iter()
        .filter(|m| m.phase() == Some("Running"))
        .count();
    assert_eq!(count(Kind::VirtualMachine), kubevirt_machines.len());
    assert_eq!(count(Kind::VirtualMachineInstance), running);
    assert!(running > 10, "{running}");
    // Every VMI sits on a worker host that accepts VMs.
    for r in objects
        .iter()
        .filter(|r| r.kind() == Kind::VirtualMachineInstance)
    {
        let Resource::VirtualMachineInstance(i) = r else {
            unreachable!()
        };
        let node = crate::model::kubevirt::vmi_node(i).unwrap_or_default();
        assert!(
            (0..4).any(|i| vm_host(i) == node),
            "{node} is not a worker that accepts VMs"
        );
    }
}

#[test]
fn the_large_demo_spreads_its_vms_over_hosts_sized_for_them() {
    let objects = fleet(&FleetSpec::large_demo(500));
    let nodes = objects.iter().filter(|r| r.kind() == Kind::Node).count();
    // The control plane, 80 workers that take VMs, a cordoned and a NotReady one.
    assert_eq!(nodes, 1 + 80 + 2);
    let mut per_host = std::collections::HashMap::<String, usize>::new();
    for r in &objects {
        if let Resource::VirtualMachineInstance(i) = r {
            let node = crate::model::kubevirt::vmi_node(i).unwrap_or_default();
            *per_host.entry(node.to_string()).or_default() += 1;
        }
    }
    assert_eq!(per_host.len(), 80, "every worker that takes VMs has some");
    assert!(per_host.contains_key("kv-node-80") && !per_host.contains_key("kv-node-81"));
    // 8,000 VMs: 100 a host, give or take the spread.
    assert_eq!(per_host.values().sum::<usize>(), 8000);
    assert!(
        per_host.values().all(|n| (50..=150).contains(n)),
        "{per_host:?}"
    );
}

#[test]
fn the_large_fleet_has_twenty_machines_per_cluster() {
    let objects = fleet(&FleetSpec::large(50));
    let clusters = objects
        .iter()
        .filter(|r| r.kind() == Kind::KubernetesCluster)
        .count();
    assert_eq!(clusters, 50);
    let machines = objects.iter().filter(|r| r.kind() == Kind::Machine).count();
    assert_eq!(machines, 50 * 20);
}
