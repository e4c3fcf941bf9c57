//! The project's own demo fleet, shaped like the upstream operator examples: a Vitistack, providers,
//! machine classes, and tenant clusters caught at every stage of the operators' pipeline, with the
//! Machines, NetworkConfigurations, NetworkNamespaces and VIPs the operators would have written.
//! Deterministic for a given size and seed, so tests and benchmarks see the same graph.

mod platform;

use platform::{hosts, kubevirt_vm, platform, vm_host, vm_host_count};
use serde_json::{Value, json};

use crate::model::{Kind, Resource};

/// Where a generated cluster is stuck (or `Ready`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DemoStage {
    /// The NetworkNamespace has no status yet.
    NetworkPending,
    /// The NetworkNamespace failed (Ready=False, reason Error).
    NetworkError,
    /// Network Ready, no Machines yet.
    MachinesMissing,
    /// Machines exist, their NetworkConfigurations have no IPs yet.
    IpsPending,
    /// IPs allocated, Machines still Pending.
    MachinesProvisioning,
    /// One worker Machine Failed.
    MachineFailed,
    /// Machines Running, the VIP is waiting for an IP.
    VipPending,
    /// Talos is bootstrapping the first control plane.
    Bootstrapping,
    /// Everything applied, tenant Nodes not Ready yet.
    WaitingForNodes,
    /// Ready.
    Ready,
}

impl DemoStage {
    /// Every stage, in pipeline order.
    pub const ALL: [DemoStage; 10] = [
        DemoStage::NetworkPending,
        DemoStage::NetworkError,
        DemoStage::MachinesMissing,
        DemoStage::IpsPending,
        DemoStage::MachinesProvisioning,
        DemoStage::MachineFailed,
        DemoStage::VipPending,
        DemoStage::Bootstrapping,
        DemoStage::WaitingForNodes,
        DemoStage::Ready,
    ];

    fn at_least(self, other: DemoStage) -> bool {
        let pos = |s: DemoStage| DemoStage::ALL.iter().position(|x| *x == s).unwrap_or(0);
        pos(self) >= pos(other)
    }
}

/// Size and shape of a generated fleet.
#[derive(Clone, Debug)]
pub struct FleetSpec {
    /// Number of tenant clusters.
    pub clusters: usize,
    /// Worker replicas of the second node pool; the first has one more.
    pub workers_per_pool: usize,
    /// Control-plane replicas (odd).
    pub control_planes: usize,
    /// Seed for the names and the choice of stages.
    pub seed: u64,
    /// Share of clusters that are Ready, in percent; the rest spread over the other stages.
    pub ready_percent: u64,
    /// Also generate hosts (Nodes) and the KubeVirt VMs/VMIs of kubevirt Machines.
    pub hosts: bool,
    /// The datacenter its objects belong to (`DEMO_DATACENTERS`; empty: the one datacenter).
    pub datacenter: crate::model::Datacenter,
}

impl FleetSpec {
    /// The dashboard demo: a dozen clusters, every pipeline stage present.
    pub fn demo() -> Self {
        FleetSpec {
            clusters: 14,
            workers_per_pool: 2,
            control_planes: 1,
            seed: 7,
            ready_percent: 30,
            hosts: true,
            datacenter: Default::default(),
        }
    }

    /// The large demo (`DEMO_CLUSTERS`): the benchmark fleet with hosts and the VMs on them.
    pub fn large_demo(clusters: usize) -> Self {
        FleetSpec {
            hosts: true,
            ..Self::large(clusters)
        }
    }

    /// The benchmark fleet: `clusters` Ready clusters × 20 machines (3 control planes, pools of 9 and 8).
    pub fn large(clusters: usize) -> Self {
        FleetSpec {
            clusters,
            workers_per_pool: 8,
            control_planes: 3,
            seed: 42,
            ready_percent: 100,
            hosts: false,
            datacenter: Default::default(),
        }
    }
}

/// A small deterministic generator (SplitMix64): demo data must not depend on a crate's RNG changes.
#[derive(Clone)]
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    fn suffix(&mut self) -> String {
        const ALPHA: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
        (0..4)
            .map(|_| ALPHA[self.below(ALPHA.len() as u64) as usize] as char)
            .collect()
    }
}

const T0: &str = "2026-11-01T08:00:00Z";

/// The cluster the demo's applications run on: the first Ready one of the dashboard demo
/// (every other stage comes before it). The simulator never replaces it.
pub(crate) const APPS_CLUSTER: usize = DemoStage::ALL.len() - 1;

/// The UID of the demo's `kube-system` namespace in datacenter `dc`; the demo's
/// [`APPS_CLUSTER`] carries it as its `vitistack.io/kube-system-uid`, as talos-operator writes
/// it, which is how its applications are linked to it.
pub fn kube_system_uid(dc: &crate::model::Datacenter) -> String {
    // FNV-1a: a fixed, dependency-free digest of the datacenter's key.
    let h = dc.key().bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    format!("6b5d2c1e-0000-4000-8000-{:012x}", h & 0xffff_ffff_ffff)
}

/// Generate the fleet's objects (validated shapes; see the tests).
pub fn fleet(spec: &FleetSpec) -> Vec<Resource> {
    let mut objects = Vec::new();
    let mut out: Vec<Value> = Vec::new();
    platform(&mut out);
    if spec.hosts {
        hosts(&mut out, spec);
    }
    // Decode cluster by cluster so the JSON scaffolding never piles up (it would stay in the
    // allocator's free lists and inflate the server's resident memory).
    let mut flush = |out: &mut Vec<Value>| {
        objects.extend(
            out.drain(..)
                .filter_map(to_resource)
                .map(|r| r.in_datacenter(&spec.datacenter)),
        )
    };
    flush(&mut out);
    for (i, stage) in stages(spec).into_iter().enumerate() {
        tenant(&mut out, spec, i, stage, &mut tenant_rng(spec, i));
        flush(&mut out);
    }
    objects
}

/// The stage each of the fleet's clusters is generated at.
pub fn stages(spec: &FleetSpec) -> Vec<DemoStage> {
    let mut rng = Rng(spec.seed);
    let others: Vec<DemoStage> = DemoStage::ALL
        .iter()
        .copied()
        .filter(|s| *s != DemoStage::Ready)
        .collect();
    (0..spec.clusters)
        .map(|i| {
            // The first clusters walk through every stage (Ready last) so a small demo shows
            // each one.
            if i < others.len() && spec.ready_percent < 100 {
                others[i]
            } else if (i == others.len() && spec.ready_percent < 100)
                || rng.below(100) < spec.ready_percent
            {
                DemoStage::Ready
            } else {
                others[rng.below(others.len() as u64) as usize]
            }
        })
        .collect()
}

/// Each cluster draws its names from its own generator, so it can be generated again at
/// another stage (the simulator) with the same names.
fn tenant_rng(spec: &FleetSpec, i: usize) -> Rng {
    Rng(spec.seed ^ (i as u64 + 1).wrapping_mul(0xA24B_AED4_963E_E407))
}

/// One cluster's objects (NetworkNamespace, KubernetesCluster, Machines, NetworkConfigurations,
/// VIP, VMs, …) as the operators would have written them at `stage`, with `workers_per_pool`
/// workers in its second pool (the first has one more). Keyed by (kind, namespace, name).
pub fn tenant_objects(
    spec: &FleetSpec,
    i: usize,
    stage: DemoStage,
    workers_per_pool: usize,
) -> Vec<(crate::store::ObjectKey, Value)> {
    let mut out = Vec::new();
    let spec = FleetSpec {
        workers_per_pool,
        ..spec.clone()
    };
    tenant(&mut out, &spec, i, stage, &mut tenant_rng(&spec, i));
    out.into_iter()
        .filter_map(|v| {
            let kind: Kind = v.get("kind")?.as_str()?.parse().ok()?;
            let meta = v.get("metadata")?;
            let key = crate::store::ObjectKey::new(
                &spec.datacenter,
                kind,
                meta.get("namespace")
                    .and_then(Value::as_str)
                    .unwrap_or_default(),
                meta.get("name")?.as_str()?,
            );
            Some((key, v))
        })
        .collect()
}

/// Decode a generated object.
pub fn decode(v: Value) -> Option<Resource> {
    to_resource(v)
}

fn to_resource(mut v: Value) -> Option<Resource> {
    let kind: Kind = v.get("kind")?.as_str()?.parse().ok()?;
    let version = v
        .get("apiVersion")?
        .as_str()?
        .rsplit('/')
        .next()?
        .to_string();
    if let Some(m) = v.as_object_mut() {
        m.remove("apiVersion");
        m.remove("kind");
    }
    Resource::from_value(kind, &version, v).ok()
}

fn obj(kind: &str, version: &str, meta: Value, spec: Value, status: Option<Value>) -> Value {
    let mut v = json!({"apiVersion": format!("vitistack.io/{version}"), "kind": kind, "metadata": meta, "spec": spec});
    if let (Some(s), Some(m)) = (status, v.as_object_mut()) {
        m.insert("status".into(), s);
    }
    v
}

fn condition(type_: &str, ok: bool, reason: &str, message: &str) -> Value {
    json!({"type": type_, "status": if ok { "True" } else { "False" }, "reason": reason, "message": message,
           "lastTransitionTime": T0})
}

fn tenant(out: &mut Vec<Value>, spec: &FleetSpec, i: usize, stage: DemoStage, rng: &mut Rng) {
    let ns = format!("team-{}", i % 8);
    let cluster_id = format!("t-demo-{i:03}-{}", rng.suffix());
    let nn_name = format!("net-{i:03}");
    let vlan = 2100 + i as i64;
    let (o2, o3) = ((i / 250) % 250, i % 250);
    let prefix = format!("10.{o2}.{o3}.0/24");
    let net = |host: usize| format!("10.{o2}.{o3}.{}", 10 + host);
    let static_ip = i.is_multiple_of(3);
    let provider = if i % 5 == 4 { "proxmox" } else { "kubevirt" };

    // NetworkNamespace
    let ip_alloc = if static_ip {
        json!({"type": "static", "provider": "static-ip-operator",
               "static": {"ipv4CIDR": prefix, "ipv4Gateway": format!("10.{o2}.{o3}.1"), "ipv4RangeStart": net(0),
                          "ipv4RangeEnd": format!("10.{o2}.{o3}.250"), "vlanId": vlan, "dns": ["10.0.0.53"], "ttlSeconds": 3600}})
    } else {
        json!({"type": "dhcp", "provider": "kea"})
    };
    let nn_status = match stage {
        DemoStage::NetworkPending => None,
        DemoStage::NetworkError => Some(json!({"phase": "Error", "status": "InvalidSpec",
            "message": "NAM rejected the request: VLAN 2105 is already assigned to another supervisor",
            "conditions": [condition("Ready", false, "Error", "NAM rejected the request: VLAN already assigned")]})),
        _ => Some(
            json!({"phase": "Ready", "status": "Synced", "message": "NetworkNamespace provisioned",
            "datacenterIdentifier": "test-south-az1", "supervisorIdentifier": "test-viti", "namespaceId": format!("ns-{i:05}"),
            "ipv4Prefix": prefix, "ipv4EgressIp": format!("10.{o2}.{o3}.1"), "vlanId": vlan, "created": T0,
            "associatedKubernetesClusterIds": [cluster_id],
            "conditions": [condition("Ready", true, "Synced", "NetworkNamespace provisioned")]}),
        ),
    };
    out.push(obj(
        "NetworkNamespace",
        "v1alpha1",
        json!({"name": nn_name, "namespace": ns}),
        json!({"datacenterIdentifier": "test-south-az1", "supervisorIdentifier": "test-viti", "ipAllocation": ip_alloc}),
        nn_status,
    ));

    // KubernetesCluster
    // The first pool gets one extra worker: 3 + 9 + 8 = 20 machines per cluster in the large fleet.
    let pools = [
        ("wp", "medium", spec.workers_per_pool + 1),
        (
            "wp2",
            if i.is_multiple_of(4) {
                "large"
            } else {
                "medium"
            },
            spec.workers_per_pool,
        ),
    ];
    let pool_json: Vec<Value> = pools
        .iter()
        .map(|(name, class, replicas)| {
            json!({"name": name, "taint": [], "version": "1.36.2", "replicas": replicas, "machineClass": class,
                   "provider": provider, "autoscaling": {"enabled": false, "minReplicas": 1, "maxReplicas": 5, "scalingRules": ["cpu"]},
                   "metadata": {"labels": {"environment": "dev"}, "annotations": {}},
                   "storage": [{"class": "standard", "path": "/var/lib/vitistack/kubevirt", "size": "20Gi"}]})
        })
        .collect();
    let cp_class = if spec.control_planes > 1 {
        "large"
    } else {
        "small"
    };
    let kc_phase = match stage {
        DemoStage::NetworkPending | DemoStage::NetworkError | DemoStage::MachinesMissing => {
            "Pending"
        }
        DemoStage::IpsPending | DemoStage::MachinesProvisioning | DemoStage::MachineFailed => {
            "ControlPlaneIPsPending"
        }
        DemoStage::VipPending => "ConfigGenerated",
        DemoStage::Bootstrapping => "Bootstrapping",
        DemoStage::WaitingForNodes => "WaitingForNodes",
        DemoStage::Ready => "Ready",
    };
    let total_workers: usize = pools.iter().map(|p| p.2).sum();
    let cp_names: Vec<String> = (0..spec.control_planes)
        .map(|k| format!("{cluster_id}-ctp{k}"))
        .collect();
    let mut kc_conditions = vec![condition(
        "Valid",
        true,
        "ValidationSucceeded",
        "spec is valid",
    )];
    let nn_ready = stage.at_least(DemoStage::MachinesMissing);
    kc_conditions.push(condition(
        "NetworkNamespaceReady",
        nn_ready,
        if nn_ready { "Ready" } else { "NotReady" },
        if nn_ready {
            "NetworkNamespace is Ready"
        } else {
            "waiting for NetworkNamespace"
        },
    ));
    if stage == DemoStage::MachineFailed {
        kc_conditions.push(condition(
            "MachinesHealthy",
            false,
            "MachineProvisioningFailed",
            "DataVolume import failed",
        ));
    }
    let kc_status = json!({
        "phase": kc_phase,
        "message": format!("cluster is {kc_phase}"),
        "workers": if stage == DemoStage::Ready { total_workers } else { 0 },
        "conditions": kc_conditions,
        "state": kc_state(&cluster_id, &cp_names, cp_class, spec.control_planes, stage),
    });
    out.push(obj(
        "KubernetesCluster",
        "v1alpha1",
        json!({"name": cluster_id, "namespace": ns, "labels": {"vitistack.io/clusterid": cluster_id},
               "annotations": if i == APPS_CLUSTER {
                   json!({crate::model::ANNOTATION_KUBE_SYSTEM_UID: kube_system_uid(&spec.datacenter)})
               } else { json!({}) }}),
        json!({"data": {"clusterUid": format!("00000000-0000-4000-8000-{:012}", i), "clusterId": cluster_id,
                        "provider": "talos", "environment": if i.is_multiple_of(2) { "dev" } else { "prod" },
                        "datacenter": "test-south-az1", "region": "south", "zone": "az1",
                        "project": format!("project-{}", i % 6), "workspace": format!("workspace-{}", i % 6),
                        "workorder": format!("wo-{i:05}"), "networkNamespaceName": nn_name},
               "topology": {"version": "1.36.2",
                            "controlplane": {"replicas": spec.control_planes, "version": "1.36.2", "machineClass": cp_class,
                                             "provider": provider, "metadata": {"labels": {}, "annotations": {}},
                                             "storage": [{"class": "standard", "path": "/var/lib/vitistack/kubevirt", "size": "20Gi"}]},
                            "workers": {"nodePools": pool_json}}}),
        Some(kc_status),
    ));

    if !stage.at_least(DemoStage::IpsPending) {
        return;
    }
    // Machines and their NetworkConfigurations
    let mut machines: Vec<(String, &str, Option<&str>, &str)> = cp_names
        .iter()
        .map(|n| (n.clone(), "control-plane", None, cp_class))
        .collect();
    let mut w = 0;
    for (pool, class, replicas) in &pools {
        for _ in 0..*replicas {
            machines.push((
                format!("{cluster_id}-wrk{w}"),
                "worker",
                Some(*pool),
                *class,
            ));
            w += 1;
        }
    }
    let mut cp_ips = Vec::new();
    for (k, (name, role, pool, class)) in machines.iter().enumerate() {
        let mac = format!(
            "02:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            (i >> 8) & 0xff,
            i & 0xff,
            k,
            rng.below(256),
            rng.below(256)
        );
        let ip = net(k);
        if *role == "control-plane" {
            cp_ips.push(ip.clone());
        }
        let has_ip = stage.at_least(DemoStage::MachinesProvisioning);
        let failed = stage == DemoStage::MachineFailed && k == machines.len() - 1;
        let running =
            stage.at_least(DemoStage::VipPending) || (stage == DemoStage::MachineFailed && !failed);
        let mut labels =
            json!({"vitistack.io/clusterid": cluster_id, "vitistack.io/node-role": role});
        let mut annotations = json!({"vitistack.io/kubevirt-config": "kubevirt-provider"});
        if provider == "proxmox" {
            annotations = json!({});
        }
        if let Some(p) = pool {
            annotations["vitistack.io/nodepool"] = json!(p);
        }
        labels["vitistack.io/clusterid"] = json!(cluster_id);
        let m_status = if failed {
            json!({"phase": "Failed", "state": "DataVolumeError", "provider": provider,
                   "failureReason": "DataVolumeError", "failureMessage": format!("DataVolume {name}-root import failed: HTTP 404 from image server")})
        } else if running {
            json!({"phase": "Running", "state": "Running", "provider": provider, "hostname": name, "cpus": 4,
                   "memory": 8_589_934_592i64, "architecture": "amd64", "operatingSystem": "talos",
                   "ipAddresses": [ip], "publicIPAddresses": [ip], "privateIPAddresses": [],
                   "networkInterfaces": [{"name": "net0", "macAddress": mac, "ipAddresses": [ip], "state": "up", "mtu": 1500}],
                   "disks": [{"name": "root", "device": "/dev/vda", "pvcName": format!("{name}-root"), "size": 21_474_836_480i64}],
                   "bootTime": T0})
        } else {
            json!({"phase": "Pending", "state": "Provisioning", "provider": provider})
        };
        out.push(obj(
            "Machine",
            "v1alpha1",
            json!({"name": name, "namespace": ns, "labels": labels, "annotations": annotations}),
            json!({"name": name.chars().rev().take(32).collect::<String>().chars().rev().collect::<String>(),
                   "provider": provider, "machineClass": class,
                   "network": {"networkNamespaceName": nn_name},
                   "os": {"family": "linux", "distribution": "talos", "version": "1.11.5", "architecture": "amd64"},
                   "disks": [{"name": "root", "sizeGB": 20, "boot": true, "type": "virtio"}],
                   "tags": {"cluster": cluster_id, "role": role, "nodepool": pool.unwrap_or("")}}),
            Some(m_status),
        ));
        if spec.hosts && provider == "kubevirt" {
            let state = if failed {
                "ErrorUnschedulable"
            } else if running {
                "Running"
            } else {
                "Provisioning"
            };
            let host = vm_host((i * 7 + k) % vm_host_count(spec));
            kubevirt_vm(out, &ns, name, class, state, &host, &ip);
        }
        let iface_name = format!("vlan{vlan}");
        let mut iface = json!({"name": iface_name, "macAddress": mac, "vlan": vlan.to_string()});
        let nc_status = if has_ip {
            iface["ipv4Addresses"] = json!([ip]);
            iface["ipv4Subnet"] = json!(prefix);
            iface["ipv4Gateway"] = json!(format!("10.{o2}.{o3}.1"));
            iface["dns"] = json!(["10.0.0.53"]);
            if static_ip {
                iface["ipAllocated"] = json!(true);
                iface["allocationMethod"] = json!("static");
            } else {
                iface["dhcpReserved"] = json!(true);
            }
            Some(
                json!({"phase": "Ready", "status": "Success", "message": "All 1 interfaces allocated",
                        "networkInterfaces": [iface.clone()],
                        "conditions": [condition("Ready", true, "Configured", "interfaces configured")]}),
            )
        } else {
            Some(
                json!({"phase": "Reconciling", "status": "InProgress", "message": "waiting for a DHCP lease",
                        "conditions": [condition("Ready", false, "Reconciling", "waiting for a DHCP lease")]}),
            )
        };
        let short: String = name.chars().take(32).collect();
        out.push(obj(
            "NetworkConfiguration",
            "v1alpha1",
            json!({"name": name, "namespace": ns,
                   "labels": {"vitistack.io/source-machine": name, "vitistack.io/managed-by": "kubevirt-operator"}}),
            json!({"name": short.trim_end_matches('-'), "networkNamespaceName": nn_name,
                   "networkInterfaces": [{"name": iface_name, "macAddress": mac}]}),
            nc_status,
        ));
    }
    if !stage.at_least(DemoStage::VipPending) {
        return;
    }
    let vip = format!("10.{o2}.{o3}.5");
    let vip_status = if stage == DemoStage::VipPending {
        json!({"phase": "Pending", "status": "WaitingForIPAllocation", "message": "waiting for the VIP address from NAM",
               "conditions": [condition("Ready", false, "WaitingForIPAllocation", "waiting for the VIP address")]})
    } else {
        json!({"phase": "Ready", "status": "Synced", "message": "VIP configured", "loadBalancerIps": [vip],
               "poolMembers": cp_ips, "clusterIdentifier": cluster_id, "networkNamespaceIdentifier": nn_name,
               "conditions": [condition("Ready", true, "Synced", "VIP configured")]})
    };
    out.push(obj(
        "ControlPlaneVirtualSharedIP",
        "v1alpha1",
        json!({"name": cluster_id, "namespace": ns,
               "labels": {"vitistack.io/clusterid": cluster_id, "vitistack.io/node-role": "control-plane"}}),
        json!({"datacenterIdentifier": "test-south-az1", "supervisorIdentifier": "test-viti", "clusterIdentifier": cluster_id,
               "networkNamespaceIdentifier": nn_name, "environment": "dev", "provider": "talos", "method": "first-alive",
               "poolMembers": cp_ips}),
        Some(vip_status),
    ));
    if stage == DemoStage::Ready && i % 4 == 1 {
        out.push(obj(
            "EtcdBackup",
            "v1alpha1",
            json!({"name": format!("{cluster_id}-nightly"), "namespace": ns}),
            json!({"clusterName": cluster_id, "schedule": "0 2 * * *", "retention": 7,
                   "storageLocation": {"type": "s3", "bucket": "etcd-backups", "path": cluster_id}}),
            Some(json!({"phase": "Completed", "lastBackupTime": T0, "backupCount": 12, "backupSize": "48Mi"})),
        ));
        out.push(obj(
            "ClusterStorage",
            "v1alpha1",
            json!({"name": format!("{cluster_id}-ceph"), "namespace": ns}),
            json!({"clusterId": cluster_id, "type": "ceph", "clusterStorageClass": "ceph-rbd"}),
            Some(json!({"phase": "Ready", "message": "storage deployed"})),
        ));
    }
}

fn kc_state(
    cluster_id: &str,
    cp_names: &[String],
    cp_class: &str,
    replicas: usize,
    stage: DemoStage,
) -> Value {
    let res = || {
        let u = json!({"capacity": "0", "used": "0", "percentage": 0});
        json!({"cpu": u, "memory": u, "gpu": u, "disk": u})
    };
    let cp_status = if stage == DemoStage::Ready {
        "Running"
    } else {
        "Pending"
    };
    json!({
        "cluster": {"externalId": cluster_id, "resources": res(), "price": {"monthly": 0, "yearly": 0},
                    "controlplane": {"status": cp_status, "message": "", "scale": replicas, "machineClass": cp_class,
                                     "resources": res(), "nodes": cp_names},
                    "nodepools": []},
        "versions": [{"name": "kubernetes", "version": "1.36.2", "branch": "stable"}],
        "endpoints": [], "egressIP": "", "lastUpdated": T0, "lastUpdatedBy": "talos-operator", "created": T0
    })
}

#[cfg(test)]
mod tests;
