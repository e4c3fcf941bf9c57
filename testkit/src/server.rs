//! The release server as a child process for the benchmark tools that measure it from outside:
//! started on a free port with a SQLite file of its own, waited for until `/ready`, killed (and
//! its file removed) when dropped; and WebSockets to it.

use std::time::{Duration, Instant};

use tokio_tungstenite::tungstenite::client::IntoClientRequest;

/// A number from the environment, or `default`.
pub fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A running `vitistack serve --demo`.
pub struct Server {
    /// Its port on 127.0.0.1.
    pub port: u16,
    /// Its process id.
    pub pid: u32,
    /// The binary (VITISTACK_BIN, else this build's).
    pub bin: String,
    child: crate::proc::TestChild,
    dir: std::path::PathBuf,
}

impl Server {
    /// Start `built` (the calling package's `env!("CARGO_BIN_EXE_vitistack")`, or VITISTACK_BIN
    /// when set) with the demo of `clusters` clusters and `extra` environment; wait up to
    /// `ready_within` for `/ready`.
    pub async fn start(
        built: &str,
        tag: &str,
        clusters: u64,
        extra: &[(&str, &str)],
        ready_within: Duration,
    ) -> Self {
        let bin = std::env::var("VITISTACK_BIN").unwrap_or_else(|_| built.to_string());
        let dir = std::env::temp_dir().join(format!("vitistack-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").expect("port");
            l.local_addr().expect("addr").port()
        };
        let child = crate::proc::TestChild::spawn(
            crate::proc::command(&bin)
                .args(["serve", "--demo"])
                .env("SOURCE", "embedded")
                .env("DEMO_CLUSTERS", clusters.to_string())
                .env("PORT", port.to_string())
                .env("BIND_ADDRESS", "127.0.0.1")
                .env("DATABASE_URL", format!("sqlite://{}/v.db", dir.display()))
                .env("LOG_LEVEL", "warn")
                .envs(extra.iter().copied())
                .stdout(std::process::Stdio::null()),
        )
        .expect("start vitistack");
        let pid = child.id();
        let server = Server {
            port,
            pid,
            bin,
            child,
            dir,
        };
        let started = Instant::now();
        loop {
            if let Ok(r) = reqwest::get(format!("http://127.0.0.1:{port}/ready")).await
                && r.status().is_success()
            {
                break;
            }
            assert!(started.elapsed() < ready_within, "never ready");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        server
    }

    /// A graphql-transport-ws WebSocket to it (not yet initialised).
    pub async fn ws(&self) -> GraphqlWs {
        graphql_ws(&format!("http://127.0.0.1:{}", self.port)).await
    }
}

/// A WebSocket client connection.
pub type GraphqlWs =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// A graphql-transport-ws WebSocket to the server at `base` (`http://host:port`), not yet
/// initialised.
pub async fn graphql_ws(base: &str) -> GraphqlWs {
    let mut req = format!("{}/graphql/ws", base.replacen("http", "ws", 1))
        .into_client_request()
        .expect("request");
    req.headers_mut().insert(
        "Sec-WebSocket-Protocol",
        "graphql-transport-ws".parse().expect("header"),
    );
    tokio_tungstenite::connect_async(req).await.expect("ws").0
}

impl Drop for Server {
    fn drop(&mut self) {
        // The child ends with its own drop, after this.
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
