//! The Vitistack status writer (`WRITE_VITISTACK_STATUS`): the datacenter's Vitistack gets the
//! providers, machine classes, clusters and counts the old aggregator kept there, read from the
//! CRDs' real field paths, keyed by namespace and name, and written again only when one of them
//! changes.

use serde_json::{Value, json};

use super::{Harness, PATIENCE, kube_api};
use vitistack_testkit::kube_api::KubeApi;

fn cluster(namespace: &str, phase: &str) -> Value {
    json!({"metadata": {"name": "c1", "namespace": namespace},
        "spec": {"data": {"clusterId": format!("{namespace}-c1"), "provider": "talos"},
            "topology": {"version": "1.33.1",
                "controlplane": {"replicas": 3, "machineClass": "small", "provider": "kubevirt"},
                "workers": {"nodePools": [
                    {"name": "a", "replicas": 2, "machineClass": "small", "provider": "kubevirt"},
                    {"name": "b", "replicas": 1, "machineClass": "large", "provider": "kubevirt"}]}}},
        "status": {"phase": phase}})
}

fn machine_provider(phase: &str) -> Value {
    json!({"metadata": {"name": "kubevirt-provider"},
        "spec": {"providerType": "kubevirt", "region": "south"},
        "status": {"phase": phase}})
}

fn setup(api: &KubeApi) {
    api.apply(
        "vitistacks",
        json!({"metadata": {"name": "vitistack"},
            "spec": {"displayName": "South", "infrastructure": "prod", "region": "south", "zone": "az1"},
            "status": {"displayName": "South"}}),
    );
    api.apply(
        "kubernetesproviders",
        json!({"metadata": {"name": "talos-provider"},
            "spec": {"providerType": "talos", "region": "south", "zones": ["az1", "az2"]},
            "status": {"phase": "Ready"}}),
    );
    api.apply("machineproviders", machine_provider("Pending"));
    for class in ["small", "large"] {
        api.apply(
            "machineclasses",
            json!({"metadata": {"name": class},
                "spec": {"cpu": {"cores": 2}, "memory": {"quantity": "4Gi"}}}),
        );
    }
    // The same name in two namespaces: two entries (the old writer's by-name keys kept one).
    api.apply("kubernetesclusters", cluster("team-a", "Provisioning"));
    api.apply("kubernetesclusters", cluster("team-b", "Provisioning"));
    for m in ["m0", "m1"] {
        api.apply("machines", super::machine("team-a", m, "team-a-c1"));
    }
}

/// The API server with [`setup`], and our server started with `args` and ready.
async fn started(args: &[&str]) -> Harness {
    let api = KubeApi::start(
        &kube_api::watched_resources(),
        std::time::Duration::from_millis(200),
    )
    .await;
    setup(&api);
    let mut h = Harness::unstarted(api);
    h.launch(args).await;
    h.ready().await;
    h
}

/// The Vitistack's status once `ok` holds for it.
async fn status_when(h: &Harness, what: &str, ok: impl Fn(&Value) -> bool) -> Value {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let status = h
            .api
            .object("vitistacks", "", "vitistack")
            .map(|v| v["status"].clone())
            .unwrap_or(Value::Null);
        if ok(&status) {
            return status;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}: {status}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_vitistack_status_is_written_from_the_graph_and_only_when_it_changes() {
    let h = started(&["--write-vitistack-status", "true"]).await;

    let status = status_when(&h, "the first write", |s| s["activeClusters"] == 2).await;
    assert_eq!(h.api.status_writes(), 1, "{status}");
    assert_eq!(
        status["kubernetesProviders"],
        json!([{"name": "talos-provider", "providerType": "talos", "region": "south",
                "zone": "az1,az2", "ready": true, "discoveredAt": "2026-11-01T00:00:00Z"}])
    );
    assert_eq!(status["kubernetesProviderCount"], 1);
    assert_eq!(status["machineProviders"][0]["ready"], false, "{status}");
    assert_eq!(status["machineProviderCount"], 1);
    assert_eq!(status["machineClasses"], json!(["large", "small"]));
    let clusters = status["clusters"].as_array().expect("clusters");
    assert_eq!(clusters.len(), 2, "{status}");
    for (c, ns) in clusters.iter().zip(["team-a", "team-b"]) {
        assert_eq!(c["name"], "c1");
        assert_eq!(c["namespace"], ns);
        assert_eq!(c["version"], "1.33.1", "{c}");
        assert_eq!(c["phase"], "Provisioning");
        assert_eq!(c["ready"], false);
        assert_eq!(c["controlPlaneReplicas"], 3);
        assert_eq!(c["workerReplicas"], 3, "the node pools' replicas summed");
    }
    assert_eq!(status["activeMachines"], 2);
    // Not every provider is ready: Degraded, and the condition names the one that is not.
    assert_eq!(status["phase"], "Degraded");
    assert_eq!(status["conditions"][0]["type"], "Ready");
    assert_eq!(status["conditions"][0]["status"], "False");
    assert_eq!(status["conditions"][0]["reason"], "ProvidersNotReady");
    assert!(
        status["conditions"][0]["message"]
            .as_str()
            .is_some_and(|m| m.contains("MachineProvider kubevirt-provider")),
        "{status}"
    );
    assert!(status["lastReconcileTime"].is_string());
    // What it does not own stays, and so does the spec.
    assert_eq!(status["displayName"], "South");
    let spec = h
        .api
        .object("vitistacks", "", "vitistack")
        .expect("vitistack")["spec"]
        .clone();
    assert_eq!(spec["displayName"], "South");
    let since = status["conditions"][0]["lastTransitionTime"].clone();

    // A change the status does not show writes nothing; the next one that it shows writes once
    // (both arrive in order, so a write for the first would be counted before the second).
    h.api.apply(
        "networknamespaces",
        json!({"metadata": {"name": "net", "namespace": "team-a"},
            "spec": {"datacenterIdentifier": "dc", "supervisorIdentifier": "sv"}}),
    );
    h.api.apply("machineproviders", machine_provider("Ready"));
    let status = status_when(&h, "the provider ready", |s| s["phase"] == "Ready").await;
    assert_eq!(
        h.api.status_writes(),
        2,
        "one write per change shown: {status}"
    );
    assert_eq!(status["conditions"][0]["status"], "True");
    assert_eq!(status["conditions"][0]["reason"], "ProvidersReady");
    assert_ne!(status["conditions"][0]["lastTransitionTime"], since);
    assert_eq!(
        status["clusters"][0]["discoveredAt"], "2026-11-01T00:00:00Z",
        "first sight kept"
    );

    // A deleted cluster and a running one: recounted from the graph.
    h.api.delete("kubernetesclusters", "team-b", "c1");
    h.api
        .apply("kubernetesclusters", cluster("team-a", "Running"));
    let status = status_when(&h, "team-b's cluster gone", |s| {
        s["activeClusters"] == 1 && s["clusters"][0]["phase"] == "Running"
    })
    .await;
    assert_eq!(status["clusters"][0]["namespace"], "team-a");
    let metrics = h.metrics().await;
    let written = metrics
        .lines()
        .find_map(|l| l.strip_prefix("vitistack_status_writes_total "))
        .and_then(|v| v.trim().parse::<u64>().ok());
    assert_eq!(written, Some(h.api.status_writes()), "{metrics}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_setting_the_vitistack_status_is_left_alone() {
    let h = started(&[]).await;
    // Served: the graph holds every cluster, and nothing went to the Vitistack's status.
    h.until("both clusters", |s| {
        s.snapshot()
            .list(vitistack::model::Kind::KubernetesCluster)
            .count()
            == 2
    })
    .await;
    assert_eq!(h.api.status_writes(), 0);
    let status = h
        .api
        .object("vitistacks", "", "vitistack")
        .expect("vitistack")["status"]
        .clone();
    assert_eq!(status, json!({"displayName": "South"}));
}
