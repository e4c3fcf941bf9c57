//! The demo's platform: the Vitistack, providers, classes, the hosts that run VMs and their
//! KubeVirt objects.

use serde_json::{Value, json};

use super::{FleetSpec, obj};

/// How many worker hosts accept VMs: four for the small demo, and for a large fleet one per 100
/// of its VMs (about 16 per cluster), so that the hosts are loaded as a real zone's would be.
/// It depends on the number of clusters only, so a cluster the simulator scales keeps its hosts.
pub(super) fn vm_host_count(spec: &FleetSpec) -> usize {
    (spec.clusters * 16).div_ceil(100).max(4)
}

/// The name of the worker host that accepts VMs with index `i` (from 0).
pub(super) fn vm_host(i: usize) -> String {
    format!("kv-node-{:02}", i + 1)
}

/// The KubeVirt hosts: a tainted control plane, the workers that take VMs, one cordoned, one
/// NotReady with memory pressure. A large fleet's workers are bigger machines (128 cores, 1 TiB).
pub(super) fn hosts(out: &mut Vec<Value>, spec: &FleetSpec) {
    let node = |name: &str, role: &str, cpu: &str, mem: &str, ready: &str, extra: Value| {
        let mut n = json!({"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {format!("node-role.kubernetes.io/{role}"): "",
                "kubernetes.io/hostname": name, "topology.kubernetes.io/zone": "az1"}},
            "spec": {},
            "status": {"capacity": {"cpu": cpu, "memory": mem, "pods": "110"},
                       "allocatable": {"cpu": format!("{}m", cpu.parse::<i64>().unwrap_or(0) * 1000 - 500), "memory": mem, "pods": "110"},
                       "conditions": [{"type": "Ready", "status": ready, "reason": if ready == "True" { "KubeletReady" } else { "NodeStatusUnknown" },
                                       "message": if ready == "True" { "kubelet is posting ready status" } else { "Kubelet stopped posting node status." }},
                                      {"type": "MemoryPressure", "status": "False"}, {"type": "DiskPressure", "status": "False"}],
                       "nodeInfo": {"kubeletVersion": "v1.33.4", "osImage": "Talos (v1.11.5)", "architecture": "amd64"}}});
        if let (Some(dst), Some(src)) = (n.as_object_mut(), extra.as_object()) {
            for (k, v) in src {
                if let (Some(Value::Object(a)), Value::Object(b)) = (dst.get_mut(k), v) {
                    a.extend(b.clone());
                }
            }
        }
        n
    };
    out.push(node("kv-cp-01", "control-plane", "16", "64Gi", "True",
        json!({"spec": {"taints": [{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}]}})));
    let workers = vm_host_count(spec);
    let (cpu, mem) = if workers > 4 {
        ("128", "1024Gi")
    } else {
        ("64", "256Gi")
    };
    for i in 0..workers {
        out.push(node(&vm_host(i), "worker", cpu, mem, "True", json!({})));
    }
    out.push(node(
        &vm_host(workers),
        "worker",
        "64",
        "256Gi",
        "True",
        json!({"spec": {"unschedulable": true}}),
    ));
    let mut sick = node(
        &vm_host(workers + 1),
        "worker",
        "32",
        "128Gi",
        "Unknown",
        json!({}),
    );
    sick["status"]["conditions"][1]["status"] = json!("True");
    out.push(sick);
}

/// The VM (and, when it runs, the VMI) kubevirt-operator makes for a Machine.
pub(super) fn kubevirt_vm(
    out: &mut Vec<Value>,
    ns: &str,
    name: &str,
    class: &str,
    state: &str,
    host: &str,
    ip: &str,
) {
    let (cores, mem) = match class {
        "small" => (2, "4Gi"),
        "large" => (8, "16Gi"),
        "xlarge" => (16, "32Gi"),
        "largememory" => (8, "64Gi"),
        _ => (4, "8Gi"),
    };
    let labels = json!({"vitistack.io/source-machine": name, "vitistack.io/managed-by": "kubevirt-operator"});
    let domain = json!({"cpu": {"sockets": 1, "cores": cores, "threads": 1}, "memory": {"guest": mem},
                        "resources": {"requests": {"memory": mem}}});
    out.push(
        json!({"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
        "metadata": {"name": name, "namespace": ns, "labels": labels},
        "spec": {"runStrategy": if state == "Stopped" { "Halted" } else { "Always" },
                 "template": {"metadata": {"labels": labels}, "spec": {"domain": domain}}},
        "status": {"printableStatus": state, "ready": state == "Running"}}),
    );
    if state == "Running" {
        out.push(
            json!({"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
            "metadata": {"name": name, "namespace": ns, "labels": labels},
            "spec": {"domain": domain},
            "status": {"phase": "Running", "nodeName": host,
                       "interfaces": [{"name": "default", "ipAddresses": [ip]}]}}),
        );
    }
}

pub(super) fn platform(out: &mut Vec<Value>) {
    out.push(obj(
        "Vitistack",
        "v1alpha1",
        json!({"name": "vitistack"}),
        json!({"displayName": "Demo Stack South", "region": "south", "zone": "az1", "infrastructure": "test",
               "description": "Demo Viti Stack zone generated by vitistack-graphql",
               "location": {"country": "no", "city": "Oslo"},
               "machineProviders": [{"name": "kubevirt-provider", "priority": 1, "enabled": true},
                                    {"name": "proxmox-provider", "priority": 2, "enabled": true}],
               "kubernetesProviders": [{"name": "talos-provider", "priority": 1, "enabled": true}]}),
        Some(json!({"phase": "Ready", "displayName": "Demo Stack South", "region": "south", "zone": "az1",
                    "infrastructure": "test", "machineProviderCount": 2, "kubernetesProviderCount": 1})),
    ));
    for (name, display, cores, mem, enabled, default) in [
        ("small", "Small", 2, "4Gi", true, false),
        ("medium", "Medium", 4, "8Gi", true, true),
        ("large", "Large", 8, "16Gi", true, false),
        ("xlarge", "XLarge", 16, "32Gi", true, false),
        ("largememory", "Large memory", 8, "64Gi", true, false),
        ("gpu", "GPU", 4, "16Gi", false, false),
    ] {
        let mut spec = json!({"displayName": display, "description": format!("{display} instance with {cores} cores and {mem} memory"),
            "enabled": enabled, "default": default, "category": "Standard",
            "cpu": {"cores": cores, "sockets": 1, "threads": 1}, "memory": {"quantity": mem}, "machineProviders": []});
        if name == "gpu" {
            spec["gpu"] = json!({"cores": 1024, "manufacturer": "nvidia"});
        }
        out.push(obj(
            "MachineClass",
            "v1alpha1",
            json!({"name": name}),
            spec,
            None,
        ));
    }
    out.push(obj(
        "KubevirtConfig",
        "v1alpha1",
        json!({"name": "kubevirt-provider"}),
        json!({"name": "kubevirt-provider", "secretNamespace": "vitistack", "kubeconfigSecretRef": "kubevirt-provider"}),
        None,
    ));
    out.push(obj(
        "MachineProvider",
        "v1alpha1",
        json!({"name": "kubevirt-provider", "labels": {"vitistack.io/kubevirt-config": "kubevirt-provider"}}),
        json!({"displayName": "KubeVirt south", "providerType": "kubevirt", "region": "south",
               "authentication": {"type": "credentials", "credentialsRef": {"secretName": "kubevirt-provider", "namespace": "vitistack"}}}),
        None,
    ));
    out.push(obj(
        "MachineProvider",
        "v1alpha1",
        json!({"name": "proxmox-provider"}),
        json!({"displayName": "Proxmox south", "providerType": "proxmox", "region": "south",
               "authentication": {"type": "token"}}),
        None,
    ));
    out.push(obj(
        "KubernetesProvider",
        "v1alpha1",
        json!({"name": "talos-provider", "labels": {"vitistack.io/managed-by": "talos-operator"}}),
        json!({"providerType": "talos", "displayName": "Talos", "version": "v1.11.5", "region": "south",
               "cluster": {"controlPlane": {"replicas": 3, "machineClass": "large"}},
               "machineProviderRef": {"name": "kubevirt-provider"}}),
        None,
    ));
    out.push(obj(
        "ProxmoxConfig",
        "v1alpha1",
        json!({"name": "pve-south"}),
        json!({"name": "pve-south", "endpoint": "https://pve.south.example", "port": "8006", "username": "vitistack@pve",
               "token": "<redacted>"}),
        None,
    ));
    out.push(obj(
        "ClusterStorageClass",
        "v1alpha1",
        json!({"name": "ceph-rbd"}),
        json!({"enabled": true, "version": "1.0", "type": "ceph", "data": {"pool": "rbd"}}),
        None,
    ));
}
