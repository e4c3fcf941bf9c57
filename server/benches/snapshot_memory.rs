//! Memory of subscriptions that ask for a snapshot and then do not read: N WebSockets each open
//! `resourceChanged(snapshot: true)` on the release server holding the 500-cluster demo fleet
//! (21,000+ objects), and never read again. Reported: the server's resident memory before and
//! with the subscriptions open, and its peak.
//!
//! `cargo bench --bench snapshot_memory`; env: SNAP_SUBSCRIBERS (1000), SNAP_CLUSTERS (500),
//! VITISTACK_BIN (another build of the server to compare with, e.g. an older commit's).

use vitistack_testkit::proc;
use vitistack_testkit::runtime;
use vitistack_testkit::server;

use std::time::{Duration, Instant};

use futures::SinkExt;
use proc::status_kib;
use serde_json::json;
use server::{Server, env};
use tokio_tungstenite::tungstenite::Message;

fn main() {
    runtime::main(run);
}

async fn metric(base: &str, series: &str) -> f64 {
    let text = reqwest::get(format!("{base}/metrics"))
        .await
        .ok()
        .map(|r| r.text());
    let text = match text {
        Some(t) => t.await.unwrap_or_default(),
        None => String::new(),
    };
    text.lines()
        .find_map(|l| {
            let (name, v) = l.rsplit_once(' ')?;
            (name == series).then(|| v.parse().ok()).flatten()
        })
        .unwrap_or(0.0)
}

async fn run() {
    let subscribers = env("SNAP_SUBSCRIBERS", 1_000) as usize;
    let clusters = env("SNAP_CLUSTERS", 500);
    let server = Server::start(
        env!("CARGO_BIN_EXE_vitistack"),
        "snapmem",
        clusters,
        &[("STREAM_MAX_CONNECTIONS_PER_CLIENT", "100000")],
        Duration::from_secs(600),
    )
    .await;
    let (pid, bin) = (server.pid, server.bin.clone());
    let base = format!("http://127.0.0.1:{}", server.port);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let before = status_kib(pid, "VmRSS:");
    let query = "subscription { resourceChanged(snapshot: true) { type sequence kind namespace name \
                 object { ... on Machine { name phase } ... on NetworkConfiguration { name } } } }";
    let mut sockets = Vec::with_capacity(subscribers);
    for i in 0..subscribers {
        let mut ws = server.ws().await;
        ws.send(Message::Text(
            json!({"type": "connection_init"}).to_string().into(),
        ))
        .await
        .expect("init");
        ws.send(Message::Text(
            json!({"id": format!("s{i}"), "type": "subscribe", "payload": {"query": query}})
                .to_string()
                .into(),
        ))
        .await
        .expect("subscribe");
        // Never read from it again.
        sockets.push(ws);
    }
    let series = "vitistack_subscriptions_active{field=\"resourceChanged\"}";
    let deadline = Instant::now() + Duration::from_secs(600);
    while (metric(&base, series).await as usize) < subscribers && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Let the server fill what the sockets take.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let with = status_kib(pid, "VmRSS:");
    let peak = status_kib(pid, "VmHWM:");
    println!(
        "snapshot_memory: {subscribers} stalled resourceChanged(snapshot: true) subscribers over {clusters} clusters: \
         RSS {} MiB before, {} MiB with them ({:.1} KiB each), peak {} MiB ({bin})",
        before / 1024,
        with / 1024,
        (with.saturating_sub(before)) as f64 / subscribers as f64,
        peak / 1024
    );
    drop(sockets);
    drop(server);
}
