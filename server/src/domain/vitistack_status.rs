//! The status the old aggregator kept on the datacenter's `Vitistack` (its providers, machine
//! classes, clusters and counts), computed from the graph as a whole each time (level-based: an
//! object deleted while no replica ran leaves the lists all the same), with the field paths of
//! the CRDs as they are (the old writer read `spec.zone`, `spec.version` and
//! `spec.topology.workers[]`, which do not exist, so zone, version and workerReplicas were never
//! filled). Entries are keyed by namespace and name (the old writer's by-name keys collided
//! across namespaces) and sorted, so an unchanged graph gives the same status byte for byte.

use serde_json::{Map, Value, json};

use crate::domain::aggregates::ClusterState;
use crate::domain::pipeline;
use crate::model::{Datacenter, Kind, Resource};
use crate::store::Snapshot;

/// The status fields this writer owns. Others (`displayName`, `location`, `resourceUsage`,
/// `providerStatuses`, …) are left as they are.
pub const OWNED: [&str; 11] = [
    "kubernetesProviders",
    "kubernetesProviderCount",
    "machineProviders",
    "machineProviderCount",
    "machineClasses",
    "clusters",
    "activeClusters",
    "activeMachines",
    "phase",
    "conditions",
    "observedGeneration",
];

/// The merge patch that brings `vitistack`'s status in line with `datacenter`'s objects in
/// `snap`, with `now` (RFC 3339) as `lastReconcileTime`; None when every owned field already
/// holds what it should (nothing to write).
pub fn patch(
    snap: &Snapshot,
    datacenter: &Datacenter,
    vitistack: &Resource,
    now: &str,
) -> Option<Value> {
    let object = vitistack.to_value();
    let current = object.get("status").cloned().unwrap_or(Value::Null);
    let generation = object["metadata"]["generation"].as_i64().unwrap_or(0);
    let want = desired(snap, datacenter, &current, generation, now);
    if OWNED.iter().all(|k| current.get(*k) == want.get(*k)) {
        return None;
    }
    let mut status = want;
    status.insert("lastReconcileTime".into(), json!(now));
    Some(json!({ "status": status }))
}

/// What the owned fields should hold.
fn desired(
    snap: &Snapshot,
    dc: &Datacenter,
    current: &Value,
    generation: i64,
    now: &str,
) -> Map<String, Value> {
    let kps = providers(snap, dc, Kind::KubernetesProvider, current, now);
    let mps = providers(snap, dc, Kind::MachineProvider, current, now);
    let classes: Vec<Value> = snap
        .list_datacenter(dc, Kind::MachineClass)
        .map(|c| json!(c.name()))
        .collect();
    let clusters = clusters(snap, dc, current, now);
    let machines = snap.list_datacenter(dc, Kind::Machine).count();
    // Ready when every provider is; the condition names the ones that are not.
    let not_ready: Vec<String> = [("KubernetesProvider", &kps), ("MachineProvider", &mps)]
        .into_iter()
        .flat_map(|(kind, entries)| {
            entries
                .iter()
                .filter(|e| e["ready"] == false)
                .map(move |e| format!("{kind} {}", e["name"].as_str().unwrap_or_default()))
        })
        .collect();
    let (phase, status, reason, message) = if not_ready.is_empty() {
        (
            "Ready",
            "True",
            "ProvidersReady",
            format!(
                "{} Kubernetes and {} machine provider(s) ready",
                kps.len(),
                mps.len()
            ),
        )
    } else {
        (
            "Degraded",
            "False",
            "ProvidersNotReady",
            format!("not ready: {}", not_ready.join(", ")),
        )
    };
    // The transition time moves only when the condition's status does.
    let since = current["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == "Ready"))
        .filter(|c| c["status"] == status)
        .and_then(|c| c["lastTransitionTime"].as_str())
        .unwrap_or(now);
    let mut m = Map::new();
    m.insert("kubernetesProviderCount".into(), json!(kps.len()));
    m.insert("kubernetesProviders".into(), Value::Array(kps));
    m.insert("machineProviderCount".into(), json!(mps.len()));
    m.insert("machineProviders".into(), Value::Array(mps));
    m.insert("machineClasses".into(), Value::Array(classes));
    m.insert("activeClusters".into(), json!(clusters.len()));
    m.insert("clusters".into(), Value::Array(clusters));
    m.insert("activeMachines".into(), json!(machines));
    m.insert("phase".into(), json!(phase));
    m.insert(
        "conditions".into(),
        json!([{"type": "Ready", "status": status, "reason": reason, "message": message,
                "lastTransitionTime": since, "observedGeneration": generation}]),
    );
    m.insert("observedGeneration".into(), json!(generation));
    m
}

/// When the entry for `namespace/name` in `current[list]` was first written, else when the
/// object was created, else `now`.
fn discovered(current: &Value, list: &str, o: &Resource, now: &str) -> Value {
    let kept = current[list].as_array().and_then(|entries| {
        entries.iter().find(|e| {
            e["name"] == o.name() && e["namespace"].as_str().unwrap_or_default() == o.namespace()
        })
    });
    match kept.and_then(|e| e["discoveredAt"].as_str()) {
        Some(t) => json!(t),
        None => json!(
            o.created()
                .map(|t| t.to_string())
                .unwrap_or_else(|| now.to_string())
        ),
    }
}

/// The `status.kubernetesProviders` / `machineProviders` entries.
fn providers(
    snap: &Snapshot,
    dc: &Datacenter,
    kind: Kind,
    current: &Value,
    now: &str,
) -> Vec<Value> {
    let list = match kind {
        Kind::KubernetesProvider => "kubernetesProviders",
        _ => "machineProviders",
    };
    snap.list_datacenter(dc, kind)
        .filter_map(|p| {
            let (provider_type, region, zones) = match p.as_ref() {
                Resource::KubernetesProvider(k) => (
                    k.spec.provider_type.as_str(),
                    k.spec.region.as_str(),
                    &k.spec.zones,
                ),
                Resource::MachineProvider(m) => (
                    m.spec.provider_type.as_str(),
                    m.spec.region.as_str(),
                    &m.spec.zones,
                ),
                _ => return None,
            };
            let mut e = Map::new();
            e.insert("name".into(), json!(p.name()));
            e.insert("discoveredAt".into(), discovered(current, list, p, now));
            let zone = zones.as_deref().unwrap_or_default().join(",");
            for (field, value) in [
                ("providerType", provider_type),
                ("region", region),
                ("zone", &zone),
            ] {
                if !value.is_empty() {
                    e.insert(field.into(), json!(value));
                }
            }
            e.insert("ready".into(), json!(p.readiness().ready));
            Some(Value::Object(e))
        })
        .collect()
}

/// The `status.clusters` entries: version from `spec.topology.version`, replicas from the
/// control plane and the sum of the node pools, ready as the cluster summary counts it.
fn clusters(snap: &Snapshot, dc: &Datacenter, current: &Value, now: &str) -> Vec<Value> {
    snap.list_datacenter(dc, Kind::KubernetesCluster)
        .filter_map(|c| match c.as_ref() {
            Resource::KubernetesCluster(kc) => Some((c, kc)),
            _ => None,
        })
        .map(|(c, kc)| {
            let topology = &kc.spec.topology;
            let ready = matches!(
                ClusterState::of(&pipeline::evaluate(snap, kc)),
                ClusterState::Ready | ClusterState::Degraded
            );
            let mut e = Map::new();
            e.insert("name".into(), json!(c.name()));
            e.insert("namespace".into(), json!(c.namespace()));
            e.insert(
                "discoveredAt".into(),
                discovered(current, "clusters", c, now),
            );
            if !topology.version.is_empty() {
                e.insert("version".into(), json!(topology.version));
            }
            if let Some(phase) = c.phase().filter(|p| !p.is_empty()) {
                e.insert("phase".into(), json!(phase));
            }
            e.insert("ready".into(), json!(ready));
            e.insert(
                "controlPlaneReplicas".into(),
                json!(topology.controlplane.replicas),
            );
            e.insert("workerReplicas".into(), json!(topology.worker_replicas()));
            Value::Object(e)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{Op, Store};

    fn object(kind: Kind, dc: &Datacenter, v: Value) -> Op {
        Op::Upsert(
            Resource::from_value(kind, kind.versions()[0], v)
                .expect("valid")
                .in_datacenter(dc),
        )
    }

    #[test]
    fn each_datacenter_counts_its_own_and_an_unchanged_graph_writes_nothing() {
        let (oslo, bergen) = (Datacenter::new("oslo"), Datacenter::new("bergen"));
        let store = Store::new();
        let mut ops = Vec::new();
        for dc in [&oslo, &bergen] {
            ops.push(object(
                Kind::Vitistack,
                dc,
                json!({"metadata": {"name": "vitistack", "generation": 3}, "spec": {"displayName": "x"}}),
            ));
        }
        ops.push(object(
            Kind::MachineClass,
            &oslo,
            json!({"metadata": {"name": "small"}, "spec": {"cpu": {"cores": 2}, "memory": {"quantity": "4Gi"}}}),
        ));
        ops.push(object(
            Kind::Machine,
            &oslo,
            json!({"metadata": {"name": "m0", "namespace": "t"}, "spec": {"provider": "kubevirt"}}),
        ));
        store.apply(ops);
        let snap = store.snapshot();
        let vs = |dc: &Datacenter| {
            snap.get(dc, Kind::Vitistack, "", "vitistack")
                .expect("vitistack")
                .clone()
        };
        let now = "2026-11-27T08:00:00Z";
        let oslo_patch = patch(&snap, &oslo, &vs(&oslo), now).expect("a first write");
        assert_eq!(oslo_patch["status"]["machineClasses"], json!(["small"]));
        assert_eq!(oslo_patch["status"]["activeMachines"], 1);
        assert_eq!(oslo_patch["status"]["observedGeneration"], 3);
        assert_eq!(oslo_patch["status"]["lastReconcileTime"], now);
        // No provider at all is not a fault.
        assert_eq!(oslo_patch["status"]["phase"], "Ready");
        let bergen_patch = patch(&snap, &bergen, &vs(&bergen), now).expect("a first write");
        assert_eq!(bergen_patch["status"]["machineClasses"], json!([]));
        assert_eq!(bergen_patch["status"]["activeMachines"], 0);

        // Written (as the API server would merge it): the same graph asks for nothing more,
        // even later.
        let mut written = vs(&oslo).to_value();
        written["status"] = oslo_patch["status"].clone();
        store.apply(vec![object(Kind::Vitistack, &oslo, written)]);
        let snap = store.snapshot();
        let again = snap
            .get(&oslo, Kind::Vitistack, "", "vitistack")
            .expect("vitistack");
        assert_eq!(patch(&snap, &oslo, again, "2026-11-27T09:00:00Z"), None);
    }
}
