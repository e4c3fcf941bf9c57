//! Subscription load: N WebSocket subscribers (graphql-transport-ws, tokio-tungstenite) on the
//! release server, M changes per second applied at the source, and what the subscribers see:
//! delivered events/s, change-to-client latency (p50/p99/max), and the server's resident memory
//! per idle subscriber.
//!
//! The change source is the Kubernetes API test server (`vitistack-testkit`'s `kube_api`) in this
//! process; the vitistack server runs as its own process (`SOURCE=kube`), so its memory is
//! measured alone. A change is a Machine whose annotation `load.vitistack.io/applied-at` carries
//! the time (µs since the epoch) it was applied at the API; a subscriber's latency is its arrival
//! time minus that: watch → store → fan-out → socket → client, all on this machine's two cores.
//!
//! Subscribers are spread over namespaces (`machineChanged(filter: {namespace})`), as dashboards
//! following one tenant each would be: every change reaches `N / NAMESPACES` subscribers.
//!
//! `cargo bench --bench subscription_load`; env: LOAD_SUBSCRIBERS (10000), LOAD_CHANGES_PER_SECOND
//! (100), LOAD_SECONDS (20), LOAD_NAMESPACES (1000), LOAD_SUBSCRIBE (1; 0 = sockets only, to
//! separate what a connection costs from what a subscription costs), LOAD_QUERY (another
//! subscription document; a field other than `machineChanged` counts its first event as its
//! opening), LOAD_FLIP (1: each change also flips the Machine's phase, moving the aggregates),
//! LOAD_SCOPES (0: every subscriber anonymous, seeing everything; S: the subscribers sign in with
//! API keys limited to namespaces, in S distinct scopes that each still see every load namespace,
//! so every change reaches every subscriber as before but is rendered once per scope) and
//! LOAD_USERS (the number of distinct keys, spread over the scopes; default LOAD_SCOPES), and
//! LOAD_SSE (0: every subscriber on a WebSocket; every Nth subscriber instead reads the same
//! subscription as an SSE stream, `POST /graphql` with `Accept: text/event-stream`: 2 = half).
//! Besides delivery and latency it prints the server's CPU time over the run (per 1,000 delivered
//! events) and whether the graph kept up: how long after the last change the store held them all.

use vitistack_testkit::kube_api;
use vitistack_testkit::proc;

use vitistack_testkit::runtime;

use proc::status_kib;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures::{SinkExt, StreamExt};
use kube_api::KubeApi;
use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use vitistack::model::Kind;
use vitistack::source::demo::{FleetSpec, fleet};

const ANNOTATION: &str = "load.vitistack.io/applied-at";

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn now_micros() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0)
}

fn main() {
    runtime::main(run);
}

#[derive(Default)]
struct Seen {
    events: AtomicU64,
    /// Events of another field (a `LOAD_QUERY` such as `infrastructureSummary`).
    other: AtomicU64,
    latencies: Mutex<Vec<u32>>,
    synced: AtomicU64,
    stopping: Arc<std::sync::atomic::AtomicBool>,
}

impl Seen {
    /// An event that arrived at `arrived` (µs since the epoch), applied at the API at `applied`.
    fn event(&self, arrived: u64, applied: u64) {
        self.events.fetch_add(1, Ordering::Relaxed);
        let micros = arrived.saturating_sub(applied).min(u64::from(u32::MAX));
        self.latencies.lock().push(micros as u32);
    }
}

async fn subscriber(
    url: String,
    namespace: String,
    key: Option<String>,
    seen: Arc<Seen>,
    subscribe: bool,
) -> Result<(), String> {
    let mut req = url.into_client_request().map_err(|e| e.to_string())?;
    req.headers_mut().insert(
        "Sec-WebSocket-Protocol",
        "graphql-transport-ws".parse().map_err(|_| "header")?,
    );
    let (mut ws, _) = tokio_tungstenite::connect_async(req)
        .await
        .map_err(|e| e.to_string())?;
    let send = |v: Value| Message::Text(v.to_string().into());
    let init = match &key {
        Some(k) => {
            json!({"type": "connection_init", "payload": {"Authorization": format!("Bearer {k}")}})
        }
        None => json!({"type": "connection_init"}),
    };
    ws.send(send(init)).await.map_err(|e| e.to_string())?;
    let query = query();
    let mut subscribed = false;
    let mut opened = false;
    while let Some(msg) = ws.next().await {
        let Ok(Message::Text(text)) = msg else {
            if msg.is_err() {
                return Err("socket error".into());
            }
            continue;
        };
        let arrived = now_micros();
        // The common case read without a JSON parse, so that the clients (on the same two cores
        // as the server) cost little: a MODIFIED event carrying the applied-at annotation.
        if let Some(t) = applied_at(&text) {
            seen.event(arrived, t);
            continue;
        }
        let v: Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
        match v["type"].as_str() {
            Some("connection_ack") if !subscribe => {
                // Sockets only (LOAD_SUBSCRIBE=0): what a connection costs without an operation.
                seen.synced.fetch_add(1, Ordering::Relaxed);
            }
            Some("connection_ack") if !subscribed => {
                subscribed = true;
                ws.send(send(json!({"id": "1", "type": "subscribe",
                    "payload": {"query": query, "variables": {"ns": namespace}}})))
                    .await
                    .map_err(|e| e.to_string())?;
            }
            Some("ping") => {
                let _ = ws.send(send(json!({"type": "pong"}))).await;
            }
            Some("next") => {
                let ev = &v["payload"]["data"]["machineChanged"];
                if ev.is_null() {
                    // Another field: its first event is its opening.
                    seen.other.fetch_add(1, Ordering::Relaxed);
                    if !opened {
                        opened = true;
                        seen.synced.fetch_add(1, Ordering::Relaxed);
                    }
                    continue;
                }
                if ev["type"] == "SYNCED" {
                    seen.synced.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                if ev["type"] != "MODIFIED" {
                    continue;
                }
                let applied = ev["object"]["annotations"]
                    .as_array()
                    .and_then(|a| a.iter().find(|kv| kv["key"] == ANNOTATION))
                    .and_then(|kv| kv["value"].as_str()?.parse::<u64>().ok());
                if let Some(t) = applied {
                    seen.event(arrived, t);
                }
            }
            Some("error") => return Err(format!("refused: {v}")),
            _ => {}
        }
    }
    Ok(())
}

/// The subscription every subscriber runs (with its namespace as `$ns`).
fn query() -> String {
    let default =
        "subscription($ns: String) { machineChanged(filter: {namespace: $ns}, snapshot: true) {
        type sequence object { ... on Machine { annotations { key value } } } } }";
    // LOAD_QUERY: another subscription document (same variables), e.g. to see what a selection costs.
    std::env::var("LOAD_QUERY").unwrap_or_else(|_| default.to_string())
}

/// A subscriber reading the subscription as an SSE stream (`LOAD_SSE`): counted as a socket's
/// is (its opening's SYNCED, then each MODIFIED event's latency).
async fn sse_subscriber(
    http: reqwest::Client,
    url: String,
    namespace: String,
    key: Option<String>,
    seen: Arc<Seen>,
) -> Result<(), String> {
    let body = json!({"query": query(), "variables": {"ns": namespace}});
    let mut request = http
        .post(url)
        .header("Accept", "text/event-stream")
        .header("Content-Type", "application/json")
        .body(body.to_string());
    if let Some(k) = &key {
        request = request.header("Authorization", format!("Bearer {k}"));
    }
    let mut response = request.send().await.map_err(|e| e.to_string())?;
    if !response.status().is_success() {
        return Err(format!("SSE refused: {}", response.status()));
    }
    let mut opened = false;
    let mut buffer = String::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| e.to_string())? {
        let arrived = now_micros();
        buffer.push_str(&String::from_utf8_lossy(&chunk));
        while let Some(end) = buffer.find("\n\n") {
            let event: String = buffer.drain(..end + 2).collect();
            let Some(data) = event.lines().find_map(|l| l.strip_prefix("data:")) else {
                continue;
            };
            if let Some(t) = applied_at_in(data) {
                seen.event(arrived, t);
            } else if !opened
                && (data.contains(r#""type":"SYNCED""#) || !data.contains("machineChanged"))
            {
                // Its opening (or, another field's, its first event).
                opened = true;
                seen.synced.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
    Ok(())
}

/// The applied-at time of a `next` frame with a MODIFIED event, read off the text.
fn applied_at(text: &str) -> Option<u64> {
    if !text.starts_with(r#"{"type":"next""#) {
        return None;
    }
    applied_at_in(text)
}

/// The applied-at time of a MODIFIED event's payload, read off the text.
fn applied_at_in(text: &str) -> Option<u64> {
    if !text.contains(r#""type":"MODIFIED""#) {
        return None;
    }
    let at = text.find(ANNOTATION)? + ANNOTATION.len();
    let rest = &text[at..];
    let start = rest.find(r#""value":""#)? + r#""value":""#.len();
    let digits: &str = rest[start..].split('"').next()?;
    digits.parse().ok()
}

/// CPU time (user + system) the process has used, in seconds (Linux `/proc/PID/stat`).
fn cpu_seconds(pid: u32) -> f64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0.0;
    };
    // Fields after the command name (which is in parentheses and may hold spaces).
    let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
        return 0.0;
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the whole line: 12 and 13 after the name.
    let ticks: u64 = [11, 12]
        .iter()
        .filter_map(|&i| fields.get(i)?.parse::<u64>().ok())
        .sum();
    let hz = std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok()?.trim().parse::<f64>().ok())
        .unwrap_or(100.0);
    ticks as f64 / hz
}

/// The server's store sequence number, from /metrics.
async fn store_sequence(http: &reqwest::Client, port: u16) -> u64 {
    let Ok(r) = http
        .get(format!("http://127.0.0.1:{port}/metrics"))
        .send()
        .await
    else {
        return 0;
    };
    let text = r.text().await.unwrap_or_default();
    text.lines()
        .find_map(|l| l.strip_prefix("vitistack_store_sequence "))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .map_or(0, |v| v as u64)
}

fn percentile(sorted: &[u32], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    f64::from(sorted[i]) / 1000.0
}

async fn run() {
    let subscribers = env("LOAD_SUBSCRIBERS", 10_000) as usize;
    let rate = env("LOAD_CHANGES_PER_SECOND", 100);
    let seconds = env("LOAD_SECONDS", 20);
    let namespaces = env("LOAD_NAMESPACES", 1_000) as usize;
    let subscribe = env("LOAD_SUBSCRIBE", 1) != 0;
    let sse_every = env("LOAD_SSE", 0) as usize;
    let machines_per_ns = 2usize;

    // The API test server on a runtime (thread) of its own: the subscribers' clients in this
    // process must not starve the watches the server under test reads from, or a lagging graph
    // would be the load tool's doing.
    let (api_runtime, api) = std::thread::spawn(|| {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("API runtime");
        let api = rt.block_on(KubeApi::start(
            &kube_api::watched_resources(),
            Duration::from_secs(1),
        ));
        (rt, api)
    })
    .join()
    .expect("API server");
    // A Machine from the demo generator as the template.
    let template = fleet(&FleetSpec::large(1))
        .into_iter()
        .find(|r| r.kind() == Kind::Machine)
        .map(|r| r.to_value())
        .expect("a demo machine");
    // LOAD_FLIP=1: every change also flips the Machine's phase (Running ⇄ Failed), so that
    // aggregates (`infrastructureSummary`) change with it.
    let flip = env("LOAD_FLIP", 0) != 0;
    let machine = |ns: usize, m: usize, applied_at: u64| {
        let mut v = template.clone();
        v["metadata"] = json!({"name": format!("m-{m}"), "namespace": format!("load-{ns:04}"),
            "labels": {"vitistack.io/clusterid": format!("load-{ns:04}")},
            "annotations": {ANNOTATION: applied_at.to_string()}});
        if flip {
            v["status"]["phase"] = json!(if applied_at.is_multiple_of(2) {
                "Running"
            } else {
                "Failed"
            });
        }
        v
    };
    for ns in 0..namespaces {
        for m in 0..machines_per_ns {
            api.apply("machines", machine(ns, m, 0));
        }
    }

    let dir = std::env::temp_dir().join(format!("vitistack-sub-load-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let kubeconfig = dir.join("kubeconfig");
    api.write_kubeconfig(&kubeconfig);
    let limit = (subscribers + 100).to_string();
    // LOAD_SCOPES / LOAD_USERS: keys limited to namespaces (every load namespace, and one of the
    // scope's own, so that scopes differ but all see every change).
    let scopes = env("LOAD_SCOPES", 0) as usize;
    let users = if scopes == 0 {
        0
    } else {
        (env("LOAD_USERS", scopes as u64) as usize).max(scopes)
    };
    let all_namespaces: Vec<String> = (0..namespaces).map(|n| format!("load-{n:04}")).collect();
    let mut keys_file = String::new();
    for u in 0..users {
        keys_file.push_str(&format!(
            "user-{u} viewer load-user-key-{u:06}-0123456789 namespaces={},scope-{:04}\n",
            all_namespaces.join(","),
            u % scopes
        ));
    }
    let keys_path = dir.join("keys");
    std::fs::write(&keys_path, keys_file).expect("keys");
    let mut settings = vec![
        ("STREAM_MAX_CONNECTIONS", limit.clone()),
        ("STREAM_MAX_CONNECTIONS_PER_CLIENT", limit),
    ];
    if users > 0 {
        settings.push(("API_KEYS_FILE", keys_path.display().to_string()));
    }
    let (mut child, port) = proc::spawn_server(env!("CARGO_BIN_EXE_vitistack"), &dir, &settings);
    let pid = child.id();
    let http = reqwest::Client::new();
    let started = Instant::now();
    loop {
        if let Ok(r) = http
            .get(format!("http://127.0.0.1:{port}/ready"))
            .send()
            .await
            && r.status().is_success()
        {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(60), "not ready");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let rss_before = status_kib(pid, "VmRSS:");

    // Open the subscribers, 200 connections at a time.
    let seen = Arc::new(Seen::default());
    let url = format!("ws://127.0.0.1:{port}/graphql/ws");
    let sse_url = format!("http://127.0.0.1:{port}/graphql");
    // Each SSE stream holds a connection of its own.
    let sse_http = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .expect("HTTP client");
    let opening = Instant::now();
    let mut tasks = Vec::with_capacity(subscribers);
    let mut sse_count = 0;
    for i in 0..subscribers {
        let (url, mine) = (url.clone(), seen.clone());
        let ns = format!("load-{:04}", i % namespaces);
        let key = (users > 0).then(|| format!("load-user-key-{:06}-0123456789", i % users));
        let sse = subscribe && sse_every > 0 && i % sse_every == 0;
        sse_count += usize::from(sse);
        let (sse_url, sse_http) = (sse_url.clone(), sse_http.clone());
        tasks.push(tokio::spawn(async move {
            let stopping = mine.stopping.clone();
            let served = match sse {
                true => sse_subscriber(sse_http, sse_url, ns, key, mine).await,
                false => subscriber(url, ns, key, mine, subscribe).await,
            };
            if let Err(e) = served
                && !stopping.load(Ordering::Relaxed)
            {
                eprintln!("subscriber {i}: {e}");
            }
        }));
        if i % 200 == 199 {
            while (seen.synced.load(Ordering::Relaxed) as usize) < i + 1 - 200 {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
    }
    while (seen.synced.load(Ordering::Relaxed) as usize) < subscribers {
        assert!(
            opening.elapsed() < Duration::from_secs(300),
            "subscribers did not all sync"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let open_time = opening.elapsed();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let rss_idle = status_kib(pid, "VmRSS:");

    // M changes per second, spread evenly, to random namespaces.
    let mut rng = 0x9E37_79B9_7F4A_7C15u64;
    let total = rate * seconds;
    let period = Duration::from_secs_f64(1.0 / rate as f64);
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let seq_before = store_sequence(&http, port).await;
    let cpu_before = cpu_seconds(pid);
    let tool_cpu_before = cpu_seconds(std::process::id());
    let load_start = Instant::now();
    for _ in 0..total {
        tick.tick().await;
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let ns = (rng % namespaces as u64) as usize;
        let m = ((rng >> 32) % machines_per_ns as u64) as usize;
        api.apply("machines", machine(ns, m, now_micros()));
    }
    let applying = load_start.elapsed();
    // Whether the graph kept up while subscribers were served: how long after the last change
    // the store holds every change (each apply is one change).
    let behind = Instant::now();
    while store_sequence(&http, port).await < seq_before + total
        && behind.elapsed() < Duration::from_secs(60)
    {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let graph_lag = behind.elapsed();
    let graph_seq = store_sequence(&http, port).await;
    // Let the last events arrive.
    let expected = total * (subscribers / namespaces) as u64;
    let drain = Instant::now();
    while seen.events.load(Ordering::Relaxed) < expected
        && drain.elapsed() < Duration::from_secs(10)
    {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let delivered = seen.events.load(Ordering::Relaxed);
    let other = seen.other.load(Ordering::Relaxed);
    let window = applying + drain.elapsed();
    let cpu = cpu_seconds(pid) - cpu_before;
    let tool_cpu = cpu_seconds(std::process::id()) - tool_cpu_before;
    let rss_after = status_kib(pid, "VmRSS:");
    let hwm = status_kib(pid, "VmHWM:");
    let mut lat = std::mem::take(&mut *seen.latencies.lock());
    lat.sort_unstable();

    println!(
        "subscribers: {subscribers} over {namespaces} namespaces, {sse_count} of them SSE streams (opened and synced in {open_time:.1?}); {}",
        if users == 0 {
            "anonymous, each seeing everything".to_string()
        } else {
            format!("{users} keys in {scopes} scopes")
        }
    );
    println!("changes applied: {total} at {rate}/s in {applying:.1?}");
    println!(
        "events delivered: {delivered} of {expected} expected ({:.0} events/s)",
        delivered as f64 / window.as_secs_f64()
    );
    if other > 0 {
        println!("events of another field (LOAD_QUERY): {other}, openings included");
    }
    println!(
        "graph: {} of {total} changes in the store {graph_lag:.1?} after the last was applied",
        graph_seq.saturating_sub(seq_before).min(total)
    );
    println!(
        "server CPU: {cpu:.1} s in {window:.1?} ({:.0}% of one core), {:.1} ms per 1,000 delivered events",
        cpu / window.as_secs_f64() * 100.0,
        if delivered > 0 {
            cpu * 1000.0 / (delivered as f64 / 1000.0)
        } else {
            0.0
        }
    );
    println!(
        "load tool CPU (clients and the API test server, same machine): {tool_cpu:.1} s ({:.0}% of one core)",
        tool_cpu / window.as_secs_f64() * 100.0
    );
    println!(
        "change-to-client latency: p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
        percentile(&lat, 0.50),
        percentile(&lat, 0.99),
        percentile(&lat, 1.0)
    );
    println!(
        "server RSS: {} MiB before subscribers, {} MiB with {subscribers} idle subscribers ({:.1} KiB each), {} MiB after the run (peak {} MiB)",
        rss_before >> 10,
        rss_idle >> 10,
        (rss_idle.saturating_sub(rss_before)) as f64 / subscribers as f64,
        rss_after >> 10,
        hwm >> 10
    );
    seen.stopping.store(true, Ordering::Relaxed);
    let _ = child.kill();
    let _ = child.wait();
    for t in tasks {
        t.abort();
    }
    let _ = std::fs::remove_dir_all(&dir);
    drop(api);
    api_runtime.shutdown_background();
}
