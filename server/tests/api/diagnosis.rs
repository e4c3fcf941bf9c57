//! `cluster.pipeline` and `cluster.diagnosis` on a cluster blocked at each stage.

use serde_json::{Value, json};

use super::spawn;

const Q: &str = r#"{ clusters(first: 500, filter: {search: "t-demo-0"}) { nodes { name phase
    pipeline { stage steps { stage state } }
    diagnosis { ready stage failed summary blockers { kind namespace name reason terminal object { id kind name } } } } } }"#;

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
        "has no IPv4 address yet (has Ready=False: Reconciling",
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
        assert_eq!(c["diagnosis"]["stage"], "READY");
        assert!(c["diagnosis"]["blockers"].as_array().expect("b").is_empty());
    }
}

#[tokio::test]
async fn a_missing_network_namespace_is_named_even_though_it_does_not_exist() {
    let dir = std::env::temp_dir().join(format!("vitistack-ghost-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let kc = std::fs::read_to_string(
        super::shared().join("fixtures/upstream/talos-operator/1-kubernetescluster.yaml"),
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
