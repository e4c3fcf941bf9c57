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

/// Read until the server closes the connection; what it sent.
async fn until_closed(tcp: &mut TcpStream) -> Vec<u8> {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        match tokio::time::timeout_at(deadline, tcp.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return got,
            Ok(Ok(n)) => got.extend_from_slice(&buf[..n]),
            Err(_) => panic!("the server kept the connection open for {PATIENCE:?}"),
        }
    }
}

/// One whole answer to a request on a kept-alive connection: its status.
async fn exchange(tcp: &mut TcpStream, path: &str) -> u16 {
    tcp.write_all(format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes())
        .await
        .expect("write");
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = tokio::time::timeout(PATIENCE, tcp.read(&mut buf))
            .await
            .expect("an answer")
            .expect("read");
        assert!(
            n > 0,
            "closed before answering: {}",
            String::from_utf8_lossy(&got)
        );
        got.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&got);
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let length: usize = head
                .lines()
                .find_map(|l| {
                    let (k, v) = l.split_once(':')?;
                    k.eq_ignore_ascii_case("content-length")
                        .then(|| v.trim().parse().ok())
                        .flatten()
                })
                .expect("content-length");
            if body.len() >= length {
                return head
                    .split_whitespace()
                    .nth(1)
                    .and_then(|s| s.parse().ok())
                    .expect("status");
            }
        }
    }
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
