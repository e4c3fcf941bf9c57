//! `resourceChanged` over `/graphql/ws` (graphql-transport-ws), driven from this test with
//! tokio-tungstenite: snapshot then stream, filters, and consistency while the graph churns.

use std::collections::BTreeMap;
use std::time::Duration;

use futures::StreamExt;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use vitistack::model::{Kind, Resource};
use vitistack::store::{ObjectKey, Op};

use super::{TestApp, Ws, eventually, metric as gauge, send_json as send, spawn};

async fn connect(app: &TestApp) -> Ws {
    let url = format!("{}/graphql/ws", app.base.replacen("http", "ws", 1));
    let mut req = url.into_client_request().expect("request");
    req.headers_mut().insert(
        "Sec-WebSocket-Protocol",
        "graphql-transport-ws".parse().expect("header"),
    );
    let (mut ws, resp) = tokio_tungstenite::connect_async(req)
        .await
        .expect("connect");
    assert_eq!(
        resp.headers()
            .get("sec-websocket-protocol")
            .and_then(|v| v.to_str().ok()),
        Some("graphql-transport-ws")
    );
    send(&mut ws, json!({"type": "connection_init"})).await;
    assert_eq!(next(&mut ws).await["type"], "connection_ack");
    ws
}

/// The next protocol message (pings answered).
async fn next(ws: &mut Ws) -> Value {
    loop {
        let msg = tokio::time::timeout(Duration::from_secs(10), ws.next())
            .await
            .expect("a message in time")
            .expect("open")
            .expect("frame");
        if let Message::Text(t) = msg {
            let v: Value = serde_json::from_str(&t).expect("json");
            if v["type"] == "ping" {
                send(ws, json!({"type": "pong"})).await;
                continue;
            }
            return v;
        }
    }
}

/// The next event of subscription `id`.
async fn event(ws: &mut Ws, id: &str) -> Value {
    let v = next(ws).await;
    assert_eq!(v["id"], id, "{v}");
    assert_eq!(v["type"], "next", "{v}");
    v["payload"]["data"]["resourceChanged"].clone()
}

const SUB: &str = "subscription($kinds: [String!], $ns: String, $sel: String, $snap: Boolean!) {
  resourceChanged(kinds: $kinds, namespace: $ns, labelSelector: $sel, snapshot: $snap) {
    type sequence kind namespace name object { id ... on Machine { phase } } } }";

fn machine(ns: &str, name: &str, phase: &str) -> Resource {
    Resource::from_value(
        Kind::Machine,
        "v1alpha1",
        json!({"metadata": {"name": name, "namespace": ns, "labels": {"vitistack.io/clusterid": "sub-test"}},
               "spec": {"provider": "kubevirt"}, "status": {"phase": phase}}),
    )
    .expect("machine")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshot_then_changes_filtered_with_sequence_numbers() {
    let app = spawn(&["--demo"]).await;
    let store = app.running().store.clone();
    let expected: Vec<String> = store
        .snapshot()
        .list_in(Kind::Machine, "team-0")
        .map(|m| m.name().to_string())
        .collect();
    assert!(!expected.is_empty());
    let mut ws = connect(&app).await;
    send(
        &mut ws,
        json!({"id": "1", "type": "subscribe", "payload": {"query": SUB,
            "variables": {"kinds": ["Machine"], "ns": "team-0", "snap": true}}}),
    )
    .await;
    let mut snapshot = Vec::new();
    let synced_at = loop {
        let e = event(&mut ws, "1").await;
        match e["type"].as_str() {
            Some("ADDED") => snapshot.push(e["name"].as_str().unwrap_or_default().to_string()),
            Some("SYNCED") => break e["sequence"].as_u64().expect("sequence"),
            other => panic!("unexpected {other:?}: {e}"),
        }
    };
    assert_eq!(
        snapshot, expected,
        "the snapshot is the current matching objects"
    );
    assert_eq!(synced_at, store.snapshot().seq());

    // Changes: one in the namespace, one elsewhere (filtered out), one of another kind.
    store.apply(vec![Op::Upsert(machine("team-1", "elsewhere", "Pending"))]);
    store.apply(vec![Op::Upsert(machine("team-0", "new-one", "Pending"))]);
    store.apply(vec![Op::Upsert(machine("team-0", "new-one", "Running"))]);
    store.apply(vec![Op::Delete(ObjectKey::new(
        &Default::default(),
        Kind::Machine,
        "team-0",
        "new-one",
    ))]);
    let added = event(&mut ws, "1").await;
    let modified = event(&mut ws, "1").await;
    let deleted = event(&mut ws, "1").await;
    assert_eq!(
        (
            added["type"].as_str(),
            added["name"].as_str(),
            added["object"]["phase"].as_str()
        ),
        (Some("ADDED"), Some("new-one"), Some("Pending"))
    );
    assert_eq!(
        (
            modified["type"].as_str(),
            modified["object"]["phase"].as_str()
        ),
        (Some("MODIFIED"), Some("Running"))
    );
    assert_eq!(deleted["type"], "DELETED");
    let seqs: Vec<u64> = [&added, &modified, &deleted]
        .iter()
        .filter_map(|e| e["sequence"].as_u64())
        .collect();
    assert!(
        seqs[0] > synced_at + 1,
        "the team-1 change was filtered out, not renumbered"
    );
    assert!(seqs.windows(2).all(|w| w[0] + 1 == w[1]));

    // A bad selector is refused with a clear error, and the socket stays usable.
    send(
        &mut ws,
        json!({"id": "2", "type": "subscribe", "payload": {"query": SUB,
            "variables": {"sel": "a in (", "snap": false}}}),
    )
    .await;
    // An execution error (not a validation error): `next` with the error, then `complete`.
    let err = next(&mut ws).await;
    assert_eq!(
        (err["type"].as_str(), err["id"].as_str()),
        (Some("next"), Some("2")),
        "{err}"
    );
    let e = &err["payload"]["errors"][0];
    assert_eq!(e["extensions"]["code"], "BAD_LABEL_SELECTOR", "{err}");
    assert_eq!(e["message"], "labelSelector `a in (`: missing `)`", "{err}");
    let done = next(&mut ws).await;
    assert_eq!(
        (done["type"].as_str(), done["id"].as_str()),
        (Some("complete"), Some("2")),
        "{done}"
    );
    // The first subscription still delivers.
    store.apply(vec![Op::Upsert(machine(
        "team-0",
        "after-error",
        "Pending",
    ))]);
    assert_eq!(event(&mut ws, "1").await["name"], "after-error");
    send(&mut ws, json!({"id": "1", "type": "complete"})).await;
}

/// `synced: true` without the snapshot: SYNCED alone comes first, carrying the sequence the
/// changes come after, so a client that reads with a query and reads again on it misses none
/// (a change made before SYNCED is in what the store answers then; one after it is an event).
/// Without it, nothing comes until a change (the stream as it always was).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn synced_alone_says_where_the_changes_start() {
    let app = spawn(&["--demo"]).await;
    let store = app.running().store.clone();
    let mut ws = connect(&app).await;
    let sub = "subscription($synced: Boolean!) { resourceChanged(kinds: [\"Machine\"], namespace: \"team-0\", synced: $synced) { type sequence name } }";
    let machines = "subscription { machineChanged(filter: {namespace: \"team-0\"}, synced: true) { type sequence name } }";
    send(
        &mut ws,
        json!({"id": "plain", "type": "subscribe", "payload": {"query": sub, "variables": {"synced": false}}}),
    )
    .await;
    send(
        &mut ws,
        json!({"id": "synced", "type": "subscribe", "payload": {"query": sub, "variables": {"synced": true}}}),
    )
    .await;
    send(
        &mut ws,
        json!({"id": "machines", "type": "subscribe", "payload": {"query": machines}}),
    )
    .await;
    let mut first = BTreeMap::new();
    while first.len() < 2 {
        let v = next(&mut ws).await;
        assert_eq!(v["type"], "next", "{v}");
        let id = v["id"].as_str().expect("id").to_string();
        assert_ne!(
            id, "plain",
            "nothing changed, yet the plain stream sent {v}"
        );
        let data = &v["payload"]["data"];
        let e = data
            .get("resourceChanged")
            .unwrap_or(&data["machineChanged"]);
        assert_eq!(e["type"], "SYNCED", "{v}");
        assert!(e["name"].is_null(), "{v}");
        assert!(
            first
                .insert(id, e["sequence"].as_u64().expect("sequence"))
                .is_none()
        );
    }
    let seq = store.snapshot().seq();
    assert_eq!(first.values().copied().collect::<Vec<_>>(), vec![seq, seq]);
    // The change after it is an event on all three, with a greater sequence.
    store.apply(vec![Op::Upsert(machine(
        "team-0",
        "after-synced",
        "Pending",
    ))]);
    let mut seen = std::collections::BTreeSet::new();
    while seen.len() < 3 {
        let v = next(&mut ws).await;
        let data = &v["payload"]["data"];
        let e = data
            .get("resourceChanged")
            .unwrap_or(&data["machineChanged"]);
        assert_eq!(
            (e["type"].as_str(), e["name"].as_str()),
            (Some("ADDED"), Some("after-synced")),
            "{v}"
        );
        assert!(e["sequence"].as_u64() > Some(seq), "{v}");
        seen.insert(v["id"].as_str().expect("id").to_string());
    }
}

/// While the graph changes as fast as it can, a subscriber that asks for the snapshot and then
/// applies every event ends with exactly the graph's objects: no gap, no duplicate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshot_and_stream_agree_with_the_graph_during_churn() {
    let app = spawn(&[]).await;
    let store = app.running().store.clone();
    for i in 0..50 {
        store.apply(vec![Op::Upsert(machine(
            "churn",
            &format!("m{i}"),
            "Pending",
        ))]);
    }
    let writer = {
        let store = store.clone();
        tokio::spawn(async move {
            for round in 0..400u32 {
                let i = round % 60;
                let op = if round % 7 == 3 {
                    Op::Delete(ObjectKey::new(
                        &Default::default(),
                        Kind::Machine,
                        "churn",
                        &format!("m{i}"),
                    ))
                } else {
                    let phase = if round % 2 == 0 { "Running" } else { "Pending" };
                    Op::Upsert(machine("churn", &format!("m{i}"), phase))
                };
                store.apply(vec![op]);
                if round % 20 == 0 {
                    tokio::task::yield_now().await;
                }
            }
        })
    };
    let mut ws = connect(&app).await;
    send(
        &mut ws,
        json!({"id": "c", "type": "subscribe", "payload": {"query": SUB,
            "variables": {"kinds": ["Machine"], "ns": "churn", "snap": true}}}),
    )
    .await;
    let mut mine: BTreeMap<String, String> = BTreeMap::new();
    let mut last_seq = 0u64;
    let mut synced = false;
    writer.await.expect("writer");
    let final_seq = store.snapshot().seq();
    while !(synced && last_seq >= final_seq) {
        let e = event(&mut ws, "c").await;
        let seq = e["sequence"].as_u64().expect("sequence");
        let name = e["name"].as_str().unwrap_or_default().to_string();
        match e["type"].as_str() {
            Some("ADDED") if !synced => {
                assert!(
                    mine.insert(
                        name,
                        e["object"]["phase"].as_str().unwrap_or_default().into()
                    )
                    .is_none()
                );
            }
            Some("SYNCED") => {
                synced = true;
                last_seq = seq;
            }
            Some("ADDED" | "MODIFIED") => {
                assert!(
                    seq > last_seq,
                    "duplicate or out of order: {seq} after {last_seq}"
                );
                last_seq = seq;
                mine.insert(
                    name,
                    e["object"]["phase"].as_str().unwrap_or_default().into(),
                );
            }
            Some("DELETED") => {
                assert!(
                    seq > last_seq,
                    "duplicate or out of order: {seq} after {last_seq}"
                );
                last_seq = seq;
                assert!(mine.remove(&name).is_some(), "deleted {name} it never had");
            }
            other => panic!("unexpected {other:?}: {e}"),
        }
    }
    let truth: BTreeMap<String, String> = store
        .snapshot()
        .list_in(Kind::Machine, "churn")
        .map(|m| {
            (
                m.name().to_string(),
                m.phase().unwrap_or_default().to_string(),
            )
        })
        .collect();
    assert_eq!(mine, truth);
}

/// A client that vanishes without `complete` leaves nothing behind: the socket and
/// subscription gauges return to where they were.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gauges_return_to_baseline_when_a_socket_drops_without_complete() {
    let app = spawn(&["--demo"]).await;
    let (_, before) = app.get("/metrics").await;
    assert_eq!(gauge(&before, "vitistack_websockets_open"), 0);
    let mut sockets = Vec::new();
    for i in 0..3 {
        let mut ws = connect(&app).await;
        send(
            &mut ws,
            json!({"id": format!("s{i}"), "type": "subscribe", "payload": {"query": SUB,
                "variables": {"kinds": ["Machine"], "ns": "gauges", "snap": true}}}),
        )
        .await;
        // SYNCED: the subscription is listening.
        assert_eq!(event(&mut ws, &format!("s{i}")).await["type"], "SYNCED");
        sockets.push(ws);
    }
    // Deliver one event to each so the subscriptions are surely running.
    app.running()
        .store
        .apply(vec![Op::Upsert(machine("gauges", "g0", "Pending"))]);
    for (i, ws) in sockets.iter_mut().enumerate() {
        assert_eq!(event(ws, &format!("s{i}")).await["name"], "g0");
    }
    let (_, during) = app.get("/metrics").await;
    assert_eq!(gauge(&during, "vitistack_websockets_open"), 3, "{during}");
    assert_eq!(
        gauge(
            &during,
            "vitistack_subscriptions_active{field=\"resourceChanged\"}"
        ),
        3
    );
    assert!(
        gauge(
            &during,
            "vitistack_subscription_events_total{field=\"resourceChanged\"}"
        ) >= 3
    );
    // Drop the TCP connections without a close frame or `complete`.
    drop(sockets);
    eventually("the gauges back at their baseline", || async {
        let after = app.get("/metrics").await.1;
        gauge(&after, "vitistack_websockets_open") == 0
            && gauge(
                &after,
                "vitistack_subscriptions_active{field=\"resourceChanged\"}",
            ) == 0
    })
    .await;
}

/// A reader that stops reading while the graph changes more than its queue holds gets RESYNC,
/// then a fresh snapshot and SYNCED, and ends with the graph's state; memory stays bounded and
/// other subscribers are not held up. (The shared ring holds the whole burst: a burst that
/// outruns the fan-out itself resyncs everyone, which is another case than one stopped reader.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_reader_gets_resync_then_a_fresh_snapshot() {
    let app = spawn(&["--change-buffer", "20000", "--subscription-buffer", "1024"]).await;
    let store = app.running().store.clone();
    let mut slow = connect(&app).await;
    // Whole objects in every event (~1.5 KB each), so the socket buffers fill well before the
    // change stream overflows.
    let big = SUB.replace("... on Machine { phase }", "... on Machine { phase raw }");
    send(
        &mut slow,
        json!({"id": "slow", "type": "subscribe", "payload": {"query": big,
            "variables": {"kinds": ["Machine"], "ns": "busy", "snap": true}}}),
    )
    .await;
    assert_eq!(event(&mut slow, "slow").await["type"], "SYNCED");
    let mut fast = connect(&app).await;
    send(
        &mut fast,
        json!({"id": "fast", "type": "subscribe", "payload": {"query": SUB,
            "variables": {"kinds": ["Machine"], "ns": "quiet", "snap": true}}}),
    )
    .await;
    assert_eq!(event(&mut fast, "fast").await["type"], "SYNCED");
    // Sixteen times what the stopped reader's queue holds (1,024), while `slow` reads nothing
    // (socket buffers absorb a few thousand events before its queue fills).
    let rounds = 2048 * 8;
    let mut batch = Vec::with_capacity(1000);
    for r in 0..rounds {
        let phase = if (r / 100) % 2 == 0 {
            "Running"
        } else {
            "Pending"
        };
        batch.push(Op::Upsert(machine("busy", &format!("b{}", r % 100), phase)));
        if batch.len() == 1000 {
            store.apply(std::mem::take(&mut batch));
        }
    }
    store.apply(batch);
    let busy_done = store.snapshot().seq();
    // The other subscriber is not held up by the stalled one.
    store.apply(vec![Op::Upsert(machine("quiet", "q0", "Pending"))]);
    let quiet = event(&mut fast, "fast").await;
    assert_eq!(quiet["name"], "q0", "{quiet}");

    // Now read: buffered events, RESYNC, a snapshot, SYNCED, and any changes after it, up to
    // the last change.
    let mut resynced = false;
    let mut in_snapshot = false;
    let mut state: BTreeMap<String, String> = BTreeMap::new();
    let mut seen = 0usize;
    loop {
        let e = event(&mut slow, "slow").await;
        seen += 1;
        match e["type"].as_str() {
            Some("RESYNC") => {
                resynced = true;
                in_snapshot = true;
                state.clear();
            }
            Some("ADDED" | "MODIFIED") => {
                state.insert(
                    e["name"].as_str().unwrap_or_default().into(),
                    e["object"]["phase"].as_str().unwrap_or_default().into(),
                );
            }
            Some("SYNCED") if resynced => in_snapshot = false,
            other => panic!("unexpected {other:?} after {seen} events: {e}"),
        }
        if resynced && !in_snapshot && e["sequence"].as_u64().is_some_and(|s| s >= busy_done) {
            break;
        }
    }
    assert!(resynced);
    assert!(
        seen < rounds,
        "{seen} events: the stalled reader did not get every change"
    );
    let truth: BTreeMap<String, String> = store
        .snapshot()
        .list_in(Kind::Machine, "busy")
        .map(|m| {
            (
                m.name().to_string(),
                m.phase().unwrap_or_default().to_string(),
            )
        })
        .collect();
    assert_eq!(state, truth);
    let (_, metrics) = app.get("/metrics").await;
    assert!(
        gauge(
            &metrics,
            "vitistack_subscription_resyncs_total{field=\"resourceChanged\"}"
        ) >= 1,
        "{metrics}"
    );
}

/// `clusterChanged` follows one cluster through the pipeline: its state first, then a new state
/// each time one of its own objects changes, nothing for other clusters' objects, null once
/// deleted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_changed_follows_one_cluster_through_the_pipeline() {
    let app = spawn(&["--demo"]).await;
    let store = app.running().store.clone();
    let data = app
        .data(
            "{ clusters(first: 50) { nodes { id name namespace clusterId diagnosis { stage } } } }",
            json!({}),
        )
        .await;
    let nodes = data["clusters"]["nodes"].as_array().expect("clusters");
    let target = nodes
        .iter()
        .find(|c| c["diagnosis"]["stage"] == "MACHINES_RUNNING")
        .expect("a demo cluster waiting for its machines")
        .clone();
    let other = nodes
        .iter()
        .find(|c| c["name"] != target["name"] && c["diagnosis"]["stage"] == "READY")
        .expect("another cluster")
        .clone();
    let mut ws = connect(&app).await;
    send(
        &mut ws,
        json!({"id": "k", "type": "subscribe", "payload": {"query":
            "subscription($id: ID!) { clusterChanged(id: $id) { sequence changed { type kind name }
               cluster { name diagnosis { stage summary } } } }",
            "variables": {"id": target["id"]}}}),
    )
    .await;
    let first = next(&mut ws).await["payload"]["data"]["clusterChanged"].clone();
    assert_eq!(first["changed"], Value::Null);
    assert_eq!(first["cluster"]["diagnosis"]["stage"], "MACHINES_RUNNING");

    let machines_of = |ns: &str, id: &str| -> Vec<Resource> {
        store
            .snapshot()
            .lookup(
                &Default::default(),
                vitistack::store::Idx::MachineByCluster,
                &vitistack::store::scoped(ns, id),
            )
            .map(|m| (**m).clone())
            .collect()
    };
    let running = |m: &Resource| {
        let mut v = m.to_value();
        v["status"]["phase"] = json!("Running");
        let o = v.as_object_mut().expect("object");
        o.remove("apiVersion");
        o.remove("kind");
        Resource::from_value(Kind::Machine, "v1alpha1", v).expect("machine")
    };
    // Another cluster's machine changes: not this subscription's business.
    let theirs = machines_of(
        other["namespace"].as_str().unwrap_or_default(),
        other["clusterId"].as_str().unwrap_or_default(),
    );
    let mut touched = theirs[0].clone();
    touched
        .meta_mut()
        .labels
        .get_or_insert_with(Default::default)
        .insert("touched", "yes");
    let unrelated = store.apply(vec![Op::Upsert(touched)])[0].seq;
    // This cluster's machines start one by one.
    let ours = machines_of(
        target["namespace"].as_str().unwrap_or_default(),
        target["clusterId"].as_str().unwrap_or_default(),
    );
    assert!(ours.len() >= 2);
    for m in &ours {
        store.apply(vec![Op::Upsert(running(m))]);
    }
    let mut last = Value::Null;
    for m in &ours {
        let e = event_of(&mut ws, "k", "clusterChanged").await;
        assert!(e["sequence"].as_u64() > Some(unrelated), "{e}");
        assert_eq!(e["changed"]["kind"], "Machine");
        assert_eq!(e["changed"]["name"], m.name());
        last = e;
    }
    assert_ne!(
        last["cluster"]["diagnosis"]["stage"], "MACHINES_RUNNING",
        "every machine runs: the cluster moved on: {last}"
    );
    // Deleted: the cluster is null.
    store.apply(vec![Op::Delete(ObjectKey::new(
        &Default::default(),
        Kind::KubernetesCluster,
        target["namespace"].as_str().unwrap_or_default(),
        target["name"].as_str().unwrap_or_default(),
    ))]);
    let gone = event_of(&mut ws, "k", "clusterChanged").await;
    assert_eq!(gone["changed"]["type"], "DELETED");
    assert_eq!(gone["cluster"], Value::Null);
}

/// An object as the store holds it, edited as JSON and read back.
fn edited(r: &Resource, f: impl FnOnce(&mut Value)) -> Resource {
    let mut v = r.to_value();
    f(&mut v);
    let version = v["apiVersion"]
        .as_str()
        .and_then(|a| a.rsplit('/').next())
        .unwrap_or("v1alpha1")
        .to_string();
    Resource::from_value(r.kind(), &version, v).expect("object")
}

/// `clusterChanged` matches a cluster's objects exactly: the objects of a cluster whose id
/// merely starts with this one's (`t-1` / `t-10`) are not its business; and it follows the
/// cluster's references: after `networkNamespaceName` is changed, the new NetworkNamespace's
/// changes are sent and the old one's are not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_changed_matches_exactly_and_follows_a_renamed_reference() {
    let app = spawn(&["--demo"]).await;
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
    let (ns, id) = (kc.namespace().to_string(), k.spec.data.cluster_id.clone());
    let old_nn = k.spec.data.network_namespace_name.clone();
    let ours = snap
        .lookup(
            &Default::default(),
            vitistack::store::Idx::MachineByCluster,
            &vitistack::store::scoped(&ns, &id),
        )
        .next()
        .cloned()
        .expect("a machine");
    // A second cluster in the namespace whose id extends this one's, with a Machine and its
    // NetworkConfiguration named after it.
    let longer = format!("{id}0");
    let twin = edited(&kc, |v| {
        v["metadata"]["name"] = json!(longer);
        v["spec"]["data"]["clusterId"] = json!(longer);
        v["metadata"].as_object_mut().map(|m| m.remove("uid"));
    });
    let twin_machine_name = format!("{longer}-ctp0");
    let twin_machine = edited(&ours, |v| {
        v["metadata"]["name"] = json!(twin_machine_name);
        v["metadata"]["labels"]["vitistack.io/clusterid"] = json!(longer);
        v["metadata"].as_object_mut().map(|m| m.remove("uid"));
    });
    let nc = snap
        .get(
            &Default::default(),
            Kind::NetworkConfiguration,
            &ns,
            ours.name(),
        )
        .cloned()
        .expect("the machine's NC");
    let twin_nc = edited(&nc, |v| {
        v["metadata"]["name"] = json!(twin_machine_name);
        v["metadata"]["labels"] = json!({"vitistack.io/source-machine": twin_machine_name});
        v["metadata"].as_object_mut().map(|m| m.remove("uid"));
    });
    store.apply(vec![
        Op::Upsert(twin),
        Op::Upsert(twin_machine.clone()),
        Op::Upsert(twin_nc.clone()),
    ]);
    let id_of = vitistack::graphql::types::global_id(&kc).0;
    let mut ws = connect(&app).await;
    send(
        &mut ws,
        json!({"id": "c", "type": "subscribe", "payload": {"query":
            "subscription($id: ID!) { clusterChanged(id: $id) { sequence changed { type kind name } } }",
            "variables": {"id": id_of}}}),
    )
    .await;
    let first = event_of(&mut ws, "c", "clusterChanged").await;
    assert_eq!(first["changed"], Value::Null);
    let touch = |r: &Resource, label: &str| {
        Op::Upsert(edited(r, |v| v["metadata"]["labels"][label] = json!("yes")))
    };
    // The twin's objects change, then ours: the next event is ours.
    store.apply(vec![touch(&twin_machine, "a")]);
    store.apply(vec![touch(&twin_nc, "a")]);
    store.apply(vec![touch(&nc, "a")]);
    let e = event_of(&mut ws, "c", "clusterChanged").await;
    assert_eq!(
        (e["changed"]["kind"].as_str(), e["changed"]["name"].as_str()),
        (Some("NetworkConfiguration"), Some(ours.name())),
        "the t-1/t-10 twin's changes were sent: {e}"
    );
    // The cluster now names another NetworkNamespace.
    let nn = snap
        .get(&Default::default(), Kind::NetworkNamespace, &ns, &old_nn)
        .cloned()
        .expect("nn");
    let new_nn = edited(&nn, |v| {
        v["metadata"]["name"] = json!("renamed-nn");
        v["metadata"].as_object_mut().map(|m| m.remove("uid"));
    });
    store.apply(vec![Op::Upsert(new_nn.clone())]);
    let current = store
        .snapshot()
        .get_key(&ObjectKey::of(&kc))
        .cloned()
        .expect("kc");
    store.apply(vec![Op::Upsert(edited(&current, |v| {
        v["spec"]["data"]["networkNamespaceName"] = json!("renamed-nn")
    }))]);
    let e = event_of(&mut ws, "c", "clusterChanged").await;
    assert_eq!(e["changed"]["kind"], "KubernetesCluster", "{e}");
    store.apply(vec![touch(&nn, "b")]);
    store.apply(vec![touch(&new_nn, "b")]);
    let e = event_of(&mut ws, "c", "clusterChanged").await;
    assert_eq!(
        (e["changed"]["kind"].as_str(), e["changed"]["name"].as_str()),
        (Some("NetworkNamespace"), Some("renamed-nn")),
        "after the rename, the old NetworkNamespace is not followed: {e}"
    );
}

async fn event_of(ws: &mut Ws, id: &str, field: &str) -> Value {
    let v = next(ws).await;
    assert_eq!(
        (v["id"].as_str(), v["type"].as_str()),
        (Some(id), Some("next")),
        "{v}"
    );
    v["payload"]["data"][field].clone()
}

/// Aggregates come once per burst of changes and only when a number changed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aggregates_are_debounced_and_sent_only_when_they_change() {
    let app = spawn(&["--demo"]).await;
    let store = app.running().store.clone();
    let mut ws = connect(&app).await;
    send(
        &mut ws,
        json!({"id": "i", "type": "subscribe", "payload": {"query":
            "subscription { infrastructureSummary(debounceMs: 100) { machines { total } } }"}}),
    )
    .await;
    send(
        &mut ws,
        json!({"id": "h", "type": "subscribe", "payload": {"query":
            "subscription { hostsChanged(debounceMs: 100) { activeVms vcpusUsed } }"}}),
    )
    .await;
    let mut firsts = BTreeMap::new();
    for _ in 0..2 {
        let v = next(&mut ws).await;
        firsts.insert(
            v["id"].as_str().unwrap_or_default().to_string(),
            v["payload"]["data"].clone(),
        );
    }
    let total = firsts["i"]["infrastructureSummary"]["machines"]["total"]
        .as_i64()
        .expect("total");
    let vms = firsts["h"]["hostsChanged"]["activeVms"]
        .as_i64()
        .expect("vms");

    // A change that moves no number: nothing is sent. Then a burst of five new machines: one
    // event, with all five counted.
    let mut m = store
        .snapshot()
        .list(Kind::Machine)
        .next()
        .map(|r| (**r).clone())
        .expect("machine");
    m.meta_mut()
        .labels
        .get_or_insert_with(Default::default)
        .insert("cosmetic", "yes");
    store.apply(vec![Op::Upsert(m)]);
    // The burst is one atomic write: whichever change wakes the aggregate, the snapshot it then
    // reads holds all five (no reliance on the debounce window to batch them).
    store.apply(
        (0..5)
            .map(|i| Op::Upsert(machine("burst", &format!("b{i}"), "Pending")))
            .collect(),
    );
    let e = event_of(&mut ws, "i", "infrastructureSummary").await;
    assert_eq!(e["machines"]["total"].as_i64(), Some(total + 5), "{e}");

    // A new running VM instance: hostsChanged reports it.
    store.apply(vec![Op::Mirror(
        Resource::from_value(
            Kind::VirtualMachineInstance,
            "v1",
            json!({"metadata": {"name": "extra", "namespace": "burst"},
                "spec": {"domain": {"cpu": {"cores": 2}}},
                "status": {"phase": "Running", "nodeName": "kv-node-01"}}),
        )
        .expect("vmi"),
    )]);
    let h = event_of(&mut ws, "h", "hostsChanged").await;
    assert_eq!(h["activeVms"].as_i64(), Some(vms + 1), "{h}");
    // Machines did not change with the VMI: no infrastructure event is waiting before the next.
    store.apply(vec![Op::Delete(ObjectKey::new(
        &Default::default(),
        Kind::Machine,
        "burst",
        "b0",
    ))]);
    let e = event_of(&mut ws, "i", "infrastructureSummary").await;
    assert_eq!(e["machines"]["total"].as_i64(), Some(total + 4), "{e}");
}

/// `machineChanged` is a live view of the filter: a Machine entering it (its phase became one
/// asked for) arrives as ADDED, one leaving it as DELETED, others not at all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn machine_changed_keeps_a_live_view_of_its_filter() {
    let app = spawn(&[]).await;
    let store = app.running().store.clone();
    let labelled = |name: &str, cluster: &str, phase: &str| {
        Resource::from_value(
            Kind::Machine,
            "v1alpha1",
            json!({"metadata": {"name": name, "namespace": "view",
                                "labels": {"vitistack.io/clusterid": cluster}},
                   "spec": {"provider": "kubevirt"}, "status": {"phase": phase}}),
        )
        .expect("machine")
    };
    store.apply(vec![
        Op::Upsert(labelled("a", "c1", "Running")),
        Op::Upsert(labelled("b", "c1", "Pending")),
        Op::Upsert(labelled("other", "c2", "Running")),
    ]);
    let mut ws = connect(&app).await;
    send(
        &mut ws,
        json!({"id": "m", "type": "subscribe", "payload": {"query":
            "subscription($f: Filter) { machineChanged(filter: $f, clusterId: \"c1\", snapshot: true) { type sequence name object { ... on Machine { phase } } } }",
            "variables": {"f": {"phase": ["running"]}}}}),
    )
    .await;
    let ev = |v: Value| v["payload"]["data"]["machineChanged"].clone();
    let first = ev(next(&mut ws).await);
    assert_eq!(
        (first["type"].as_str(), first["name"].as_str()),
        (Some("ADDED"), Some("a"))
    );
    assert_eq!(ev(next(&mut ws).await)["type"], "SYNCED");

    store.apply(vec![Op::Upsert(labelled("other", "c2", "Failed"))]); // other cluster
    store.apply(vec![Op::Upsert(labelled("b", "c1", "Running"))]); // enters
    store.apply(vec![Op::Upsert(labelled("a", "c1", "Failed"))]); // leaves
    store.apply(vec![Op::Upsert(labelled("a", "c1", "Deleting"))]); // still out
    store.apply(vec![Op::Delete(ObjectKey::new(
        &Default::default(),
        Kind::Machine,
        "view",
        "b",
    ))]); // gone
    let mut seen = Vec::new();
    for _ in 0..3 {
        let e = ev(next(&mut ws).await);
        seen.push(format!(
            "{} {}",
            e["type"].as_str().unwrap_or("?"),
            e["name"].as_str().unwrap_or("?")
        ));
    }
    assert_eq!(seen, ["ADDED b", "DELETED a", "DELETED b"]);

    // A bad selector in the filter is refused with its reason.
    send(
        &mut ws,
        json!({"id": "bad", "type": "subscribe", "payload": {"query":
            "subscription { machineChanged(filter: {labelSelector: \"a in (\"}) { type } }"}}),
    )
    .await;
    let v = next(&mut ws).await;
    assert_eq!(
        v["payload"]["errors"][0]["extensions"]["code"], "BAD_LABEL_SELECTOR",
        "{v}"
    );
}

/// `--simulate` plays the pipeline on the demo: events flow without anyone touching the store,
/// and clusters reach Ready. Without it the demo stands still (tests rely on that).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_simulator_makes_the_demo_live_and_is_off_by_default() {
    let still = spawn(&["--demo"]).await;
    let q = "{ sequence clusters(first: 100) { nodes { pipeline { stage } } } }";
    let before = still.data(q, json!({})).await["sequence"].clone();

    // The still server is judged once the simulating one has visibly moved (30 events and a
    // cluster further along): a measure of "long enough" that grows with the machine's load.
    let app = spawn(&["--demo", "--simulate", "--simulate-steps-per-second", "40"]).await;
    let ready = |d: &Value| {
        d["clusters"]["nodes"].as_array().map_or(0, |cs| {
            cs.iter()
                .filter(|c| c["pipeline"]["stage"] == "READY")
                .count()
        })
    };
    let first = app.data(q, json!({})).await;
    let mut ws = connect(&app).await;
    send(
        &mut ws,
        json!({"id": "1", "type": "subscribe", "payload": {"query": SUB,
            "variables": {"kinds": ["Machine", "NetworkConfiguration", "KubernetesCluster"], "snap": false}}}),
    )
    .await;
    let mut types = std::collections::BTreeSet::new();
    for _ in 0..30 {
        let e = event(&mut ws, "1").await;
        types.insert(e["type"].as_str().unwrap_or_default().to_string());
    }
    assert!(
        types.contains("MODIFIED") && types.contains("ADDED"),
        "{types:?}"
    );
    eventually("a cluster to reach Ready", || async {
        ready(&app.data(q, json!({})).await) > ready(&first)
    })
    .await;
    assert_eq!(
        still.data(q, json!({})).await["sequence"],
        before,
        "without --simulate the demo stands still"
    );
}

/// Subscribers of the same document and variables share one render of each change (one shared
/// stream, counted in /metrics); each still gets exactly what its own variables select, and one
/// that joins later gets its own snapshot, then the shared changes after it: no gap, no
/// duplicate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn identical_subscriptions_share_one_render_and_keep_their_own_variables() {
    let app = spawn(&[]).await;
    let store = app.running().store.clone();
    store.apply(vec![
        Op::Upsert(machine("a", "m0", "Pending")),
        Op::Upsert(machine("b", "m0", "Pending")),
    ]);
    let vars = |ns: &str| json!({"kinds": ["Machine"], "ns": ns, "snap": true});
    let subscribe = |id: &str, ns: &str| json!({"id": id, "type": "subscribe", "payload": {"query": SUB, "variables": vars(ns)}});
    // Events up to and including SYNCED: (type, name) in order.
    async fn opening(ws: &mut Ws, id: &str) -> Vec<(String, String)> {
        let mut seen = Vec::new();
        loop {
            let e = event(ws, id).await;
            let ty = e["type"].as_str().unwrap_or("?").to_string();
            if ty == "SYNCED" {
                return seen;
            }
            seen.push((ty, e["name"].as_str().unwrap_or("?").to_string()));
        }
    }
    let pair = |t: &str, n: &str| (t.to_string(), n.to_string());

    let mut first = connect(&app).await;
    send(&mut first, subscribe("a1", "a")).await;
    assert_eq!(opening(&mut first, "a1").await, [pair("ADDED", "m0")]);
    store.apply(vec![Op::Upsert(machine("a", "m1", "Pending"))]);
    let e = event(&mut first, "a1").await;
    assert_eq!(
        (e["type"].as_str(), e["name"].as_str()),
        (Some("ADDED"), Some("m1"))
    );

    // A second subscriber of the same document and variables, on another socket: its own
    // snapshot (m1 included), then the shared stream.
    let mut second = connect(&app).await;
    send(&mut second, subscribe("a2", "a")).await;
    assert_eq!(
        opening(&mut second, "a2").await,
        [pair("ADDED", "m0"), pair("ADDED", "m1")]
    );
    // Other variables: another stream.
    let mut other = connect(&app).await;
    send(&mut other, subscribe("b", "b")).await;
    assert_eq!(opening(&mut other, "b").await, [pair("ADDED", "m0")]);

    let (_, metrics) = app.get("/metrics").await;
    assert_eq!(
        gauge(&metrics, "vitistack_subscription_shared_streams"),
        2,
        "{metrics}"
    );
    assert_eq!(
        gauge(
            &metrics,
            "vitistack_subscriptions_active{field=\"resourceChanged\"}"
        ),
        3,
        "{metrics}"
    );
    let renders = gauge(&metrics, "vitistack_subscription_renders_total");

    store.apply(vec![
        Op::Upsert(machine("a", "m2", "Running")),
        Op::Upsert(machine("b", "m1", "Running")),
    ]);
    let a1 = event(&mut first, "a1").await;
    let a2 = event(&mut second, "a2").await;
    assert_eq!(a1, a2, "the same event for the same document and variables");
    assert_eq!(
        (a1["name"].as_str(), a1["namespace"].as_str()),
        (Some("m2"), Some("a"))
    );
    let b = event(&mut other, "b").await;
    assert_eq!(
        (b["name"].as_str(), b["namespace"].as_str()),
        (Some("m1"), Some("b"))
    );
    // Nothing else waits on any socket: one more change per namespace comes next, in order.
    store.apply(vec![Op::Upsert(machine("a", "m3", "Running"))]);
    assert_eq!(event(&mut first, "a1").await["name"], "m3");
    assert_eq!(event(&mut second, "a2").await["name"], "m3");
    store.apply(vec![Op::Upsert(machine("b", "m2", "Running"))]);
    assert_eq!(event(&mut other, "b").await["name"], "m2");
    // Four changes were rendered: once each, not once per subscriber.
    let (_, metrics) = app.get("/metrics").await;
    assert_eq!(
        gauge(&metrics, "vitistack_subscription_renders_total") - renders,
        4,
        "{metrics}"
    );

    // When its last subscriber goes, a shared stream stops.
    drop(first);
    drop(second);
    eventually("the shared stream of namespace a stops", || async {
        let (_, metrics) = app.get("/metrics").await;
        gauge(&metrics, "vitistack_subscription_shared_streams") == 1
    })
    .await;
}
