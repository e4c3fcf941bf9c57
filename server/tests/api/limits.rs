//! What one hostile client can make the server do: documents too long in tokens, too many
//! aliases, too complex, too deep, and WebSocket messages too big are refused before they run,
//! over HTTP and over WebSocket alike, each refusal naming its limit and value; a subscription's
//! document is parsed once and shared.

use futures::SinkExt;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

use super::{TestApp, acked, recv, send_json, spawn};

/// POST asking for application/graphql-response+json: (status, body).
async fn post(app: &TestApp, query: &str, variables: Value) -> (u16, Value) {
    let res = app
        .client
        .post(format!("{}/graphql", app.base))
        .header("accept", "application/graphql-response+json")
        .json(&json!({"query": query, "variables": variables}))
        .send()
        .await
        .expect("request");
    (res.status().as_u16(), res.json().await.expect("json"))
}

fn refused(body: &Value, code: &str, words: &[&str]) {
    let e = &body["errors"][0];
    assert_eq!(e["extensions"]["code"], code, "{body}");
    let message = e["message"].as_str().unwrap_or_default();
    for w in words {
        assert!(message.contains(w), "{message} should say {w}");
    }
    assert!(
        body.get("data").is_none(),
        "a refused request has no data: {body}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn costly_documents_are_refused_naming_the_limit() {
    let app = spawn(&[
        "--demo",
        "--max-query-tokens",
        "200",
        "--max-query-aliases",
        "3",
        "--max-query-complexity",
        "1000",
    ])
    .await;
    // Tokens, counted before parsing (this one would not even parse).
    let long = format!("{{ {} }}", "a ".repeat(300));
    let (code, body) = post(&app, &long, json!({})).await;
    assert_eq!(code, 400);
    refused(&body, "TOKEN_LIMIT", &["200", "MAX_QUERY_TOKENS"]);
    // Aliases.
    let (code, body) = post(
        &app,
        "{ a: sequence b: sequence c: sequence d: sequence }",
        json!({}),
    )
    .await;
    assert_eq!(code, 400);
    refused(
        &body,
        "ALIAS_LIMIT",
        &["4 aliased", "limit of 3", "MAX_QUERY_ALIASES"],
    );
    // Complexity: a page of 100 clusters × 100 machines each.
    let nested = "query($n: Int) { clusters(first: $n) { nodes { machines(first: 100) { nodes { name } } } } }";
    let (code, body) = post(&app, nested, json!({"n": 100})).await;
    assert_eq!(code, 400);
    refused(
        &body,
        "COMPLEXITY_LIMIT",
        &[
            "complexity is 20201",
            "limit of 1000",
            "MAX_QUERY_COMPLEXITY",
        ],
    );
    // The same document with a small page is within the limit.
    let (code, body) = post(&app, nested, json!({"n": 2})).await;
    assert_eq!(code, 200, "{body}");
    assert!(body["data"]["clusters"]["nodes"].is_array(), "{body}");
    // Depth.
    let deep = format!(
        "{{ {}sequence{} }}",
        "datacenter { ".repeat(20),
        " }".repeat(20)
    );
    let (code, body) = post(&app, &deep, json!({})).await;
    assert_eq!(code, 400);
    let m = body["errors"][0]["message"].as_str().unwrap_or_default();
    assert!(m.contains("MAX_QUERY_DEPTH"), "{body}");

    // The same limits hold for subscriptions over WebSocket.
    let mut ws = acked(&app).await;
    send_json(
        &mut ws,
        json!({"id": "t", "type": "subscribe", "payload": {"query":
            format!("subscription {{ hostsChanged {{ {} }} }}", "hosts ".repeat(300))}}),
    )
    .await;
    let v = recv(&mut ws).await;
    assert_eq!(
        (v["type"].as_str(), v["id"].as_str()),
        (Some("error"), Some("t")),
        "{v}"
    );
    assert_eq!(v["payload"][0]["extensions"]["code"], "TOKEN_LIMIT", "{v}");
    send_json(
        &mut ws,
        json!({"id": "a", "type": "subscribe", "payload": {"query":
            "subscription { hostsChanged { a: hosts b: hosts c: hosts d: hosts } }"}}),
    )
    .await;
    let v = recv(&mut ws).await;
    assert_eq!(v["payload"][0]["extensions"]["code"], "ALIAS_LIMIT", "{v}");
    send_json(
        &mut ws,
        json!({"id": "c", "type": "subscribe", "payload": {"query":
            "subscription { clusterChanged(id: \"x\") { cluster { machines(first: 500) { nodes { name phase namespace } } } } }"}}),
    )
    .await;
    let v = recv(&mut ws).await;
    assert_eq!(
        v["payload"][0]["extensions"]["code"], "COMPLEXITY_LIMIT",
        "{v}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_websocket_message_above_the_limit_is_refused_with_1009() {
    let app = spawn(&[]).await;
    let mut ws = acked(&app).await;
    // A 5 MB subscribe message (its document padded with a comment).
    let padding = format!("# {}\n", "x".repeat(5 * 1024 * 1024));
    let msg = json!({"id": "big", "type": "subscribe", "payload": {"query":
        format!("{padding}subscription {{ hostsChanged {{ hosts }} }}")}});
    let _ = ws.send(Message::Text(msg.to_string().into())).await;
    let v = recv(&mut ws).await;
    assert_eq!(v["close"], 1009, "{v}");
    assert!(
        v["reason"].as_str().is_some_and(|r| r.contains("1048576")),
        "the reason names the limit: {v}"
    );
}

/// Subscriptions sending the same document share one parsed syntax tree; a document padded
/// with comments (a big text, a small tree) renders its events like any other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscription_document_is_parsed_once_and_shared() {
    let app = spawn(&["--demo"]).await;
    let documents = app.running().executor_documents();
    let query = "subscription { resourceChanged(kinds: [\"Machine\"], namespace: \"limits\") { type name } }";
    let mut sockets = Vec::new();
    for i in 0..5 {
        let mut ws = acked(&app).await;
        send_json(
            &mut ws,
            json!({"id": format!("s{i}"), "type": "subscribe", "payload": {"query": query}}),
        )
        .await;
        sockets.push(ws);
    }
    let padded = format!("# {}\n{query}", "comment ".repeat(100_000));
    let mut padded_ws = acked(&app).await;
    send_json(
        &mut padded_ws,
        json!({"id": "p", "type": "subscribe", "payload": {"query": padded}}),
    )
    .await;
    super::eventually("six subscriptions", || async {
        super::metric_opt(
            &app.get("/metrics").await.1,
            "vitistack_subscriptions_active{field=\"resourceChanged\"}",
        ) == Some(6.0)
    })
    .await;
    assert_eq!(
        documents.len(),
        2,
        "five identical documents share one tree"
    );
    app.running().store.apply(vec![vitistack::store::Op::Upsert(
        vitistack::model::Resource::from_value(
            vitistack::model::Kind::Machine,
            "v1alpha1",
            json!({"metadata": {"name": "m", "namespace": "limits"}, "spec": {"provider": "kubevirt"}}),
        )
        .expect("machine"),
    )]);
    for ws in sockets.iter_mut().chain(std::iter::once(&mut padded_ws)) {
        let v = recv(ws).await;
        assert_eq!(v["payload"]["data"]["resourceChanged"]["name"], "m", "{v}");
    }
}
