//! The `vitistack` binary as users run it: a process serving on a port of its own, its JSON log
//! read line by line, stopped by a signal.

use std::io::BufRead;
use std::process::{Command, Stdio};

use std::sync::{Arc, Mutex};
use vitistack_testkit::proc::{TestChild, command};

use serde_json::Value;

use crate::PATIENCE;

/// `vitistack serve` running as a child process.
pub struct Process {
    /// Ends with the process (killed when dropped).
    pub child: TestChild,
    /// `http://127.0.0.1:PORT`, read from its "serving GraphQL" line.
    pub base: String,
    /// Its stdout so far, line by line.
    pub lines: Arc<Mutex<Vec<String>>>,
}

/// The path of the binary cargo built for these tests.
pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_vitistack")
}

impl Process {
    /// `vitistack serve` on 127.0.0.1 and a free port, JSON logs at `info`, no rate limit, with
    /// extra environment; returns once it says where it serves.
    pub fn start(env: &[(&str, &str)]) -> Process {
        Process::start_with(&["serve"], env)
    }

    /// The binary with these arguments (a `serve` form) and extra environment.
    pub fn start_with(args: &[&str], env: &[(&str, &str)]) -> Process {
        let mut child = TestChild::spawn(
            command(bin())
                .args(args)
                .env("PORT", "0")
                .env("BIND_ADDRESS", "127.0.0.1")
                .env("LOG_JSON_LOGGING", "true")
                .env("LOG_LEVEL", "info")
                .env("RATE_LIMIT", "0")
                .envs(env.iter().copied())
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit()),
        )
        .expect("start vitistack");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let stdout = child.stdout.take().expect("stdout");
        let sink = lines.clone();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
            {
                sink.lock().expect("lines").push(line);
            }
        });
        let deadline = std::time::Instant::now() + PATIENCE * 4;
        let addr = loop {
            let found = lines.lock().expect("lines").iter().find_map(|l| {
                let v: Value = serde_json::from_str(l).ok()?;
                v["message"]
                    .as_str()?
                    .starts_with("serving GraphQL")
                    .then(|| v["addr"].as_str().map(String::from))?
            });
            if let Some(addr) = found {
                break addr;
            }
            if let Ok(Some(status)) = child.try_wait() {
                panic!(
                    "the server exited with {status} before serving: {:?}",
                    lines.lock().expect("lines")
                );
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the server did not start: {:?}",
                lines.lock().expect("lines")
            );
            std::thread::sleep(std::time::Duration::from_millis(25));
        };
        Process {
            child,
            base: format!("http://{addr}"),
            lines,
        }
    }

    /// The log lines so far, as JSON (every line must be JSON).
    pub fn log(&self) -> Vec<Value> {
        self.lines
            .lock()
            .expect("lines")
            .iter()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
            .collect()
    }

    /// True when a log line's message contains `text`.
    pub fn logged(&self, text: &str) -> bool {
        self.log()
            .iter()
            .any(|l| l["message"].as_str().is_some_and(|m| m.contains(text)))
    }

    /// The request log line with this request id.
    pub fn request_line(&self, id: &str) -> Option<Value> {
        self.log()
            .into_iter()
            .find(|l| l["requestId"] == id && l.get("statusCode").is_some())
    }

    /// Send a signal (`TERM`, `INT`) as a user, a supervisor or Kubernetes would.
    pub fn signal(&self, name: &str) {
        let status = Command::new("kill")
            .args([&format!("-{name}"), &self.child.id().to_string()])
            .status()
            .expect("kill");
        assert!(status.success());
    }

    /// SIGTERM, as Kubernetes stops a pod.
    pub fn terminate(&self) {
        self.signal("TERM");
    }

    /// Wait for the process to exit; its exit code.
    pub async fn exited(&mut self) -> Option<i32> {
        let deadline = tokio::time::Instant::now() + PATIENCE * 2;
        loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                return status.code();
            }
            assert!(tokio::time::Instant::now() < deadline, "still running");
            tokio::time::sleep(std::time::Duration::from_millis(25)).await;
        }
    }
}

/// A client that opens a new connection for every request (none is kept alive), so a listener
/// that stopped accepting cannot hide behind an open connection.
pub fn fresh_client() -> reqwest::Client {
    reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .expect("client")
}

/// Run the binary to completion: exit code, stdout, stderr.
pub fn run(args: &[&str], env: &[(&str, &str)]) -> (Option<i32>, String, String) {
    let out = Command::new(bin())
        .args(args)
        .envs(env.iter().copied())
        .output()
        .expect("run vitistack");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}
