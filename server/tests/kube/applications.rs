//! The application inventory against the Kubernetes API test server: Helm release Secrets made
//! here with Helm's own encoding (several revisions), a release kept in a ConfigMap, pods,
//! services, PVCs and ingresses, served by watch to the real binary. Checked: the join, nothing
//! joined across namespaces, a denied namespace skipped, only the latest revision live, the
//! health of a crash-looping pod and of an upgrade under way, the cluster UUID kept in a
//! ConfigMap, and a value planted in the release's values, config and manifest found in no
//! answer, log line or database row.

use std::time::Duration;

use serde_json::{Value, json};
use vitistack::model::helm;

use super::{Harness, KubeApi, PATIENCE, kube_api};

const PLANTED: &str = "planted-helm-value-7Qx9";

fn ns(name: &str) -> Value {
    json!({"metadata": {"name": name}})
}

fn release(name: &str, namespace: &str, revision: u64, status: &str) -> Value {
    json!({
        "name": name, "namespace": namespace, "version": revision,
        "info": {"status": status, "last_deployed": format!("2026-11-2{revision}T08:00:00Z"),
                 "notes": format!("admin password: {PLANTED}")},
        "chart": {"metadata": {"name": "webshop", "version": format!("1.{revision}.0"), "appVersion": "4.2"},
                  "values": {"db": {"password": PLANTED}},
                  "templates": [{"name": "secret.yaml", "data": PLANTED}]},
        "config": {"db": {"password": PLANTED}},
        "manifest": format!("---\napiVersion: v1\nkind: Service\nmetadata:\n  name: {name}-plain\n  labels:\n    app.kubernetes.io/managed-by: Helm\n---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: {name}-db\nstringData:\n  password: {PLANTED}\n"),
    })
}

/// A release revision as Helm stores it: a Secret of type `helm.sh/release.v1`.
fn release_secret(name: &str, namespace: &str, revision: u64, status: &str) -> Value {
    json!({
        "metadata": {"name": format!("sh.helm.release.v1.{name}.v{revision}"), "namespace": namespace,
                     "labels": {"owner": "helm", "name": name, "status": status, "version": revision.to_string()}},
        "type": "helm.sh/release.v1",
        "data": {"release": helm::secret_data(&release(name, namespace, revision, status))},
    })
}

fn labels(instance: &str) -> Value {
    json!({"app.kubernetes.io/instance": instance, "app.kubernetes.io/managed-by": "Helm"})
}

fn pod(name: &str, namespace: &str, instance: &str, ready: bool, waiting: Option<&str>) -> Value {
    let state = match waiting {
        Some(reason) => json!({"waiting": {"reason": reason}}),
        None => json!({"running": {"startedAt": "2026-11-20T08:00:00Z"}}),
    };
    json!({
        "metadata": {"name": name, "namespace": namespace, "labels": labels(instance)},
        "spec": {"containers": [{"name": "web", "image": "registry.example/webshop:4.2"}]},
        "status": {"phase": "Running", "containerStatuses": [{
            "name": "web", "image": "registry.example/webshop:4.2", "imageID": "sha256:1",
            "ready": ready, "restartCount": if waiting.is_some() { 9 } else { 0 }, "state": state}]},
    })
}

async fn applications(base: &str) -> Value {
    let q = r#"{ applications(first: 50) { edges { node { id datacenter namespace name revision status health reasons
        chart chartVersion appVersion appUuid readyPods kubernetesCluster { name namespace }
        pods { name image phase ready restarts waiting } services { name ports }
        volumes { name requestedBytes } ingresses { name hosts }
        revisions { revision status chartVersion } } } }
      applicationInventory { paused clusterUuids { datacenter uuid } namespaces total deniedNamespaces
        byHealth { health count } reconciled { namespace name revision } lastReconciledAt } }"#;
    // Null until the server answers.
    let Ok(res) = reqwest::Client::new()
        .post(format!("{base}/graphql"))
        .json(&json!({ "query": q }))
        .send()
        .await
    else {
        return Value::Null;
    };
    res.json().await.unwrap_or(Value::Null)
}

fn app<'a>(answer: &'a Value, namespace: &str, name: &str) -> Option<&'a Value> {
    answer["data"]["applications"]["edges"]
        .as_array()?
        .iter()
        .map(|e| &e["node"])
        .find(|n| n["namespace"] == namespace && n["name"] == name)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn helm_releases_are_joined_with_what_they_run_and_their_values_never_leave() {
    let mut defs = kube_api::watched_resources();
    defs.extend(kube_api::inventory_resources());
    let api = KubeApi::start(&defs, Duration::from_millis(200)).await;
    for n in ["shop", "other", "kube-system", "vitistack"] {
        api.apply("namespaces", ns(n));
    }
    // The KubernetesCluster this cluster is (talos-operator annotates it with the UID of the
    // tenant's kube-system), and another one that is not.
    let kube_system_uid = api
        .object("namespaces", "", "kube-system")
        .and_then(|n| n["metadata"]["uid"].as_str().map(String::from))
        .expect("kube-system's UID");
    let mut here = super::upstream("talos-operator/1-kubernetescluster.yaml");
    here["metadata"]["namespace"] = json!("tenants");
    here["metadata"]["annotations"] = json!({"vitistack.io/kube-system-uid": kube_system_uid});
    let mut elsewhere = here.clone();
    elsewhere["metadata"]["name"] = json!("elsewhere");
    elsewhere["metadata"]["annotations"] =
        json!({"vitistack.io/kube-system-uid": "7d3c1a6e-0000-4000-8000-000000000001"});
    api.apply("kubernetesclusters", here.clone());
    api.apply("kubernetesclusters", elsewhere);
    // Two revisions of shop; the second is live.
    api.apply("secrets", release_secret("shop", "shop", 1, "superseded"));
    api.apply("secrets", release_secret("shop", "shop", 2, "deployed"));
    // A release kept in a ConfigMap (HELM_DRIVER=configmap).
    api.apply(
        "configmaps",
        json!({"metadata": {"name": "sh.helm.release.v1.api.v1", "namespace": "other",
                            "labels": {"owner": "helm", "name": "api"}},
               "data": {"release": helm::encode(&release("api", "other", 1, "deployed"))}}),
    );
    // A denied namespace's release.
    api.apply(
        "secrets",
        release_secret("metrics", "kube-system", 1, "deployed"),
    );
    // A Secret that is no release: never read (the field selector keeps it away).
    api.apply(
        "secrets",
        json!({"metadata": {"name": "db-credentials", "namespace": "shop"}, "type": "Opaque",
               "data": {"password": base64_of(PLANTED)}}),
    );
    api.apply(
        "secrets",
        json!({"metadata": {"name": "uuid", "namespace": "shop"}, "type": "Opaque",
               "data": {"uuid": base64_of("0b5e2c4e-58f1-4d8a-9d7e-3f0a7c1b2d44")}}),
    );
    api.apply("pods", pod("shop-0", "shop", "shop", true, None));
    api.apply(
        "pods",
        pod("shop-1", "shop", "shop", false, Some("CrashLoopBackOff")),
    );
    // The same instance label in another namespace: never shop's.
    api.apply("pods", pod("shop-0", "other", "shop", true, None));
    api.apply(
        "persistentvolumeclaims",
        json!({"metadata": {"name": "shop-data", "namespace": "shop", "labels": labels("shop")},
               "spec": {"resources": {"requests": {"storage": "10Gi"}}}}),
    );
    api.apply(
        "persistentvolumeclaims",
        json!({"metadata": {"name": "shop-data", "namespace": "other", "labels": labels("shop")},
               "spec": {"resources": {"requests": {"storage": "1Ti"}}}}),
    );
    // Joined by the annotations, and by the manifest (no labels at all).
    api.apply(
        "services",
        json!({"metadata": {"name": "shop", "namespace": "shop",
                            "annotations": {"meta.helm.sh/release-name": "shop", "meta.helm.sh/release-namespace": "shop"}},
               "spec": {"ports": [{"port": 80}, {"port": 443}]}}),
    );
    api.apply(
        "services",
        json!({"metadata": {"name": "shop-plain", "namespace": "shop"}, "spec": {"ports": [{"port": 9090}]}}),
    );
    api.apply(
        "ingresses",
        json!({"metadata": {"name": "shop", "namespace": "shop", "labels": labels("shop")},
               "spec": {"rules": [{"host": "shop.example.com"}]}}),
    );

    let mut h = Harness::unstarted(api);
    let log = h.dir.join("log");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("port")
        .port();
    let db_url = format!("sqlite://{}/v.db", h.dir.display());
    let mut child = vitistack_testkit::proc::command(env!("CARGO_BIN_EXE_vitistack"))
        .arg("serve")
        .env("KUBECONFIG", h.dir.join("kubeconfig"))
        .env("KUBE_CONTEXT", "test")
        .env("PORT", port.to_string())
        .env("BIND_ADDRESS", "127.0.0.1")
        .env("DATABASE_URL", &db_url)
        .env("LOG_LEVEL", "debug")
        .env("ANONYMOUS_READ_FROM", "127.0.0.0/8")
        .env("RATE_LIMIT", "0")
        .env("APPLICATIONS", "true")
        .env("POD_NAMESPACE", "vitistack")
        .env("HISTORY_FLUSH_INTERVAL_MS", "20")
        .stdout(std::fs::File::create(&log).expect("log"))
        .stderr(std::fs::File::create(h.dir.join("err")).expect("log"))
        .spawn()
        .map(vitistack_testkit::proc::TestChild::from)
        .expect("start the binary");
    // The binary serves here; the harness reads through it.
    h.base = format!("http://127.0.0.1:{port}");
    let base = h.base.clone();
    let mut answers = String::new();

    // Both applications, the cluster UUID kept, shop's crash loop judged.
    let deadline = tokio::time::Instant::now() + PATIENCE;
    let first = loop {
        let a = applications(&base).await;
        let done = a["data"]["applicationInventory"]["total"] == 2
            && a["data"]["applicationInventory"]["clusterUuids"]
                .as_array()
                .is_some_and(|u| u.len() == 1)
            && app(&a, "shop", "shop").is_some_and(|s| {
                s["pods"].as_array().is_some_and(|p| p.len() == 2)
                    && s["volumes"].as_array().is_some_and(|v| v.len() == 1)
                    && s["ingresses"].as_array().is_some_and(|i| i.len() == 1)
                    && s["services"].as_array().is_some_and(|v| v.len() == 2)
                    && s["appUuid"].is_string()
                    && s["kubernetesCluster"].is_object()
            });
        if done {
            break a;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the inventory never showed both applications: {a}\n{}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    answers.push_str(&first.to_string());
    assert!(first.get("errors").is_none(), "{first}");
    let shop = app(&first, "shop", "shop").expect("shop");
    assert_eq!(
        shop["revision"], 2,
        "only the latest deployed revision is live"
    );
    assert_eq!(shop["status"], "deployed");
    assert_eq!(shop["chartVersion"], "1.2.0");
    assert_eq!(shop["health"], "DEGRADED");
    assert!(
        shop["reasons"]
            .as_array()
            .is_some_and(|r| r.iter().any(|r| r
                .as_str()
                .is_some_and(|r| r.contains("shop-1 is crash-looping")))),
        "{shop}"
    );
    assert_eq!(shop["readyPods"], 1);
    let revisions: Vec<u64> = shop["revisions"]
        .as_array()
        .expect("revisions")
        .iter()
        .filter_map(|r| r["revision"].as_u64())
        .collect();
    assert_eq!(revisions, [2, 1]);
    // Its own namespace's volume only (10 GiB), not the other namespace's 1 TiB one.
    assert_eq!(
        shop["volumes"][0]["requestedBytes"],
        json!(10.0 * 1024f64.powi(3))
    );
    let mut services: Vec<&str> = shop["services"]
        .as_array()
        .expect("services")
        .iter()
        .filter_map(|s| s["name"].as_str())
        .collect();
    services.sort_unstable();
    assert_eq!(services, ["shop", "shop-plain"]);
    assert_eq!(shop["ingresses"][0]["hosts"], json!(["shop.example.com"]));
    assert_eq!(shop["appUuid"], "0b5e2c4e-58f1-4d8a-9d7e-3f0a7c1b2d44");
    let pods: Vec<&str> = shop["pods"]
        .as_array()
        .expect("pods")
        .iter()
        .filter_map(|p| p["name"].as_str())
        .collect();
    assert!(!pods.is_empty() && pods.iter().all(|p| p.starts_with("shop-")));
    let from_configmap = app(&first, "other", "api").expect("the ConfigMap-stored release");
    assert_eq!(from_configmap["health"], "HEALTHY");
    assert!(
        from_configmap["pods"]
            .as_array()
            .is_some_and(|p| p.is_empty()),
        "a pod of another namespace joined: {from_configmap}"
    );
    assert!(app(&first, "kube-system", "metrics").is_none());
    // Linked to the cluster whose annotation names this kube-system (a denied namespace, yet
    // its UID is read), both ways.
    assert_eq!(
        shop["kubernetesCluster"],
        json!({"name": here["metadata"]["name"], "namespace": "tenants"})
    );
    let on = h
        .answer("{ clusters(first: 10) { nodes { name applications { namespace name } } } }")
        .await;
    let mut runs: Vec<(String, Vec<String>)> = on["data"]["clusters"]["nodes"]
        .as_array()
        .expect("clusters")
        .iter()
        .map(|c| {
            let apps = c["applications"].as_array().map_or(Vec::new(), |a| {
                a.iter()
                    .map(|a| {
                        format!(
                            "{}/{}",
                            a["namespace"].as_str().unwrap_or(""),
                            a["name"].as_str().unwrap_or("")
                        )
                    })
                    .collect()
            });
            (c["name"].as_str().unwrap_or_default().to_string(), apps)
        })
        .collect();
    runs.sort();
    let here_name = here["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert_eq!(
        runs,
        [
            ("elsewhere".to_string(), vec![]),
            (
                here_name,
                vec!["other/api".to_string(), "shop/shop".to_string()]
            )
        ],
        "{on}"
    );
    let inv = &first["data"]["applicationInventory"];
    assert!(
        inv["deniedNamespaces"]
            .as_array()
            .is_some_and(|d| d.contains(&json!("kube-system")))
    );
    assert!(inv["lastReconciledAt"].is_string());
    let uuid = inv["clusterUuids"][0]["uuid"]
        .as_str()
        .expect("uuid")
        .to_string();
    let kept = h
        .api
        .object("configmaps", "vitistack", "vitistack-graphql-inventory")
        .expect("the cluster UUID's ConfigMap");
    assert_eq!(kept["data"]["clusterUuid"], uuid.as_str());

    // The summary's subscription: its application counts come with it, and a change of the
    // applications alone (no infrastructure object moves) sends it again.
    use futures::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message;
    let mut ws = super::open_ws(&base).await;
    for m in [
        json!({"type": "connection_init"}),
        json!({"id": "s", "type": "subscribe", "payload": {"query":
            "subscription { infrastructureSummary(debounceMs: 10) { clusters { total } applications { total degraded pending } } }"}}),
    ] {
        ws.send(Message::Text(m.to_string().into()))
            .await
            .expect("send");
    }
    let mut summaries = Vec::new();
    let mut next_summary = async || {
        // One deadline for the whole wait (other frames do not extend it).
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            match tokio::time::timeout_at(deadline, ws.next())
                .await
                .expect("a summary in time")
            {
                Some(Ok(Message::Text(t))) => {
                    let v: Value = serde_json::from_str(&t).expect("json");
                    if v["type"] == "next" {
                        break v["payload"]["data"]["infrastructureSummary"].clone();
                    }
                }
                Some(Ok(_)) => {}
                other => panic!("socket ended: {other:?}"),
            }
        }
    };
    summaries.push(next_summary().await);
    assert_eq!(
        summaries[0]["applications"],
        json!({"total": 2, "degraded": 1, "pending": 0}),
        "{summaries:?}"
    );

    // An upgrade starts: revision 3 is pending and live; then it fails, and 2 runs on.
    h.api.apply(
        "secrets",
        release_secret("shop", "shop", 3, "pending-upgrade"),
    );
    let upgrading = until_app(&base, "shop", "shop", |s| s["revision"] == 3).await;
    assert_eq!(upgrading["health"], "PENDING_UPGRADE");
    summaries.push(next_summary().await);
    assert_eq!(
        summaries[1]["applications"],
        json!({"total": 2, "degraded": 0, "pending": 1}),
        "{summaries:?}"
    );
    assert_eq!(summaries[1]["clusters"], summaries[0]["clusters"]);
    drop(ws);
    h.api
        .apply("secrets", release_secret("shop", "shop", 3, "failed"));
    let failed = until_app(&base, "shop", "shop", |s| {
        s["revision"] == 2
            && s["reasons"].as_array().is_some_and(|r| {
                r.iter().any(|r| {
                    r.as_str()
                        .is_some_and(|r| r.contains("upgrade to revision 3 failed"))
                })
            })
    })
    .await;
    assert_eq!(failed["health"], "DEGRADED");
    // The crash-looping pod goes: only the failed upgrade is left to say.
    h.api.delete("pods", "shop", "shop-1");
    let healed = until_app(&base, "shop", "shop", |s| {
        s["pods"].as_array().is_some_and(|p| p.len() == 1)
    })
    .await;
    assert_eq!(
        healed["reasons"],
        json!(["the upgrade to revision 3 failed; revision 2 still runs"])
    );
    assert_eq!(healed["readyPods"], 1);
    answers.push_str(&healed.to_string());
    // Its history: the new revision, its health on the way, the failed upgrade; none of the
    // first list (it was there before).
    let deadline = tokio::time::Instant::now() + PATIENCE;
    let history = loop {
        let q = r#"{ application(namespace: "shop", name: "shop") { history(first: 20) { edges { node {
            type change phaseBefore phaseAfter diff kind namespace name } } } } }"#;
        let v = h.answer(q).await;
        let types: Vec<String> = v["data"]["application"]["history"]["edges"]
            .as_array()
            .map(|e| {
                e.iter()
                    .filter_map(|e| e["node"]["type"].as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        // Newest first: back to revision 2 (the upgrade failed), to 3 (pending).
        if types.len() >= 2 && types[..2] == ["application.revision", "application.revision"] {
            break v;
        }
        assert!(tokio::time::Instant::now() < deadline, "history: {v}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    answers.push_str(&history.to_string());
    let edges = history["data"]["application"]["history"]["edges"]
        .as_array()
        .expect("edges")
        .clone();
    let newest = &edges[0]["node"];
    assert_eq!(
        (
            newest["kind"].as_str(),
            newest["phaseBefore"].as_str(),
            newest["phaseAfter"].as_str()
        ),
        (
            Some("Application"),
            Some("PENDING_UPGRADE"),
            Some("DEGRADED")
        ),
        "{newest}"
    );
    assert_eq!(
        newest["diff"][0],
        json!({"path": "/revision", "before": 3, "after": 2})
    );
    assert!(
        edges
            .iter()
            .all(|e| e["node"]["type"] != "application.installed"),
        "what the first list found is not an install: {edges:?}"
    );

    // The release is uninstalled: its Secrets go, and so does the application.
    for r in 1..=3 {
        h.api
            .delete("secrets", "shop", &format!("sh.helm.release.v1.shop.v{r}"));
    }
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let a = applications(&base).await;
        if app(&a, "shop", "shop").is_none() && a["data"]["applicationInventory"]["total"] == 1 {
            answers.push_str(&a.to_string());
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "shop never went: {a}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    let _ = std::process::Command::new("kill")
        .arg(child.id().to_string())
        .status();
    let _ = child.wait();
    let logs = std::fs::read_to_string(&log).unwrap_or_default()
        + &std::fs::read_to_string(h.dir.join("err")).unwrap_or_default();
    assert!(
        logs.contains("DEBUG") || logs.contains("\"debug\""),
        "logged at debug level"
    );
    let mut stored = String::new();
    for table in [
        "objects",
        "events",
        "webhook_deliveries",
        "inventory_clusters",
    ] {
        stored.push_str(&crate::db_text::table_text(&db_url, table).await);
    }
    for (place, text) in [
        ("answers", &answers),
        ("the log", &logs),
        ("the database", &stored),
    ] {
        assert!(!text.contains(PLANTED), "the planted value is in {place}");
    }
}

fn base64_of(s: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(s)
}

/// Wait until application `namespace/name` passes `cond`; returns it.
async fn until_app(
    base: &str,
    namespace: &str,
    name: &str,
    cond: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let a = applications(base).await;
        if let Some(found) = app(&a, namespace, name).filter(|s| cond(s)) {
            return found.clone();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {namespace}/{name}: {a}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// What the inventory API received: (Authorization header, body), in order.
type Received = std::sync::Arc<parking_lot::Mutex<Vec<(String, Value)>>>;

/// An inventory API that answers 200 and keeps what it gets.
async fn inventory_api() -> (String, Received) {
    use axum::routing::post;
    let got: Received = Default::default();
    let kept = got.clone();
    let app = axum::Router::new().route(
        "/api/v1/apps",
        post(move |headers: axum::http::HeaderMap, body: String| {
            let kept = kept.clone();
            async move {
                let auth = headers
                    .get("authorization")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or_default()
                    .to_string();
                kept.lock()
                    .push((auth, serde_json::from_str(&body).unwrap_or(Value::Null)));
                "ok"
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move { axum::serve(listener, app).await });
    (
        format!("http://{addr}/api/v1/apps?key=push-url-secret"),
        got,
    )
}

/// The inventory server, as a process (started again on the same database to restart it).
fn inventory_server(
    h: &Harness,
    push: &str,
    keys: &std::path::Path,
    n: u32,
) -> (vitistack_testkit::proc::TestChild, String) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("port")
        .port();
    let child = vitistack_testkit::proc::command(env!("CARGO_BIN_EXE_vitistack"))
        .arg("serve")
        .env("KUBECONFIG", h.dir.join("kubeconfig"))
        .env("KUBE_CONTEXT", "test")
        .env("PORT", port.to_string())
        .env("BIND_ADDRESS", "127.0.0.1")
        .env("DATABASE_URL", format!("sqlite://{}/v.db", h.dir.display()))
        .env("LOG_LEVEL", "debug")
        .env("API_KEYS_FILE", keys)
        .env("RATE_LIMIT", "0")
        .env("APPLICATIONS", "true")
        .env("POD_NAMESPACE", "vitistack")
        .env("HOSSTED_API_URL", push)
        .env("HOSSTED_AUTH_TOKEN", "hossted-token-ZQX")
        .env("HOSSTED_EMAIL_ID", "ops@example.org")
        .env("WEBHOOK_RETRY_MS", "50")
        .stdout(std::fs::File::create(h.dir.join(format!("log{n}"))).expect("log"))
        .stderr(std::fs::File::create(h.dir.join(format!("err{n}"))).expect("log"))
        .spawn()
        .map(vitistack_testkit::proc::TestChild::from)
        .expect("start the binary");
    (child, format!("http://127.0.0.1:{port}"))
}

const ADMIN_KEY: &str = "admin-key-0123456789abcdef";

/// Wait until the inventory API has received `n` pushes; returns them.
async fn pushes(got: &Received, n: usize, what: &str) -> Vec<(String, Value)> {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let now = got.lock().clone();
        if now.len() >= n {
            return now;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what}: {} pushes, waited for {n}: {now:?}",
            now.len()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The revision and the ready pods a push says.
fn says(push: &Value) -> (u64, Vec<String>) {
    let doc = &push[0]["app_info"];
    let revision = doc["helm_info"]["revision"].as_u64().unwrap_or_default();
    let pods = doc["pod_info"]
        .as_array()
        .map(|p| {
            p.iter()
                .map(|p| {
                    format!(
                        "{}:{}",
                        p["name"].as_str().unwrap_or_default(),
                        p["status"].as_str().unwrap_or_default()
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    (revision, pods)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_inventory_api_gets_one_push_per_revision_or_readiness_change_and_none_while_paused() {
    let mut defs = kube_api::watched_resources();
    defs.extend(kube_api::inventory_resources());
    let api = KubeApi::start(&defs, Duration::from_millis(200)).await;
    api.apply("namespaces", ns("shop"));
    api.apply("secrets", release_secret("shop", "shop", 1, "deployed"));
    api.apply("pods", pod("shop-0", "shop", "shop", true, None));
    api.apply(
        "secrets",
        json!({"metadata": {"name": "uuid", "namespace": "shop"}, "type": "Opaque",
               "data": {"uuid": base64_of("5d1e0c2a-7b4f-4e39-8a61-2c9d0f3b7e15")}}),
    );
    let h = Harness::unstarted(api);
    let keys = h.dir.join("keys");
    std::fs::write(&keys, format!("root admin {ADMIN_KEY}\n")).expect("keys");
    let (url, got) = inventory_api().await;
    let (mut child, base) = inventory_server(&h, &url, &keys, 1);

    // The first push: the design's document, with the token.
    let first = pushes(&got, 1, "the first push").await;
    assert_eq!(first[0].0, "Bearer hossted-token-ZQX");
    let schema: Value = serde_json::from_str(include_str!(
        "../../../fixtures/hossted/app-documents.schema.json"
    ))
    .expect("schema");
    let validator = jsonschema::validator_for(&schema).expect("schema");
    let errors: Vec<String> = validator
        .iter_errors(&first[0].1)
        .map(|e| e.to_string())
        .collect();
    assert!(errors.is_empty(), "{errors:?}: {}", first[0].1);
    let api_info = &first[0].1[0]["app_api_info"];
    assert_eq!(api_info["all_good"], 1);
    // The account's e-mail, and the design's `hossted_helm` rule: the release's manifest labels its
    // objects as Helm's and the namespace has a uuid Secret.
    assert_eq!(api_info["email_id"], "ops@example.org", "{api_info}");
    assert_eq!(api_info["hossted_helm"], true, "{api_info}");
    assert_eq!(
        api_info["app_uuid"], "5d1e0c2a-7b4f-4e39-8a61-2c9d0f3b7e15",
        "{api_info}"
    );
    assert_eq!(says(&first[0].1).0, 1);

    // A label on the pod: nothing to push. Then its readiness: one push. (The readiness push
    // coming second, with nothing between, shows the label sent nothing.)
    let mut labelled = pod("shop-0", "shop", "shop", true, None);
    labelled["metadata"]["labels"]["tier"] = json!("web");
    h.api.apply("pods", labelled);
    h.api
        .apply("pods", pod("shop-0", "shop", "shop", false, None));
    let two = pushes(&got, 2, "the readiness change").await;
    assert_eq!(two[1].1[0]["app_api_info"]["all_good"], 0);
    // A new revision: one push with it.
    h.api
        .apply("secrets", release_secret("shop", "shop", 2, "deployed"));
    let three = pushes(&got, 3, "the new revision").await;
    assert_eq!(says(&three[2].1).0, 2);

    // Paused by an admin: changes wait; resumed, the state now is pushed once.
    let mutate = |paused: bool| {
        let base = base.clone();
        async move {
            let q = format!("mutation {{ setApplicationsPaused(paused: {paused}) {{ paused }} }}");
            let res = admin_answer(&base, &q).await.expect("mutation");
            assert_eq!(
                res["data"]["setApplicationsPaused"]["paused"], paused,
                "{res}"
            );
        }
    };
    mutate(true).await;
    h.api
        .apply("secrets", release_secret("shop", "shop", 3, "deployed"));
    h.api
        .apply("pods", pod("shop-0", "shop", "shop", true, None));
    // Seen by the inventory while paused.
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let q = "{ application(namespace: \"shop\", name: \"shop\") { revision readyPods } }";
        let res = admin_answer(&base, q).await.expect("query");
        if res["data"]["application"] == json!({"revision": 3, "readyPods": 1}) {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "never saw revision 3: {res}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(got.lock().len(), 3, "pushed while paused");
    mutate(false).await;
    let four = pushes(&got, 4, "the push after resuming").await;
    assert_eq!(says(&four[3].1), (3, vec!["shop-0:Running".to_string()]));

    // Restarted on the same database: nothing delivered is sent again. (The next change's push
    // comes fifth, so nothing came before it.)
    let _ = std::process::Command::new("kill")
        .arg(child.id().to_string())
        .status();
    let _ = child.wait();
    let (mut again, _) = inventory_server(&h, &url, &keys, 2);
    h.api
        .apply("pods", pod("shop-1", "shop", "shop", true, None));
    let five = pushes(&got, 5, "the push after the restart").await;
    assert_eq!(
        five.len(),
        5,
        "{:?}\n{}",
        five.iter().map(|(_, b)| says(b)).collect::<Vec<_>>(),
        (1..=2)
            .map(|n| std::fs::read_to_string(h.dir.join(format!("log{n}"))).unwrap_or_default())
            .collect::<Vec<_>>()
            .join("\n=====\n")
            .lines()
            .filter(|l| l.contains("inventory") || l.contains("shutdown") || l.contains("stop"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert_eq!(says(&five[4].1).1.len(), 2, "{:?}", five[4].1);
    let logs: String = (1..=2)
        .flat_map(|n| [format!("log{n}"), format!("err{n}")])
        .map(|f| std::fs::read_to_string(h.dir.join(f)).unwrap_or_default())
        .collect();
    let _ = std::process::Command::new("kill")
        .arg(again.id().to_string())
        .status();
    let _ = again.wait();
    let bodies: String = got.lock().iter().map(|(_, b)| b.to_string()).collect();
    for (place, text) in [("the log", &logs), ("the pushes", &bodies)] {
        assert!(!text.contains(PLANTED), "the planted value is in {place}");
        assert!(
            !text.contains("hossted-token-ZQX"),
            "the token is in {place}"
        );
        assert!(
            !text.contains("push-url-secret"),
            "the push URL is in {place}"
        );
    }
}

/// POST a query or mutation to `base`, with the admin key; the whole answer (None while the
/// server does not answer).
async fn admin_answer(base: &str, query: &str) -> Option<Value> {
    reqwest::Client::new()
        .post(format!("{base}/graphql"))
        .bearer_auth(ADMIN_KEY)
        .json(&json!({ "query": query }))
        .send()
        .await
        .ok()?
        .json()
        .await
        .ok()
}

/// What `base`'s inventory says of shop: (paused, revision), once it answers.
async fn pause_and_revision(base: &str) -> Option<(bool, u64)> {
    let res = admin_answer(
        base,
        "{ applicationInventory { paused } application(namespace: \"shop\", name: \"shop\") { revision } }",
    )
    .await?;
    Some((
        res["data"]["applicationInventory"]["paused"].as_bool()?,
        res["data"]["application"]["revision"].as_u64()?,
    ))
}

/// Wait until `base`'s inventory says `(paused, revision)`.
async fn until_inventory(base: &str, want: (bool, u64), what: &str) {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let now = pause_and_revision(base).await;
        if now == Some(want) {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what}: {now:?}, waited for {want:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The pause is kept in the database: two replicas on one PostgreSQL, the pause sent to the one
/// without the Lease stops the holder's pushes (and the holder says it is paused), and both hold
/// it across a restart of the holder; resumed on the other, the holder pushes the state now once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pause_sent_to_either_replica_stops_the_holders_pushes_and_survives_a_restart() {
    use vitistack_testkit::postgres::TempPostgres;
    use vitistack_testkit::proc::spawn_server;
    let mut defs = kube_api::watched_resources();
    defs.extend(kube_api::inventory_resources());
    defs.push(kube_api::leases());
    let api = KubeApi::start(&defs, Duration::from_millis(200)).await;
    api.apply("namespaces", ns("shop"));
    api.apply("secrets", release_secret("shop", "shop", 1, "deployed"));
    api.apply("pods", pod("shop-0", "shop", "shop", true, None));
    let h = Harness::unstarted(api);
    let keys = h.dir.join("keys");
    std::fs::write(&keys, format!("root admin {ADMIN_KEY}\n")).expect("keys");
    let db = TempPostgres::create().await;
    let (url, got) = inventory_api().await;
    let start = |name: &str| {
        let env = [
            ("DATABASE_URL", db.url()),
            ("LEADER_ELECTION", "true".to_string()),
            ("LEASE_NAME", "vitistack-inventory".to_string()),
            ("POD_NAME", name.to_string()),
            ("POD_NAMESPACE", "vitistack".to_string()),
            ("LEASE_DURATION_SECONDS", "6".to_string()),
            ("APPLICATIONS", "true".to_string()),
            ("HOSSTED_API_URL", url.clone()),
            ("API_KEYS_FILE", keys.display().to_string()),
            ("WEBHOOK_RETRY_MS", "50".to_string()),
        ];
        let (child, port) = spawn_server(env!("CARGO_BIN_EXE_vitistack"), &h.dir, &env);
        (child, format!("http://127.0.0.1:{port}"))
    };
    let holder = || {
        h.api.object("leases", "vitistack", "vitistack-inventory")?["spec"]["holderIdentity"]
            .as_str()
            .map(str::to_string)
    };
    let (a, a_base) = start("replica-a");
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while holder().as_deref() != Some("replica-a") {
        assert!(
            tokio::time::Instant::now() < deadline,
            "replica-a never led"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (_b, b_base) = start("replica-b");
    until_inventory(&b_base, (false, 1), "replica-b's inventory").await;
    pushes(&got, 1, "the first push, by the holder").await;

    // Paused at the replica without the Lease: the holder says so, and a new revision it sees is
    // not pushed.
    let res = admin_answer(&b_base, "mutation { setApplicationsPaused(paused: true) { paused pausedChangedBy pausedChangedAt } }").await.expect("answer");
    assert_eq!(
        res["data"]["setApplicationsPaused"]["paused"], true,
        "{res}"
    );
    assert_eq!(
        res["data"]["setApplicationsPaused"]["pausedChangedBy"], "key:root",
        "{res}"
    );
    h.api
        .apply("secrets", release_secret("shop", "shop", 2, "deployed"));
    until_inventory(&a_base, (true, 2), "the holder paused, at revision 2").await;
    until_inventory(&b_base, (true, 2), "the other paused, at revision 2").await;
    assert_eq!(got.lock().len(), 1, "the holder pushed while paused");

    // The holder restarts (its database row holds the pause, not APPLICATIONS_PAUSED): paused
    // still, on both; nothing pushed.
    drop(a);
    let (_a, a_base) = start("replica-a");
    until_inventory(&a_base, (true, 2), "the restarted replica paused").await;
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while holder().is_none() {
        assert!(tokio::time::Instant::now() < deadline, "nobody leads");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(got.lock().len(), 1, "pushed while paused, after a restart");

    // Resumed at the other replica: the state now is pushed once, by whoever holds the Lease.
    let res = admin_answer(
        &b_base,
        "mutation { setApplicationsPaused(paused: false) { paused } }",
    )
    .await
    .expect("answer");
    assert_eq!(
        res["data"]["setApplicationsPaused"]["paused"], false,
        "{res}"
    );
    let after = pushes(&got, 2, "the push after resuming").await;
    assert_eq!(says(&after[1].1).0, 2, "{:?}", after[1].1);
    until_inventory(&a_base, (false, 2), "replica-a resumed").await;
}
