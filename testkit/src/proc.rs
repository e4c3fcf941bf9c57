//! Processes a test or benchmark starts: each ends with it ([`TestChild`], [`command`]); the
//! server as its own process watching the in-process Kubernetes API test server, and its memory
//! figures from /proc (Linux), for the benchmarks that measure the server alone.

/// `program` to run as a test's child: on Linux through util-linux's `setpriv --pdeathsig KILL`,
/// so the kernel kills it when the thread that started it ends, even when the test binary is
/// killed or aborts before any destructor runs (setpriv sets the signal and then executes
/// `program` in its place: same process id, same output). Where setpriv is missing, `program`
/// itself; [`TestChild`]'s drop still ends it.
pub fn command(program: impl AsRef<std::ffi::OsStr>) -> std::process::Command {
    static SETPRIV: std::sync::LazyLock<bool> = std::sync::LazyLock::new(|| {
        std::process::Command::new("setpriv")
            .arg("--help")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    });
    if *SETPRIV {
        let mut c = std::process::Command::new("setpriv");
        c.args(["--pdeathsig", "KILL", "--"]).arg(program);
        c
    } else {
        std::process::Command::new(program)
    }
}

/// A child process that ends with the test that started it: killed (and reaped) when dropped, so
/// a test that fails (and unwinds) leaves no server behind. Start it with [`TestChild::spawn`]
/// from a [`command`].
#[derive(Debug)]
pub struct TestChild(std::process::Child);

impl TestChild {
    /// Start `cmd`.
    pub fn spawn(cmd: &mut std::process::Command) -> std::io::Result<TestChild> {
        cmd.spawn().map(TestChild)
    }

    /// Ask it to stop (SIGTERM) and wait until it has; its exit status.
    pub fn terminate(&mut self) -> std::io::Result<std::process::ExitStatus> {
        let _ = std::process::Command::new("kill")
            .arg(self.0.id().to_string())
            .status();
        self.0.wait()
    }
}

impl From<std::process::Child> for TestChild {
    /// A child started from a [`command`] (`command(..).spawn().map(TestChild::from)`).
    fn from(child: std::process::Child) -> TestChild {
        TestChild(child)
    }
}

impl std::ops::Deref for TestChild {
    type Target = std::process::Child;
    fn deref(&self) -> &std::process::Child {
        &self.0
    }
}

impl std::ops::DerefMut for TestChild {
    fn deref_mut(&mut self) -> &mut std::process::Child {
        &mut self.0
    }
}

impl Drop for TestChild {
    fn drop(&mut self) {
        // Already ended (waited for): nothing to kill, and `kill` says so harmlessly.
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

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
) -> (TestChild, u16) {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("port");
        l.local_addr().expect("addr").port()
    };
    let mut cmd = command(bin);
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
    (TestChild::spawn(&mut cmd).expect("start vitistack"), port)
}
