//! The network operators (nms, manual-ip, static-ip) judged beside the others, from what the
//! API server holds; the pipeline reading `provisioningPhase`, the allocator a configuration's
//! namespace selects, and Machines labelled the older way; and an operator's change of state
//! announced once, with a Warning Event on the Vitistack.

use std::sync::Arc;
use std::sync::atomic::{AtomicU16, Ordering};

use serde_json::{Value, json};

use super::{Harness, PATIENCE, kube_api};
use vitistack_testkit::kube_api::KubeApi;

fn ready_condition() -> Value {
    json!([{"type": "Ready", "status": "True", "reason": "Synced", "message": "",
        "lastTransitionTime": "2026-01-01T00:00:00Z"}])
}

/// A namespace whose network is given by hand (`ipAllocation.provider: static-ip-operator`),
/// Ready but with its segment `provisioningPhase`.
fn static_namespace(provisioning_phase: &str) -> Value {
    json!({"metadata": {"name": "net-static", "namespace": "team-a"},
        "spec": {"datacenterIdentifier": "dc-1", "supervisorIdentifier": "sv-1",
            "ipAllocation": {"type": "static", "provider": "static-ip-operator",
                "static": {"ipv4CIDR": "10.9.0.0/24", "ipv4Gateway": "10.9.0.1"}}},
        "status": {"phase": "Ready", "conditions": ready_condition(),
            "provisioningPhase": provisioning_phase, "message": "NetworkNamespace manually provisioned",
            "ipv4Prefix": "10.9.0.0/24", "vlanId": 209}})
}

fn setup(api: &KubeApi) {
    api.apply("networknamespaces", static_namespace("Pending"));
    api.apply(
        "networknamespaces",
        json!({"metadata": {"name": "net-dhcp", "namespace": "team-a"},
            "spec": {"datacenterIdentifier": "dc-1", "supervisorIdentifier": "sv-1"},
            "status": {"phase": "Ready", "conditions": ready_condition()}}),
    );
    api.apply(
        "kubernetesclusters",
        json!({"metadata": {"name": "c1", "namespace": "team-a"},
            "spec": {"data": {"clusterId": "c1-x", "provider": "talos", "networkNamespaceName": "net-static"},
                "topology": {"version": "1.33.1", "controlplane": {"replicas": 1, "machineClass": "small", "provider": "kubevirt"},
                    "workers": {"nodePools": []}}}}),
    );
    // Labelled as older talos-operator releases did: the cluster's name and their role label.
    api.apply(
        "machines",
        json!({"metadata": {"name": "c1-control-plane-0", "namespace": "team-a",
                "labels": {"cluster.vitistack.io/cluster-name": "c1", "cluster.vitistack.io/role": "controlplane"}},
            "spec": {"provider": "kubevirt", "machineClass": "small"},
            "status": {"phase": "Running"}}),
    );
    api.apply(
        "networkconfigurations",
        json!({"metadata": {"name": "c1-control-plane-0", "namespace": "team-a"},
            "spec": {"name": "c1-control-plane-0", "networkNamespaceName": "net-static"}}),
    );
    api.apply(
        "networkconfigurations",
        json!({"metadata": {"name": "other", "namespace": "team-a"},
            "spec": {"name": "other", "networkNamespaceName": "net-dhcp"}}),
    );
}

const CLUSTER: &str = r#"{
  cluster(namespace: "team-a", name: "c1") {
    machines { totalCount nodes { name role clusterId cluster { name } } }
    diagnosis { stage blockers { stage kind name reason terminal } }
    nodeCounts { total ready unready }
    networking { networkNamespace ipv4Prefix vlanId controlPlaneAddresses }
    operators { installed healthy }
    updatedAt
  }
  networkNamespace(namespace: "team-a", name: "net-static") { provisioningPhase ready }
}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_network_operators_are_judged_and_the_pipeline_reads_the_segment_and_the_allocator() {
    let h = Harness::start(setup).await;
    h.ready().await;

    // The machine labelled with the cluster's name is the cluster's, a control plane.
    let data = h.data(CLUSTER).await;
    let c = &data["cluster"];
    assert_eq!(c["machines"]["totalCount"], 1, "{data}");
    let m = &c["machines"]["nodes"][0];
    assert_eq!(m["role"], "CONTROL_PLANE", "{m}");
    assert_eq!(m["clusterId"], "c1-x", "{m}");
    assert_eq!(m["cluster"]["name"], "c1", "{m}");
    // The old cluster model: nodes, networking, the operators it depends on, updatedAt.
    assert_eq!(
        c["nodeCounts"],
        json!({"total": 1, "ready": 1, "unready": 0}),
        "{c}"
    );
    assert_eq!(
        c["networking"],
        json!({"networkNamespace": "net-static", "ipv4Prefix": "10.9.0.0/24", "vlanId": 209,
            "controlPlaneAddresses": []}),
        "{c}"
    );
    assert_eq!(
        c["operators"]["installed"],
        json!(["talos", "kubevirt", "manual-ip", "static-ip"]),
        "{c}"
    );
    let installed = c["operators"]["installed"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        c["operators"]["healthy"]
            .as_array()
            .is_some_and(|h| h.iter().all(|o| installed.contains(o))),
        "{c}"
    );
    assert!(
        c["updatedAt"]
            .as_str()
            .is_some_and(|t| t.parse::<jiff::Timestamp>().is_ok()),
        "{c}"
    );
    // Ready=True, but the segment is Pending: the cluster waits at the network, on manual-ip.
    assert_eq!(data["networkNamespace"]["provisioningPhase"], "Pending");
    assert_eq!(data["networkNamespace"]["ready"], false);
    assert_eq!(c["diagnosis"]["stage"], "NETWORK", "{data}");
    let b = &c["diagnosis"]["blockers"][0];
    let reason = b["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("has provisioningPhase Pending: NetworkNamespace manually provisioned")
            && reason.contains("(manual-ip-provisioning-operator provisions it)"),
        "{b}"
    );
    assert_eq!(b["terminal"], false);

    // Each network operator is judged on its own objects: the configuration in the static
    // namespace is static-ip's, not kea's.
    let (_, report) = h.get("/health/operators").await;
    let total = |op: &str| report["operators"][op]["resources"]["total"].clone();
    assert_eq!(total("static-ip"), 1, "{report}");
    assert_eq!(total("kea"), 1, "{report}");
    assert_eq!(total("manual-ip"), 1, "{report}");
    assert_eq!(total("nms"), 1, "{report}");
    // The old operator model's fields: capabilities, and when it was last seen at work (the
    // namespaces' Ready conditions are nms's and manual-ip's writes).
    let static_ip = &report["operators"]["static-ip"];
    assert_eq!(
        static_ip["capabilities"],
        json!(["ip-allocation:static", "control-plane-vip"]),
        "{static_ip}"
    );
    assert_eq!(
        report["operators"]["manual-ip"]["lastSeen"], "2026-01-01T00:00:00Z",
        "{report}"
    );
    assert_eq!(static_ip["degraded"], false, "{static_ip}");
    let (_, infra) = h.get("/api/v1/infrastructure").await;
    for op in ["nms", "manual-ip", "static-ip"] {
        assert!(
            infra["operators"][op]["status"].is_string(),
            "{op} in /api/v1/infrastructure: {infra}"
        );
    }
    let metrics = h.metrics().await;
    assert!(
        metrics.contains(r#"vitistack_operator_operator_status{operator="static-ip",status="#),
        "static-ip in /metrics"
    );
    // The old route's cluster entry: kea does not serve a cluster whose namespace is static.
    let (_, clusters) = h.get("/api/v1/clusters").await;
    assert_eq!(
        clusters["clusters"][0]["operators"]["kea"], false,
        "{clusters}"
    );
    assert_eq!(clusters["clusters"][0]["nodes"]["total"], 1, "{clusters}");

    // The segment is provisioned: the cluster moves on to the addresses, which static-ip gives.
    h.api.apply("networknamespaces", static_namespace("Ready"));
    let deadline = tokio::time::Instant::now() + PATIENCE;
    let data = loop {
        let data = h.data(CLUSTER).await;
        if data["cluster"]["diagnosis"]["stage"] != "NETWORK" {
            break data;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "still at NETWORK: {data}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    let d = &data["cluster"]["diagnosis"];
    assert_eq!(d["stage"], "IPS_ALLOCATED", "{data}");
    let b = d["blockers"]
        .as_array()
        .and_then(|bs| bs.iter().find(|b| b["kind"] == "NetworkConfiguration"))
        .cloned()
        .unwrap_or_default();
    assert!(
        b["reason"]
            .as_str()
            .is_some_and(|r| r.contains("; static-ip-operator allocates it")),
        "{data}"
    );
}

/// An endpoint whose answer the test sets.
async fn endpoint(status: Arc<AtomicU16>) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let app = axum::Router::new().fallback(move || {
        let status = status.clone();
        async move {
            axum::http::StatusCode::from_u16(status.load(Ordering::Relaxed))
                .unwrap_or(axum::http::StatusCode::INTERNAL_SERVER_ERROR)
        }
    });
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}/healthz")
}

/// A webhook receiver: the bodies it got.
async fn receiver() -> (String, Arc<parking_lot::Mutex<Vec<Value>>>) {
    let got: Arc<parking_lot::Mutex<Vec<Value>>> = Arc::default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let kept = got.clone();
    let app = axum::Router::new().fallback(move |body: axum::body::Bytes| {
        let kept = kept.clone();
        async move {
            kept.lock()
                .push(serde_json::from_slice(&body).unwrap_or(Value::Null));
            axum::http::StatusCode::NO_CONTENT
        }
    });
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{addr}/hook"), got)
}

/// The value of a metric line (`name{labels} value`).
fn metric(text: &str, line_start: &str) -> Option<f64> {
    text.lines()
        .find(|l| l.starts_with(line_start))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_going_unhealthy_is_announced_once_with_a_warning_event_on_the_vitistack() {
    let status = Arc::new(AtomicU16::new(200));
    let url = endpoint(status.clone()).await;
    let (hook, delivered) = receiver().await;
    let mut defs = kube_api::watched_resources();
    defs.push(kube_api::events());
    let api = KubeApi::start(&defs, std::time::Duration::from_millis(200)).await;
    api.apply(
        "vitistacks",
        json!({"metadata": {"name": "vitistack"},
            "spec": {"displayName": "South", "infrastructure": "prod", "region": "south", "zone": "az1"}}),
    );
    let mut h = Harness::unstarted(api);
    h.launch(&[
        "--health-check-interval",
        "200ms",
        "--kea-operator-endpoint",
        &url,
        "--kea-sync-interval",
        "200ms",
        "--webhook-urls",
        &hook,
    ])
    .await;
    h.ready().await;
    let checks = r#"vitistack_health_checks_total "#;
    let status_events = r#"vitistack_operator_events_processed_total{event_type="infrastructure.operator.status",status="success"}"#;
    // Healthy, and checked so at least twice (the first check is what later ones compare with).
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let (_, report) = h.get("/health/operators").await;
        let text = h.metrics().await;
        if report["operators"]["kea"]["status"] == "healthy"
            && report["operators"]["kea"]["lastProbeAt"].is_string()
            && metric(&text, checks).is_some_and(|n| n >= 2.0)
        {
            assert_eq!(
                metric(&text, status_events),
                Some(0.0),
                "nothing changed yet"
            );
            assert!(
                report["operators"]["kea"]["lastSeen"].is_string(),
                "{report}"
            );
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "never checked healthy: {report}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(h.api.objects("events").is_empty(), "no Event while healthy");

    // Its endpoint answers 500: unhealthy, announced once.
    status.store(500, Ordering::Relaxed);
    let deadline = tokio::time::Instant::now() + PATIENCE;
    let event = loop {
        if let Some(e) = h.api.objects("events").into_iter().next() {
            break e;
        }
        assert!(tokio::time::Instant::now() < deadline, "no Event");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    assert_eq!(event["type"], "Warning", "{event}");
    assert_eq!(event["reason"], "OperatorUnhealthy", "{event}");
    assert_eq!(event["regarding"]["kind"], "Vitistack", "{event}");
    assert_eq!(event["regarding"]["name"], "vitistack", "{event}");
    assert_eq!(
        event["reportingController"],
        "vitistack.io/vitistack-graphql"
    );
    let note = event["note"].as_str().unwrap_or_default();
    assert!(
        note.starts_with("kea-operator is unhealthy: ") && note.contains("answered HTTP 500"),
        "{note}"
    );
    // Several more checks see the same state: nothing more is announced.
    let text = h.metrics().await;
    let made = metric(&text, checks).unwrap_or_default();
    let deadline = tokio::time::Instant::now() + PATIENCE;
    let text = loop {
        let text = h.metrics().await;
        if metric(&text, checks).is_some_and(|n| n >= made + 3.0) {
            break text;
        }
        assert!(tokio::time::Instant::now() < deadline, "checks stopped");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    assert_eq!(metric(&text, status_events), Some(1.0), "announced once");
    assert_eq!(h.api.objects("events").len(), 1);
    // Last seen at its last good answer, however many failed probes came since.
    let (_, report) = h.get("/health/operators").await;
    let kea = &report["operators"]["kea"];
    let seen = kea["lastSeen"].as_str().unwrap_or_default();
    let probed = kea["lastProbeAt"].as_str().unwrap_or_default();
    assert!(!seen.is_empty() && seen < probed, "{kea}");
    // The webhook event, as the old operator sent it: `{operator, status}`.
    let deadline = tokio::time::Instant::now() + PATIENCE;
    let sent = loop {
        let sent: Vec<Value> = delivered
            .lock()
            .iter()
            .filter(|b| b["type"] == "infrastructure.operator.status")
            .cloned()
            .collect();
        if !sent.is_empty() {
            break sent;
        }
        assert!(tokio::time::Instant::now() < deadline, "no webhook event");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    assert_eq!(sent.len(), 1, "{sent:?}");
    let e = &sent[0];
    assert_eq!(
        (e["operator"].as_str(), e["status"].as_str()),
        (Some("kea"), Some("unhealthy")),
        "{e}"
    );
    assert_eq!(e["previousStatus"], "healthy", "{e}");
    assert!(
        e["reason"]
            .as_str()
            .is_some_and(|r| r.contains("answered HTTP 500")),
        "{e}"
    );
    assert!(
        !e.to_string().contains(&url),
        "the endpoint's path stays in the server: {e}"
    );

    // Well again: a Normal Event says so.
    status.store(200, Ordering::Relaxed);
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let events = h.api.objects("events");
        if let Some(e) = events.iter().find(|e| e["reason"] == "OperatorHealthy") {
            assert_eq!(e["type"], "Normal", "{e}");
            assert_eq!(e["note"], "kea-operator is healthy");
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no recovery Event: {events:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}
