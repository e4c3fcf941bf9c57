//! Integration tests: the real server on a random port, loaded with the upstream fixtures and the
//! demo fleet, queried over HTTP like a client would.

mod diagnosis;
mod fixtures;
mod queries;
mod robustness;

use std::path::PathBuf;

use clap::Parser;
use serde_json::{Value, json};
use vitistack::config::ServeConfig;

/// `../shared` next to the project root.
pub fn shared() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared")
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
    pub running: vitistack::app::Running,
}

impl TestApp {
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

    /// POST a query that must fail; returns the first error.
    pub async fn error(&self, query: &str, variables: Value) -> Value {
        let body = self.query(query, variables).await;
        body["errors"][0].clone()
    }
}

impl Drop for TestApp {
    fn drop(&mut self) {
        self.running.abort();
    }
}

/// Start a server with extra arguments (as on the command line), on 127.0.0.1 and a random port.
pub async fn spawn(args: &[&str]) -> TestApp {
    let mut argv = vec!["test", "--log-json", "false"];
    argv.extend_from_slice(args);
    let cfg = Args::try_parse_from(argv).expect("args").cfg;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let running = vitistack::app::start(&cfg, listener).await.expect("start");
    let base = format!("http://{}", running.addr);
    TestApp {
        base,
        client: reqwest::Client::new(),
        running,
    }
}

/// A server with the demo fleet and every upstream fixture.
pub async fn spawn_full() -> TestApp {
    let upstream = shared().join("fixtures/upstream");
    spawn(&["--demo", upstream.to_str().expect("utf-8 path")]).await
}
