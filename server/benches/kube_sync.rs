//! Initial sync of 100,000 objects (mixed kinds, realistic sizes) from the Kubernetes API test
//! server: the time from start until `/ready`, and the server's peak resident memory.
//!
//! The API test server runs in this process; the vitistack server runs as its own process (the
//! release binary, `SOURCE=kube`, a kubeconfig pointing at the test server), so its memory is
//! measured alone. Run with `cargo bench --bench kube_sync`; `KUBE_SYNC_OBJECTS` changes the size.

use vitistack_testkit::kube_api;
use vitistack_testkit::proc;

use proc::status_kib;

use std::time::{Duration, Instant};

use kube_api::{KubeApi, ResourceDef};
use vitistack::model::Kind;
use vitistack::source::demo::{FleetSpec, fleet};

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let target: usize = std::env::var("KUBE_SYNC_OBJECTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(run(target));
}

async fn run(target: usize) {
    let defs: Vec<ResourceDef> = kube_api::watched_resources();
    let api = KubeApi::start(&defs, Duration::from_secs(1)).await;

    // The generated fleet with hosts and VMs: ~83 objects per 20-machine cluster.
    let mut spec = FleetSpec::large(1);
    spec.hosts = true;
    let mut loaded = 0usize;
    let mut per_kind = std::collections::BTreeMap::<&str, usize>::new();
    let mut json_bytes = 0usize;
    let mut cluster = 0u64;
    while loaded < target {
        spec.seed = 1000 + cluster;
        spec.clusters = 1;
        for r in fleet(&spec) {
            if loaded >= target {
                break;
            }
            // The platform objects repeat per generated batch: keep one copy.
            if !r.kind().namespaced() && cluster > 0 && r.kind() != Kind::Node {
                continue;
            }
            let mut v = r.to_value();
            if r.kind().namespaced() {
                // A namespace per cluster, so every batch's objects are distinct.
                v["metadata"]["namespace"] = serde_json::json!(format!("tenant-{cluster:05}"));
            }
            if r.kind() == Kind::Node
                && let Some(name) = v["metadata"]["name"].as_str()
            {
                v["metadata"]["name"] = serde_json::json!(format!("{name}-{cluster:05}"));
            }
            json_bytes += v.to_string().len();
            api.apply(r.kind().plural(), v);
            *per_kind.entry(r.kind().name()).or_default() += 1;
            loaded += 1;
        }
        cluster += 1;
    }
    println!(
        "API test server holds {loaded} objects ({} MiB of JSON) in {} kinds: {per_kind:?}",
        json_bytes >> 20,
        per_kind.len()
    );

    let dir = std::env::temp_dir().join(format!("vitistack-kube-sync-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let kubeconfig = dir.join("kubeconfig");
    api.write_kubeconfig(&kubeconfig);
    let started = Instant::now();
    let (mut child, port) = proc::spawn_server(env!("CARGO_BIN_EXE_vitistack"), &dir, &[]);
    let pid = child.id();
    let client = reqwest::Client::new();
    let ready_url = format!("http://127.0.0.1:{port}/ready");
    let mut peak = 0;
    let synced = loop {
        peak = peak.max(status_kib(pid, "VmHWM:"));
        if let Ok(r) = client.get(&ready_url).send().await
            && r.status().is_success()
        {
            break started.elapsed();
        }
        if started.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            panic!("not ready after 120 s");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let body: serde_json::Value = client
        .post(format!("http://127.0.0.1:{port}/graphql"))
        .json(&serde_json::json!({"query": "{ sources { kinds { name objects } } }"}))
        .send()
        .await
        .expect("query")
        .json()
        .await
        .expect("json");
    let in_store: i64 = body["data"]["sources"]["kinds"]
        .as_array()
        .map(|ks| ks.iter().filter_map(|k| k["objects"].as_i64()).sum())
        .unwrap_or(0);
    let hwm = status_kib(pid, "VmHWM:").max(peak);
    let rss = status_kib(pid, "VmRSS:");
    let lists = defs
        .iter()
        .map(|d| api.requests(d.plural).iter().filter(|r| !r.watch).count())
        .sum::<usize>();
    println!(
        "initial sync of {in_store} objects: ready after {:.2} s ({lists} list pages); server peak RSS {} MiB, RSS when ready {} MiB",
        synced.as_secs_f64(),
        hwm >> 10,
        rss >> 10
    );
    assert_eq!(in_store as usize, loaded, "every object reached the store");
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
}
