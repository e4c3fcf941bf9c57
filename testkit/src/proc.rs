//! The release server as its own process, watching the in-process Kubernetes API test server, and
//! its memory figures from /proc (Linux), for the benchmarks that measure the server alone.

/// A `VmRSS:`/`VmHWM:`-style field of `/proc/PID/status`, in KiB (0 when unreadable).
pub fn status_kib(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

/// The server (`bin`: the calling package's `env!("CARGO_BIN_EXE_vitistack")`) as a child
/// process: `SOURCE=kube` against the API test server whose kubeconfig is
/// in `dir`, its SQLite file in `dir`, plus `extra` environment. Returns the child and its port.
pub fn spawn_server(
    bin: &str,
    dir: &std::path::Path,
    extra: &[(&str, String)],
) -> (std::process::Child, u16) {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("port");
        l.local_addr().expect("addr").port()
    };
    let mut cmd = std::process::Command::new(bin);
    cmd.arg("serve")
        .env("SOURCE", "kube")
        .env("KUBECONFIG", dir.join("kubeconfig"))
        .env("KUBE_CONTEXT", "test")
        .env("PORT", port.to_string())
        .env("BIND_ADDRESS", "127.0.0.1")
        .env("DATABASE_URL", format!("sqlite://{}/v.db", dir.display()))
        .env("LOG_LEVEL", "warn")
        // The benchmarks measure serving, not the rate limiter; they read as a local client.
        .env("ANONYMOUS_READ_FROM", "127.0.0.0/8")
        .env("RATE_LIMIT", "0")
        .stdout(std::process::Stdio::null());
    for (k, v) in extra {
        cmd.env(k, v);
    }
    (cmd.spawn().expect("start vitistack"), port)
}
