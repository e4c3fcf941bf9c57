//! `cluster.pipeline` and `cluster.diagnosis` on a cluster blocked at each stage.

use serde_json::{Value, json};

use super::spawn;

const Q: &str = r#"{ clusters(first: 500, filter: {search: "t-demo-0"}) { nodes { name phase
    pipeline { stage steps { stage state } }
    diagnosis { ready degraded stage failed summary warnings { stage }
      blockers { stage kind namespace name reason terminal object { id kind name } } } } } }"#;

/// (stage, failed, blocker kind, words in the reason, blocker exists)
const EXPECTED: &[(&str, bool, &str, &str, bool)] = &[
    (
        "NETWORK",
        false,
        "NetworkNamespace",
        "has no status yet",
        true,
    ),
    (
        "NETWORK",
        true,
        "NetworkNamespace",
        "has Ready=False: Error NAM rejected the request",
        true,
    ),
    (
        "MACHINES_CREATED",
        false,
        "KubernetesCluster",
        "0 of 6 Machines exist",
        true,
    ),
    (
        "IPS_ALLOCATED",
        false,
        "NetworkConfiguration",
        "has no IPv4 address yet (status: phase Reconciling; Ready=False: Reconciling",
        true,
    ),
    (
        "MACHINES_RUNNING",
        false,
        "Machine",
        "is Pending: Provisioning",
        true,
    ),
    (
        "MACHINES_RUNNING",
        true,
        "Machine",
        "is Failed: DataVolume",
        true,
    ),
    (
        "VIP_READY",
        false,
        "ControlPlaneVirtualSharedIP",
        "has Ready=False: WaitingForIPAllocation",
        true,
    ),
    (
        "TALOS",
        false,
        "KubernetesCluster",
        "is at phase Bootstrapping",
        true,
    ),
    (
        "TALOS",
        false,
        "KubernetesCluster",
        "is at phase WaitingForNodes",
        true,
    ),
];

#[tokio::test]
async fn diagnosis_names_the_blocking_object_at_every_stage() {
    let app = spawn(&["--demo"]).await;
    let d = app.data(Q, json!({})).await;
    let clusters = d["clusters"]["nodes"].as_array().expect("clusters").clone();
    for (i, (stage, failed, kind, words, exists)) in EXPECTED.iter().enumerate() {
        let c = &clusters[i];
        let diag = &c["diagnosis"];
        assert_eq!(diag["ready"], false, "{c}");
        assert_eq!(diag["stage"], *stage, "cluster {i}: {diag}");
        assert_eq!(c["pipeline"]["stage"], *stage);
        assert_eq!(diag["failed"], *failed, "cluster {i}: {diag}");
        let b = &diag["blockers"][0];
        assert_eq!(b["kind"], *kind, "cluster {i}: {diag}");
        assert_eq!(b["stage"], *stage, "cluster {i}: {diag}");
        assert!(
            b["reason"].as_str().expect("reason").contains(words),
            "cluster {i}: {} should contain {words}",
            b["reason"]
        );
        assert_eq!(b["object"].is_null(), !exists);
        assert!(
            diag["summary"]
                .as_str()
                .expect("summary")
                .contains("is blocked")
        );
        // Every stage before the current one is DONE, none after it has started.
        let steps = c["pipeline"]["steps"].as_array().expect("steps");
        let at = steps
            .iter()
            .position(|s| s["stage"] == *stage)
            .expect("stage in steps");
        assert!(steps[..at].iter().all(|s| s["state"] == "DONE"));
        assert_eq!(
            steps[at]["state"],
            if *failed { "FAILED" } else { "IN_PROGRESS" }
        );
        assert!(steps[at + 1..].iter().all(|s| s["state"] == "NOT_STARTED"));
    }
    let ready: Vec<&Value> = clusters.iter().filter(|c| c["phase"] == "Ready").collect();
    assert!(!ready.is_empty());
    for c in ready {
        assert_eq!(c["diagnosis"]["ready"], true, "{c}");
        assert_eq!(c["diagnosis"]["degraded"], false, "{c}");
        assert_eq!(c["diagnosis"]["stage"], "READY");
        assert!(c["diagnosis"]["blockers"].as_array().expect("b").is_empty());
    }
}

#[tokio::test]
async fn a_missing_network_namespace_is_named_even_though_it_does_not_exist() {
    let dir = std::env::temp_dir().join(format!("vitistack-ghost-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let kc = std::fs::read_to_string(
        super::fixtures().join("upstream/talos-operator/1-kubernetescluster.yaml"),
    )
    .expect("fixture")
    .replace(
        "networkNamespaceName: t-test001",
        "networkNamespaceName: ghost",
    );
    std::fs::write(dir.join("kc.yaml"), kc).expect("write");
    let app = spawn(&[dir.to_str().expect("path")]).await;
    let d = app
        .data(r#"{ cluster(namespace: "default", clusterId: "t-test-001-4y8e") { diagnosis { stage blockers { kind name reason object { id } } } } }"#, json!({}))
        .await;
    let b = &d["cluster"]["diagnosis"]["blockers"][0];
    assert_eq!(d["cluster"]["diagnosis"]["stage"], "NETWORK");
    assert_eq!(
        (b["kind"].as_str(), b["name"].as_str()),
        (Some("NetworkNamespace"), Some("ghost"))
    );
    assert_eq!(b["reason"], "NetworkNamespace default/ghost does not exist");
    assert!(b["object"].is_null());
    let _ = std::fs::remove_dir_all(dir);
}

/// A cluster whose own status says Ready while its NetworkNamespace is in Error is Ready and
/// degraded (the network a warning), and `clusterSummary` counts it apart from the healthy ones.
#[tokio::test]
async fn a_ready_cluster_with_a_broken_network_is_ready_degraded_and_counted_apart() {
    use vitistack::model::{Kind, Resource};
    use vitistack::store::{ObjectKey, Op};
    let app = spawn(&["--demo"]).await;
    let summary = "{ clusterSummary { total ready degraded failed inProgress } }";
    let before = app.data(summary, json!({})).await["clusterSummary"].clone();
    let store = app.running().store.clone();
    let snap = store.snapshot();
    let kc = snap
        .list(Kind::KubernetesCluster)
        .find(|c| c.phase() == Some("Ready"))
        .cloned()
        .expect("a Ready cluster");
    let Resource::KubernetesCluster(k) = kc.as_ref() else {
        unreachable!()
    };
    let nn_key = ObjectKey::new(
        &Default::default(),
        Kind::NetworkNamespace,
        kc.namespace(),
        &k.spec.data.network_namespace_name,
    );
    let mut nn = snap.get_key(&nn_key).map(|r| r.to_value()).expect("nn");
    nn["status"]["phase"] = json!("Error");
    nn["status"]["conditions"] = json!([{"type": "Ready", "status": "False", "reason": "Error",
        "message": "VLAN already assigned", "lastTransitionTime": "2026-11-01T00:00:00Z"}]);
    let version = nn["apiVersion"]
        .as_str()
        .and_then(|v| v.rsplit('/').next())
        .unwrap_or("v1alpha1")
        .to_string();
    store.apply(vec![Op::Upsert(
        Resource::from_value(Kind::NetworkNamespace, &version, nn).expect("nn"),
    )]);
    let d = app
        .data(
            r#"query($ns: String!, $n: String!) { cluster(namespace: $ns, name: $n) { diagnosis {
                ready degraded stage failed summary blockers { name }
                warnings { stage kind name reason terminal } } pipeline { steps { stage state } } } }"#,
            json!({"ns": kc.namespace(), "n": kc.name()}),
        )
        .await;
    let diag = &d["cluster"]["diagnosis"];
    assert_eq!(diag["ready"], true, "{diag}");
    assert_eq!(diag["degraded"], true, "{diag}");
    assert_eq!(diag["stage"], "READY", "{diag}");
    assert_eq!(diag["blockers"], json!([]), "{diag}");
    assert_eq!(diag["warnings"][0]["stage"], "NETWORK", "{diag}");
    assert_eq!(diag["warnings"][0]["kind"], "NetworkNamespace", "{diag}");
    assert!(
        diag["warnings"][0]["reason"]
            .as_str()
            .is_some_and(|r| r.contains("VLAN already assigned")),
        "{diag}"
    );
    assert!(
        d["cluster"]["pipeline"]["steps"]
            .as_array()
            .expect("steps")
            .iter()
            .any(|s| s["stage"] == "NETWORK" && s["state"] == "DEGRADED")
    );
    let after = app.data(summary, json!({})).await["clusterSummary"].clone();
    assert_eq!(
        after["ready"].as_i64(),
        before["ready"].as_i64().map(|n| n - 1)
    );
    assert_eq!(
        after["degraded"].as_i64(),
        before["degraded"].as_i64().map(|n| n + 1)
    );
    assert_eq!(after["total"], before["total"]);
}
