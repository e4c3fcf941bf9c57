//! The server's connection limits (`SERVER_READ_TIMEOUT`, `SERVER_WRITE_TIMEOUT`,
//! `SERVER_IDLE_TIMEOUT`, `SERVER_MAX_HEADER_BYTES`), seen from raw sockets: a slow head is cut
//! off, an idle kept-alive connection lives until its own limit, a client that stops reading is
//! dropped, an oversized head is answered 431.

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::{PATIENCE, TestApp, eventually, metric, spawn};

async fn closed(app: &TestApp, reason: &str) -> i64 {
    let (_, text) = app.get("/metrics").await;
    metric(
        &text,
        &format!("vitistack_http_connections_closed_total{{reason=\"{reason}\"}}"),
    )
}

/// Read from `tcp` into `got` until `done` holds for what came so far (true) or the server
/// closes the connection (false), within PATIENCE.
async fn read_until(tcp: &mut TcpStream, got: &mut Vec<u8>, done: impl Fn(&[u8]) -> bool) -> bool {
    let mut buf = [0u8; 4096];
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while !done(got) {
        match tokio::time::timeout_at(deadline, tcp.read(&mut buf)).await {
            Ok(Ok(n)) if n > 0 => got.extend_from_slice(&buf[..n]),
            Ok(_) => return false,
            Err(_) => panic!(
                "not seen within {PATIENCE:?}; what came: {}",
                String::from_utf8_lossy(got)
            ),
        }
    }
    true
}

/// Read until the server closes the connection; what it sent.
async fn until_closed(tcp: &mut TcpStream) -> Vec<u8> {
    let mut got = Vec::new();
    read_until(tcp, &mut got, |_| false).await;
    got
}

/// One whole answer to a request on a kept-alive connection: its status.
async fn exchange(tcp: &mut TcpStream, path: &str) -> u16 {
    tcp.write_all(format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes())
        .await
        .expect("write");
    // The head, once the body its content-length announces has come too.
    let whole = |got: &[u8]| {
        let text = String::from_utf8_lossy(got);
        let (head, body) = text.split_once("\r\n\r\n")?;
        let length: usize = head
            .lines()
            .find_map(|l| {
                let (k, v) = l.split_once(':')?;
                k.eq_ignore_ascii_case("content-length")
                    .then(|| v.trim().parse().ok())
                    .flatten()
            })
            .expect("content-length");
        (body.len() >= length).then(|| head.to_string())
    };
    let mut got = Vec::new();
    let answered = read_until(tcp, &mut got, |g| whole(g).is_some()).await;
    assert!(
        answered,
        "closed before answering: {}",
        String::from_utf8_lossy(&got)
    );
    whole(&got)
        .and_then(|head| head.split_whitespace().nth(1).and_then(|s| s.parse().ok()))
        .expect("status")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_head_is_cut_off_at_the_read_limit_while_an_idle_connection_lives_on() {
    let app = spawn(&[
        "--server-read-timeout",
        "300ms",
        "--server-idle-timeout",
        "10m",
    ])
    .await;
    let addr = app.running().addr;
    // A kept-alive connection, answered once, then idle.
    let mut idle = TcpStream::connect(addr).await.expect("connect");
    assert_eq!(exchange(&mut idle, "/health/live").await, 200);
    // A head begun after it and never finished: closed, with nothing sent back.
    let mut slow = TcpStream::connect(addr).await.expect("connect");
    slow.write_all(b"GET /health/live HTTP/1.1\r\nHost: t\r\n")
        .await
        .expect("write");
    assert!(until_closed(&mut slow).await.is_empty());
    assert_eq!(closed(&app, "read_timeout").await, 1);
    // The idle connection has now waited longer than the read limit, and still serves.
    assert_eq!(exchange(&mut idle, "/health/live").await, 200);
    assert_eq!(closed(&app, "idle_timeout").await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_connection_is_closed_at_the_idle_limit() {
    let app = spawn(&[
        "--server-read-timeout",
        "10m",
        "--server-idle-timeout",
        "300ms",
    ])
    .await;
    let mut tcp = TcpStream::connect(app.running().addr)
        .await
        .expect("connect");
    assert_eq!(exchange(&mut tcp, "/health/live").await, 200);
    assert!(until_closed(&mut tcp).await.is_empty());
    eventually("the idle close counted", || async {
        closed(&app, "idle_timeout").await == 1
    })
    .await;
    assert_eq!(closed(&app, "read_timeout").await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_stops_reading_is_dropped_at_the_write_limit() {
    let app = spawn(&["--server-write-timeout", "300ms"]).await;
    let mut tcp = TcpStream::connect(app.running().addr)
        .await
        .expect("connect");
    // Requests for a large document, one after another on one connection, none of whose
    // answers is read: the socket buffers fill and the server's write waits.
    let writer = tokio::spawn(async move {
        let request = b"GET /api/v1/openapi.json HTTP/1.1\r\nHost: t\r\n\r\n";
        for _ in 0..20_000 {
            if tcp.write_all(request).await.is_err() {
                break;
            }
        }
        tcp
    });
    eventually("the stalled connection dropped", || async {
        closed(&app, "write_timeout").await == 1
    })
    .await;
    // Its socket is closed: the client's writes fail (or its reads end) from here on.
    let mut tcp = writer.await.expect("writer");
    let mut rest = Vec::new();
    let _ = tokio::time::timeout(PATIENCE, tcp.read_to_end(&mut rest)).await;
    // Other clients are served as before.
    assert_eq!(app.get("/health/live").await.0, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_head_over_the_limit_is_answered_431() {
    let app = spawn(&["--server-max-header-bytes", "4096"]).await;
    let addr = app.running().addr;
    let big = "x".repeat(8000);
    let mut tcp = TcpStream::connect(addr).await.expect("connect");
    tcp.write_all(
        format!("GET /health/live HTTP/1.1\r\nHost: t\r\nX-Big: {big}\r\n\r\n").as_bytes(),
    )
    .await
    .expect("write");
    let answer = String::from_utf8_lossy(&until_closed(&mut tcp).await).to_string();
    assert!(answer.starts_with("HTTP/1.1 431"), "{answer}");
    // Under the limit: served.
    let mut tcp = TcpStream::connect(addr).await.expect("connect");
    let small = "x".repeat(2000);
    tcp.write_all(
        format!("GET /health/live HTTP/1.1\r\nHost: t\r\nX-Small: {small}\r\n\r\n").as_bytes(),
    )
    .await
    .expect("write");
    assert!(
        String::from_utf8_lossy(&{
            let mut buf = vec![0u8; 64];
            let n = tcp.read(&mut buf).await.expect("read");
            buf.truncate(n);
            buf
        })
        .starts_with("HTTP/1.1 200"),
    );
    // The default is Go's 1 MiB: an 8000-byte header is fine.
    let app = spawn(&[]).await;
    let mut tcp = TcpStream::connect(app.running().addr)
        .await
        .expect("connect");
    tcp.write_all(
        format!("GET /health/live HTTP/1.1\r\nHost: t\r\nX-Big: {big}\r\n\r\n").as_bytes(),
    )
    .await
    .expect("write");
    let mut buf = vec![0u8; 64];
    let n = tcp.read(&mut buf).await.expect("read");
    assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"));
}

/// The events of an SSE answer's body as the client reads them (name, data), chunked as its head
/// says (each chunk's size, its bytes, CRLF; a last chunk of size 0) or, in HTTP/1.0, up to the
/// close; keep-alive comments left out.
fn sse_events(answer: &[u8]) -> (String, Vec<(String, String)>) {
    let text = String::from_utf8_lossy(answer).to_string();
    let (head, mut rest) = text.split_once("\r\n\r\n").expect("a head");
    let head = head.to_ascii_lowercase();
    let body = if head.contains("transfer-encoding: chunked") {
        let mut body = String::new();
        loop {
            let (size, after) = rest.split_once("\r\n").expect("a chunk's size line");
            let size = usize::from_str_radix(size.trim(), 16).expect("a hex chunk size");
            if size == 0 {
                assert_eq!(after, "\r\n", "nothing after the last chunk");
                break;
            }
            body.push_str(&after[..size]);
            assert_eq!(&after[size..size + 2], "\r\n", "a chunk ends with CRLF");
            rest = &after[size + 2..];
        }
        body
    } else {
        rest.to_string()
    };
    let mut events = Vec::new();
    for block in body.split("\n\n").filter(|b| !b.is_empty()) {
        let mut event = (String::new(), String::new());
        for line in block.lines() {
            if let Some(v) = line.strip_prefix("event:") {
                event.0 = v.trim().to_string();
            } else if let Some(v) = line.strip_prefix("data:") {
                event.1.push_str(v.trim_start());
            }
        }
        if !event.0.is_empty() {
            events.push(event);
        }
    }
    (head, events)
}

/// Read until a chunked answer's last chunk has come (within PATIENCE); what was sent.
async fn until_last_chunk(tcp: &mut TcpStream) -> Vec<u8> {
    let mut got = Vec::new();
    let whole = read_until(tcp, &mut got, |g| g.ends_with(b"\r\n0\r\n\r\n")).await;
    assert!(
        whole,
        "closed before the last chunk: {}",
        String::from_utf8_lossy(&got)
    );
    got
}

const SSE_QUERY: &str = "/graphql/stream?query=%7B%20sequence%20%7D";

/// An SSE answer on a kept-alive connection, after another answer, pipelined behind one, and in
/// HTTP/1.0: framed as its head says (chunks, or up to the close), its events whole, and the
/// connection kept for the next request after an HTTP/1.1 stream's last chunk.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_sse_answer_is_framed_as_its_head_says_on_any_connection() {
    let app = spawn(&["--stream-keepalive-seconds", "1"]).await;
    let addr = app.running().addr;
    let seq = app.running().store.snapshot().seq();
    let answered = |(head, events): (String, Vec<(String, String)>)| {
        assert!(head.contains("content-type: text/event-stream"), "{head}");
        assert_eq!(events.len(), 2, "{events:?}");
        assert_eq!(events[0].0, "next");
        let data: serde_json::Value = serde_json::from_str(&events[0].1).expect("json");
        assert_eq!(data["data"]["sequence"], seq);
        assert_eq!(events[1].0, "complete");
        head
    };
    // After an answer on the same connection.
    let mut tcp = TcpStream::connect(addr).await.expect("connect");
    assert_eq!(exchange(&mut tcp, "/health/live").await, 200);
    tcp.write_all(format!("GET {SSE_QUERY} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes())
        .await
        .expect("write");
    let head = answered(sse_events(&until_last_chunk(&mut tcp).await));
    assert!(head.contains("transfer-encoding: chunked"), "{head}");
    assert_eq!(exchange(&mut tcp, "/health/live").await, 200);

    // Pipelined behind another request, both in one write: both answered, in order.
    let mut tcp = TcpStream::connect(addr).await.expect("connect");
    tcp.write_all(
        format!("GET /health/live HTTP/1.1\r\nHost: t\r\n\r\nGET {SSE_QUERY} HTTP/1.1\r\nHost: t\r\n\r\n")
            .as_bytes(),
    )
    .await
    .expect("write");
    let both = until_last_chunk(&mut tcp).await;
    let text = String::from_utf8_lossy(&both).to_string();
    let second = text[1..].find("HTTP/1.1 ").expect("a second answer") + 1;
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    answered(sse_events(&both[second..]));

    // HTTP/1.0: no chunks, the body ends with the connection.
    let mut tcp = TcpStream::connect(addr).await.expect("connect");
    tcp.write_all(format!("GET {SSE_QUERY} HTTP/1.0\r\nHost: t\r\n\r\n").as_bytes())
        .await
        .expect("write");
    let head = answered(sse_events(&until_closed(&mut tcp).await));
    assert!(!head.contains("transfer-encoding"), "{head}");
}

/// A subscription over SSE on a raw connection: keep-alive comments while nothing changes, the
/// change when it comes, and the stream released once the client closes its side.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_sse_subscription_lives_until_its_client_closes() {
    let app = spawn(&["--stream-keepalive-seconds", "1"]).await;
    let sub = "subscription { resourceChanged(kinds: [\"Machine\"], namespace: \"raw\", snapshot: false) { type name } }";
    let body = serde_json::json!({ "query": sub }).to_string();
    let mut tcp = TcpStream::connect(app.running().addr)
        .await
        .expect("connect");
    tcp.write_all(
        format!(
            "POST /graphql/stream HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .as_bytes(),
    )
    .await
    .expect("write");
    let mut got = Vec::new();
    // What came so far, once `done` holds for it (chunks may arrive split).
    let mut seen = async |got: &mut Vec<u8>, done: &dyn Fn(&str) -> bool| {
        let open = read_until(&mut tcp, got, |g| done(&String::from_utf8_lossy(g))).await;
        let text = String::from_utf8_lossy(got).to_string();
        assert!(open, "closed: {text}");
        text
    };
    // Two keep-alive comments, each its own chunk, with nothing changed.
    let text = seen(&mut got, &|t| t.matches("\r\n:\n\n\r\n").count() >= 2).await;
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    eventually("the stream counted", || async {
        metric(&app.get("/metrics").await.1, "vitistack_sse_streams_open") == 1
    })
    .await;
    let m = vitistack::model::Resource::from_value(
        vitistack::model::Kind::Machine,
        "v1alpha1",
        serde_json::json!({"metadata": {"name": "over-raw-sse", "namespace": "raw"}, "spec": {}}),
    )
    .expect("machine");
    app.running()
        .store
        .apply(vec![vitistack::store::Op::Upsert(m)]);
    let text = seen(&mut got, &|t| t.contains("over-raw-sse")).await;
    // Each event is a chunk of its own: after its size line.
    let event = text
        .split("\r\nevent: next\ndata: ")
        .skip(1)
        .find(|e| e.contains("over-raw-sse"))
        .expect("the change as a next event in a chunk");
    let data: serde_json::Value =
        serde_json::from_str(event.split_once('\n').expect("one line").0).expect("json");
    assert_eq!(
        data["data"]["resourceChanged"],
        serde_json::json!({"type": "ADDED", "name": "over-raw-sse"})
    );
    drop(tcp);
    eventually("the stream released", || async {
        metric(&app.get("/metrics").await.1, "vitistack_sse_streams_open") == 0
    })
    .await;
}
