//! The fleet as it was: a simulator run is recorded, the live answers of the pages' queries are
//! kept at 20 moments, the server restarts on the same database, and the same queries asked
//! `at(time:)` those moments answer the same; `changes(from, to)` says what a mutation changed;
//! moments before the oldest one kept are refused with HISTORY_TRIMMED; trimming by size keeps
//! every moment left rebuildable; many distinct moments keep the rebuilt graphs within their
//! bound. On SQLite and on PostgreSQL.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::persistence::{TestDb, start};
use crate::{TestApp, eventually, metric, metric_opt};

on_both_engines!(
    twenty_moments_answer_after_a_restart_as_they_did_live,
    trimming_keeps_every_moment_left_rebuildable_and_refuses_older_ones,
);

/// The pages' queries (overview, a filtered list, a cluster page with its diagnosis, a host
/// page, the applications with their counts), each as an operation whose root fields `at` can wrap. `$ns`/`$name` name a cluster,
/// `$host` a host.
const PAGES: &[(&str, &str)] = &[
    (
        "overview",
        "query Overview { infrastructure { machines { total running failed } \
         clusters { total ready degraded failed inProgress byPhase { value count } byStage { value count } } } \
         clusterSummary { total ready degraded failed inProgress } \
         hostCapacity { hosts readyHosts usableHosts activeVms stoppedVms failedVms pendingVms vcpusUsed vcpusLimit memoryUsedBytes memoryLimitBytes hostsThatCanFail redundancyLimit } \
         machines(first: 1) { totalCount } clusters(first: 1) { totalCount } }",
    ),
    (
        "list",
        "query List { machines(filter: {phase: [\"Running\", \"Failed\"]}, sort: {field: NAME}, first: 100) { totalCount \
         nodes { id name namespace phase phaseState labels { key value } resourceVersion } } }",
    ),
    (
        "cluster",
        "query Cluster($ns: String!, $name: String!) { cluster(namespace: $ns, name: $name) { id name phase \
         clusterId version message controlPlane { replicas } nodePools { name replicas readyReplicas } \
         desiredMachines nodeCounts { total ready } \
         pipeline { stage steps { stage state detail } } \
         diagnosis { ready degraded failed summary stage blockers { stage kind name reason terminal object { __typename id } } warnings { kind name reason } } \
         machines(first: 100) { totalCount nodes { name phase role nodePool } } \
         networkNamespace { name phase } controlPlaneVip { name phase } etcdBackups { name phase } } }",
    ),
    (
        "host",
        "query Host { hosts(first: 3) { nodes { id name readiness acceptsVms cpuCapacity \
         allocation { vcpusUsed memoryUsedBytes } vms { name phase } } } }",
    ),
    (
        "applications",
        "query Apps { applications(first: 100, sort: {field: HEALTH}) { edges { node { id datacenter \
         namespace name revision status updated health reasons chart chartVersion appVersion appUuid \
         readyPods pods { name phase ready restarts waiting } services { name ports } \
         volumes { name requestedBytes } ingresses { name hosts } revisions { revision status } \
         kubernetesCluster { name } } } } \
         keycloak: application(namespace: \"identity\", name: \"keycloak\") { health readyPods pods { restarts } } \
         infrastructure { applications { total healthy degraded failed pending other } } }",
    ),
];

/// `query X($v…) { fields }` as `query X($v…, $at: String!) { at(time: $at) { fields } }`.
fn at_moment(query: &str) -> String {
    let open = query.find('{').expect("a selection");
    let head = &query[..open];
    let body = &query[open + 1..query.rfind('}').expect("its end")];
    let head = match head.find('(') {
        Some(p) => format!("{}($at: String!, {}", &head[..p], &head[p + 1..]),
        None => format!("{}($at: String!) ", head.trim_end()),
    };
    format!("{head}{{ at(time: $at) {{ {body} }} }}")
}

async fn sequence(app: &TestApp) -> i64 {
    app.data("{ sequence }", json!({})).await["sequence"]
        .as_i64()
        .expect("sequence")
}

/// Every page's live answer.
async fn pages(app: &TestApp, vars: &Value) -> Vec<Value> {
    let mut out = Vec::new();
    for (_, q) in PAGES {
        out.push(app.data(q, vars.clone()).await);
    }
    out
}

/// A moment with the pages' live answers at it: the graph did not change while they were asked
/// (the sequence was the same before and after), and the moment is in between, a few
/// milliseconds from either end (history times are in milliseconds).
async fn moment(app: &TestApp, vars: &Value) -> (String, Vec<Value>) {
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let before = sequence(app).await;
        let first = pages(app, vars).await;
        tokio::time::sleep(Duration::from_millis(3)).await;
        let at = jiff::Timestamp::now().to_string();
        tokio::time::sleep(Duration::from_millis(3)).await;
        let second = pages(app, vars).await;
        if sequence(app).await == before && first == second {
            return (at, first);
        }
        assert!(Instant::now() < deadline, "the graph never held still");
    }
}

async fn twenty_moments_answer_after_a_restart_as_they_did_live(db: &TestDb) {
    let app = start(
        db,
        &[
            "--demo",
            "--simulate",
            "--simulate-steps-per-second",
            "4",
            "--history-flush-interval-ms",
            "50",
        ],
    )
    .await;
    let first = app
        .data(
            "{ clusters(first: 1, sort: {field: NAME}) { nodes { namespace name } } hosts(first: 1) { nodes { name } } }",
            json!({}),
        )
        .await;
    let vars = json!({
        "ns": first["clusters"]["nodes"][0]["namespace"],
        "name": first["clusters"]["nodes"][0]["name"],
    });
    let mut kept = Vec::new();
    let mut last = sequence(&app).await;
    while kept.len() < 20 {
        // Let the simulator move the fleet on between moments.
        let deadline = Instant::now() + Duration::from_secs(120);
        while sequence(&app).await < last + 5 {
            assert!(Instant::now() < deadline, "the simulator made no progress");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let (at, answers) = moment(&app, &vars).await;
        last = sequence(&app).await;
        kept.push((at, answers));
    }
    // The moments differ from one another: the test compares something that moved (the
    // machines and the applications both).
    for (page, at_least) in [(1, 5), (4, 3)] {
        let distinct: std::collections::HashSet<String> =
            kept.iter().map(|(_, a)| a[page].to_string()).collect();
        assert!(
            distinct.len() >= at_least,
            "{} distinct answers of {}",
            distinct.len(),
            PAGES[page].0
        );
    }
    assert!(
        kept.iter().all(|(_, a)| a[4]["applications"]["edges"]
            .as_array()
            .is_some_and(|e| !e.is_empty())),
        "the demo's applications are listed at every moment"
    );
    app.stop().await;

    // A new process on the same database, without the simulator or the demo's applications:
    // only the history knows.
    let app = start(db, &["--applications"]).await;
    assert_eq!(
        app.data("{ applications { edges { node { name } } } }", json!({}))
            .await["applications"]["edges"],
        json!([]),
        "nothing feeds the inventory now"
    );
    // Every other moment latest first (each rebuilt from its checkpoint: no earlier graph is
    // built yet), then the rest earliest first (each carried forward from the built one before
    // it): both ways of rebuilding answer as live did.
    let order = (0..kept.len())
        .rev()
        .filter(|i| i % 2 == 1)
        .chain((0..kept.len()).filter(|i| i % 2 == 0));
    for (at, live) in order.map(|i| &kept[i]) {
        for ((name, q), live) in PAGES.iter().zip(live) {
            let mut v = vars.clone();
            v["at"] = json!(at);
            let past = app.data(&at_moment(q), v).await;
            assert_eq!(&past["at"], live, "{name} at {at}");
        }
    }
    // Both ways were taken: the moments asked latest first from their checkpoints, most of the
    // others carried forward (one whose changes since the one before outnumber a third of the fleet
    // is rebuilt from its checkpoint instead).
    let m = app.get("/metrics").await.1;
    let how = |h: &str| {
        metric(
            &m,
            &format!("vitistack_history_past_moments_total{{how=\"{h}\"}}"),
        )
    };
    let (forward, checkpoint) = (how("forward"), how("checkpoint"));
    assert_eq!(forward + checkpoint, 20, "each moment built once:\n{m}");
    assert!(
        forward >= 5 && checkpoint >= 11,
        "forward {forward}, checkpoint {checkpoint}"
    );
    // The events at a moment are those that had happened by then: the newest is at or before
    // it, while the log holds later ones (the simulator went on after it).
    let (mid, _) = &kept[10];
    let newest = |v: &Value| {
        v["edges"][0]["node"]["at"]
            .as_str()
            .map(ms)
            .expect("an event")
    };
    let then = app
        .data(
            "query($at: String!) { at(time: $at) { events(first: 1) { edges { node { at } } } } }",
            json!({"at": mid}),
        )
        .await;
    let now = app
        .data("{ events(first: 1) { edges { node { at } } } }", json!({}))
        .await;
    assert!(newest(&then["at"]["events"]) <= ms(mid), "{then}");
    assert!(newest(&now["events"]) > ms(mid), "{now}");
    // The oldest moment kept is named, and every kept moment is after it.
    let named = app.data("{ oldestMoment }", json!({})).await["oldestMoment"]
        .as_str()
        .map(ms)
        .expect("an oldest moment");
    assert!(named <= ms(&kept[0].0), "{named}");
    // Before the oldest moment kept: refused, naming that moment.
    let e = app
        .error(
            &at_moment(PAGES[0].1),
            json!({"at": "2001-01-01T00:00:00Z"}),
        )
        .await;
    assert_eq!(e["extensions"]["code"], "HISTORY_TRIMMED", "{e}");
    let oldest = e["extensions"]["oldest"]
        .as_str()
        .expect("the oldest moment");
    assert!(oldest > "2001" && oldest <= kept[0].0.as_str(), "{oldest}");
    assert_eq!(ms(oldest), named);
    app.stop().await;
}

/// A cluster's changed annotation shows in `changes`, field by field; asking 100 distinct moments
/// keeps the rebuilt graphs within the cache's bound; trimming by age and by size drops the oldest
/// moments (refused from then on, naming the new oldest one) and keeps the rest answering as
/// before.
async fn trimming_keeps_every_moment_left_rebuildable_and_refuses_older_ones(db: &TestDb) {
    let args = [
        "--history-flush-interval-ms",
        "20",
        "--history-cache-mb",
        "8",
    ];
    let mut first_args = vec!["--demo"];
    first_args.extend_from_slice(&args);
    let app = start(db, &first_args).await;
    let cluster = app
        .data(
            "{ clusters(first: 1, sort: {field: NAME}) { nodes { id namespace name } } }",
            json!({}),
        )
        .await["clusters"]["nodes"][0]
        .clone();
    let mut moments = vec![wait_for_history(&app).await];
    toggle(&app, &cluster, 6, &mut moments).await;
    let changes = app
        .data(
            "query($from: String!, $to: String!) { changes(from: $from, to: $to, filter: {kinds: [\"KubernetesCluster\"]}) { \
             totalCount datacenters { datacenter changed } objects { change kind name fields { path before after } } } }",
            json!({"from": moments[0], "to": moments[1]}),
        )
        .await;
    let objects = changes["changes"]["objects"].as_array().expect("objects");
    assert!(
        objects.iter().any(|o| o["name"] == cluster["name"]
            && o["change"] == "CHANGED"
            && o["fields"].as_array().is_some_and(|f| f
                .iter()
                .any(|f| f["path"] == "/metadata/annotations/example.com~1step"))),
        "{changes}"
    );
    assert_eq!(
        changes["changes"]["datacenters"][0]["changed"],
        json!(objects.len()),
        "{changes}"
    );

    // 100 distinct moments: every one answers, the kept graphs stay within 8 MiB.
    let t0 = jiff::Timestamp::now();
    for i in 0..100 {
        let at = t0 - jiff::SignedDuration::from_millis(i * 37);
        let r = app
            .query(&at_moment(PAGES[0].1), json!({"at": at.to_string()}))
            .await;
        assert!(
            r.get("errors").is_none() || r["errors"][0]["extensions"]["code"] == "HISTORY_TRIMMED",
            "{r}"
        );
        let (_, bytes) = app.running().history.past.held();
        assert!(bytes <= 8 << 20, "{bytes} bytes of past graphs held");
    }
    app.stop().await;
    // A restart starts the timeline again from a checkpoint; more changes after it.
    let app = start(db, &args).await;
    let restarted = moments.len();
    // The restart's checkpoint is written before the first moment after it is taken (a moment
    // just before it answers as now does, nothing having changed).
    eventually("the restart's checkpoint", || async {
        let m = app.get("/metrics").await.1;
        metric_opt(&m, "vitistack_history_timeline_rows_total{row=\"restart\"}").unwrap_or(0.0)
            >= 1.0
    })
    .await;
    moments.push(wait_for_history(&app).await);
    toggle(&app, &cluster, 4, &mut moments).await;
    let counts = "query($at: String!) { at(time: $at) { clusters(first: 500) { nodes { name resourceVersion annotations { key value } } } } }";
    let mut answers = Vec::new();
    for m in &moments {
        answers.push(app.data(counts, json!({"at": m})).await);
    }
    let history = &app.running().history;
    let db_handle = history.db().expect("database");
    // By age: moments before the restart are older than the retention.
    let now = vitistack::clock::now_ms();
    let since_restart = now - ms(&moments[restarted]);
    let by_age = vitistack::history::writer::HistorySettings {
        retention: Duration::from_millis(since_restart as u64),
        max_bytes: 0,
        ..history.settings.clone()
    };
    let oldest = vitistack::history::timeline::read::trim(&db_handle, &by_age, now)
        .await
        .expect("trim")
        .expect("an oldest moment");
    assert!(oldest > ms(&moments[restarted - 1]) && oldest <= ms(&moments[restarted]));
    // By size: one byte keeps the newest checkpoint only, which is the restart's.
    let by_size = vitistack::history::writer::HistorySettings {
        max_bytes: 1,
        ..history.settings.clone()
    };
    let after_size = vitistack::history::timeline::read::trim(&db_handle, &by_size, now)
        .await
        .expect("trim");
    assert_eq!(after_size, Some(oldest));
    let oldest = vitistack::history::rfc3339(oldest);
    // The API names the new oldest moment (the dashboard's slider starts there).
    assert_eq!(
        app.data("{ oldestMoment }", json!({})).await["oldestMoment"],
        json!(oldest)
    );
    for (i, (m, answer)) in moments.iter().zip(&answers).enumerate() {
        let r = app.query(counts, json!({"at": m})).await;
        if i < restarted {
            assert_eq!(
                r["errors"][0]["extensions"]["code"], "HISTORY_TRIMMED",
                "{m}: {r}"
            );
            assert_eq!(r["errors"][0]["extensions"]["oldest"], json!(oldest));
        } else {
            assert_eq!(&r["data"], answer, "{m} after the trim");
        }
    }
    app.stop().await;
}

fn ms(rfc3339: &str) -> i64 {
    rfc3339
        .parse::<jiff::Timestamp>()
        .expect("a time")
        .as_millisecond()
}

/// Change a cluster's annotation `n` times (as its source would: through the store), keeping
/// the moment after each change.
async fn toggle(app: &TestApp, cluster: &Value, n: usize, moments: &mut Vec<String>) {
    for _ in 0..n {
        annotate(app, cluster, moments.len());
        moments.push(wait_for_history(app).await);
    }
}

/// Set a cluster's annotation `example.com/step` to `step`, as its source would: through the
/// store.
fn annotate(app: &TestApp, cluster: &Value, step: usize) {
    let store = &app.running().store;
    let snap = store.snapshot();
    let mut r = snap
        .list(vitistack::model::Kind::KubernetesCluster)
        .find(|r| r.name() == cluster["name"] && r.namespace() == cluster["namespace"])
        .map(|r| (**r).clone())
        .expect("the cluster");
    r.meta_mut()
        .annotations
        .get_or_insert_with(Default::default)
        .insert("example.com/step", &step.to_string());
    assert_eq!(store.apply(vec![vitistack::store::Op::Upsert(r)]).len(), 1);
}

/// The current moment once the timeline holds everything the store does.
async fn wait_for_history(app: &TestApp) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    let want = app
        .data(
            "{ clusters(first: 500) { nodes { resourceVersion } } }",
            json!({}),
        )
        .await;
    loop {
        let at = jiff::Timestamp::now().to_string();
        let r = app
            .query(
                "query($at: String!) { at(time: $at) { clusters(first: 500) { nodes { resourceVersion } } } }",
                json!({"at": at}),
            )
            .await;
        if r["data"]["at"] == want {
            return at;
        }
        assert!(
            Instant::now() < deadline,
            "the history never caught up: {r}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Each datacenter's state at a past moment: one of three demo datacenters goes away and comes
/// back; asked afterwards, a moment during its outage shows it away and the others synced, a
/// moment before shows all three synced. (Each moment is kept once the history shows it as the
/// live query did: the states are recorded within a second of changing.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_datacenter_away_at_a_past_moment_shows_away_then() {
    let db = TestDb::sqlite();
    let app = start(
        &db,
        &[
            "--demo",
            "--simulate",
            "--demo-datacenters",
            "3",
            "--demo-outage-seconds",
            "15",
            "--dc-probe-interval-seconds",
            "1",
            "--dc-stale-after-seconds",
            "1",
        ],
    )
    .await;
    let query = "{ datacenters { key state } }";
    let states = |d: Value| d["datacenters"].clone();
    let q = "query($at: String!) { at(time: $at) { datacenters { key state } } }";
    // A moment (now) once the history has recorded `seen` (the writer looks every second).
    let recorded = |seen: Value| {
        let app = &app;
        async move {
            let at = jiff::Timestamp::now().to_string();
            let then = app.data_of_any_state(q, json!({"at": at})).await;
            (then["at"]["datacenters"] == seen).then_some(at)
        }
    };
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut before = None;
    let (during, away) = loop {
        let now = states(app.data_of_any_state(query, json!({})).await);
        let all_synced = now
            .as_array()
            .is_some_and(|a| a.iter().all(|d| d["state"] == "SYNCED"));
        if all_synced && before.is_none() {
            before = recorded(now.clone()).await;
        }
        if before.is_some()
            && !all_synced
            && let Some(at) = recorded(now.clone()).await
        {
            break (at, now);
        }
        assert!(Instant::now() < deadline, "no datacenter went away: {now}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let before = before.expect("a moment before");
    let past = app.data_of_any_state(q, json!({"at": during})).await;
    assert_eq!(past["at"]["datacenters"], away, "at {during}");
    let past = app.data_of_any_state(q, json!({"at": before})).await;
    let all: Vec<Value> = past["at"]["datacenters"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(all.len(), 3, "{past}");
    assert!(
        all.iter().all(|d| d["state"] == "SYNCED"),
        "at {before}: {past}"
    );
    app.stop().await;
}

/// A moment just past holds every change before it, though the writer keeps changes back to
/// write them in batches (here for ten minutes): asked right after each change, `at(time:)` a
/// moment after it answers as the live query did (the reader has the writer write first).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_moment_just_past_holds_every_change_before_it_though_writes_are_batched() {
    let db = TestDb::sqlite();
    let app = start(&db, &["--demo", "--history-flush-interval-ms", "600000"]).await;
    // From the history's first moment on (a moment before its first checkpoint is answered
    // HISTORY_TRIMMED: on a loaded machine that checkpoint came after the first step's moment).
    wait_for_history(&app).await;
    let live = "{ clusters(first: 500) { nodes { name namespace resourceVersion } } }";
    let past = "query($at: String!) { at(time: $at) { clusters(first: 500) { nodes { name namespace resourceVersion } } } }";
    let cluster = app.data(live, json!({})).await["clusters"]["nodes"][0].clone();
    for step in 0..3 {
        annotate(&app, &cluster, step);
        let want = app.data(live, json!({})).await;
        let at = jiff::Timestamp::now().to_string();
        let then = app.data(past, json!({"at": at})).await;
        assert_eq!(then["at"], want, "step {step}: at {at}");
    }
    app.stop().await;
}

/// A load larger than the change stream holds, while the timeline's writer waits for the database
/// (SQLite's one writer, held here): the writer keeps reading the stream as it waits, so it misses
/// nothing and writes no checkpoint to mend a chain (a checkpoint of a large graph outlasted the
/// load's patience with a stalled reader: each one broke the chain again).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_load_while_the_timeline_waits_for_the_database_is_written_whole() {
    let db = TestDb::sqlite();
    // Written as soon as anything waits: the writer is in a write (waiting for its turn) early in
    // the load, not after it.
    let app = start(&db, &["--demo", "--history-flush-interval-ms", "1"]).await;
    wait_for_history(&app).await;
    let rows = |m: &str, row: &str| {
        metric(
            m,
            &format!("vitistack_history_timeline_rows_total{{row=\"{row}\"}}"),
        )
    };
    let m = app.get("/metrics").await.1;
    let (versions, restarts) = (rows(&m, "version"), rows(&m, "restart"));
    let running = app.running();
    let database = running.history.db().expect("a database");
    let turn = database.write_turn().await;
    assert!(turn.is_some(), "SQLite writes take turns");
    // Four times the change stream (vitistack::store::CHANGE_BUFFER) in one load.
    let n = 4 * vitistack::store::CHANGE_BUFFER;
    let ops = (0..n)
        .map(|i| {
            let machine = json!({
                "metadata": {"name": format!("loaded-{i:05}"), "namespace": "bulk", "uid": format!("bulk-{i}")},
                "spec": {"name": format!("loaded-{i:05}")},
            });
            let r = vitistack::model::Resource::from_value(
                vitistack::model::Kind::Machine,
                "v1alpha1",
                machine,
            )
            .expect("a machine");
            vitistack::store::Op::Upsert(r)
        })
        .collect();
    let loaded = running.store.load(ops).await;
    assert_eq!(loaded, n);
    drop(turn);
    // Written whole, however slowly a loaded machine writes: the wait fails when the writer
    // stops (no new version for PATIENCE), not when it is merely slow (16,384 versions in a
    // debug build beside a full CI run once took over 30 s).
    let mut progress = (versions, tokio::time::Instant::now());
    loop {
        let written = rows(&app.get("/metrics").await.1, "version");
        if written >= versions + n as i64 {
            break;
        }
        if written > progress.0 {
            progress = (written, tokio::time::Instant::now());
        }
        assert!(
            progress.1.elapsed() < crate::PATIENCE,
            "the timeline's writer stopped: {} of {n} loaded versions written, none for {:?}",
            written - versions,
            crate::PATIENCE
        );
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    let m = app.get("/metrics").await.1;
    assert_eq!(rows(&m, "restart"), restarts, "no change was missed");
    assert_eq!(
        metric(
            &m,
            "vitistack_change_stream_lagged_total{reader=\"history\"}"
        ),
        0
    );
    app.stop().await;
}
