//! What a subscription's document text costs per event: one subscriber opens
//! `resourceChanged(kinds: ["Machine"], snapshot: true)` on the release server holding the demo
//! fleet, with its document padded by a comment of DOC_PADDING_KB, and reads until `SYNCED`.
//! Reported: the events received and the server's CPU time (user + system, from /proc) spent
//! between the subscribe message and `SYNCED`.
//!
//! `cargo bench --bench document_cost`; env: DOC_PADDING_KB (1000), DEMO_CLUSTERS (0: the small
//! demo), VITISTACK_BIN (another build of the server to compare with).

use vitistack_testkit::runtime;
use vitistack_testkit::server;

use std::time::{Duration, Instant};

use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use server::{Server, env};
use tokio_tungstenite::tungstenite::Message;

/// User + system CPU time of a process, in milliseconds (clock ticks of 10 ms).
fn cpu_ms(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or_default();
    // After the name: state, ppid, pgrp, session, tty_nr, tpgid, flags, minflt, cminflt, majflt,
    // cmajflt, utime, stime (fields 3 to 15 of the line).
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    (ticks(11) + ticks(12)) * 10
}

fn main() {
    runtime::main(run);
}

async fn run() {
    let padding_kb = env("DOC_PADDING_KB", 1_000) as usize;
    let clusters = env("DEMO_CLUSTERS", 0);
    let server = Server::start(
        env!("CARGO_BIN_EXE_vitistack"),
        "doccost",
        clusters,
        &[],
        Duration::from_secs(300),
    )
    .await;
    let (pid, bin) = (server.pid, server.bin.clone());
    tokio::time::sleep(Duration::from_secs(1)).await;
    let mut ws = server.ws().await;
    ws.send(Message::Text(
        json!({"type": "connection_init"}).to_string().into(),
    ))
    .await
    .expect("init");
    let padding = format!("# {}\n", "x".repeat(padding_kb * 1024));
    let query = format!(
        "{padding}subscription {{ resourceChanged(kinds: [\"Machine\"], snapshot: true) {{ type name object {{ ... on Machine {{ phase }} }} }} }}"
    );
    let before = cpu_ms(pid);
    let t0 = Instant::now();
    ws.send(Message::Text(
        json!({"id": "d", "type": "subscribe", "payload": {"query": query}})
            .to_string()
            .into(),
    ))
    .await
    .expect("subscribe");
    let mut events = 0;
    let mut outcome = String::from("SYNCED");
    while let Some(Ok(m)) = ws.next().await {
        let Message::Text(t) = m else {
            if let Message::Close(f) = m {
                outcome = format!("closed {f:?}");
                break;
            }
            continue;
        };
        let v: Value = serde_json::from_str(&t).unwrap_or(Value::Null);
        match v["type"].as_str() {
            Some("next") => {
                events += 1;
                if v["payload"]["data"]["resourceChanged"]["type"] == "SYNCED" {
                    break;
                }
            }
            Some("error") => {
                outcome = format!("refused: {}", v["payload"]);
                break;
            }
            _ => {}
        }
    }
    let cpu = cpu_ms(pid).saturating_sub(before);
    println!(
        "document_cost: {padding_kb} KB of comment, {events} events ({outcome}) in {:.2} s, server CPU {cpu} ms ({bin})",
        t0.elapsed().as_secs_f64()
    );
    drop(server);
}
