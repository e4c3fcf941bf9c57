//! The streaming transports' rules, from a raw client: graphql-transport-ws close codes, keep-alive,
//! the caps (operations per socket, connections per client and in total), the legacy graphql-ws
//! subprotocol, and GraphQL over SSE.

use std::time::Duration;

use futures::SinkExt;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use vitistack::model::{Kind, Resource};
use vitistack::store::Op;

use super::{
    Ws, acked, eventually, metric as counter, open_ws as open, recv, send_json as send, spawn,
};

const SUB: &str =
    "subscription { resourceChanged(kinds: [\"Machine\"], namespace: \"proto\") { type name } }";

fn subscribe(id: &str) -> Value {
    json!({"id": id, "type": "subscribe", "payload": {"query": SUB}})
}

/// SUB with the snapshot first: its `SYNCED` event says the subscription is registered, so a
/// change made after it arrives is delivered (no waiting on the clock).
const SYNCED_SUB: &str = "subscription { resourceChanged(kinds: [\"Machine\"], namespace: \"proto\", snapshot: true) { type name } }";

/// Read messages until the `SYNCED` event of operation `id` (`next`, or `data` for the legacy
/// subprotocol); every message before it must belong to `id` too.
async fn until_synced(ws: &mut Ws, id: &str) {
    loop {
        let v = recv(ws).await;
        if v["type"] == "ka" || v["type"] == "ping" {
            continue; // keep-alives may come at any time
        }
        assert_eq!(v["id"], id, "{v}");
        assert!(v["type"] == "next" || v["type"] == "data", "{v}");
        if v["payload"]["data"]["resourceChanged"]["type"] == "SYNCED" {
            return;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graphql_transport_ws_close_codes() {
    let app = spawn(&["--ws-init-timeout-seconds", "1"]).await;
    let expect_close = |v: Value, code: u16, reason: &str| {
        assert_eq!(v["close"], code, "{v}");
        assert!(
            v["reason"].as_str().is_some_and(|r| r.contains(reason)),
            "{v} should say {reason:?}"
        );
    };

    // 4408: no connection_init in time.
    let mut ws = open(&app, Some("graphql-transport-ws")).await;
    expect_close(
        recv(&mut ws).await,
        4408,
        "Connection initialisation timeout",
    );

    // 4429: a second connection_init.
    let mut ws = acked(&app).await;
    send(&mut ws, json!({"type": "connection_init"})).await;
    expect_close(
        recv(&mut ws).await,
        4429,
        "Too many initialisation requests",
    );

    // 4401: subscribe before the acknowledgement.
    let mut ws = open(&app, Some("graphql-transport-ws")).await;
    send(&mut ws, subscribe("1")).await;
    expect_close(recv(&mut ws).await, 4401, "Unauthorized");

    // 4400: not JSON, an unknown type, a subscribe without id, a binary frame.
    for (bad, reason) in [
        (Message::Text("{not json".into()), "not JSON"),
        (
            Message::Text(json!({"type": "start", "id": "1"}).to_string().into()),
            "unknown type `start`",
        ),
        (
            Message::Text(json!({"type": "subscribe"}).to_string().into()),
            "needs a non-empty string `id`",
        ),
        (Message::Binary(vec![1, 2, 3].into()), "Binary"),
    ] {
        let mut ws = acked(&app).await;
        ws.send(bad).await.expect("send");
        expect_close(recv(&mut ws).await, 4400, reason);
    }

    // 4409: an id that is still running.
    let mut ws = acked(&app).await;
    send(&mut ws, subscribe("dup")).await;
    send(&mut ws, subscribe("dup")).await;
    expect_close(
        recv(&mut ws).await,
        4409,
        "Subscriber for dup already exists",
    );

    // An id may be reused once its operation is complete.
    let mut ws = acked(&app).await;
    send(&mut ws, subscribe("again")).await;
    send(&mut ws, json!({"id": "again", "type": "complete"})).await;
    send(
        &mut ws,
        json!({"id": "again", "type": "subscribe", "payload": {"query": SYNCED_SUB}}),
    )
    .await;
    // Only the second subscription sends a snapshot: once it is synced, it is registered.
    until_synced(&mut ws, "again").await;
    let m = Resource::from_value(
        Kind::Machine,
        "v1alpha1",
        json!({"metadata": {"name": "m1", "namespace": "proto"}, "spec": {}}),
    )
    .expect("machine");
    app.running().store.apply(vec![Op::Upsert(m)]);
    let v = recv(&mut ws).await;
    assert_eq!(
        (v["type"].as_str(), v["id"].as_str()),
        (Some("next"), Some("again")),
        "{v}"
    );

    // 4406: no subprotocol the server speaks.
    let mut ws = open(&app, None).await;
    expect_close(recv(&mut ws).await, 4406, "Subprotocol not acceptable");

    // A document that does not validate is refused with `error` (the socket stays open).
    let mut ws = acked(&app).await;
    send(
        &mut ws,
        json!({"id": "v", "type": "subscribe", "payload": {"query": "subscription { nope }"}}),
    )
    .await;
    let v = recv(&mut ws).await;
    assert_eq!(
        (v["type"].as_str(), v["id"].as_str()),
        (Some("error"), Some("v")),
        "{v}"
    );
    assert!(
        v["payload"][0]["message"]
            .as_str()
            .is_some_and(|m| m.contains("nope")),
        "{v}"
    );
    // A subscription selects exactly one root field (GraphQL's "single root field" rule); the
    // message keeps the client's own positions although the executor runs it as a query.
    for (id, query, says) in [
        (
            "two",
            "subscription Two { a: hostsChanged { hosts } b: hostsChanged { hosts } }",
            "Subscription \"Two\" must select only one top level field.",
        ),
        (
            "tn",
            "subscription { __typename }",
            "Anonymous Subscription must select only one top level field.",
        ),
        (
            "pos",
            "\n  subscription { hostsChanged { nope } }",
            "Unknown field \"nope\" on type \"HostCapacity\".",
        ),
    ] {
        send(
            &mut ws,
            json!({"id": id, "type": "subscribe", "payload": {"query": query}}),
        )
        .await;
        let v = recv(&mut ws).await;
        assert_eq!(
            (v["type"].as_str(), v["id"].as_str()),
            (Some("error"), Some(id)),
            "{v}"
        );
        assert_eq!(v["payload"][0]["message"], says, "{v}");
        if id == "pos" {
            assert_eq!(
                v["payload"][0]["locations"],
                json!([{"line": 2, "column": 33}])
            );
        }
    }
    send(&mut ws, json!({"type": "ping"})).await;
    assert_eq!(recv(&mut ws).await["type"], "pong");

    let metrics = app.get("/metrics").await.1;
    for (code, n) in [
        ("4408", 1),
        ("4429", 1),
        ("4401", 1),
        ("4400", 4),
        ("4409", 1),
        ("4406", 1),
    ] {
        assert_eq!(
            counter(
                &metrics,
                &format!("vitistack_websocket_closes_total{{code=\"{code}\"}}")
            ),
            n,
            "closes with {code}: {metrics}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_pings_and_answers_pings() {
    use futures::{FutureExt, StreamExt};
    // A server that keeps its sockets alive every hour, opened first: the measure of the setting
    // is that its socket has heard nothing while the other one's pings came.
    let hourly = spawn(&["--stream-keepalive-seconds", "3600"]).await;
    let mut quiet = acked(&hourly).await;
    let app = spawn(&["--stream-keepalive-seconds", "1"]).await;
    let mut ws = acked(&app).await;
    send(&mut ws, json!({"type": "ping", "payload": {"t": 1}})).await;
    assert_eq!(recv(&mut ws).await["type"], "pong");
    // Nothing else is happening: the next message is the server's ping.
    assert_eq!(recv(&mut ws).await["type"], "ping");
    send(&mut ws, json!({"type": "pong"})).await;
    assert_eq!(recv(&mut ws).await["type"], "ping", "pings keep coming");
    assert_eq!(recv(&mut ws).await["type"], "ping", "pings keep coming");
    // Whatever the hourly server had sent by now is already readable: nothing.
    let pending = quiet.next().now_or_never();
    assert!(
        pending.is_none(),
        "the hourly server sent {pending:?} while the other sent three pings"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn caps_refuse_with_the_limit_named() {
    let app = spawn(&[
        "--stream-max-operations-per-socket",
        "2",
        "--stream-max-connections-per-client",
        "2",
    ])
    .await;
    let mut ws = acked(&app).await;
    send(&mut ws, subscribe("a")).await;
    send(&mut ws, subscribe("b")).await;
    send(&mut ws, subscribe("c")).await;
    let v = recv(&mut ws).await;
    assert_eq!(
        (v["type"].as_str(), v["id"].as_str()),
        (Some("error"), Some("c")),
        "{v}"
    );
    assert_eq!(v["payload"][0]["extensions"]["code"], "OPERATION_LIMIT");
    assert!(
        v["payload"][0]["message"]
            .as_str()
            .is_some_and(|m| m.contains("limit (STREAM_MAX_OPERATIONS_PER_SOCKET) is 2")),
        "{v}"
    );
    // Completing one makes room.
    send(&mut ws, json!({"id": "a", "type": "complete"})).await;
    send(&mut ws, subscribe("c")).await;
    send(&mut ws, json!({"type": "ping"})).await;
    assert_eq!(
        recv(&mut ws).await["type"],
        "pong",
        "c was accepted silently"
    );

    // Per client: the third connection is closed with 1013 and the limit; SSE is refused with 429.
    let _second = acked(&app).await;
    let mut third = open(&app, Some("graphql-transport-ws")).await;
    let v = recv(&mut third).await;
    assert_eq!(v["close"], 1013, "{v}");
    assert!(
        v["reason"]
            .as_str()
            .is_some_and(|r| r.contains("(STREAM_MAX_CONNECTIONS_PER_CLIENT) is 2")),
        "{v}"
    );
    let res = app
        .client
        .post(format!("{}/graphql/stream", app.base))
        .json(&json!({"query": SUB}))
        .send()
        .await
        .expect("request");
    assert_eq!(res.status().as_u16(), 429);
    let body: Value = res.json().await.expect("json");
    assert_eq!(body["errors"][0]["extensions"]["code"], "CONNECTION_LIMIT");

    // Closing a socket frees its place.
    drop(ws);
    let admitted = parking_lot::Mutex::new(None);
    eventually("a place to be freed", || async {
        let mut ws = open(&app, Some("graphql-transport-ws")).await;
        send(&mut ws, json!({"type": "connection_init"})).await;
        let acked = recv(&mut ws).await["type"] == "connection_ack";
        if acked {
            *admitted.lock() = Some(ws);
        }
        acked
    })
    .await;

    // In total.
    let total = spawn(&["--stream-max-connections", "1"]).await;
    let _one = acked(&total).await;
    let mut two = open(&total, Some("graphql-transport-ws")).await;
    let v = recv(&mut two).await;
    assert_eq!(v["close"], 1013, "{v}");
    assert!(
        v["reason"]
            .as_str()
            .is_some_and(|r| r.contains("limit (STREAM_MAX_CONNECTIONS) is 1")),
        "{v}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn legacy_graphql_ws_subprotocol() {
    let app = spawn(&[]).await;
    let mut ws = open(&app, Some("graphql-ws")).await;
    send(&mut ws, json!({"type": "connection_init", "payload": {}})).await;
    assert_eq!(recv(&mut ws).await["type"], "connection_ack");
    assert_eq!(recv(&mut ws).await["type"], "ka");
    send(
        &mut ws,
        json!({"id": "1", "type": "start", "payload": {"query": SYNCED_SUB}}),
    )
    .await;
    until_synced(&mut ws, "1").await;
    let m = Resource::from_value(
        Kind::Machine,
        "v1alpha1",
        json!({"metadata": {"name": "legacy", "namespace": "proto"}, "spec": {}}),
    )
    .expect("machine");
    app.running().store.apply(vec![Op::Upsert(m)]);
    let v = recv(&mut ws).await;
    assert_eq!(
        (v["type"].as_str(), v["id"].as_str()),
        (Some("data"), Some("1")),
        "{v}"
    );
    assert_eq!(v["payload"]["data"]["resourceChanged"]["name"], "legacy");
    send(&mut ws, json!({"id": "1", "type": "stop"})).await;
    let v = recv(&mut ws).await;
    assert_eq!(
        (v["type"].as_str(), v["id"].as_str()),
        (Some("complete"), Some("1")),
        "{v}"
    );
    // A query runs once: data, then complete.
    send(
        &mut ws,
        json!({"id": "q", "type": "start", "payload": {"query": "{ sequence }"}}),
    )
    .await;
    let v = recv(&mut ws).await;
    assert_eq!(v["type"], "data", "{v}");
    assert!(v["payload"]["data"]["sequence"].as_u64().is_some(), "{v}");
    assert_eq!(recv(&mut ws).await["type"], "complete");
    send(&mut ws, json!({"type": "connection_terminate"})).await;
    assert_eq!(recv(&mut ws).await["close"], 1000);
}

/// Reads SSE events (`event:` name and `data:` JSON) from a streaming response.
pub struct SseReader {
    res: reqwest::Response,
    buf: String,
}

impl SseReader {
    pub fn new(res: reqwest::Response) -> Self {
        SseReader {
            res,
            buf: String::new(),
        }
    }

    pub async fn next(&mut self) -> (String, Value) {
        loop {
            if let Some(end) = self.buf.find("\n\n") {
                let block: String = self.buf.drain(..end + 2).collect();
                let mut event = String::new();
                let mut data = String::new();
                for line in block.lines() {
                    if let Some(v) = line.strip_prefix("event:") {
                        event = v.trim().to_string();
                    } else if let Some(v) = line.strip_prefix("data:") {
                        data.push_str(v.trim_start());
                    }
                }
                if event.is_empty() {
                    continue; // a keep-alive comment
                }
                let value = if data.is_empty() {
                    Value::Null
                } else {
                    serde_json::from_str(&data).expect("json data")
                };
                return (event, value);
            }
            let chunk = tokio::time::timeout(Duration::from_secs(10), self.res.chunk())
                .await
                .expect("an event in time")
                .expect("body")
                .expect("stream open");
            self.buf
                .push_str(std::str::from_utf8(&chunk).expect("utf-8"));
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graphql_over_sse() {
    // Keep-alives every second: a write is how a vanished client is noticed.
    let app = spawn(&["--stream-keepalive-seconds", "1"]).await;
    let sub = "subscription { resourceChanged(kinds: [\"Machine\"], namespace: \"sse\", snapshot: true) { type sequence name } }";
    let res = app
        .client
        .post(format!("{}/graphql/stream", app.base))
        .json(&json!({"query": sub}))
        .send()
        .await
        .expect("request");
    assert_eq!(res.status().as_u16(), 200);
    assert!(
        res.headers()["content-type"]
            .to_str()
            .is_ok_and(|c| c.starts_with("text/event-stream"))
    );
    let mut sse = SseReader::new(res);
    let (event, synced) = sse.next().await;
    assert_eq!(event, "next");
    assert_eq!(synced["data"]["resourceChanged"]["type"], "SYNCED");
    let gauge = counter(&app.get("/metrics").await.1, "vitistack_sse_streams_open");
    assert_eq!(gauge, 1);
    let m = Resource::from_value(
        Kind::Machine,
        "v1alpha1",
        json!({"metadata": {"name": "over-sse", "namespace": "sse"}, "spec": {}}),
    )
    .expect("machine");
    let seq = app.running().store.apply(vec![Op::Upsert(m)])[0].seq;
    let (event, added) = sse.next().await;
    assert_eq!(event, "next");
    assert_eq!(added["data"]["resourceChanged"]["name"], "over-sse");
    assert_eq!(added["data"]["resourceChanged"]["sequence"], seq);
    drop(sse);

    // A query: one `next`, then `complete`; also via `Accept: text/event-stream` on /graphql,
    // and as GET with parameters.
    let res = app
        .client
        .post(format!("{}/graphql", app.base))
        .header("accept", "text/event-stream")
        .json(&json!({"query": "{ sequence }"}))
        .send()
        .await
        .expect("request");
    let mut sse = SseReader::new(res);
    let (event, v) = sse.next().await;
    assert_eq!(
        (event.as_str(), v["data"]["sequence"].as_u64()),
        ("next", Some(seq))
    );
    assert_eq!(sse.next().await.0, "complete");
    let res = app
        .client
        .get(format!(
            "{}/graphql/stream?query=%7B%20sequence%20%7D",
            app.base
        ))
        .send()
        .await
        .expect("request");
    let mut sse = SseReader::new(res);
    assert_eq!(sse.next().await.1["data"]["sequence"], seq);
    assert_eq!(sse.next().await.0, "complete");

    // The stream's gauge returns to zero once the client has gone.
    eventually("the SSE gauge back at 0", || async {
        counter(&app.get("/metrics").await.1, "vitistack_sse_streams_open") == 0
    })
    .await;
}

/// A request to `/graphql/ws` that is not a WebSocket upgrade is refused with the status and the
/// reason of what is missing; an upgrade offering both subprotocols gets the first the server
/// speaks, and the socket works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_that_is_not_an_upgrade_is_refused_with_its_reason() {
    let app = spawn(&[]).await;
    let url = format!("{}/graphql/ws", app.base);
    let upgrade = [
        ("Connection", "keep-alive, Upgrade"),
        ("Upgrade", "WebSocket"),
        ("Sec-WebSocket-Version", "13"),
        ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="),
    ];
    let cases = [
        (None, 400, "Connection header did not include 'upgrade'"),
        (
            Some("Upgrade"),
            400,
            "`Upgrade` header did not include 'websocket'",
        ),
        (
            Some("Sec-WebSocket-Key"),
            400,
            "`Sec-WebSocket-Key` header missing",
        ),
        (
            Some("Sec-WebSocket-Version"),
            400,
            "`Sec-WebSocket-Version` header did not include '13'",
        ),
    ];
    for (missing, status, reason) in cases {
        let mut request = app.client.get(&url);
        for (name, value) in upgrade {
            let drop = match missing {
                None => name == "Connection",
                Some(m) => m == name,
            };
            if !drop {
                request = request.header(name, value);
            }
        }
        let response = request.send().await.expect("response");
        assert_eq!(response.status().as_u16(), status, "without {missing:?}");
        assert_eq!(
            response.text().await.expect("text"),
            reason,
            "without {missing:?}"
        );
    }
    // Both offered, in the other order: the server's first choice.
    let mut ws = open(&app, Some("graphql-ws, graphql-transport-ws")).await;
    send(&mut ws, json!({"type": "connection_init"})).await;
    assert_eq!(recv(&mut ws).await["type"], "connection_ack");
    send(&mut ws, json!({"type": "ping"})).await;
    // Only graphql-transport-ws answers a ping with a pong.
    assert_eq!(recv(&mut ws).await["type"], "pong");
}
