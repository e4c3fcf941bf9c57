//! The cluster lifecycle as talos-operator sees it: the KubernetesCluster a request describes,
//! the Machines the operator will generate for it (names `<clusterId>-ctp<i>` and `-wrk<i>`, the
//! worker index global across node pools with gaps reused, labels, pool annotation, classes), and
//! whether they fit: on the hosts' free allocatable CPU and memory, with "hosts that can fail"
//! kept at or above a minimum once they are placed.

mod capacity;
mod types;

use capacity::{capacity, class_demand};
pub use types::{
    CapacityCheck, CapacityVerdict, ClusterInput, ClusterPlan, ControlPlaneInput, FieldProblem,
    NodePoolInput, PlannedMachine, PlannedRole,
};

use std::collections::BTreeSet;

use serde_json::{Value, json};

use super::{ChangeError, field};
use crate::domain::hosts::Overcommit;
use crate::model::validation::FieldError;
use crate::model::{
    ANNOTATION_NODE_POOL, Datacenter, Kind, LABEL_CLUSTER_ID, LABEL_NODE_ROLE, Resource,
};
use crate::store::{Idx, Snapshot, scoped};

/// Annotation that makes talos-operator skip a cluster (any non-empty value).
pub const DO_NOT_RECONCILE: &str = "upgrade.vitistack.io/do-not-reconcile";
/// Annotation asking talos-operator to upgrade Talos to a version.
pub const TALOS_TARGET: &str = "upgrade.vitistack.io/talos-target";
/// Annotation asking talos-operator to upgrade Kubernetes to a version.
pub const KUBERNETES_TARGET: &str = "upgrade.vitistack.io/kubernetes-target";

/// `true` for a DNS label.
fn label_problem(value: &str) -> Option<String> {
    let ok = !value.is_empty()
        && value.len() <= 63
        && value
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !value.starts_with('-')
        && !value.ends_with('-');
    (!ok).then(|| {
        format!(
            "Invalid value: \"{value}\": must be a lowercase RFC 1123 label (a-z, 0-9, '-', at most 63 characters, starting and ending with a letter or digit)"
        )
    })
}

/// Longest clusterId: `<clusterId>-wrk<i>` names stay labels, and the id is a label value.
const MAX_CLUSTER_ID: usize = 52;

impl ClusterInput {
    /// `spec.data.clusterId`.
    pub fn cluster_id(&self) -> &str {
        self.cluster_id.as_deref().unwrap_or(&self.name)
    }

    /// The KubernetesCluster object (without status).
    pub fn object(&self, snap: &Snapshot, dc: &Datacenter) -> Value {
        let cp = &self.control_plane;
        let cp_provider = cp.provider.clone().unwrap_or_else(|| "kubevirt".into());
        let pools: Vec<Value> = self
            .node_pools
            .iter()
            .map(|p| {
                json!({"name": p.name, "replicas": p.replicas,
                       "machineClass": p.machine_class.as_deref().unwrap_or("medium"),
                       "provider": p.provider.as_deref().unwrap_or(&cp_provider),
                       "version": p.version.as_deref().unwrap_or(&self.version),
                       "autoscaling": {"enabled": false, "minReplicas": p.replicas, "maxReplicas": p.replicas, "scalingRules": []},
                       "metadata": {"labels": {}, "annotations": {}},
                       "storage": [], "taint": []})
            })
            .collect();
        let uid = snap
            .get(dc, Kind::KubernetesCluster, &self.namespace, &self.name)
            .and_then(|r| match r.as_ref() {
                Resource::KubernetesCluster(k) => Some(k.spec.data.cluster_uid.to_string()),
                _ => None,
            })
            .filter(|u| !u.is_empty())
            .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
        let nn = self
            .network_namespace_name
            .clone()
            .or_else(|| only_network_namespace(snap, dc, &self.namespace))
            .unwrap_or_default();
        let mut kc = json!({
            "apiVersion": Kind::KubernetesCluster.api_version("v1alpha1"),
            "kind": "KubernetesCluster",
            "metadata": {"name": self.name, "namespace": self.namespace,
                         "labels": {LABEL_CLUSTER_ID: self.cluster_id()}},
            "spec": {
                "data": {"clusterUid": uid, "clusterId": self.cluster_id(),
                         "provider": self.provider.as_deref().unwrap_or("talos"),
                         "datacenter": self.datacenter, "region": self.region, "zone": self.zone,
                         "project": self.project, "workspace": self.workspace,
                         "workorder": self.workorder, "environment": self.environment},
                "topology": {
                    "version": self.version,
                    "controlplane": {"replicas": cp.replicas,
                                     "machineClass": cp.machine_class.as_deref().unwrap_or("large"),
                                     "provider": cp_provider,
                                     "version": cp.version.as_deref().unwrap_or(&self.version),
                                     "metadata": {"labels": {}, "annotations": {}},
                                     "storage": []},
                    "workers": {"nodePools": pools}
                }
            }
        });
        // Optional: left out when the namespace has none or several (the plan warns).
        if !nn.is_empty() {
            kc["spec"]["data"]["networkNamespaceName"] = json!(nn);
        }
        kc
    }

    /// What the CRD cannot say but talos-operator and the Machines' names need.
    pub fn problems(&self) -> Vec<FieldError> {
        let mut out = Vec::new();
        let id = self.cluster_id();
        if let Some(p) = label_problem(id) {
            out.push(field("clusterId", p));
        } else if id.len() > MAX_CLUSTER_ID {
            out.push(field(
                "clusterId",
                format!("Too long: at most {MAX_CLUSTER_ID} characters, so that Machine names `{id}-wrk<i>` stay valid"),
            ));
        }
        for (field_name, value) in [
            ("datacenter", &self.datacenter),
            ("region", &self.region),
            ("zone", &self.zone),
            ("project", &self.project),
            ("workspace", &self.workspace),
            ("workorder", &self.workorder),
            ("environment", &self.environment),
            ("version", &self.version),
        ] {
            if value.trim().is_empty() {
                out.push(field(field_name, "Required value"));
            }
        }
        if self.control_plane.replicas < 1 {
            out.push(field(
                "controlPlane.replicas",
                "Invalid value: must be at least 1",
            ));
        }
        let mut seen = BTreeSet::new();
        for (i, p) in self.node_pools.iter().enumerate() {
            if let Some(problem) = label_problem(&p.name) {
                out.push(field(&format!("nodePools[{i}].name"), problem));
            }
            if !seen.insert(p.name.as_str()) {
                out.push(field(
                    &format!("nodePools[{i}].name"),
                    format!("Duplicate value: \"{}\"", p.name),
                ));
            }
            if p.replicas < 0 {
                out.push(field(
                    &format!("nodePools[{i}].replicas"),
                    "Invalid value: must be 0 or more",
                ));
            }
        }
        out
    }
}

/// The namespace's NetworkNamespace, when it has exactly one.
fn only_network_namespace(snap: &Snapshot, dc: &Datacenter, namespace: &str) -> Option<String> {
    let mut it = snap.list_in_datacenter(dc, Kind::NetworkNamespace, namespace);
    let first = it.next()?;
    it.next().is_none().then(|| first.name().to_string())
}

/// A cluster's topology read from its object: (control plane (replicas, class, provider),
/// pools (name, replicas, class, provider)).
pub type Topology = ((i64, String, String), Vec<(String, i64, String, String)>);

/// The topology of a KubernetesCluster object (JSON).
pub fn topology(kc: &Value) -> Topology {
    let t = &kc["spec"]["topology"];
    let s = |v: &Value| v.as_str().unwrap_or_default().to_string();
    let cp = &t["controlplane"];
    let pools = t["workers"]["nodePools"]
        .as_array()
        .map(|ps| {
            ps.iter()
                .map(|p| {
                    (
                        s(&p["name"]),
                        p["replicas"].as_i64().unwrap_or(0),
                        s(&p["machineClass"]),
                        s(&p["provider"]),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    (
        (
            cp["replicas"].as_i64().unwrap_or(0),
            s(&cp["machineClass"]),
            s(&cp["provider"]),
        ),
        pools,
    )
}

/// The Machines of a cluster after talos-operator has reconciled `kc`: existing ones kept (by
/// role and pool), new ones named with the lowest free index, the highest indexes of a pool
/// removed when it shrinks. Returns (machines, removed).
fn machines(snap: &Snapshot, dc: &Datacenter, kc: &Value) -> (Vec<PlannedMachine>, Vec<String>) {
    let ns = kc["metadata"]["namespace"].as_str().unwrap_or_default();
    let id = kc["spec"]["data"]["clusterId"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let nn = kc["spec"]["data"]["networkNamespaceName"]
        .as_str()
        .unwrap_or_default();
    let existing: Vec<&std::sync::Arc<Resource>> = snap
        .lookup(dc, Idx::MachineByCluster, &scoped(ns, &id))
        .filter(|m| m.meta().deletion_timestamp().is_none())
        .collect();
    let index_of = |name: &str, tag: &str| -> Option<usize> {
        name.strip_prefix(&format!("{id}-{tag}"))?.parse().ok()
    };
    let ((cp_n, cp_class, cp_provider), pools) = topology(kc);
    let mut out = Vec::new();
    let mut removed = Vec::new();
    let planned = |name: String,
                   role: PlannedRole,
                   pool: Option<&str>,
                   class: &str,
                   provider: &str,
                   exists: bool| {
        let (d, _) = class_demand(snap, dc, class).unwrap_or_default();
        let role_label = match role {
            PlannedRole::ControlPlane => "control-plane",
            PlannedRole::Worker => "worker",
        };
        let mut annotations = serde_json::Map::new();
        if let Some(p) = pool {
            annotations.insert(ANNOTATION_NODE_POOL.into(), json!(p));
        }
        let object = json!({
            "apiVersion": Kind::Machine.api_version("v1alpha1"), "kind": "Machine",
            "metadata": {"name": name, "namespace": ns,
                         "labels": {LABEL_CLUSTER_ID: id, LABEL_NODE_ROLE: role_label},
                         "annotations": annotations},
            "spec": {"name": name, "provider": provider, "machineClass": class,
                     "network": {"networkNamespaceName": nn},
                     "tags": {"cluster": id, "role": role_label, "nodepool": pool.unwrap_or("")}}
        });
        PlannedMachine {
            yaml: serde_yaml::to_string(&object).unwrap_or_default(),
            name,
            role,
            node_pool: pool.map(str::to_string),
            machine_class: class.to_string(),
            provider: provider.to_string(),
            vcpus: d.vcpus,
            memory_bytes: d.memory_bytes,
            exists,
        }
    };
    // Control plane: ctp0..ctp(n-1); existing ones beyond are removed.
    let cp_existing: BTreeSet<usize> = existing
        .iter()
        .filter(|m| m.label(LABEL_NODE_ROLE) == Some("control-plane"))
        .filter_map(|m| index_of(m.name(), "ctp"))
        .collect();
    let cp_n = usize::try_from(cp_n).unwrap_or(0);
    let mut kept: Vec<usize> = cp_existing.iter().copied().take(cp_n).collect();
    let mut next = 0;
    while kept.len() < cp_n {
        if !cp_existing.contains(&next) {
            kept.push(next);
        }
        next += 1;
    }
    kept.sort_unstable();
    for i in &kept {
        out.push(planned(
            format!("{id}-ctp{i}"),
            PlannedRole::ControlPlane,
            None,
            &cp_class,
            &cp_provider,
            cp_existing.contains(i),
        ));
    }
    removed.extend(
        cp_existing
            .iter()
            .filter(|i| !kept.contains(i))
            .map(|i| format!("{id}-ctp{i}")),
    );
    // Workers: existing ones per pool kept up to the pool's count (lowest indexes first); new
    // ones take the lowest index free across all pools.
    let workers: Vec<(usize, String)> = existing
        .iter()
        .filter(|m| m.label(LABEL_NODE_ROLE) == Some("worker"))
        .filter_map(|m| {
            Some((
                index_of(m.name(), "wrk")?,
                m.annotation(ANNOTATION_NODE_POOL)
                    .unwrap_or_default()
                    .to_string(),
            ))
        })
        .collect();
    let mut taken: BTreeSet<usize> = BTreeSet::new();
    let mut per_pool: Vec<Vec<usize>> = Vec::new();
    for (name, n, _, _) in &pools {
        let mut mine: Vec<usize> = workers
            .iter()
            .filter(|(_, p)| p == name)
            .map(|(i, _)| *i)
            .collect();
        mine.sort_unstable();
        let keep = usize::try_from(*n).unwrap_or(0).min(mine.len());
        taken.extend(&mine[..keep]);
        per_pool.push(mine[..keep].to_vec());
    }
    for (i, _) in &workers {
        if !taken.contains(i) {
            removed.push(format!("{id}-wrk{i}"));
        }
    }
    // Indexes of removed workers are free again only once they are gone: new ones avoid them.
    let busy: BTreeSet<usize> = workers.iter().map(|(i, _)| *i).collect();
    let mut free = (0..).filter(|i| !busy.contains(i));
    for ((name, n, class, provider), mine) in pools.iter().zip(per_pool) {
        for i in &mine {
            out.push(planned(
                format!("{id}-wrk{i}"),
                PlannedRole::Worker,
                Some(name),
                class,
                provider,
                true,
            ));
        }
        let missing = usize::try_from(*n).unwrap_or(0).saturating_sub(mine.len());
        for i in free.by_ref().take(missing) {
            out.push(planned(
                format!("{id}-wrk{i}"),
                PlannedRole::Worker,
                Some(name),
                class,
                provider,
                false,
            ));
        }
    }
    (out, removed)
}

/// Problems with the classes a cluster names: missing or disabled (talos-operator refuses both).
fn class_problems(snap: &Snapshot, dc: &Datacenter, kc: &Value) -> Vec<FieldError> {
    let ((_, cp_class, _), pools) = topology(kc);
    let mut out = Vec::new();
    let mut check = |path: String, class: &str| match class_demand(snap, dc, class) {
        None => out.push(field(
            &path,
            format!("Not found: MachineClass \"{class}\" does not exist"),
        )),
        Some((_, false)) => out.push(field(
            &path,
            format!("Invalid value: MachineClass \"{class}\" is not enabled"),
        )),
        Some(_) => {}
    };
    check("spec.topology.controlplane.machineClass".into(), &cp_class);
    for (i, (_, _, class, _)) in pools.iter().enumerate() {
        check(
            format!("spec.topology.workers.nodePools[{i}].machineClass"),
            class,
        );
    }
    out
}

/// Plan a cluster object (JSON, as it would be stored): its Machines, the capacity verdict and
/// every problem that would refuse it. `extra` are problems found before (input checks).
pub fn plan_object(
    snap: &Snapshot,
    dc: &Datacenter,
    kc: &Value,
    extra: Vec<FieldError>,
    o: Overcommit,
    minimum: usize,
) -> ClusterPlan {
    let ns = kc["metadata"]["namespace"].as_str().unwrap_or_default();
    let name = kc["metadata"]["name"].as_str().unwrap_or_default();
    let exists = snap.get(dc, Kind::KubernetesCluster, ns, name).is_some();
    let mut problems = extra;
    if let Err(e) = super::validate(Kind::KubernetesCluster, "v1alpha1", kc.clone()) {
        problems.extend(e.fields);
    }
    let classes = class_problems(snap, dc, kc);
    let classes_ok = classes.is_empty();
    problems.extend(classes);
    let (machines, removed) = machines(snap, dc, kc);
    let capacity = capacity(snap, dc, &machines, o, minimum, classes_ok);
    let mut warnings = Vec::new();
    let nn = kc["spec"]["data"]["networkNamespaceName"]
        .as_str()
        .unwrap_or_default();
    if nn.is_empty() {
        if snap
            .list_in_datacenter(dc, Kind::NetworkNamespace, ns)
            .next()
            .is_none()
        {
            warnings.push(format!(
                "namespace {ns} has no NetworkNamespace: talos-operator waits at the network stage until one is Ready"
            ));
        }
    } else if snap.get(dc, Kind::NetworkNamespace, ns, nn).is_none() {
        warnings.push(format!(
            "NetworkNamespace {ns}/{nn} does not exist: talos-operator waits at the network stage until it is Ready"
        ));
    }
    let mut shown = kc.clone();
    if let Some(m) = shown.get_mut("metadata").and_then(Value::as_object_mut) {
        for k in [
            "uid",
            "resourceVersion",
            "generation",
            "creationTimestamp",
            "managedFields",
        ] {
            m.remove(k);
        }
    }
    if let Some(m) = shown.as_object_mut() {
        m.remove("status");
    }
    ClusterPlan {
        valid: problems.is_empty(),
        problems: problems.into_iter().map(FieldProblem::from).collect(),
        exists,
        cluster_yaml: serde_yaml::to_string(&shown).unwrap_or_default(),
        machines,
        removed,
        capacity,
        warnings,
    }
}

/// Plan a cluster from its input.
pub fn plan(
    snap: &Snapshot,
    dc: &Datacenter,
    input: &ClusterInput,
    o: Overcommit,
    minimum: usize,
) -> ClusterPlan {
    plan_object(
        snap,
        dc,
        &input.object(snap, dc),
        input.problems(),
        o,
        minimum,
    )
}

/// Refuse a plan that is not valid.
pub fn refuse_invalid(plan: &ClusterPlan, what: &str) -> Result<(), ChangeError> {
    if plan.valid {
        return Ok(());
    }
    Err(ChangeError::invalid(
        what,
        plan.problems
            .iter()
            .map(|p| field(&p.path, p.reason.clone()))
            .collect(),
    ))
}

#[cfg(test)]
mod tests;
