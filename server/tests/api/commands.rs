//! Every path a user takes through the `vitistack` binary and the README's run command, run as a
//! user runs them: a process, its exit code and what it prints. (A server that stopped serving
//! 20 s after it started passed every in-process test.)

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use crate::process::{Process, bin, fresh_client, run};
use crate::{PATIENCE, TempSqlite};

/// A directory in the temp directory, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> TempDir {
        let dir = std::env::temp_dir().join(format!("vitistack-cmd-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        TempDir(dir)
    }

    fn file(&self, name: &str, text: &str) -> PathBuf {
        let path = self.0.join(name);
        std::fs::write(&path, text).expect("write");
        path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// A MachineClass that the CRD accepts.
const MACHINE_CLASS: &str = "apiVersion: vitistack.io/v1alpha1\nkind: MachineClass\nmetadata:\n  name: small\nspec:\n  displayName: Small\n  enabled: true\n  category: standard\n  machineProviders: [kubevirt]\n  cpu:\n    cores: 2\n  memory:\n    quantity: 4Gi\n";

/// GET on a new connection: the status, or the connection error.
async fn get_fresh(base: &str, path: &str) -> Result<u16, String> {
    fresh_client()
        .get(format!("{base}{path}"))
        .send()
        .await
        .map(|r| r.status().as_u16())
        .map_err(|e| format!("{e:?}"))
}

/// POST a query on a new connection; the whole answer.
async fn query_fresh(base: &str, query: &str, key: Option<&str>) -> Value {
    let mut request = fresh_client()
        .post(format!("{base}/graphql"))
        .json(&json!({ "query": query }));
    if let Some(k) = key {
        request = request.bearer_auth(k);
    }
    request
        .send()
        .await
        .expect("a new connection is accepted")
        .json()
        .await
        .expect("JSON")
}

/// `serve` serves until it is told to stop, however long that is: new connections are still
/// accepted long after `SHUTDOWN_TIMEOUT_SECONDS` (1 s here), which counts only from a signal.
/// Then SIGINT (Ctrl-C in a terminal) and SIGTERM (Kubernetes, systemd) each drain and exit 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_keeps_serving_new_connections_until_a_signal_then_drains_and_exits_0() {
    for signal in ["INT", "TERM"] {
        let db = TempSqlite::default();
        let url = db.url();
        let mut server = Process::start_with(
            &["serve", "--demo"],
            &[
                ("DATABASE_URL", &url),
                ("ANONYMOUS_READ_FROM", "127.0.0.0/8"),
                ("SHUTDOWN_TIMEOUT_SECONDS", "1"),
                ("SHUTDOWN_DELAY_SECONDS", "0"),
            ],
        );
        // Five times the shutdown timeout, each round on a new connection.
        for round in 0..5 {
            assert_eq!(
                get_fresh(&server.base, "/ready").await,
                Ok(200),
                "round {round}"
            );
            let body = query_fresh(&server.base, "{ clusters { totalCount } }", None).await;
            assert!(
                body["data"]["clusters"]["totalCount"].as_i64() > Some(0),
                "round {round}: {body}"
            );
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        assert!(
            !server.logged("closing the listener") && !server.logged("shutdown timeout"),
            "nobody asked it to stop: {:?}",
            server.log()
        );
        server.signal(signal);
        assert_eq!(
            server.exited().await,
            Some(0),
            "SIG{signal}: {:?}",
            server.log()
        );
        assert!(server.logged("shutting down"), "{:?}", server.log());
        assert!(
            server.logged("closing the listener"),
            "drained: {:?}",
            server.log()
        );
        assert!(
            get_fresh(&server.base, "/ready").await.is_err(),
            "nothing listens after the exit"
        );
    }
}

/// The README's run command (`scripts/run.sh`), with the binary these tests built instead of
/// the release build: the demo is served, reads need no key from this machine, the printed admin
/// key signs in, and it still serves new connections past the shutdown timeout; SIGTERM stops
/// it with exit 0. A second dashboard build with nothing changed reuses `web/dist` untouched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readme_run_command_serves_the_demo_until_stopped() {
    let state = TempDir::new();
    let db = TempSqlite::default();
    let mut child = vitistack_testkit::proc::command("bash")
        .arg(repo().join("scripts/run.sh"))
        .env("VITISTACK_BIN", bin())
        .env("VITISTACK_STATE_DIR", &state.0)
        .env("DATABASE_URL", db.url())
        .env("PORT", "0")
        .env("SHUTDOWN_TIMEOUT_SECONDS", "1")
        .env("SHUTDOWN_DELAY_SECONDS", "0")
        .env_remove("API_KEYS_FILE")
        .env_remove("ANONYMOUS_READ_FROM")
        .env_remove("KUBECONFIG")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map(vitistack_testkit::proc::TestChild::from)
        .expect("bash scripts/run.sh");
    let lines = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    for stream in [
        Box::new(child.stdout.take().expect("stdout")) as Box<dyn std::io::Read + Send>,
        Box::new(child.stderr.take().expect("stderr")),
    ] {
        let sink = lines.clone();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(stream)
                .lines()
                .map_while(Result::ok)
            {
                sink.lock().expect("lines").push(line);
            }
        });
    }
    let find = |prefix: &str, end: char| {
        lines.lock().expect("lines").iter().find_map(|l| {
            let at = l.find(prefix)? + prefix.len();
            Some(l[at..].split(end).next().unwrap_or_default().to_string())
        })
    };
    // The dashboard's build may run first when web/dist is not current (minutes on a small
    // machine); in the test command it has just been built.
    let deadline = std::time::Instant::now() + Duration::from_secs(3600);
    let addr = loop {
        if let Some(a) = find("serving GraphQL at http://", '/') {
            break a;
        }
        if let Ok(Some(status)) = child.try_wait() {
            panic!(
                "run.sh exited with {status}: {:?}",
                lines.lock().expect("lines")
            );
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{:?}",
            lines.lock().expect("lines")
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let base = format!("http://{addr}");
    let key = find("use the key ", ' ').expect("run.sh prints the admin key");
    assert!(key.starts_with("vsk_"), "{key}");
    let keys = std::fs::read_to_string(state.0.join("keys")).expect("the keys file");
    assert!(!keys.contains(&key), "only the key's hash is kept");

    for round in 0..5 {
        // Reading needs no key from this machine.
        let body = query_fresh(
            &base,
            "{ me { role anonymous } clusters { totalCount } }",
            None,
        )
        .await;
        assert_eq!(
            body["data"]["me"]["anonymous"], true,
            "round {round}: {body}"
        );
        assert!(
            body["data"]["clusters"]["totalCount"].as_i64() > Some(0),
            "the demo: {body}"
        );
        // The printed key signs in as admin.
        let body = query_fresh(&base, "{ me { role } }", Some(&key)).await;
        assert_eq!(body["data"]["me"]["role"], "ADMIN", "{body}");
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    assert_eq!(get_fresh(&base, "/").await, Ok(200), "the dashboard");

    let status = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(status.success());
    let deadline = std::time::Instant::now() + PATIENCE * 2;
    let code = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s.code();
        }
        assert!(std::time::Instant::now() < deadline, "still running");
        std::thread::sleep(Duration::from_millis(25));
    };
    assert_eq!(code, Some(0), "{:?}", lines.lock().expect("lines"));

    // Started again with nothing changed: the dashboard's build is reused, web/dist untouched
    // (so cargo has nothing to rebuild either).
    let before = tree_times(&repo().join("web/dist"));
    assert!(!before.is_empty(), "run.sh built web/dist");
    let out = std::process::Command::new("bash")
        .arg(repo().join("scripts/build-web.sh"))
        .output()
        .expect("bash scripts/build-web.sh");
    let said = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{said}");
    assert!(said.contains("up to date"), "{said}");
    assert_eq!(
        tree_times(&repo().join("web/dist")),
        before,
        "web/dist untouched"
    );
}

/// Every file under `dir` with its modification time.
fn tree_times(dir: &Path) -> Vec<(PathBuf, std::time::SystemTime)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let path = e.path();
            if path.is_dir() {
                stack.push(path);
            } else if let Ok(m) = e.metadata().and_then(|m| m.modified()) {
                out.push((path, m));
            }
        }
    }
    out.sort();
    out
}

/// `check` validates without a database: accepted objects listed, a refused file named with
/// its document, field path and reason, exit 1 when any file is refused.
#[test]
fn check_lists_what_it_accepts_and_names_what_it_refuses() {
    let dir = TempDir::new();
    let good = dir.file("good.yaml", MACHINE_CLASS);
    let (code, out, err) = run(&["check", good.to_str().expect("utf-8")], &[]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(
        out.contains("ok: ") && out.contains("MachineClass small"),
        "{out}"
    );
    assert!(
        out.contains("1 files, 1 objects accepted, 0 files refused"),
        "{out}"
    );

    let bad = dir.file(
        "bad.yaml",
        &format!(
            "{MACHINE_CLASS}---\n{}",
            MACHINE_CLASS
                .replace("name: small", "name: broken")
                .replace("cores: 2", "cores: many")
        ),
    );
    let (code, out, err) = run(&["check", dir.0.to_str().expect("utf-8")], &[]);
    assert_eq!(code, Some(1), "{out}{err}");
    let refusal = out
        .lines()
        .find(|l| l.starts_with("refused: "))
        .unwrap_or_else(|| panic!("no refusal: {out}"));
    assert!(
        refusal.contains(&bad.display().to_string()),
        "the file: {refusal}"
    );
    assert!(refusal.contains("document 1"), "the document: {refusal}");
    assert!(
        refusal.contains("spec.cpu.cores"),
        "the field path: {refusal}"
    );
    assert!(
        out.contains("2 files, 1 objects accepted, 1 files refused"),
        "{out}"
    );

    let (code, _, err) = run(&["check", "/nonexistent/manifests"], &[]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("/nonexistent/manifests"), "{err}");
}

/// `schema` prints the SDL that is committed as `schema.graphql`.
#[test]
fn schema_prints_the_committed_sdl() {
    let (code, out, err) = run(&["schema"], &[]);
    assert_eq!(code, Some(0), "{err}");
    let committed = std::fs::read_to_string(repo().join("schema.graphql")).expect("schema.graphql");
    assert!(
        out == committed,
        "`vitistack schema` differs from schema.graphql"
    );
}

/// `probe` checks a running server as `helm test` does, and says which step failed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probe_says_what_it_saw() {
    let db = TempSqlite::default();
    let url = db.url();
    let server = Process::start(&[
        ("DATABASE_URL", &url),
        ("ANONYMOUS_READ_FROM", "127.0.0.0/8"),
    ]);
    let (code, out, err) = run(&["probe", &server.base], &[]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains("/ready answers 200"), "{out}");
    assert!(out.contains("/graphql answers version"), "{out}");
    drop(server);
    let (code, out, _) = run(&["probe", "http://127.0.0.1:1"], &[]);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.starts_with("failed: http://127.0.0.1:1/ready"), "{out}");
}

/// `probe --live` (the image's health check) needs no key: it passes on a server that refuses
/// anonymous GraphQL, where the full probe fails; without a URL it asks this machine on `PORT`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probe_live_needs_no_key_and_finds_the_port() {
    let db = TempSqlite::default();
    let url = db.url();
    let server = Process::start(&[("DATABASE_URL", &url)]);
    let (code, out, _) = run(&["probe", &server.base], &[]);
    assert_eq!(code, Some(1), "GraphQL refuses an anonymous probe: {out}");
    assert!(out.contains("/graphql answers 401"), "{out}");
    let port = server.base.rsplit(':').next().expect("port").to_string();
    let (code, out, err) = run(&["probe", "--live"], &[("PORT", &port)]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(
        out.contains(&format!("127.0.0.1:{port}/health/live answers 200")),
        "{out}"
    );
    drop(server);
    let (code, out, _) = run(&["probe", "--live"], &[("PORT", &port)]);
    assert_eq!(code, Some(1), "nothing serves now: {out}");
}

/// Every setting `serve --help` documents is in the README's settings, and the table of the old
/// aggregator's settings names each of its own (supported, renamed, refused or planned).
#[test]
fn the_readme_documents_every_setting_and_every_old_one() {
    let (code, help, _) = run(&["serve", "--help"], &[]);
    assert_eq!(code, Some(0));
    let readme = std::fs::read_to_string(repo().join("README.md")).expect("README");
    let envs: Vec<&str> = help
        .split("[env: ")
        .skip(1)
        .filter_map(|rest| rest.split(['=', ']']).next())
        .collect();
    assert!(envs.len() > 100, "{} settings in --help", envs.len());
    let missing: Vec<&&str> = envs
        .iter()
        .filter(|e| !readme.contains(&format!("`{e}`")) && !readme.contains(&format!("`{e},")))
        .collect();
    assert!(missing.is_empty(), "not in the README: {missing:?}");
    let old_table = readme
        .split("### The old aggregator's settings, one by one")
        .nth(1)
        .and_then(|rest| rest.split("\n## ").next())
        .expect("the old settings' table");
    for old in [
        "PORT",
        "LOG_LEVEL",
        "CACHE_TTL",
        "METRICS_ENABLED",
        "HEALTH_CHECK_INTERVAL",
        "API_TIMEOUT",
        "DATABASE_URL",
        "REDIS_URL",
        "PROXMOX_OPERATOR_ENDPOINT",
        "PROXMOX_OPERATOR_NAMESPACE",
        "PROXMOX_SYNC_INTERVAL",
        "server.readTimeout",
        "server.maxHeaderBytes",
        "db.maxIdleConns",
        "db.connMaxIdleTime",
        "tls.caFile",
        "tls.minVersion",
        "VITISTACKCRDNAME",
        "CONFIGMAPNAME",
        "LOG_COLORIZE",
    ] {
        let row = old_table
            .lines()
            .find(|l| l.starts_with("| ") && l.contains(&format!("`{old}")))
            .unwrap_or_else(|| panic!("{old} is not in the old settings' table"));
        assert!(
            ["supported", "renamed", "refused", "planned"]
                .iter()
                .any(|w| row.contains(w)),
            "{old}: {row}"
        );
    }
}

/// A kubeconfig that cannot be used stops the start with one line naming the file and what is
/// wrong, and exit 1: never a panic (exit 101) or a backtrace.
#[test]
fn a_bad_kubeconfig_is_refused_with_one_line_naming_the_file() {
    let dir = TempDir::new();
    let db = TempSqlite::default();
    let url = db.url();
    let server = "clusters:\n- name: c\n  cluster:\n    server: http://127.0.0.1:1\nusers:\n- name: u\n  user: {}\ncontexts:\n- name: ctx\n  context:\n    cluster: c\n    user: u\n";
    let missing = dir.0.join("missing");
    let no_current = dir.file(
        "no-current",
        &format!("apiVersion: v1\nkind: Config\n{server}"),
    );
    let good = dir.file(
        "good",
        &format!("apiVersion: v1\nkind: Config\n{server}current-context: ctx\n"),
    );
    let not_yaml = dir.file("not-yaml", "clusters: [unclosed\n  - {{{\n");
    let folder = dir.0.join("a-folder");
    std::fs::create_dir_all(&folder).expect("dir");
    let path = |p: &Path| p.to_str().expect("utf-8").to_string();
    let cases: Vec<(String, Option<&str>, &str)> = vec![
        (path(&missing), None, "cannot read it"),
        (path(&folder), None, "cannot read it"),
        (path(&not_yaml), None, "not a kubeconfig (YAML)"),
        (path(&no_current), None, "names no current-context"),
        (
            path(&good),
            Some("elsewhere"),
            "no context named \"elsewhere\"",
        ),
    ];
    for (file, context, what) in cases {
        let mut env = vec![
            ("SOURCE", "kube"),
            ("KUBECONFIG", file.as_str()),
            ("DATABASE_URL", url.as_str()),
            ("PORT", "0"),
            ("BIND_ADDRESS", "127.0.0.1"),
            ("ANONYMOUS_READ_FROM", "127.0.0.0/8"),
            ("LOG_JSON_LOGGING", "true"),
        ];
        if let Some(c) = context {
            env.push(("KUBE_CONTEXT", c));
        }
        let (code, out, err) = run(&["serve"], &env);
        assert_eq!(code, Some(1), "{file}: {out}\n{err}");
        assert!(
            !err.contains("panicked") && !err.contains("backtrace"),
            "{err}"
        );
        let said: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
        assert_eq!(said.len(), 1, "one line: {err}");
        assert!(said[0].starts_with("error: "), "{err}");
        assert!(said[0].contains(&file), "names {file}: {err}");
        assert!(said[0].contains(what), "says {what}: {err}");
        if let Some(c) = context {
            assert!(
                said[0].contains("ctx"),
                "names the contexts it has ({c} is not one): {err}"
            );
        }
    }
}

/// The old operator's `*_OPERATOR_NAMESPACE` and `CACHE_TTL` settings start the server and are
/// said to be unused; a `HEALTH_CHECK_INTERVAL` that is no duration stops it, naming the setting.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn old_operator_namespaces_are_said_unused_and_a_bad_health_check_interval_stops_the_start() {
    let db = TempSqlite::default();
    let url = db.url();
    let server = Process::start(&[
        ("DATABASE_URL", &url),
        ("KEA_OPERATOR_NAMESPACE", "kea-system"),
        ("CACHE_TTL", "5m"),
        ("HEALTH_CHECK_INTERVAL", "200ms"),
    ]);
    let warned: Vec<Value> = server
        .log()
        .into_iter()
        .filter(|l| {
            l["message"]
                .as_str()
                .is_some_and(|m| m.contains("set and not used"))
        })
        .collect();
    let settings: Vec<&str> = warned
        .iter()
        .filter_map(|w| w["setting"].as_str())
        .collect();
    assert_eq!(
        settings,
        ["CACHE_TTL", "KEA_OPERATOR_NAMESPACE"],
        "{warned:?}"
    );
    assert!(warned.iter().all(|w| w["level"] == "warn"), "{warned:?}");
    // The health check runs on its interval: several within a generous wait.
    crate::eventually("three health checks", || async {
        let (_, text) = get_text(&format!("{}/metrics", server.base)).await;
        crate::metric_opt(&text, "vitistack_health_checks_total").is_some_and(|n| n >= 3.0)
    })
    .await;
    drop(server);
    let (code, out, err) = run(
        &["serve"],
        &[
            ("DATABASE_URL", &url),
            ("PORT", "0"),
            ("HEALTH_CHECK_INTERVAL", "0s"),
        ],
    );
    assert_ne!(code, Some(0), "{out}{err}");
    assert!(
        format!("{out}{err}").contains("HEALTH_CHECK_INTERVAL"),
        "{out}{err}"
    );
}

async fn get_text(url: &str) -> (u16, String) {
    let res = reqwest::get(url).await.expect("GET");
    (res.status().as_u16(), res.text().await.expect("text"))
}
