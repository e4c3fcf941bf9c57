//! Initial sync of 100,000 objects (mixed kinds, realistic sizes) from the Kubernetes API test
//! server: the time from start until `/ready`, and the server's peak resident memory.
//!
//! The API test server runs in this process; the vitistack server runs as its own process (the
//! release binary, `SOURCE=kube`, a kubeconfig pointing at the test server), so its memory is
//! measured alone. Run with `cargo bench --bench kube_sync`; `KUBE_SYNC_OBJECTS` changes the size.
//!
//! `KUBE_SYNC_DATACENTERS=N` starts N API test servers holding `KUBE_SYNC_OBJECTS` each (the same
//! names in every one), watched as N datacenters (`DATACENTERS_DIR`); `/ready` then means every
//! datacenter listed. After the sync it times the counts query (`e2e/load/counts.graphql`) and the
//! dashboard's cluster page (`web/graphql/cluster_live.graphql`'s selection, as a query), 200
//! sequential requests each, so one datacenter and several can be set side by side. Last, the
//! first datacenter is relisted with nothing changed, and the server's peak RSS while it runs
//! is printed against its RSS before. `VITISTACK_BIN` runs another build of the server.

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

/// Fill `api` with `target` objects; returns how many, their JSON size and the count per kind.
fn load(
    api: &KubeApi,
    target: usize,
) -> (
    usize,
    usize,
    std::collections::BTreeMap<&'static str, usize>,
) {
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
    (loaded, json_bytes, per_kind)
}

/// The selection of `{ ... }` following `field {` in a document.
fn selection(document: &str, field: &str) -> String {
    let start = document.find(&format!("{field} {{")).expect("field") + field.len() + 1;
    let mut depth = 0;
    for (i, c) in document[start..].char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return document[start..=start + i].to_string();
                }
            }
            _ => {}
        }
    }
    panic!("unbalanced selection")
}

/// POST a GraphQL request; its answer.
async fn post(client: &reqwest::Client, url: &str, body: &serde_json::Value) -> serde_json::Value {
    client
        .post(url)
        .json(body)
        .send()
        .await
        .expect("query")
        .json()
        .await
        .expect("json")
}

/// p50 and p99 of `n` sequential requests of `body`, in ms; every answer must be free of errors
/// other than `allowed`.
async fn latency(
    client: &reqwest::Client,
    url: &str,
    body: &serde_json::Value,
    n: usize,
) -> (f64, f64) {
    let mut took = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        let answer = post(client, url, body).await;
        took.push(t.elapsed().as_secs_f64() * 1000.0);
        assert!(answer.get("errors").is_none(), "{answer}");
    }
    took.sort_by(f64::total_cmp);
    (took[n / 2], took[(n * 99 / 100).min(n - 1)])
}

async fn run(target: usize) {
    let defs: Vec<ResourceDef> = kube_api::watched_resources();
    let datacenters: usize = std::env::var("KUBE_SYNC_DATACENTERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1)
        .max(1);
    let mut apis = Vec::new();
    let mut loaded = 0;
    for i in 0..datacenters {
        let api = KubeApi::start(&defs, Duration::from_secs(1)).await;
        // Each API test server counts uids from 1: move each one's count on (a placeholder
        // made and deleted per datacenter before it), so every datacenter's Vitistack has a
        // uid of its own and is not taken for a second path to the same cluster.
        for n in 0..i {
            let name = format!("uid-shift-{n}");
            api.apply(
                "machines",
                serde_json::json!({"metadata": {"name": name, "namespace": "default"}, "spec": {}}),
            );
            api.delete_silently("machines", "default", &name);
        }
        let (n, json_bytes, per_kind) = load(&api, target);
        // The server lists what it syncs: the load's watch history is not needed, and would
        // hold every object a second time in this process (ten datacenters of 100,000).
        api.compact();
        println!(
            "API test server holds {n} objects ({} MiB of JSON) in {} kinds: {per_kind:?}",
            json_bytes >> 20,
            per_kind.len()
        );
        loaded += n;
        apis.push(api);
    }
    let api = &apis[0];

    let dir = std::env::temp_dir().join(format!("vitistack-kube-sync-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let kubeconfig = dir.join("kubeconfig");
    api.write_kubeconfig(&kubeconfig);
    let mut extra = Vec::new();
    if datacenters > 1 {
        let dcs = dir.join("datacenters");
        std::fs::create_dir_all(&dcs).expect("dir");
        for (i, api) in apis.iter().enumerate() {
            // Each file reaches its cluster by its own current context.
            let file = dcs.join(format!("dc-{}", i + 1));
            api.write_kubeconfig(&file);
            let text = std::fs::read_to_string(&file).expect("kubeconfig");
            std::fs::write(
                &file,
                text.replace("current-context: elsewhere", "current-context: test"),
            )
            .expect("kubeconfig");
        }
        extra.push(("DATACENTERS_DIR", dcs.display().to_string()));
    }
    let deadline = Duration::from_secs(
        std::env::var("KUBE_SYNC_DEADLINE")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(120),
    );
    let started = Instant::now();
    extra.push(("RESPONSE_CACHE_MB", "0".to_string()));
    extra.push(("PART_CACHE_MB", "0".to_string()));
    // With several datacenters, `/ready` also answers once READY_TIMEOUT_SECONDS have passed
    // (a datacenter that never answers must not hold the others back): here it must mean
    // "every datacenter listed", so the timeout is past the bench's own deadline.
    extra.push((
        "READY_TIMEOUT_SECONDS",
        (deadline.as_secs() + 60).to_string(),
    ));
    // VITISTACK_BIN: another build of the server (an older commit's), or a wrapper that runs it
    // under a profiler.
    let bin = std::env::var("VITISTACK_BIN")
        .unwrap_or_else(|_| env!("CARGO_BIN_EXE_vitistack").to_string());
    let (mut child, port) = proc::spawn_server(&bin, &dir, &extra);
    let pid = child.id();
    let client = reqwest::Client::new();
    let ready_url = format!("http://127.0.0.1:{port}/ready");
    let url = format!("http://127.0.0.1:{port}/graphql");
    let mut peak = 0;
    let mut progress = Instant::now();
    let synced = loop {
        peak = peak.max(status_kib(pid, "VmHWM:"));
        if let Ok(r) = client.get(&ready_url).send().await
            && r.status().is_success()
        {
            break started.elapsed();
        }
        // How the sync goes: objects in the store and RSS every 10 s (where it slows, and
        // what it holds on the way).
        if progress.elapsed() >= Duration::from_secs(10) {
            progress = Instant::now();
            println!(
                "  {:>5.1} s: {} objects in the store, server RSS {} MiB",
                started.elapsed().as_secs_f64(),
                stored(&client, &url).await,
                status_kib(pid, "VmRSS:") >> 10
            );
        }
        if started.elapsed() > deadline {
            let _ = child.kill();
            panic!(
                "not ready after {} s (KUBE_SYNC_DEADLINE); server peak RSS {} MiB",
                deadline.as_secs(),
                peak >> 10
            );
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let in_store = stored(&client, &url).await;
    let hwm = status_kib(pid, "VmHWM:").max(peak);
    let rss = status_kib(pid, "VmRSS:");
    let lists = apis
        .iter()
        .flat_map(|api| {
            defs.iter()
                .map(|d| api.requests(d.plural).iter().filter(|r| !r.watch).count())
        })
        .sum::<usize>();
    println!(
        "initial sync of {in_store} objects in {datacenters} datacenter(s): ready after {:.2} s ({lists} list pages); server peak RSS {} MiB, RSS when ready {} MiB",
        synced.as_secs_f64(),
        hwm >> 10,
        rss >> 10
    );
    assert_eq!(in_store as usize, loaded, "every object reached the store");
    // What the timeline wrote meanwhile: a version per object, and checkpoints (a restart is
    // one written because changes were missed).
    let metrics = client
        .get(format!("http://127.0.0.1:{port}/metrics"))
        .send()
        .await
        .expect("metrics")
        .text()
        .await
        .expect("metrics");
    let rows: Vec<&str> = metrics
        .lines()
        .filter(|l| l.starts_with("vitistack_history_timeline_rows_total{"))
        .collect();
    println!("timeline when ready: {}", rows.join(", "));

    // Reading it: the counts query and one cluster page.
    let counts = serde_json::json!({"query": include_str!("../../e2e/load/counts.graphql")});
    let page = format!(
        "query($id: ID!) {{ node(id: $id) {{ ... on KubernetesCluster {} }} }}",
        selection(
            include_str!("../../web/graphql/cluster_live.graphql"),
            "cluster"
        )
    );
    let first = post(
        &client,
        &url,
        &serde_json::json!({"query": "{ clusters(first: 1) { nodes { id } } }"}),
    )
    .await;
    let id = first["data"]["clusters"]["nodes"][0]["id"].clone();
    let page = serde_json::json!({"query": page, "variables": {"id": id}});
    // Warm-up, then the measured requests (the response cache is off: each is executed).
    latency(&client, &url, &counts, 20).await;
    let (c50, c99) = latency(&client, &url, &counts, 200).await;
    latency(&client, &url, &page, 20).await;
    let (p50, p99) = latency(&client, &url, &page, 200).await;
    println!(
        "counts query p50 {c50:.2} ms, p99 {c99:.2} ms; cluster page p50 {p50:.2} ms, p99 {p99:.2} ms (200 sequential requests each)"
    );
    relist(&client, &url, pid, &apis[0], datacenters, rss).await;
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
}

/// Objects in the store, every kind of every datacenter (`sources`).
async fn stored(client: &reqwest::Client, url: &str) -> i64 {
    let body = post(
        client,
        url,
        &serde_json::json!({"query": "{ sources { kinds { name objects } } }"}),
    )
    .await;
    body["data"]["sources"]["kinds"]
        .as_array()
        .map(|ks| ks.iter().filter_map(|k| k["objects"].as_i64()).sum())
        .unwrap_or(0)
}

/// Each kind's last full list in the first datacenter (`sources`).
async fn synced_at(client: &reqwest::Client, url: &str, datacenter: &str) -> Vec<String> {
    let body = post(
        client,
        url,
        &serde_json::json!({"query": "{ sources { kinds { datacenter objects lastSyncedAt } } }"}),
    )
    .await;
    body["data"]["sources"]["kinds"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|k| k["datacenter"] == datacenter && k["objects"].as_i64() > Some(0))
        .map(|k| k["lastSyncedAt"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// One datacenter relisted (its API server forgets its history and cuts every watch, so each
/// of its kinds is listed again at once) with nothing changed: the server's peak RSS while it
/// runs against its RSS before, and against that datacenter's share of the memory.
async fn relist(
    client: &reqwest::Client,
    url: &str,
    pid: u32,
    api: &KubeApi,
    datacenters: usize,
    rss_ready: u64,
) {
    let key = if datacenters > 1 { "dc-1" } else { "" };
    let before = synced_at(client, url, key).await;
    let rss_before = status_kib(pid, "VmRSS:");
    // Writing 5 to clear_refs resets the process's peak RSS (VmHWM) to its RSS now.
    let reset = std::fs::write(format!("/proc/{pid}/clear_refs"), "5").is_ok();
    let started = Instant::now();
    // The resourceVersion moves on (a deletion of nothing, told to no one), then every version
    // before it is forgotten: each watch of the datacenter, cut, comes back to 410 Gone.
    api.delete_silently("machines", "default", "relist-nothing");
    api.compact();
    api.drop_watches();
    let mut peak = 0;
    loop {
        peak = peak.max(status_kib(pid, "VmRSS:"));
        let now = synced_at(client, url, key).await;
        if now.len() == before.len() && now.iter().zip(&before).all(|(a, b)| a != b) {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(300),
            "not relisted after 300 s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let took = started.elapsed();
    if reset {
        peak = peak.max(status_kib(pid, "VmHWM:"));
    }
    let share = rss_ready / datacenters as u64;
    println!(
        "relist of one datacenter ({} kinds, nothing changed): {:.2} s; server RSS {} MiB before, peak {} MiB while it ran (+{} MiB, {:.0} % of one datacenter's share of the RSS when ready, {} MiB){}",
        before.len(),
        took.as_secs_f64(),
        rss_before >> 10,
        peak >> 10,
        peak.saturating_sub(rss_before) >> 10,
        peak.saturating_sub(rss_before) as f64 * 100.0 / share.max(1) as f64,
        share >> 10,
        if reset {
            ""
        } else {
            " (peak sampled: clear_refs not writable)"
        }
    );
}
