//! The application inventory at scale: 2,000 Helm releases (two revisions each, stored as Helm
//! stores them) with 10 pods, a service and a volume each, in 200 namespaces, served by the
//! Kubernetes API test server. The release binary is started twice on it, without and with
//! `APPLICATIONS`: the time until every application and pod is in the inventory, and the resident
//! memory the inventory adds. Then the cost of one pod's status change: the time until the API
//! shows it (through the watch), and the in-process cost of joining the namespace again.
//!
//! `cargo bench --bench inventory_sync`; `INVENTORY_RELEASES` changes the size.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use vitistack_testkit::kube_api::{self, KubeApi};
use vitistack_testkit::proc::{self, status_kib};

const PODS: usize = 10;
const PER_NAMESPACE: usize = 10;

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let releases: usize = std::env::var("INVENTORY_RELEASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2_000);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(run(releases));
}

fn labels(release: &str) -> Value {
    json!({"app.kubernetes.io/instance": release, "app.kubernetes.io/managed-by": "Helm",
           "app.kubernetes.io/name": "webshop", "helm.sh/chart": "webshop-1.2.0"})
}

/// A release revision as Helm stores it, with a manifest of a dozen objects and some values.
fn release(name: &str, ns: &str, revision: u64, status: &str) -> Value {
    let mut manifest = String::new();
    for kind in [
        "Deployment",
        "Service",
        "ConfigMap",
        "Secret",
        "ServiceAccount",
        "Role",
    ] {
        manifest.push_str(&format!(
            "---\napiVersion: v1\nkind: {kind}\nmetadata:\n  name: {name}\n  labels:\n    app.kubernetes.io/instance: {name}\nspec:\n  replicas: {PODS}\n  template:\n    spec:\n      containers:\n        - name: web\n          image: registry.example/webshop:4.2\n          env:\n            - name: LOG_LEVEL\n              value: info\n"
        ));
    }
    let stored = json!({
        "name": name, "namespace": ns, "version": revision,
        "info": {"status": status, "last_deployed": "2026-11-20T08:00:00Z", "description": "Upgrade complete"},
        "chart": {"metadata": {"name": "webshop", "version": "1.2.0", "appVersion": "4.2"},
                  "values": {"replicaCount": PODS, "image": {"repository": "registry.example/webshop", "tag": "4.2"},
                             "resources": {"limits": {"cpu": "500m", "memory": "256Mi"}}}},
        "config": {"replicaCount": PODS, "db": {"password": "bench-secret"}},
        "manifest": manifest,
    });
    json!({
        "metadata": {"name": format!("sh.helm.release.v1.{name}.v{revision}"), "namespace": ns,
                     "labels": {"owner": "helm", "name": name, "status": status, "version": revision.to_string()}},
        "type": "helm.sh/release.v1",
        "data": {"release": vitistack::model::helm::secret_data(&stored)},
    })
}

fn pod(name: &str, ns: &str, release: &str, ready: bool) -> Value {
    json!({
        "metadata": {"name": name, "namespace": ns, "labels": labels(release),
                     "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": format!("{release}-7d9f"), "uid": "x", "controller": true}]},
        "spec": {"nodeName": "host-01", "serviceAccountName": release,
                 "containers": [{"name": "web", "image": "registry.example/webshop:4.2",
                                 "ports": [{"containerPort": 8080}],
                                 "resources": {"limits": {"cpu": "500m", "memory": "256Mi"}},
                                 "env": [{"name": "LOG_LEVEL", "value": "info"}]}]},
        "status": {"phase": "Running", "podIP": "10.1.2.3", "hostIP": "10.0.0.1",
                   "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}],
                   "containerStatuses": [{"name": "web", "image": "registry.example/webshop:4.2",
                                          "imageID": "sha256:1", "ready": ready, "restartCount": 0,
                                          "state": {"running": {"startedAt": "2026-11-20T08:00:00Z"}}}]},
    })
}

fn load(api: &KubeApi, releases: usize) -> usize {
    let mut objects = 0;
    for r in 0..releases {
        let ns = format!("team-{:03}", r / PER_NAMESPACE);
        if r % PER_NAMESPACE == 0 {
            api.apply("namespaces", json!({"metadata": {"name": ns}}));
            objects += 1;
        }
        let name = format!("app-{r:04}");
        api.apply("secrets", release(&name, &ns, 1, "superseded"));
        api.apply("secrets", release(&name, &ns, 2, "deployed"));
        for p in 0..PODS {
            api.apply("pods", pod(&format!("{name}-{p}"), &ns, &name, true));
        }
        api.apply(
            "services",
            json!({"metadata": {"name": name, "namespace": ns, "labels": labels(&name)},
                   "spec": {"ports": [{"port": 80, "targetPort": 8080}]}}),
        );
        api.apply(
            "persistentvolumeclaims",
            json!({"metadata": {"name": format!("data-{name}"), "namespace": ns, "labels": labels(&name)},
                   "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "10Gi"}}}}),
        );
        objects += 2 + PODS + 2;
    }
    objects
}

async fn post(client: &reqwest::Client, url: &str, query: &str) -> Value {
    let Ok(r) = client
        .post(url)
        .json(&json!({ "query": query }))
        .send()
        .await
    else {
        return Value::Null;
    };
    r.json().await.unwrap_or(Value::Null)
}

/// Applications and ready pods the server shows.
async fn counts(client: &reqwest::Client, url: &str) -> (u64, u64) {
    let mut after: Option<String> = None;
    let (mut apps, mut ready) = (0, 0);
    loop {
        let q = match &after {
            None => "{ applications(first: 500) { edges { node { readyPods } } pageInfo { hasNextPage endCursor } } }".to_string(),
            Some(c) => format!("{{ applications(first: 500, after: \"{c}\") {{ edges {{ node {{ readyPods }} }} pageInfo {{ hasNextPage endCursor }} }} }}"),
        };
        let v = post(client, url, &q).await;
        let Some(edges) = v["data"]["applications"]["edges"].as_array() else {
            return (0, 0);
        };
        apps += edges.len() as u64;
        ready += edges
            .iter()
            .filter_map(|e| e["node"]["readyPods"].as_u64())
            .sum::<u64>();
        if v["data"]["applications"]["pageInfo"]["hasNextPage"] != true {
            return (apps, ready);
        }
        after = v["data"]["applications"]["pageInfo"]["endCursor"]
            .as_str()
            .map(str::to_string);
    }
}

/// Start the server on `api` (applications on or off); (time until it shows `want`, RSS KiB).
async fn start(
    dir: &std::path::Path,
    on: bool,
    want: (u64, u64),
) -> (vitistack_testkit::proc::TestChild, u16, Duration, u64) {
    let started = Instant::now();
    let (child, port) = proc::spawn_server(
        env!("CARGO_BIN_EXE_vitistack"),
        dir,
        &[
            ("APPLICATIONS", on.to_string()),
            ("RESPONSE_CACHE_MB", "0".to_string()),
            ("PART_CACHE_MB", "0".to_string()),
        ],
    );
    let client = reqwest::Client::new();
    let url = format!("http://127.0.0.1:{port}/graphql");
    let ready = format!("http://127.0.0.1:{port}/ready");
    loop {
        let up = client
            .get(&ready)
            .send()
            .await
            .is_ok_and(|r| r.status().is_success());
        if up && (!on || counts(&client, &url).await == want) {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(300),
            "not synced after 300 s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let took = started.elapsed();
    let rss = status_kib(child.id(), "VmRSS:");
    (child, port, took, rss)
}

async fn run(releases: usize) {
    let mut defs = kube_api::watched_resources();
    defs.extend(kube_api::inventory_resources());
    let api = KubeApi::start(&defs, Duration::from_secs(1)).await;
    let t = Instant::now();
    let objects = load(&api, releases);
    println!(
        "API test server holds {objects} inventory objects ({releases} releases × 2 revisions, {PODS} pods, a service and a volume each) in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    let dir = std::env::temp_dir().join(format!("vitistack-inventory-sync-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    api.write_kubeconfig(&dir.join("kubeconfig"));
    let want = (releases as u64, (releases * PODS) as u64);

    let (mut off, _, ready_off, rss_off) = start(&dir, false, want).await;
    let _ = off.kill();
    let _ = off.wait();
    let _ = std::fs::remove_file(dir.join("v.db"));
    let (mut on, port, synced, rss_on) = start(&dir, true, want).await;
    println!(
        "without APPLICATIONS: ready after {:.2} s, RSS {} MiB; with: {} applications and {} ready pods after {:.2} s, RSS {} MiB (+{} MiB)",
        ready_off.as_secs_f64(),
        rss_off >> 10,
        want.0,
        want.1,
        synced.as_secs_f64(),
        rss_on >> 10,
        rss_on.saturating_sub(rss_off) >> 10
    );

    // One pod's readiness changes: how long until the API shows it (watch, join, snapshot).
    let client = reqwest::Client::new();
    let url = format!("http://127.0.0.1:{port}/graphql");
    let mut took = Vec::new();
    for i in 0..20 {
        let r = i * (releases / 20).max(1);
        let ns = format!("team-{:03}", r / PER_NAMESPACE);
        let name = format!("app-{r:04}");
        let t = Instant::now();
        api.apply("pods", pod(&format!("{name}-0"), &ns, &name, false));
        let q = format!("{{ application(namespace: \"{ns}\", name: \"{name}\") {{ readyPods }} }}");
        loop {
            let v = post(&client, &url, &q).await;
            if v["data"]["application"]["readyPods"] == (PODS - 1) as u64 {
                break;
            }
            assert!(
                t.elapsed() < Duration::from_secs(30),
                "the change never showed: {v}"
            );
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        took.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    took.sort_by(f64::total_cmp);
    println!(
        "one pod's readiness change visible in the API after p50 {:.1} ms, max {:.1} ms (20 changes, polled every 1 ms)",
        took[took.len() / 2],
        took[took.len() - 1]
    );
    let _ = on.kill();
    let _ = on.wait();
    let _ = std::fs::remove_dir_all(&dir);

    // In process: the cost of joining one namespace again after a pod's change, with the whole
    // inventory held.
    let inv = vitistack::inventory::Inventory::new(Default::default());
    let dc = vitistack::model::Datacenter::default();
    use vitistack::domain::applications::{Meta, PodFacts};
    use vitistack::inventory::Fact;
    let pod_fact = |name: &str, ns: &str, release: &str, ready: bool| {
        Fact::Pod(PodFacts {
            meta: Meta {
                name: name.into(),
                namespace: ns.into(),
                labels: [
                    (
                        "app.kubernetes.io/instance".to_string(),
                        release.to_string(),
                    ),
                    (
                        "app.kubernetes.io/managed-by".to_string(),
                        "Helm".to_string(),
                    ),
                ]
                .into(),
                annotations: Default::default(),
            },
            images: vec!["registry.example/webshop:4.2".into()],
            phase: "Running".into(),
            ready,
            restarts: 0,
            waiting: vec![],
            ready_since: None,
        })
    };
    let mut facts = Vec::new();
    let mut pods = Vec::new();
    for r in 0..releases {
        let ns = format!("team-{:03}", r / PER_NAMESPACE);
        let name = format!("app-{r:04}");
        let secret = release(&name, &ns, 2, "deployed");
        let data = secret["data"]["release"].as_str().unwrap_or_default();
        let decoded = vitistack::model::helm::from_secret_data(data).expect("release");
        facts.push(Fact::Release {
            object: format!("sh.helm.release.v1.{name}.v2"),
            release: Box::new(decoded),
            in_configmap: false,
        });
        for p in 0..PODS {
            pods.push(pod_fact(&format!("{name}-{p}"), &ns, &name, true));
        }
    }
    let t = Instant::now();
    inv.replace(&dc, vitistack::inventory::FactKind::Release, facts);
    inv.replace(&dc, vitistack::inventory::FactKind::Pod, pods);
    println!(
        "in process: {} applications joined from their releases and pods in {:.0} ms",
        inv.snapshot().apps.len(),
        t.elapsed().as_secs_f64() * 1000.0
    );
    let n = 2_000;
    let t = Instant::now();
    for i in 0..n {
        let r = (i * 7) % releases;
        let ns = format!("team-{:03}", r / PER_NAMESPACE);
        let name = format!("app-{r:04}");
        inv.apply(&dc, pod_fact(&format!("{name}-0"), &ns, &name, i % 2 == 0));
    }
    println!(
        "in process: one pod's change (its namespace of {PER_NAMESPACE} releases and {} pods joined again, the snapshot republished) costs {:.1} µs",
        PER_NAMESPACE * PODS,
        t.elapsed().as_secs_f64() * 1e6 / n as f64
    );
}
