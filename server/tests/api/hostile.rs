//! Hostile input, with and without a key: each is refused with an error naming what is wrong (and
//! the limit with its value), and the server answers a normal query the same afterwards.
//! (Its memory and latency under the same input are measured by `e2e/load/hostile.sh`.)

use futures::SinkExt;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

use super::{TestApp, recv, send_json, spawn};

const KEY: &str = "hostile-test-key-0123456789";

/// Send `body` (JSON text) to /graphql with or without the key: status and JSON answer.
async fn send(app: &TestApp, key: bool, body: String) -> (u16, Value) {
    if body.len() > 1024 * 1024 {
        return send_big(app, key, &body).await;
    }
    let mut req = app
        .client
        .post(format!("{}/graphql", app.base))
        .header("content-type", "application/json")
        .header("accept", "application/graphql-response+json")
        .body(body);
    if key {
        req = req.bearer_auth(KEY);
    }
    let res = req.send().await.expect("request");
    let status = res.status().as_u16();
    let text = res.text().await.expect("body");
    (
        status,
        serde_json::from_str(&text).unwrap_or_else(|_| json!({"text": text})),
    )
}

/// A body over the limit, as a client that reads the answer while still sending sees it: the
/// server answers (and closes) as soon as the head announces the length, before the body is read.
async fn send_big(app: &TestApp, key: bool, body: &str) -> (u16, Value) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let addr = app.running().addr;
    let mut tcp = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let auth = if key {
        format!("Authorization: Bearer {KEY}\r\n")
    } else {
        String::new()
    };
    let head = format!(
        "POST /graphql HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Accept: application/graphql-response+json\r\n{auth}Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    tcp.write_all(head.as_bytes()).await.expect("head");
    // Some of the body; the rest may be refused unread.
    let _ = tcp.write_all(&body.as_bytes()[..64 * 1024]).await;
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(super::PATIENCE, tcp.read_to_end(&mut answer)).await;
    let text = String::from_utf8_lossy(&answer);
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let json_text = text.split("\r\n\r\n").nth(1).unwrap_or_default();
    (
        status,
        serde_json::from_str(json_text).unwrap_or_else(|_| json!({"text": text})),
    )
}

fn query(q: &str) -> String {
    json!({"query": q}).to_string()
}

fn says(body: &Value, code: &str, words: &[&str]) {
    let e = &body["errors"][0];
    assert_eq!(e["extensions"]["code"], code, "{body}");
    let m = e["message"].as_str().unwrap_or_default();
    for w in words {
        assert!(m.contains(w), "`{m}` should say {w}");
    }
    assert!(
        body.get("data").is_none() || body["data"].is_null(),
        "{body}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_input_is_refused_with_and_without_a_key() {
    let keys = std::env::temp_dir().join(format!("vitistack-keys-{}", uuid::Uuid::new_v4()));
    std::fs::write(&keys, format!("hostile viewer {KEY}\n")).expect("keys");
    let app = spawn(&["--demo", "--api-keys-file", keys.to_str().expect("utf-8")]).await;
    let normal = query("{ infrastructure { clusters { total } } }");
    let (code, before) = send(&app, true, normal.clone()).await;
    assert_eq!(code, 200, "{before}");

    let nested = format!(
        "{{ {}sequence{} }}",
        "datacenter { ".repeat(50),
        " }".repeat(50)
    );
    let aliases = format!(
        "{{ {} }}",
        (0..5000)
            .map(|i| format!("a{i}: sequence"))
            .collect::<Vec<_>>()
            .join(" ")
    );
    let huge = format!(
        "{{\"query\": \"{{ sequence }}\", \"extensions\": {{\"pad\": \"{}\"}}}}",
        "x".repeat(5 * 1024 * 1024)
    );
    let batch = Value::Array(vec![json!({"query": "{ sequence }"}); 1000]).to_string();
    let cases: Vec<(&str, String, u16, &str, Vec<&str>)> = vec![
        (
            "50-level nesting",
            query(&nested),
            400,
            "DEPTH_LIMIT",
            vec!["16 levels", "MAX_QUERY_DEPTH"],
        ),
        (
            "5,000 aliases",
            query(&aliases),
            400,
            "TOKEN_LIMIT",
            vec!["10000", "MAX_QUERY_TOKENS"],
        ),
        (
            "a 5 MB body",
            huge,
            413,
            "BODY_LIMIT",
            vec!["1048576 bytes", "MAX_BODY_BYTES"],
        ),
        (
            "first: 100000",
            query("{ machines(first: 100000) { totalCount } }"),
            200,
            "PAGE_SIZE_LIMIT",
            vec!["500", "MAX_PAGE_SIZE"],
        ),
        (
            "a forged cursor",
            query("{ machines(first: 5, after: \"Zm9yZ2Vk\") { totalCount } }"),
            200,
            "BAD_CURSOR",
            vec!["cursor"],
        ),
        (
            "a forged global id",
            query("{ node(id: \"WyJNYWNoaW5lIiwibnMiXQ\") { id } }"),
            200,
            "BAD_ID",
            vec!["id"],
        ),
        (
            "a 1,000-operation batch",
            batch,
            400,
            "BAD_REQUEST",
            vec!["batches are not accepted"],
        ),
    ];
    for (what, body, status, code, words) in &cases {
        let (got, answer) = send(&app, true, body.clone()).await;
        assert_eq!(got, *status, "{what}: {answer}");
        if *status == 200 {
            // Refused while running (a field's argument): an error with the field's path.
            let e = &answer["errors"][0];
            assert_eq!(e["extensions"]["code"], *code, "{what}: {answer}");
            for w in words {
                assert!(
                    e["message"].as_str().unwrap_or_default().contains(w),
                    "{what}: {answer}"
                );
            }
        } else {
            says(&answer, code, words);
        }
        // Without the key: refused before anything is read (the body limit comes first).
        let (got, answer) = send(&app, false, body.clone()).await;
        if *code == "BODY_LIMIT" {
            assert_eq!(got, 413, "{what}: {answer}");
        } else {
            assert_eq!(got, 401, "{what}: {answer}");
            says(&answer, "UNAUTHENTICATED", &["Authorization: Bearer"]);
        }
    }

    // A 5 MB WebSocket frame: closed with 1009 naming the limit, before or after signing in.
    for init in [false, true] {
        let mut ws = super::open_ws(&app, Some("graphql-transport-ws")).await;
        if init {
            send_json(
                &mut ws,
                json!({"type": "connection_init", "payload": {"token": KEY}}),
            )
            .await;
            assert_eq!(recv(&mut ws).await["type"], "connection_ack");
        }
        let msg = json!({"id": "big", "type": "subscribe", "payload": {"query":
            format!("# {}\n{{ sequence }}", "x".repeat(5 * 1024 * 1024))}});
        let _ = ws.send(Message::Text(msg.to_string().into())).await;
        let v = recv(&mut ws).await;
        assert_eq!(v["close"], 1009, "{v}");
        assert!(
            v["reason"].as_str().is_some_and(|r| r.contains("1048576")),
            "{v}"
        );
    }

    // The server answers as before.
    let (code, after) = send(&app, true, normal).await;
    assert_eq!((code, &after), (200, &before));
    app.stop().await;
    let _ = std::fs::remove_file(&keys);
}
