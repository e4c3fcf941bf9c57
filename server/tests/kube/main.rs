//! The kube source against the Kubernetes API test server (`vitistack-testkit`'s `kube_api`): the real
//! server, configured through a kubeconfig like a user would, watching over HTTP.

use vitistack_testkit::db_text;
use vitistack_testkit::documented;
use vitistack_testkit::kube_api;
mod applications;
mod datacenters;
mod mutations;
mod operators;
mod replicas;
mod secrets;
mod tenants;
mod vitistack_status;

use std::time::Duration;

use clap::Parser;
use kube_api::KubeApi;
use serde_json::{Value, json};
use vitistack::config::ServeConfig;
use vitistack::store::ChangeType;

#[derive(Parser)]
struct Args {
    #[command(flatten)]
    cfg: ServeConfig,
}

/// How long a test waits for something that should happen (generous: a loaded one-core machine
/// must not turn a slow success into a failure).
const PATIENCE: Duration = Duration::from_secs(60);

struct Harness {
    api: KubeApi,
    app: Option<vitistack::app::Running>,
    base: String,
    client: reqwest::Client,
    dir: std::path::PathBuf,
}

impl Drop for Harness {
    fn drop(&mut self) {
        if let Some(app) = &self.app {
            app.abort();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Harness {
    /// The API server with `setup` applied, then our server watching it.
    async fn start(setup: impl FnOnce(&KubeApi)) -> Harness {
        let api = KubeApi::start(&kube_api::watched_resources(), Duration::from_millis(200)).await;
        setup(&api);
        let mut h = Harness::unstarted(api);
        h.launch(&[]).await;
        h
    }

    fn unstarted(api: KubeApi) -> Harness {
        let dir = std::env::temp_dir().join(format!("vitistack-kube-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        api.write_kubeconfig(&dir.join("kubeconfig"));
        Harness {
            api,
            app: None,
            base: String::new(),
            client: reqwest::Client::new(),
            dir,
        }
    }

    async fn launch(&mut self, extra: &[&str]) {
        let kubeconfig = self.dir.join("kubeconfig");
        let db = format!("sqlite://{}/v.db", self.dir.display());
        let mut argv = vec![
            "test",
            "--log-json",
            "false",
            "--database-url",
            &db,
            "--kubeconfig",
            kubeconfig.to_str().expect("utf-8"),
            "--kube-context",
            "test",
            "--watch-backoff-min-ms",
            "100",
            "--watch-backoff-max-seconds",
            "1",
            "--absent-kind-retry-seconds",
            "1",
        ];
        if !extra
            .iter()
            .any(|a| a.starts_with("--api-keys-file") || *a == "--auth-kubernetes")
        {
            argv.extend(["--anonymous-read-from", "127.0.0.0/8"]);
        }
        if !extra.iter().any(|a| a.starts_with("--rate-limit")) {
            argv.extend(["--rate-limit", "0"]);
        }
        if !extra
            .iter()
            .any(|a| a.starts_with("--watch-timeout-seconds"))
        {
            argv.extend(["--watch-timeout-seconds", "2"]);
        }
        argv.extend_from_slice(extra);
        let cfg = Args::try_parse_from(argv).expect("args").cfg;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let app = vitistack::app::start(&cfg, listener).await.expect("start");
        self.base = format!("http://{}", app.addr);
        self.app = Some(app);
    }

    fn store(&self) -> &vitistack::store::Store {
        &self.app.as_ref().expect("started").store
    }

    async fn get(&self, path: &str) -> (u16, Value) {
        let res = self
            .client
            .get(format!("{}{path}", self.base))
            .send()
            .await
            .expect("request");
        let code = res.status().as_u16();
        (code, res.json().await.unwrap_or(Value::Null))
    }

    /// The whole answer to a query, errors included.
    async fn answer(&self, query: &str) -> Value {
        self.client
            .post(format!("{}/graphql", self.base))
            .json(&json!({ "query": query }))
            .send()
            .await
            .expect("request")
            .json()
            .await
            .expect("json")
    }

    /// The `/metrics` text.
    async fn metrics(&self) -> String {
        self.client
            .get(format!("{}/metrics", self.base))
            .send()
            .await
            .expect("metrics")
            .text()
            .await
            .expect("text")
    }

    /// The data of a query that must answer without errors.
    async fn data(&self, query: &str) -> Value {
        let body = self.answer(query).await;
        assert!(body.get("errors").is_none(), "{body}");
        body["data"].clone()
    }

    /// List requests the API server received for a resource.
    fn lists(&self, plural: &str) -> usize {
        self.api
            .requests(plural)
            .iter()
            .filter(|r| !r.watch)
            .count()
    }

    /// Watch requests the API server received for a resource.
    fn watches(&self, plural: &str) -> usize {
        self.api.requests(plural).iter().filter(|r| r.watch).count()
    }

    /// Wait until `/ready` answers 200.
    async fn ready(&self) {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        while tokio::time::Instant::now() < deadline {
            if self.get("/ready").await.0 == 200 {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("never ready: {:?}", self.get("/health/operators").await);
    }

    /// Wait until `cond` holds for the store.
    async fn until(&self, what: &str, cond: impl Fn(&vitistack::store::Store) -> bool) {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        while tokio::time::Instant::now() < deadline {
            if cond(self.store()) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!("timed out waiting for {what}");
    }

    /// Wait until `cond` holds for the Machine entry of `sources`.
    async fn until_sources(&self, what: &str, cond: impl Fn(&Value) -> bool) {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            let k = machine_kind(
                &self
                    .data("{ sources { kinds { name stale error } } }")
                    .await,
            );
            if cond(&k) {
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "timed out waiting for {what}: {k}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

fn machine(ns: &str, name: &str, cluster: &str) -> Value {
    json!({"metadata": {"name": name, "namespace": ns, "labels": {"vitistack.io/clusterid": cluster}},
        "spec": {"provider": "kubevirt", "machineClass": "small"}})
}

/// m0, m1, m2 in team-a, cluster c1.
fn three_machines(api: &KubeApi) {
    for i in 0..3 {
        api.apply("machines", machine("team-a", &format!("m{i}"), "c1"));
    }
}

fn machine_count(store: &vitistack::store::Store) -> usize {
    store.snapshot().count(vitistack::model::Kind::Machine)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn initial_sync_then_every_change_in_order() {
    let h = Harness::start(three_machines).await;
    h.ready().await;
    let data = h
        .data("{ machines(first: 10) { totalCount nodes { name uid resourceVersion raw } } sources { mode kinds { name served synced objects lastSyncedAt staleSeconds } } }")
        .await;
    assert_eq!(data["machines"]["totalCount"], 3);
    let first = &data["machines"]["nodes"][0];
    assert_eq!(
        first["uid"], "00000000-0000-4000-8000-000000000001",
        "uid from the API server"
    );
    assert_eq!(
        first["resourceVersion"], "1001",
        "resourceVersion from the API server"
    );
    assert!(
        first["raw"]["metadata"].get("managedFields").is_none(),
        "managedFields dropped"
    );
    assert_eq!(data["sources"]["mode"], "kube");
    let machines = data["sources"]["kinds"]
        .as_array()
        .expect("kinds")
        .iter()
        .find(|k| k["name"] == "Machine")
        .cloned()
        .expect("Machine kind");
    assert_eq!(machines["served"], true);
    assert_eq!(machines["synced"], true);
    assert_eq!(machines["objects"], 3);
    assert!(machines["lastSyncedAt"].is_string());
    assert_eq!(machines["staleSeconds"], 0.0);

    let mut rx = h.store().subscribe();
    h.api.apply("machines", machine("team-a", "m3", "c1"));
    let mut changed = machine("team-a", "m0", "c1");
    changed["metadata"]["labels"]["extra"] = json!("yes");
    h.api.apply("machines", changed);
    h.api.delete("machines", "team-a", "m1");
    let mut seen = Vec::new();
    while seen.len() < 3 {
        let c = tokio::time::timeout(Duration::from_secs(10), rx.recv())
            .await
            .expect("change in time")
            .expect("change");
        seen.push((c.seq, c.change, c.object.name().to_string()));
    }
    assert_eq!(
        seen.iter()
            .map(|(_, t, n)| (*t, n.as_str()))
            .collect::<Vec<_>>(),
        vec![
            (ChangeType::Added, "m3"),
            (ChangeType::Modified, "m0"),
            (ChangeType::Deleted, "m1"),
        ]
    );
    assert!(
        seen.windows(2).all(|w| w[0].0 < w[1].0),
        "sequence increases"
    );
    assert_eq!(machine_count(h.store()), 3);

    // The event log has the three watch events, not the initial list (the cluster as it was).
    let mut events = Value::Null;
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while tokio::time::Instant::now() < deadline {
        events = h
            .data(r#"{ events(filter: {kind: "Machine"}) { nodes { type name } } }"#)
            .await["events"]["nodes"]
            .clone();
        if events.as_array().map_or(0, Vec::len) >= 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        events,
        json!([{"type": "infrastructure.machine.deleted", "name": "m1"},
               {"type": "machine.updated", "name": "m0"},
               {"type": "infrastructure.machine.created", "name": "m3"}])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_list_of_several_pages_keeps_every_object_but_one_the_model_cannot_read() {
    // 1,201 Machines are three pages (500 a page); one more, in the second page, has a spec
    // the model cannot read.
    let h = Harness::start(|api| {
        for i in 0..1201 {
            let mut m = machine("team-a", &format!("m{i:04}"), "c1");
            m["spec"]["tags"] = json!({"row": i.to_string()});
            api.apply("machines", m);
            if i == 700 {
                api.apply(
                    "machines",
                    json!({"metadata": {"name": "m0700-bad", "namespace": "team-a"}, "spec": "unreadable"}),
                );
            }
        }
    })
    .await;
    h.ready().await;
    let data = h
        .data(r#"{ machines(filter: {search: "m1200"}) { totalCount nodes { name raw } } all: machines(first: 1) { totalCount } }"#)
        .await;
    assert_eq!(data["all"]["totalCount"], 1201, "every readable Machine");
    let raw = &data["machines"]["nodes"][0]["raw"];
    assert_eq!(raw["spec"]["tags"], json!({"row": "1200"}), "{raw}");
    assert_eq!(raw["metadata"]["labels"]["vitistack.io/clusterid"], "c1");
    assert!(raw["metadata"].get("managedFields").is_none(), "{raw}");
    assert!(h.lists("machines") >= 3, "listed in pages");
    let metrics = h.metrics().await;
    assert!(
        metrics.lines().any(
            |l| l.starts_with("vitistack_operator_events_processed_total")
                && l.contains("infrastructure.machine.created")
                && l.contains("status=\"error\"")
                && l.ends_with(" 1")
        ),
        "the unreadable Machine counted: {metrics}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gone_410_relists_and_deletes_what_vanished() {
    let h = Harness::start(three_machines).await;
    h.ready().await;
    let lists_before = h.lists("machines");
    // m1 disappears and the history is compacted: the watch cannot resume (410) and only a
    // relist can tell that m1 is gone.
    h.api.apply("machines", machine("team-a", "m9", "c1"));
    h.until("m9 through the watch", |s| machine_count(s) == 4)
        .await;
    // After the client's last version: m2 changes, m1 goes, and the history that would tell
    // is compacted. m1's deletion comes last, so the version compacted to is past any the
    // watch can have reached (had it seen m2's change, a watch from m2's version would resume
    // without a 410).
    let mut m2 = machine("team-a", "m2", "c1");
    m2["spec"]["machineClass"] = json!("large");
    let m2_rv = h.api.apply("machines", m2);
    h.api.delete_silently("machines", "team-a", "m1");
    h.api.compact();
    h.api.drop_watches();
    h.until("m1 deleted after the relist", |s| {
        let snap = s.snapshot();
        snap.get(
            &Default::default(),
            vitistack::model::Kind::Machine,
            "team-a",
            "m1",
        )
        .is_none()
            && snap
                .get(
                    &Default::default(),
                    vitistack::model::Kind::Machine,
                    "team-a",
                    "m9",
                )
                .is_some()
    })
    .await;
    let lists_after = h.lists("machines");
    assert!(lists_after > lists_before, "a relist happened");
    assert_eq!(machine_count(h.store()), 3);
    let snap = h.store().snapshot();
    let m2 = snap
        .get(
            &Default::default(),
            vitistack::model::Kind::Machine,
            "team-a",
            "m2",
        )
        .expect("m2");
    let class = match &**m2 {
        vitistack::model::Resource::Machine(m) => m.spec.machine_class.as_deref(),
        _ => None,
    };
    assert_eq!(
        (m2.meta().resource_version.as_deref(), class),
        (Some(m2_rv.to_string().as_str()), Some("large")),
        "m2's change reached the store"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_connection_resumes_from_the_last_version_without_relisting() {
    let h = Harness::start(|api| {
        api.apply("machines", machine("team-a", "m0", "c1"));
    })
    .await;
    h.ready().await;
    // Another kind changes: the Machine watch hears nothing of it except, through bookmarks,
    // that the cluster's resourceVersion moved on.
    let other_rv = h.api.apply(
        "machineclasses",
        json!({"metadata": {"name": "small"}, "spec": {"cpu": {"cores": 2}, "memory": {"quantity": "4Gi"}}}),
    );
    // Wait until a bookmark has carried the Machine watch past that version (`sources` says
    // where each watch is).
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let data = h
            .data("{ sources { kinds { name resourceVersion } } }")
            .await;
        let at = data["sources"]["kinds"]
            .as_array()
            .and_then(|ks| ks.iter().find(|k| k["name"] == "Machine"))
            .and_then(|k| k["resourceVersion"].as_str())
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0);
        if at >= other_rv {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no bookmark past {other_rv}: {data}"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let lists_before = h.lists("machines");
    let watches_before = h.watches("machines");
    h.api.drop_watches();
    h.api.apply("machines", machine("team-a", "m1", "c1"));
    h.until("m1 after the reconnect", |s| machine_count(s) == 2)
        .await;
    let requests = h.api.requests("machines");
    let lists_after = requests.iter().filter(|r| !r.watch).count();
    let watches: Vec<_> = requests.iter().filter(|r| r.watch).collect();
    assert_eq!(lists_after, lists_before, "resumed, not relisted");
    assert!(watches.len() > watches_before);
    let resumed_at: u64 = watches[watches_before]
        .resource_version
        .as_deref()
        .and_then(|v| v.parse().ok())
        .expect("watch resumed with a resourceVersion");
    assert!(
        watches.iter().all(|w| w.bookmarks),
        "every watch asks for bookmarks"
    );
    assert!(
        resumed_at >= other_rv,
        "resumed from the bookmarked version {other_rv}, not an older one: {resumed_at}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hung_watch_is_detected_and_restarted() {
    let h = Harness::start(|api| {
        api.apply("machines", machine("team-a", "m0", "c1"));
    })
    .await;
    h.ready().await;
    let (lists_before, watches_before) = (h.lists("machines"), h.watches("machines"));
    h.api.hang(true);
    // Any open watch now goes silent (and stays so: a hung connection never sends again); this
    // change is not sent on it. New requests are answered again at once.
    h.api.apply("machines", machine("team-a", "m1", "c1"));
    h.api.hang(false);
    // The silent stream is noticed (timeout 2 s + 5 s margin) and replaced.
    h.until("m1 after the restart", |s| machine_count(s) == 2)
        .await;
    // m1 can only have come through a request made after the hang: a new list or watch.
    let (lists_after, watches_after) = (h.lists("machines"), h.watches("machines"));
    assert!(
        lists_after + watches_after > lists_before + watches_before,
        "m1 arrived through a new request"
    );
    assert!(watches_after > watches_before, "a new watch was opened");
}

/// The Machine entry of a `sources` answer.
fn machine_kind(data: &Value) -> Value {
    data["sources"]["kinds"]
        .as_array()
        .and_then(|ks| ks.iter().find(|k| k["name"] == "Machine"))
        .cloned()
        .unwrap_or(Value::Null)
}

/// An API server whose watches send nothing (`silence(true)`; lists still answer) while a
/// Machine is added: the kind is reported stale in `sources` (with `reason` in its error),
/// `/health/operators`, `/ready` and `/metrics`, and relisted so the Machine arrives while the
/// watches still send nothing; once they send again (`silence(false)`) it is current and ready.
async fn silent_watches_are_reported_stale_and_relisted(
    h: &Harness,
    silence: impl Fn(bool),
    reason: &str,
) {
    let lists_before = h.lists("machines");
    silence(true);
    let started = std::time::Instant::now();
    h.api.apply("machines", machine("team-a", "m1", "c1"));
    // Stale, and said so everywhere, before the relist brings m1.
    let deadline = tokio::time::Instant::now() + PATIENCE;
    let stale = loop {
        let data = h
            .data("{ sources { ready kinds { name stale staleSeconds error lastReceivedAt } } }")
            .await;
        let k = machine_kind(&data);
        if k["stale"] == true {
            assert_eq!(data["sources"]["ready"], false, "{data}");
            break k;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "never stale: {data}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    eprintln!(
        "Machine reported stale {:.1} s after the watches went silent",
        started.elapsed().as_secs_f64()
    );
    let error = stale["error"].as_str().unwrap_or_default();
    assert!(error.contains("sent nothing"), "{stale}");
    // The error names what happened once the watch's own timer saw it (before, the clock alone
    // may have said stale).
    h.until_sources("the error names the silent watch", |k| {
        k["error"].as_str().is_some_and(|e| e.contains(reason))
    })
    .await;
    assert!(stale["staleSeconds"].as_f64() > Some(0.0), "{stale}");
    let (code, body) = h.get("/ready").await;
    assert_eq!(code, 503, "{body}");
    assert!(
        body["staleKinds"]
            .as_array()
            .is_some_and(|ks| ks.iter().any(|k| k == "Machine")),
        "{body}"
    );
    let (code, _) = h.get("/health/operators").await;
    assert_eq!(code, 503);
    let metrics = h.metrics().await;
    assert!(
        metrics.contains("vitistack_source_kind_stale{kind=\"Machine\"} 1"),
        "{metrics}"
    );
    // The watches still send nothing; the relist brings m1 anyway.
    h.until("m1 through a relist while the watches send nothing", |s| {
        machine_count(s) == 2
    })
    .await;
    eprintln!(
        "m1 arrived by a relist {:.1} s after the watches went silent",
        started.elapsed().as_secs_f64()
    );
    let lists_after = h.lists("machines");
    assert!(lists_after > lists_before, "relisted");
    assert_eq!(
        machine_kind(&h.data("{ sources { kinds { name stale } } }").await)["stale"],
        true,
        "still stale: the watches still send nothing"
    );
    // The API server answers again: current, ready.
    silence(false);
    h.ready().await;
    let k = machine_kind(
        &h.data("{ sources { kinds { name stale staleSeconds error } } }")
            .await,
    );
    assert_eq!(k["stale"], false, "{k}");
    assert_eq!(k["staleSeconds"], 0.0, "{k}");
    assert!(k["error"].is_null(), "{k}");
}

/// Watches that hang (open, nothing sent, not even bookmarks, never closed): after two silent
/// watches in a row (timeout 2 s + 1 s margin each) the kind is relisted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watches_that_keep_hanging_are_reported_stale_and_relisted() {
    let h = Harness::start(|api| {
        api.apply("machines", machine("team-a", "m0", "c1"));
    })
    .await;
    h.ready().await;
    silent_watches_are_reported_stale_and_relisted(
        &h,
        |on| h.api.hang(on),
        "stayed open past its timeout",
    )
    .await;
}

/// A stalled API server: its watches deliver no event and no bookmark and close normally at
/// their `timeoutSeconds` (5 s here, bookmarks otherwise only every minute and 2 s before the
/// deadline, as kube-apiserver sends them). A close with nothing sent proves nothing: the kind is
/// stale after the first such watch and relisted after the second, while the stall goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_api_server_closing_watches_with_nothing_sent_is_reported_stale_and_relisted() {
    let api = KubeApi::start(&kube_api::watched_resources(), Duration::from_secs(60)).await;
    api.apply("machines", machine("team-a", "m0", "c1"));
    let mut h = Harness::unstarted(api);
    h.launch(&["--watch-timeout-seconds", "5"]).await;
    h.ready().await;
    // Healthy first: watches that close at their timeout after the deadline bookmark keep the
    // kind current (two have been closed and replaced).
    let opened = h.watches("machines");
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while h.watches("machines") < opened + 2 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "watches are not renewed"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let k = machine_kind(&h.data("{ sources { kinds { name stale error } } }").await);
    assert_eq!(
        k["stale"], false,
        "a healthy watch closed at its timeout: {k}"
    );
    silent_watches_are_reported_stale_and_relisted(
        &h,
        |on| h.api.stall(on),
        "closed without an event or a bookmark",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn absent_resource_is_reported_and_retried_slowly_then_picked_up() {
    let h = Harness::start(|api| {
        api.set_served("etcdbackups", false);
        api.apply("machines", machine("team-a", "m0", "c1"));
    })
    .await;
    // Ready does not wait for a kind that is not installed.
    h.ready().await;
    let (code, body) = h.get("/health/operators").await;
    assert_eq!(body["ready"], true, "{body}");
    // m0 has had no status since its (fixture) creation: nothing acts on it, so kubevirt-operator
    // is reported unhealthy, saying why, and the route answers 503.
    let kubevirt = &body["operators"]["kubevirt"];
    assert_eq!(kubevirt["status"], "unhealthy", "{body}");
    assert_eq!(kubevirt["resources"]["waiting"], 1, "{kubevirt}");
    assert_eq!(code, 503, "{body}");
    let etcd = body["kinds"]
        .as_array()
        .expect("kinds")
        .iter()
        .find(|k| k["name"] == "EtcdBackup")
        .cloned()
        .expect("EtcdBackup listed");
    assert_eq!(etcd["served"], false, "{etcd}");
    assert!(
        etcd["error"]
            .as_str()
            .unwrap_or_default()
            .contains("not served"),
        "{etcd}"
    );
    let data = h.data("{ sources { kinds { name served error } } }").await;
    assert!(
        data["sources"]["kinds"]
            .as_array()
            .expect("kinds")
            .iter()
            .any(|k| k["name"] == "EtcdBackup" && k["served"] == false)
    );
    let (_, metrics) = {
        let res = h
            .client
            .get(format!("{}/metrics", h.base))
            .send()
            .await
            .expect("metrics");
        (res.status(), res.text().await.expect("text"))
    };
    assert!(
        metrics.contains("vitistack_source_kind_served{kind=\"EtcdBackup\"} 0"),
        "{metrics}"
    );

    // Retried slowly (1 s ± 25 % here), not in a tight loop: wait for three tries, however long
    // a loaded machine takes, and look at their spacing (which load can only stretch).
    let deadline = tokio::time::Instant::now() + PATIENCE;
    let tries = loop {
        let tries = h.api.requests("etcdbackups");
        if tries.len() >= 3 {
            break tries;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{} tries in 60 s",
            tries.len()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    for w in tries.windows(2) {
        assert!(
            w[1].at - w[0].at >= Duration::from_millis(700),
            "retries too close: {:?}",
            w[1].at - w[0].at
        );
    }

    // Installing it later is picked up without a restart.
    h.api.set_served("etcdbackups", true);
    h.api.apply(
        "etcdbackups",
        json!({"metadata": {"name": "b1", "namespace": "team-a"}, "spec": {"clusterName": "c1"}}),
    );
    h.until("the EtcdBackup", |s| {
        s.snapshot().count(vitistack::model::Kind::EtcdBackup) == 1
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn not_ready_until_every_served_kind_has_synced() {
    let api = KubeApi::start(&kube_api::watched_resources(), Duration::from_millis(200)).await;
    api.apply("machines", machine("team-a", "m0", "c1"));
    api.hold_lists(true);
    let mut h = Harness::unstarted(api);
    h.launch(&[]).await;
    let (code, body) = h.get("/ready").await;
    assert_eq!(code, 503, "{body}");
    let (code, body) = h.get("/health/operators").await;
    assert_eq!(code, 503, "{body}");
    h.api.hold_lists(false);
    h.ready().await;
    assert_eq!(machine_count(h.store()), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn namespace_scoping_watches_only_the_named_namespaces() {
    let api = KubeApi::start(&kube_api::watched_resources(), Duration::from_millis(200)).await;
    api.apply("machines", machine("team-a", "a0", "c1"));
    api.apply("machines", machine("team-b", "b0", "c2"));
    api.apply("machines", machine("team-c", "c0", "c3"));
    let mut h = Harness::unstarted(api);
    h.launch(&["--watch-namespaces", "team-a,team-b"]).await;
    h.ready().await;
    let snap = h.store().snapshot();
    let names: Vec<_> = snap
        .list(vitistack::model::Kind::Machine)
        .map(|m| m.name().to_string())
        .collect();
    assert_eq!(names, vec!["a0", "b0"]);
    // Cluster-scoped kinds are still watched cluster-wide.
    h.api.apply(
        "machineclasses",
        json!({"metadata": {"name": "small"}, "spec": {"cpu": {"cores": 2}, "memory": {"quantity": "4Gi"}}}),
    );
    h.until("the MachineClass", |s| {
        s.snapshot().count(vitistack::model::Kind::MachineClass) == 1
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hosts_and_vms_from_nodes_and_kubevirt_with_allocation() {
    let h = Harness::start(|api| {
        for (name, role) in [("cp1", "control-plane"), ("w1", "worker"), ("w2", "worker")] {
            api.apply(
                "nodes",
                json!({"metadata": {"name": name, "labels": {format!("node-role.kubernetes.io/{role}"): ""}},
                    "status": {"capacity": {"cpu": "16", "memory": "64Gi"}, "allocatable": {"cpu": "16", "memory": "64Gi"},
                        "conditions": [{"type": "Ready", "status": "True"}],
                        "images": [{"names": ["registry/huge:1"], "sizeBytes": 123}]}}),
            );
        }
        api.apply(
            "machines",
            json!({"metadata": {"name": "prod-w0", "namespace": "t", "labels": {"vitistack.io/clusterid": "prod"}},
                "spec": {"provider": "kubevirt"}}),
        );
        api.apply(
            "virtualmachines",
            json!({"metadata": {"name": "prod-w0", "namespace": "t", "labels": {"vitistack.io/source-machine": "prod-w0"}},
                "spec": {"runStrategy": "Always", "template": {"spec": {"domain": {"cpu": {"sockets": 1, "cores": 4, "threads": 2},
                    "memory": {"guest": "16Gi"}}}}}, "status": {"printableStatus": "Running"}}),
        );
        api.apply(
            "virtualmachineinstances",
            json!({"metadata": {"name": "prod-w0", "namespace": "t", "labels": {"vitistack.io/source-machine": "prod-w0"}},
                "spec": {"domain": {"cpu": {"sockets": 1, "cores": 4, "threads": 2}, "memory": {"guest": "16Gi"}}},
                "status": {"phase": "Running", "nodeName": "w1", "interfaces": [{"name": "default", "ipAddresses": ["10.0.0.7"]}]}}),
        );
        api.apply(
            "virtualmachines",
            json!({"metadata": {"name": "idle", "namespace": "t"}, "spec": {"runStrategy": "Halted"},
                "status": {"printableStatus": "Stopped"}}),
        );
    })
    .await;
    h.ready().await;
    let data = h
        .data(
            "{ hosts(first: 10) { nodes { name roles readiness acceptsVms raw
                 allocation { vcpusUsed vcpusLimit memoryUsedBytes cpuPercent vms }
                 vms { name vcpus memoryBytes ipAddresses membership { clusterId source } vm { runStrategy } } } }
               virtualMachines { nodes { name running } }
               hostCapacity { hosts usableHosts activeVms stoppedVms vcpusUsed vcpusLimit hostsThatCanFail } }",
        )
        .await;
    let hosts = data["hosts"]["nodes"].as_array().expect("hosts");
    let names: Vec<&str> = hosts.iter().filter_map(|h| h["name"].as_str()).collect();
    assert_eq!(
        names,
        vec!["cp1", "w1", "w2"],
        "control-plane hosts are listed"
    );
    let w1 = &hosts[1];
    assert_eq!(w1["readiness"], "READY");
    assert!(
        w1["raw"]["status"].get("images").is_none(),
        "node images dropped"
    );
    assert_eq!(w1["allocation"]["vms"], 1);
    assert_eq!(w1["allocation"]["vcpusUsed"], 8.0, "1 × 4 × 2");
    assert_eq!(w1["allocation"]["vcpusLimit"], 48.0, "16 allocatable × 3");
    assert_eq!(
        w1["allocation"]["memoryUsedBytes"],
        16.0 * 1024.0 * 1024.0 * 1024.0
    );
    let vm = &w1["vms"][0];
    assert_eq!(vm["ipAddresses"], json!(["10.0.0.7"]));
    assert_eq!(
        vm["membership"],
        json!({"clusterId": "prod", "source": "SOURCE_MACHINE"})
    );
    assert_eq!(vm["vm"]["runStrategy"], "Always");
    let vms = data["virtualMachines"]["nodes"].as_array().expect("vms");
    assert_eq!(vms.len(), 2, "the stopped VM is listed");
    assert!(
        vms.iter()
            .any(|v| v["name"] == "idle" && v["running"] == false)
    );
    let cap = &data["hostCapacity"];
    assert_eq!(cap["hosts"], 3);
    assert_eq!(cap["activeVms"], 1);
    assert_eq!(cap["stoppedVms"], 1);
    assert_eq!(cap["hostsThatCanFail"], 2, "{cap}");

    // The VMI moves (live migration): the allocation follows through the watch.
    h.api.apply(
        "virtualmachineinstances",
        json!({"metadata": {"name": "prod-w0", "namespace": "t", "labels": {"vitistack.io/source-machine": "prod-w0"}},
            "spec": {"domain": {"cpu": {"sockets": 1, "cores": 4, "threads": 2}, "memory": {"guest": "16Gi"}}},
            "status": {"phase": "Running", "nodeName": "w2"}}),
    );
    h.until("the VMI on w2", |s| {
        s.snapshot()
            .lookup(&Default::default(), vitistack::store::Idx::VmiByNode, "w2")
            .count()
            == 1
    })
    .await;
    let data = h
        .data("{ hosts { nodes { name allocation { vms } } } }")
        .await;
    let per_host: Vec<i64> = data["hosts"]["nodes"]
        .as_array()
        .expect("hosts")
        .iter()
        .map(|h| h["allocation"]["vms"].as_i64().unwrap_or(-1))
        .collect();
    assert_eq!(per_host, vec![0, 0, 1]);
}

/// The binary as a user runs it: `KUBECONFIG` and `KUBE_CONTEXT` in the environment pick the kube
/// source (and it says so), it becomes ready and follows changes until it is stopped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_picks_the_kube_source_from_kubeconfig_and_follows_changes() {
    let api = KubeApi::start(&kube_api::watched_resources(), Duration::from_millis(200)).await;
    api.apply("machines", machine("team-a", "m0", "c1"));
    let h = Harness::unstarted(api);
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("port")
        .port();
    let log = h.dir.join("log");
    let mut child = vitistack_testkit::proc::command(env!("CARGO_BIN_EXE_vitistack"))
        .env("KUBECONFIG", h.dir.join("kubeconfig"))
        .env("KUBE_CONTEXT", "test")
        .env("PORT", port.to_string())
        .env("BIND_ADDRESS", "127.0.0.1")
        .env("DATABASE_URL", format!("sqlite://{}/v.db", h.dir.display()))
        .env("LOG_JSON_LOGGING", "false")
        .env("ANONYMOUS_READ_FROM", "127.0.0.0/8")
        .stdout(std::fs::File::create(&log).expect("log"))
        .spawn()
        .map(vitistack_testkit::proc::TestChild::from)
        .expect("start the binary");
    let client = reqwest::Client::new();
    let base = format!("http://127.0.0.1:{port}");
    let count = || async {
        let body: Value = client
            .post(format!("{base}/graphql"))
            .json(&json!({"query": "{ machines { totalCount } sources { mode } }"}))
            .send()
            .await
            .ok()?
            .json()
            .await
            .ok()?;
        Some((
            body["data"]["machines"]["totalCount"].as_i64()?,
            body["data"]["sources"]["mode"].as_str()?.to_string(),
        ))
    };
    let mut seen = None;
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while tokio::time::Instant::now() < deadline {
        if let Ok(r) = client.get(format!("{base}/ready")).send().await
            && r.status().is_success()
        {
            seen = count().await;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(seen, Some((1, "kube".to_string())));
    h.api.apply("machines", machine("team-a", "m1", "c1"));
    let mut followed = false;
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while tokio::time::Instant::now() < deadline {
        if count().await.map(|c| c.0) == Some(2) {
            followed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let _ = child.kill();
    let _ = child.wait();
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        followed,
        "the running binary did not follow the change: {text}"
    );
    assert!(
        text.contains("source: Kubernetes watches") && text.contains("KUBECONFIG is set"),
        "{text}"
    );
}

/// NetworkNamespace is served in two versions: when the first (v1alpha1) is not installed the
/// watcher falls back to v1alpha2 instead of reporting the kind absent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kind_whose_first_version_is_not_served_is_watched_in_the_next() {
    let defs: Vec<_> = kube_api::watched_resources()
        .into_iter()
        .map(|mut d| {
            if d.plural == "networknamespaces" {
                d.version = "v1alpha2";
            }
            d
        })
        .collect();
    let api = KubeApi::start(&defs, Duration::from_millis(200)).await;
    api.apply(
        "networknamespaces",
        json!({"metadata": {"name": "net-a", "namespace": "team-a"},
            "spec": {"datacenterIdentifier": "dc1", "supervisorIdentifier": "svr1",
                "networkProvisioning": {"provider": "manual", "manual": {"ipv4CIDR": "10.0.1.0/24", "ipv4Gateway": "10.0.1.1", "vlanId": 100}}}}),
    );
    let mut h = Harness::unstarted(api);
    h.launch(&[]).await;
    h.ready().await;
    let data = h
        .data("{ networkNamespaces { nodes { name apiVersion } } sources { kinds { name apiVersion served synced } } }")
        .await;
    assert_eq!(
        data["networkNamespaces"]["nodes"],
        json!([{"name": "net-a", "apiVersion": "vitistack.io/v1alpha2"}])
    );
    let nn = data["sources"]["kinds"]
        .as_array()
        .expect("kinds")
        .iter()
        .find(|k| k["name"] == "NetworkNamespace")
        .cloned()
        .expect("NetworkNamespace");
    assert_eq!(
        nn,
        json!({"name": "NetworkNamespace", "apiVersion": "vitistack.io/v1alpha2", "served": true, "synced": true})
    );
}

/// Kubernetes mode: the cluster authenticates tokens (TokenReview) and its RBAC gives the role
/// (SubjectAccessReviews); answers are kept for AUTH_CACHE_SECONDS; on every transport.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubernetes_tokens_are_reviewed_and_rbac_gives_the_role() {
    let api = KubeApi::start(&kube_api::watched_resources(), Duration::from_millis(200)).await;
    api.add_user("alice-token", "alice", &[("get", "kubernetesclusters")]);
    api.add_user(
        "bob-token",
        "system:serviceaccount:ops:bob",
        &[
            ("get", "kubernetesclusters"),
            ("patch", "kubernetesclusters"),
        ],
    );
    api.add_user("carol-token", "carol", &[("create", "vitistacks")]);
    api.add_user("dave-token", "dave", &[("list", "pods")]);
    let mut h = Harness::unstarted(api);
    h.launch(&["--auth-kubernetes", "--auth-cache-seconds", "600"])
        .await;
    h.ready().await;
    let ask = |token: Option<&'static str>| {
        let mut req = h
            .client
            .post(format!("{}/graphql", h.base))
            .json(&json!({"query": "{ me { name role anonymous } }"}));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        async move {
            let res = req.send().await.expect("request");
            (
                res.status().as_u16(),
                res.json::<Value>().await.expect("json"),
            )
        }
    };
    for (token, name, role) in [
        ("alice-token", "kubernetes:alice", "VIEWER"),
        (
            "bob-token",
            "kubernetes:system:serviceaccount:ops:bob",
            "OPERATOR",
        ),
        ("carol-token", "kubernetes:carol", "ADMIN"),
    ] {
        let (code, body) = ask(Some(token)).await;
        assert_eq!(code, 200, "{body}");
        assert_eq!(
            body["data"]["me"],
            json!({"name": name, "role": role, "anonymous": false})
        );
    }
    // Authenticated, but RBAC grants no role here: 403 naming what would.
    let (code, body) = ask(Some("dave-token")).await;
    assert_eq!(code, 403, "{body}");
    assert_eq!(body["errors"][0]["extensions"]["code"], "FORBIDDEN");
    let message = body["errors"][0]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("dave")
            && message.contains("get kubernetesclusters.vitistack.io (viewer)"),
        "{message}"
    );
    // Unknown to the cluster, or no token at all: 401.
    assert_eq!(ask(Some("mallory-token")).await.0, 401);
    assert_eq!(ask(None).await.0, 401);

    // Answers are kept: asking again costs the API server nothing.
    let before = h.api.reviews();
    assert_eq!(ask(Some("alice-token")).await.0, 200);
    assert_eq!(h.api.reviews(), before, "a kept answer is not asked again");

    // The same principal on a WebSocket.
    use futures::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message;
    let mut ws = open_ws(&h.base).await;
    let mut send = async |v: Value| {
        ws.send(Message::Text(v.to_string().into()))
            .await
            .expect("send")
    };
    send(json!({"type": "connection_init", "payload": {"Authorization": "Bearer bob-token"}}))
        .await;
    send(json!({"id": "1", "type": "subscribe", "payload": {"query": "{ me { name role } }"}}))
        .await;
    let mut texts = Vec::new();
    while texts.len() < 2 {
        match tokio::time::timeout(PATIENCE, ws.next())
            .await
            .expect("in time")
        {
            Some(Ok(Message::Text(t))) => {
                texts.push(serde_json::from_str::<Value>(&t).expect("json"))
            }
            Some(Ok(_)) => {}
            other => panic!("socket ended: {other:?}"),
        }
    }
    assert_eq!(texts[0]["type"], "connection_ack");
    assert_eq!(
        texts[1]["payload"]["data"]["me"]["role"], "OPERATOR",
        "{}",
        texts[1]
    );
}

/// API_TIMEOUT (the old operator's name for OPERATION_TIMEOUT_SECONDS, a duration) holds on the
/// old REST routes as on GraphQL: a request whose TokenReview the API server does not answer is
/// answered TIMEOUT (504, JSON `{error, code}`) at the limit (a WebSocket closed with 1013, to be
/// tried again), and the server serves on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_timeout_answers_a_rest_request_stuck_on_its_token_review() {
    let api = KubeApi::start(&kube_api::watched_resources(), Duration::from_millis(200)).await;
    api.add_user("alice-token", "alice", &[("get", "kubernetesclusters")]);
    let mut h = Harness::unstarted(api);
    h.launch(&[
        "--auth-kubernetes",
        "--auth-cache-seconds",
        "0",
        "--api-timeout",
        "700ms",
    ])
    .await;
    h.ready().await;
    let get = |path: &'static str| {
        let req = h
            .client
            .get(format!("{}{path}", h.base))
            .bearer_auth("alice-token");
        async move {
            let res = req.send().await.expect("request");
            let status = res.status().as_u16();
            (status, res.json::<Value>().await.expect("json"))
        }
    };
    let (code, body) = get("/api/v1/clusters").await;
    assert_eq!(code, 200, "{body}");

    h.api.hold_reviews(true);
    for path in ["/api/v1/clusters", "/v1/machineproviders"] {
        let (code, body) = tokio::time::timeout(PATIENCE, get(path))
            .await
            .expect("answered at the limit, not left waiting");
        assert_eq!(code, 504, "{path}: {body}");
        assert_eq!(body["code"], "TIMEOUT", "{body}");
        assert_eq!(
            body["error"],
            "the operation ran longer than the limit of 0.7 s (OPERATION_TIMEOUT_SECONDS, API_TIMEOUT) and was stopped"
        );
    }
    // GraphQL under the same limit.
    let res = h
        .client
        .post(format!("{}/graphql", h.base))
        .bearer_auth("alice-token")
        .json(&json!({"query": "{ me { name } }"}))
        .send();
    let res = tokio::time::timeout(PATIENCE, res)
        .await
        .expect("answered")
        .expect("request");
    assert_eq!(res.status().as_u16(), 504);
    let body: Value = res.json().await.expect("json");
    assert_eq!(body["errors"][0]["extensions"]["code"], "TIMEOUT", "{body}");
    // Probes need no review and are not held.
    let live = h.client.get(format!("{}/health/live", h.base)).send();
    assert_eq!(live.await.expect("live").status().as_u16(), 200);
    // A WebSocket whose token cannot be reviewed now is closed with 1013 (try again later), not
    // 4403 (refused: clients do not try again), and the reason says why.
    let init = async || {
        use futures::{SinkExt, StreamExt};
        use tokio_tungstenite::tungstenite::Message;
        let mut ws = open_ws(&h.base).await;
        let init =
            json!({"type": "connection_init", "payload": {"Authorization": "Bearer alice-token"}});
        ws.send(Message::Text(init.to_string().into()))
            .await
            .expect("send");
        loop {
            match tokio::time::timeout(PATIENCE, ws.next())
                .await
                .expect("in time")
            {
                Some(Ok(Message::Text(t))) => return (0, t.to_string()),
                Some(Ok(Message::Close(Some(f)))) => {
                    return (u16::from(f.code), f.reason.to_string());
                }
                Some(Ok(_)) => {}
                other => panic!("socket ended without a close frame: {other:?}"),
            }
        }
    };
    let (code, reason) = init().await;
    assert_eq!(code, 1013, "{reason}");
    assert!(
        reason.starts_with("Try again later: the operation ran longer than the limit of 0.7 s"),
        "{reason}"
    );

    h.api.hold_reviews(false);
    let (code, body) = get("/api/v1/clusters").await;
    assert_eq!(code, 200, "{body}");
    let (code, text) = init().await;
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("connection_ack"), "{text}");
}

/// A graphql-transport-ws connection to the server at `base` (`http://…`), not yet initialised.
async fn open_ws(base: &str) -> vitistack_testkit::server::GraphqlWs {
    vitistack_testkit::server::graphql_ws(base).await
}

/// A manifest of the repository's `fixtures/upstream` as JSON.
fn upstream(path: &str) -> Value {
    let file = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures/upstream")
        .join(path);
    let text = std::fs::read_to_string(&file).expect("fixture");
    serde_yaml::from_str(&text).expect("YAML")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_old_rest_routes_answer_the_documented_shapes_from_the_watched_cluster() {
    use documented::{differences, documented};
    let cluster = upstream("talos-operator/1-kubernetescluster.yaml");
    let cluster_id = cluster["spec"]["data"]["clusterId"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let ns = "team-a".to_string();
    let mut cluster = cluster;
    cluster["metadata"]["namespace"] = json!(ns);
    let h = Harness::start(|api| {
        api.apply("kubernetesclusters", cluster.clone());
        api.apply(
            "machineproviders",
            upstream("kubevirt-operator/kubevirt-machineprovider.yaml"),
        );
        for i in 0..3 {
            api.apply(
                "machines",
                machine(&ns, &format!("{cluster_id}-m{i}"), &cluster_id),
            );
        }
        api.apply(
            "vitistacks",
            json!({"metadata": {"name": "vitistack"}, "spec": {"displayName": "South", "infrastructure": "prod", "region": "south", "zone": "az1"}}),
        );
    })
    .await;
    h.ready().await;
    for route in ["/v1/info/version", "/v1/vitistack/name"] {
        let (code, body) = h.get(route).await;
        assert_eq!(code, 200, "{route}: {body}");
        let mut out = Vec::new();
        differences(route, &documented(route), &body, &mut out);
        assert!(out.is_empty(), "{route}: {out:?}\n{body}");
    }
    assert_eq!(h.get("/v1/vitistack/name").await.1["name"], "vitistack");
    let conforming = |route: &'static str, body: Value| {
        let mut out = Vec::new();
        differences(route, &documented(route), &body, &mut out);
        assert!(out.is_empty(), "{route}: {out:?}\n{body}");
    };

    let (code, clusters) = h.get("/api/v1/clusters").await;
    assert_eq!(code, 200);
    conforming("/api/v1/clusters", clusters.clone());
    let entry = &clusters["clusters"][0];
    assert_eq!(entry["name"], cluster["metadata"]["name"]);
    // The id is the uid the API server gave the object.
    let uid = h
        .store()
        .snapshot()
        .list(vitistack::model::Kind::KubernetesCluster)
        .next()
        .map(|c| c.uid().to_string())
        .expect("the cluster");
    assert_eq!(entry["id"], uid.as_str());
    assert_eq!(entry["nodes"]["total"], 3, "{entry}");
    assert_eq!(entry["operators"]["talos"], true, "{entry}");
    assert_eq!(entry["operators"]["kubeVirt"], true, "{entry}");

    let (code, infra) = h.get("/api/v1/infrastructure").await;
    assert_eq!(code, 200);
    conforming("/api/v1/infrastructure", infra.clone());
    assert_eq!(infra["summary"]["machines"]["total"], 3);

    let (code, health) = h.get("/health").await;
    assert!(code == 200 || code == 503, "{code}");
    conforming("/health", health);

    let res = h
        .client
        .get(format!("{}/v1/machineproviders", h.base))
        .send()
        .await
        .expect("GET");
    assert_eq!(res.headers()["x-total-count"], "1");
    let providers: Value = res.json().await.expect("JSON");
    let uid = providers[0]["metadata"]["uid"].as_str().expect("uid");
    let (code, one) = h.get(&format!("/v1/machineproviders/{uid}")).await;
    assert_eq!(code, 200);
    assert_eq!(one, providers[0]);
    assert_eq!(one["spec"]["providerType"], "kubevirt", "{one}");
    let (code, _) = h.get(&format!("/v1/kubernetesproviders/{uid}")).await;
    assert_eq!(code, 404);
}
