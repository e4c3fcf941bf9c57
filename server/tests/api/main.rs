//! Integration tests: the real server on a random port, loaded with the upstream fixtures and the
//! demo fleet, queried over HTTP like a client would.

mod applications;
mod cache;
mod commands;
mod connections;
mod dashboard;
mod datacenters;
mod diagnosis;
mod fixtures;
#[macro_use]
mod persistence;
mod auth;
mod history;
mod hostile;
mod hub;
mod legacy;
mod limits;
mod mutations;
mod operations;
mod process;
pub mod protocol;
mod queries;
mod robustness;
mod scopes;
mod search;
mod sessions;
mod subscriptions;
mod timeline;

pub use db_text::table_text;
use vitistack_testkit::db_text;
use vitistack_testkit::documented;

use std::path::PathBuf;

use clap::Parser;
use serde_json::{Value, json};
use vitistack::config::ServeConfig;

/// The repository's manifest fixtures (`fixtures/`: `upstream/` and `invalid/`).
pub fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fixtures")
}

#[derive(Parser)]
struct Args {
    #[command(flatten)]
    cfg: ServeConfig,
}

/// A running server and a client for it.
pub struct TestApp {
    pub base: String,
    pub client: reqwest::Client,
    running: Option<vitistack::app::Running>,
    /// The SQLite file made for this server when the test gave no database.
    sqlite: Option<TempSqlite>,
}

impl TestApp {
    /// The running server.
    pub fn running(&self) -> &vitistack::app::Running {
        self.running.as_ref().expect("running")
    }

    /// Stop gracefully: pending database writes are flushed.
    pub async fn stop(mut self) {
        if let Some(r) = self.running.take() {
            r.stop().await.expect("clean stop");
        }
    }

    /// GET a path; returns status and body text.
    pub async fn get(&self, path: &str) -> (u16, String) {
        let res = self
            .client
            .get(format!("{}{path}", self.base))
            .send()
            .await
            .expect("request");
        (res.status().as_u16(), res.text().await.expect("body"))
    }

    /// POST a query; returns the whole response body.
    pub async fn query(&self, query: &str, variables: Value) -> Value {
        let res = self
            .client
            .post(format!("{}/graphql", self.base))
            .json(&json!({"query": query, "variables": variables}))
            .send()
            .await
            .expect("request");
        res.json().await.expect("json body")
    }

    /// POST a query that must succeed; returns `data`.
    pub async fn data(&self, query: &str, variables: Value) -> Value {
        let body = self.query(query, variables).await;
        assert!(body.get("errors").is_none(), "unexpected errors: {body}");
        body["data"].clone()
    }

    /// POST a query that must succeed, though a datacenter may be away (its
    /// `DATACENTER_UNAVAILABLE` errors are allowed, no other); returns `data`.
    pub async fn data_of_any_state(&self, query: &str, variables: Value) -> Value {
        let body = self.query(query, variables).await;
        let others = body["errors"].as_array().is_some_and(|e| {
            e.iter()
                .any(|e| e["extensions"]["code"] != "DATACENTER_UNAVAILABLE")
        });
        assert!(!others, "unexpected errors: {body}");
        body["data"].clone()
    }

    /// POST a query that must fail; returns the first error.
    pub async fn error(&self, query: &str, variables: Value) -> Value {
        let body = self.query(query, variables).await;
        body["errors"][0].clone()
    }
}

impl Drop for TestApp {
    fn drop(&mut self) {
        if let Some(r) = &self.running {
            r.abort();
        }
        drop(self.sqlite.take());
    }
}

/// A SQLite file in the temp directory, removed (with its WAL files) when dropped.
pub struct TempSqlite(pub PathBuf);

impl Default for TempSqlite {
    fn default() -> Self {
        TempSqlite(std::env::temp_dir().join(format!("vitistack-test-{}.db", uuid::Uuid::new_v4())))
    }
}

impl TempSqlite {
    pub fn url(&self) -> String {
        format!("sqlite://{}", self.0.display())
    }
}

impl Drop for TempSqlite {
    fn drop(&mut self) {
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", self.0.display()));
        }
    }
}

/// Start a server with extra arguments (as on the command line), on 127.0.0.1 and a random port.
/// Without `--database-url` it gets a SQLite file of its own.
pub async fn spawn(args: &[&str]) -> TestApp {
    let mut argv: Vec<String> = vec!["test".into(), "--log-json".into(), "false".into()];
    let sqlite = if args.contains(&"--database-url") {
        None
    } else {
        let db = TempSqlite::default();
        argv.extend(["--database-url".into(), db.url()]);
        Some(db)
    };
    // The tests of other features read as a client on a trusted network does; the tests of
    // authentication say how they authenticate.
    let auth_args = [
        "--api-keys-file",
        "--anonymous-read-from",
        "--auth-kubernetes",
    ];
    if !args.iter().any(|a| auth_args.contains(a)) {
        argv.extend(["--anonymous-read-from".into(), "127.0.0.0/8".into()]);
    }
    if !args.iter().any(|a| a.starts_with("--rate-limit")) {
        argv.extend(["--rate-limit".into(), "0".into()]);
    }
    argv.extend(args.iter().map(|a| a.to_string()));
    let cfg = Args::try_parse_from(argv).expect("args").cfg;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let running = vitistack::app::start(&cfg, listener).await.expect("start");
    let base = format!("http://{}", running.addr);
    TestApp {
        base,
        client: reqwest::Client::new(),
        running: Some(running),
        sqlite,
    }
}

/// The value of one series (its full name with labels, exactly as exposed, e.g.
/// `vitistack_websocket_closes_total{code="4400"}`) in a `/metrics` text; None when absent.
pub fn metric_opt(metrics: &str, series: &str) -> Option<f64> {
    metrics
        .lines()
        .filter(|l| !l.starts_with('#'))
        .find_map(|l| {
            let (name, value) = l.rsplit_once(' ')?;
            (name == series)
                .then(|| value.parse::<f64>().ok())
                .flatten()
        })
}

/// The value of one series as an integer; a series that is missing fails the test.
pub fn metric(metrics: &str, series: &str) -> i64 {
    match metric_opt(metrics, series) {
        Some(v) => v as i64,
        None => panic!("metric {series} is not exposed:\n{metrics}"),
    }
}

/// How long a test waits for something that should happen (generous: a loaded one-core machine
/// must not turn a slow success into a failure).
pub const PATIENCE: std::time::Duration = std::time::Duration::from_secs(30);

/// Wait until `cond` holds (checked every 25 ms), for [`PATIENCE`] at most; `what` names it in
/// the failure.
pub async fn eventually<F, Fut>(what: &str, mut cond: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        if cond().await {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {PATIENCE:?} waiting for {what}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
}

/// A WebSocket client connection.
pub type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// Open `/graphql/ws`, offering `protocol` (none when None).
pub async fn open_ws(app: &TestApp, protocol: Option<&str>) -> Ws {
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let url = format!("{}/graphql/ws", app.base.replacen("http", "ws", 1));
    let mut req = url.into_client_request().expect("request");
    if let Some(p) = protocol {
        req.headers_mut()
            .insert("Sec-WebSocket-Protocol", p.parse().expect("header"));
    }
    tokio_tungstenite::connect_async(req)
        .await
        .expect("connect")
        .0
}

/// Send one JSON message.
pub async fn send_json(ws: &mut Ws, v: Value) {
    use futures::SinkExt;
    ws.send(tokio_tungstenite::tungstenite::Message::Text(
        v.to_string().into(),
    ))
    .await
    .expect("send");
}

/// The next text message of a WebSocket, or the close frame as `{"close": code, "reason": …}`.
pub async fn recv(ws: &mut Ws) -> Value {
    use futures::StreamExt;
    use tokio_tungstenite::tungstenite::Message;
    loop {
        let msg = tokio::time::timeout(PATIENCE, ws.next())
            .await
            .expect("a message in time");
        match msg {
            Some(Ok(Message::Text(t))) => return serde_json::from_str(&t).expect("json"),
            Some(Ok(Message::Close(Some(f)))) => {
                return json!({"close": u16::from(f.code), "reason": f.reason.as_str()});
            }
            Some(Ok(Message::Close(None))) | None | Some(Err(_)) => {
                return json!({"close": null});
            }
            Some(Ok(_)) => continue,
        }
    }
}

pub async fn acked(app: &TestApp) -> Ws {
    let mut ws = open_ws(app, Some("graphql-transport-ws")).await;
    send_json(&mut ws, json!({"type": "connection_init"})).await;
    assert_eq!(recv(&mut ws).await["type"], "connection_ack");
    ws
}

/// A server with the demo fleet and every upstream fixture.
pub async fn spawn_full() -> TestApp {
    let upstream = fixtures().join("upstream");
    spawn(&["--demo", upstream.to_str().expect("utf-8 path")]).await
}
