//! History on SQLite and on the machine's PostgreSQL (each test its own database): the event log
//! of a Machine's life with the old operator's event names and no credentials, paging and
//! filters, derived figures, the DataLoader (one statement for a page of 100 machines), the
//! database going away mid-stream (nothing below the buffer bound lost), a full buffer (drops
//! counted, gap marked), and retention.

use std::time::Duration;

use serde_json::{Value, json};
use vitistack::db::{Db, Pool, PoolSettings};
use vitistack::history::{EventRow, query, writer};
use vitistack::model::{Kind, Resource};
use vitistack::store::{ObjectKey, Op};

use crate::persistence::{Proxy, TestDb, start};
use crate::{TestApp, metric, metric_opt, spawn};

on_both_engines!(
    a_machine_s_life_in_the_event_log,
    a_page_of_100_machines_reads_its_history_in_one_statement_per_loader,
    no_event_is_lost_while_the_database_is_away,
    a_full_buffer_drops_counts_and_marks_the_gap,
    retention_deletes_only_old_events,
    retention_of_a_large_table_loses_nothing_while_changes_flow,
    webhooks_are_signed_retried_recorded_and_isolated,
);

fn machine(name: &str, phase: &str, label: &str) -> Op {
    Op::Upsert(
        Resource::from_value(
            Kind::Machine,
            "v1alpha1",
            json!({"metadata": {"name": name, "namespace": "hist", "labels": {"step": label}},
                   "spec": {"provider": "kubevirt", "userData": "#cloud-config\npassword: hunter2"},
                   "status": {"phase": phase}}),
        )
        .expect("machine"),
    )
}

/// Poll `/metrics` until the series `name` exists and reaches `at_least` (20 s at most).
async fn wait_metric(app: &TestApp, name: &str, at_least: i64) -> i64 {
    let mut v = None;
    for _ in 0..200 {
        v = metric_opt(&app.get("/metrics").await.1, name).map(|v| v as i64);
        if let Some(v) = v.filter(|v| *v >= at_least) {
            return v;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let all = app.get("/metrics").await.1;
    let related: Vec<&str> = all
        .lines()
        .filter(|l| l.starts_with("vitistack_history") || l.starts_with("vitistack_change"))
        .collect();
    panic!(
        "{name} stayed at {v:?}, expected {at_least}; {}",
        related.join("; ")
    );
}

const EVENTS: &str = "query($f: EventFilter, $first: Int, $after: String) {
  events(filter: $f, first: $first, after: $after) {
    pageInfo { hasNextPage endCursor }
    edges { cursor node { id at sequence kind namespace name uid resourceVersion change type
      phaseBefore phaseAfter diff dropped object { ... on Machine { name } } } } } }";

async fn a_machine_s_life_in_the_event_log(db: &TestDb) {
    let app = start(db, &["--history-flush-interval-ms", "20"]).await;
    let store = &app.running().store;
    store.apply(vec![machine("m1", "Pending", "a")]);
    store.apply(vec![machine("m1", "Running", "b")]);
    store.apply(vec![machine("m1", "Failed", "c")]);
    wait_metric(&app, "vitistack_history_events_written_total", 3).await;

    // Derived figures on the live Machine (through the loaders).
    let data = app
        .data(
            r#"{ machines(filter: {namespace: "hist"}) { nodes { name
                history(first: 2) { type phaseAfter }
                phaseTimeline { phase since until seconds }
                timeToRunningSeconds } }
               machineFailuresPerDay(days: 2) { day count } }"#,
            json!({}),
        )
        .await;
    let m = &data["machines"]["nodes"][0];
    assert_eq!(
        m["history"],
        json!([{"type": "machine.updated", "phaseAfter": "Failed"},
               {"type": "machine.updated", "phaseAfter": "Running"}])
    );
    let phases: Vec<&str> = m["phaseTimeline"]
        .as_array()
        .expect("timeline")
        .iter()
        .filter_map(|s| s["phase"].as_str())
        .collect();
    assert_eq!(phases, ["Pending", "Running", "Failed"]);
    assert!(m["phaseTimeline"][2]["until"].is_null(), "{m}");
    assert!(
        m["phaseTimeline"][0]["seconds"].as_f64() >= Some(0.0),
        "{m}"
    );
    assert!(m["timeToRunningSeconds"].as_f64() >= Some(0.0), "{m}");
    let days = data["machineFailuresPerDay"].as_array().expect("days");
    assert_eq!(days.len(), 2);
    assert_eq!(days[1]["count"], 1, "{days:?}");
    let today = jiff::Timestamp::now().to_string();
    assert_eq!(days[1]["day"].as_str(), today.get(..10));

    store.apply(vec![Op::Delete(ObjectKey::new(
        &Default::default(),
        Kind::Machine,
        "hist",
        "m1",
    ))]);
    wait_metric(&app, "vitistack_history_events_written_total", 4).await;
    let body = app
        .query(EVENTS, json!({"f": {"kind": "Machine", "name": "m1"}}))
        .await;
    let text = body.to_string();
    assert!(
        !text.contains("hunter2"),
        "credentials left the server: {text}"
    );
    let nodes: Vec<&Value> = body["data"]["events"]["edges"]
        .as_array()
        .expect("edges")
        .iter()
        .map(|e| &e["node"])
        .collect();
    let seen: Vec<(&str, &str, Option<&str>, Option<&str>)> = nodes
        .iter()
        .map(|n| {
            (
                n["change"].as_str().unwrap_or("?"),
                n["type"].as_str().unwrap_or("?"),
                n["phaseBefore"].as_str(),
                n["phaseAfter"].as_str(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            (
                "DELETED",
                "infrastructure.machine.deleted",
                Some("Failed"),
                None
            ),
            (
                "MODIFIED",
                "machine.updated",
                Some("Running"),
                Some("Failed")
            ),
            (
                "MODIFIED",
                "machine.updated",
                Some("Pending"),
                Some("Running")
            ),
            (
                "ADDED",
                "infrastructure.machine.created",
                None,
                Some("Pending")
            ),
        ],
        "{text}"
    );
    assert_eq!(
        nodes[1]["diff"],
        json!([{"path": "/status/phase", "before": "Running", "after": "Failed"}]),
        "labels are metadata, the diff is spec and status"
    );
    assert!(nodes[0]["object"].is_null(), "deleted: no object now");
    let seqs: Vec<i64> = nodes
        .iter()
        .filter_map(|n| n["sequence"].as_i64())
        .collect();
    assert!(
        seqs.windows(2).all(|w| w[0] > w[1]),
        "newest first: {seqs:?}"
    );
    assert!(nodes.iter().all(|n| n["uid"] == nodes[0]["uid"]));

    // Pages of 3 then the rest, no duplicate, no gap.
    let page1 = app
        .data(EVENTS, json!({"f": {"kind": "Machine"}, "first": 3}))
        .await;
    assert_eq!(page1["events"]["pageInfo"]["hasNextPage"], true);
    let after = page1["events"]["pageInfo"]["endCursor"].clone();
    let page2 = app
        .data(
            EVENTS,
            json!({"f": {"kind": "Machine"}, "first": 3, "after": after}),
        )
        .await;
    assert_eq!(page2["events"]["pageInfo"]["hasNextPage"], false);
    let ids: Vec<Value> = [&page1, &page2]
        .iter()
        .flat_map(|p| p["events"]["edges"].as_array().cloned().unwrap_or_default())
        .map(|e| e["node"]["id"].clone())
        .collect();
    assert_eq!(ids.len(), 4);
    let mut unique = ids.clone();
    unique.dedup();
    assert_eq!(unique.len(), 4);

    // Filters: by type, by time, and bad input named.
    let created = app
        .data(
            EVENTS,
            json!({"f": {"types": ["infrastructure.machine.created"]}}),
        )
        .await;
    assert_eq!(created["events"]["edges"].as_array().map(Vec::len), Some(1));
    let future = app
        .data(EVENTS, json!({"f": {"since": "2999-01-01T00:00:00Z"}}))
        .await;
    assert_eq!(future["events"]["edges"], json!([]));
    let e = app
        .error(EVENTS, json!({"f": {"since": "yesterday"}}))
        .await;
    assert_eq!(e["extensions"]["code"], "BAD_TIME", "{e}");
    let e = app.error(EVENTS, json!({"first": 0})).await;
    assert_eq!(e["extensions"]["code"], "BAD_PAGE_SIZE", "{e}");
    assert!(
        e["message"].as_str().is_some_and(|m| m.contains("500")),
        "{e}"
    );
    app.stop().await;
}

async fn a_page_of_100_machines_reads_its_history_in_one_statement_per_loader(db: &TestDb) {
    let app = start(
        db,
        &[
            "--demo",
            "--demo-clusters",
            "5",
            "--history-flush-interval-ms",
            "20",
        ],
    )
    .await;
    let store = &app.running().store;
    let snap = store.snapshot();
    let machines: Vec<Resource> = snap
        .list(Kind::Machine)
        .map(|m| {
            let mut v = m.to_value();
            v["metadata"]["labels"]["touched"] = json!("yes");
            Resource::from_value(Kind::Machine, "v1alpha1", v).expect("machine")
        })
        .collect();
    assert_eq!(machines.len(), 100);
    store.apply(machines.into_iter().map(Op::Upsert).collect());
    wait_metric(&app, "vitistack_history_events_written_total", 100).await;

    // Statements as the database layer runs them (every read statement goes through it).
    let db = app.running().history.db().expect("connected");
    let before = db.read_statements();
    let data = app
        .data(
            "{ machines(first: 100) { nodes { name history(first: 5) { type }
                 phaseTimeline { phase } timeToRunningSeconds } } }",
            json!({}),
        )
        .await;
    let after = db.read_statements();
    let nodes = data["machines"]["nodes"].as_array().expect("nodes");
    assert_eq!(nodes.len(), 100);
    assert!(
        nodes
            .iter()
            .all(|n| n["history"] == json!([{"type": "machine.updated"}])),
        "every machine has its one event"
    );
    assert_eq!(
        after - before,
        2,
        "one statement for the 100 histories, one for the 100 timelines (not one per machine)"
    );
    assert_eq!(
        metric(
            &app.get("/metrics").await.1,
            "vitistack_history_queries_total"
        ),
        after as i64,
        "/metrics serves the same count"
    );
    // The Relay shape, a fragment and two page sizes: one statement per page size.
    let before = db.read_statements();
    let data = app
        .data(
            "{ machines(first: 100) { edges { node { ...M a: history(first: 1) { type } } } } }
             fragment M on Machine { history(first: 5) { type } }",
            json!({}),
        )
        .await;
    assert_eq!(
        data["machines"]["edges"].as_array().map(Vec::len),
        Some(100)
    );
    assert_eq!(db.read_statements() - before, 2, "one per distinct `first`");
    app.stop().await;
}

/// Count event rows (gap markers apart) and the events gap markers say were dropped.
async fn stored_counts(url: &str) -> (i64, i64) {
    let db = Db::open(url, &PoolSettings::default()).await.expect("open");
    let q = "SELECT COUNT(*), 0 FROM events WHERE change <> 'GAP' UNION ALL \
             SELECT COUNT(*), COALESCE(SUM(dropped), 0) FROM events WHERE change = 'GAP'";
    let rows: Vec<(i64, i64)> = match db.pool() {
        Pool::Sqlite(p) => sqlx::query_as(q).fetch_all(p).await.expect("count"),
        Pool::Postgres(p) => {
            let q = q.replace("SUM(dropped)", "SUM(dropped)::BIGINT");
            sqlx::query_as(sqlx::AssertSqlSafe(q))
                .fetch_all(p)
                .await
                .expect("count")
        }
    };
    db.close().await;
    (rows[0].0, rows[1].1)
}

/// The database goes away: PostgreSQL's connections are cut at a proxy; SQLite is locked by
/// another connection holding an exclusive transaction. Returns a guard that brings it back.
enum Away {
    Proxy(Proxy),
    Lock(sqlx::SqliteConnection),
}

async fn server_with_a_database_that_can_go_away(
    db: &TestDb,
    extra: &[&str],
) -> (TestApp, Option<Proxy>) {
    let proxy = match db {
        TestDb::Postgres(_) => {
            let p = Proxy::start(TestDb::postgres_server()).await;
            p.on.store(true, std::sync::atomic::Ordering::Release);
            Some(p)
        }
        TestDb::Sqlite(_) => None,
    };
    let url = match &proxy {
        Some(p) => db.url_via(p.addr),
        None => db.url(),
    };
    let mut args = vec![
        "--database-url",
        url.as_str(),
        "--db-connect-timeout-seconds",
        "1",
        "--history-flush-interval-ms",
        "20",
    ];
    args.extend_from_slice(extra);
    (spawn(&args).await, proxy)
}

async fn go_away(db: &TestDb, proxy: Option<Proxy>) -> Away {
    match proxy {
        Some(p) => {
            p.cut();
            Away::Proxy(p)
        }
        None => {
            use sqlx::Connection;
            let mut c = sqlx::SqliteConnection::connect(&db.url())
                .await
                .expect("lock connection");
            sqlx::query("BEGIN EXCLUSIVE")
                .execute(&mut c)
                .await
                .expect("lock");
            Away::Lock(c)
        }
    }
}

async fn come_back(away: Away) {
    match away {
        Away::Proxy(p) => {
            p.on.store(true, std::sync::atomic::Ordering::Release);
            // Keep the proxy running: the server reconnects through it.
            std::mem::forget(p);
        }
        Away::Lock(mut c) => {
            sqlx::query("ROLLBACK")
                .execute(&mut c)
                .await
                .expect("unlock");
        }
    }
}

async fn apply_changes(app: &TestApp, from: usize, n: usize) {
    let store = &app.running().store;
    for i in from..from + n {
        store.apply(vec![machine(
            &format!("m{}", i % 7),
            "Running",
            &i.to_string(),
        )]);
    }
}

async fn wait_health(app: &TestApp, up: bool) {
    for _ in 0..200 {
        let (code, _) = app.get("/health/database").await;
        if (code == 200) == up {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!(
        "/health/database never said {}",
        if up { "up" } else { "down" }
    );
}

async fn no_event_is_lost_while_the_database_is_away(db: &TestDb) {
    let (app, proxy) = server_with_a_database_that_can_go_away(db, &[]).await;
    apply_changes(&app, 0, 50).await;
    wait_metric(&app, "vitistack_history_events_written_total", 50).await;

    let away = go_away(db, proxy).await;
    apply_changes(&app, 50, 500).await;
    wait_health(&app, false).await;
    // The live API does not notice.
    let data = app
        .data(
            "{ machines(filter: {namespace: \"hist\"}) { totalCount } }",
            json!({}),
        )
        .await;
    assert_eq!(data["machines"]["totalCount"], 7);
    let metrics = app.get("/metrics").await.1;
    assert!(
        metric(&metrics, "vitistack_history_pending_events") > 0,
        "{metrics}"
    );
    if let TestDb::Postgres(_) = db {
        // (A locked SQLite file in WAL mode still serves reads.)
        let e = app.error(EVENTS, json!({})).await;
        assert_eq!(e["extensions"]["code"], "DATABASE_UNAVAILABLE", "{e}");
        // The database's own words (addresses, SQL) stay in the server's log.
        let message = e["message"].as_str().unwrap_or_default();
        for internal in ["127.0.0.1", "postgres", "SELECT", "sqlx", "error returned"] {
            assert!(!message.contains(internal), "{message}");
        }
    }

    come_back(away).await;
    wait_metric(&app, "vitistack_history_events_written_total", 550).await;
    wait_health(&app, true).await;
    let metrics = app.get("/metrics").await.1;
    assert_eq!(
        metric(&metrics, "vitistack_history_events_dropped_total"),
        0
    );
    assert_eq!(metric(&metrics, "vitistack_history_pending_events"), 0);
    app.stop().await;
    assert_eq!(
        stored_counts(&db.url()).await,
        (550, 0),
        "every event, no gap"
    );
}

async fn a_full_buffer_drops_counts_and_marks_the_gap(db: &TestDb) {
    let (app, proxy) =
        server_with_a_database_that_can_go_away(db, &["--history-buffer", "100"]).await;
    apply_changes(&app, 0, 10).await;
    wait_metric(&app, "vitistack_history_events_written_total", 10).await;
    let away = go_away(db, proxy).await;
    apply_changes(&app, 10, 300).await;
    wait_metric(&app, "vitistack_history_events_dropped_total", 1).await;
    come_back(away).await;
    // Then a few more, which must be written after the gap marker.
    wait_health(&app, true).await;
    apply_changes(&app, 310, 5).await;
    let mut metrics = String::new();
    for _ in 0..400 {
        metrics = app.get("/metrics").await.1;
        if metric(&metrics, "vitistack_history_pending_events") == 0
            && metric(&metrics, "vitistack_history_gaps_total") >= 1
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        metric(&metrics, "vitistack_history_pending_events"),
        0,
        "{metrics}"
    );
    let dropped = metric(&metrics, "vitistack_history_events_dropped_total");
    assert!(dropped >= 200, "{metrics}");
    let gaps = app
        .data(EVENTS, json!({"f": {"types": ["history.gap"]}}))
        .await;
    let marker = &gaps["events"]["edges"][0]["node"];
    assert_eq!(marker["change"], "GAP", "{gaps}");
    assert!(marker["dropped"].as_i64() >= Some(1), "{gaps}");
    app.stop().await;
    let (stored, marked) = stored_counts(&db.url()).await;
    assert_eq!(marked, dropped, "the gap markers account for every drop");
    assert_eq!(
        stored + dropped,
        315,
        "each change is either in the log or counted as dropped"
    );
}

async fn retention_deletes_only_old_events(db: &TestDb) {
    let d = Db::open(&db.url(), &PoolSettings::default())
        .await
        .expect("open");
    let now = vitistack::history::now_ms();
    let row = |age_days: i64, rv: &str| {
        let mut r = EventRow::gap(1, 1, now - age_days * 86_400_000);
        r.resource_version = rv.into();
        r
    };
    let rows = [row(40, "a"), row(31, "b"), row(29, "c"), row(0, "d")];
    assert_eq!(writer::insert(&d, &rows).await.expect("insert"), 4);
    assert_eq!(
        writer::insert(&d, &rows).await.expect("again"),
        0,
        "a replayed event is stored once"
    );
    let cutoff = now - writer::HistorySettings::default().retention.as_millis() as i64;
    assert_eq!(query::delete_before(&d, cutoff).await.expect("delete"), 2);
    let left = query::page(&d, &query::EventQuery::default(), 10)
        .await
        .expect("page");
    let rvs: Vec<&str> = left.iter().map(|e| e.resource_version.as_str()).collect();
    assert_eq!(rvs, ["d", "c"]);
    d.close().await;
}

/// The hourly retention over a large table takes a while; changes keep flowing meanwhile and the
/// writer keeps reading them (the ring here holds only 64): nothing is dropped, no gap. On
/// PostgreSQL the retention is held on a locked row until every change has been read, so the
/// overlap is certain; on SQLite the DELETE of 60,000 rows overlaps the burst.
async fn retention_of_a_large_table_loses_nothing_while_changes_flow(db: &TestDb) {
    let d = Db::open(&db.url(), &PoolSettings::default())
        .await
        .expect("open");
    let old = vitistack::history::now_ms() - 40 * 86_400_000;
    let rows: Vec<EventRow> = (0..60_000)
        .map(|i| {
            let mut r = EventRow::gap(1, 1, old);
            r.resource_version = format!("old-{i}");
            r
        })
        .collect();
    for chunk in rows.chunks(5000) {
        writer::insert(&d, chunk).await.expect("old events");
    }
    let mut held = None;
    if let Pool::Postgres(p) = d.pool() {
        let mut tx = p.begin().await.expect("tx");
        sqlx::query("SELECT id FROM events WHERE resource_version = 'old-0' FOR UPDATE")
            .execute(&mut *tx)
            .await
            .expect("lock a row");
        held = Some(tx);
    }
    let app = start(
        db,
        &["--change-buffer", "64", "--history-flush-interval-ms", "20"],
    )
    .await;
    let store = app.running().store.clone();
    store.apply(vec![machine("r0", "Pending", "a")]);
    if held.is_some() {
        let url = db.url();
        crate::eventually("the retention DELETE to wait for the held row", || async {
            // A loaded machine may take more than the default 5 s to hand out a connection.
            let settings = PoolSettings {
                acquire_timeout: std::time::Duration::from_secs(60),
                ..PoolSettings::default()
            };
            let probe = Db::open(&url, &settings).await.expect("open");
            let Pool::Postgres(p) = probe.pool() else {
                return false;
            };
            let waiting: i64 = sqlx::query_scalar(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() \
                 AND query LIKE 'DELETE FROM events%' AND wait_event_type = 'Lock'",
            )
            .fetch_one(p)
            .await
            .expect("activity");
            probe.close().await;
            waiting == 1
        })
        .await;
    }
    // A steady flow the readers can follow: each change waits until the ring has room (the
    // slowest reader's backlog below half of it). A reader that stopped reading would hold the
    // backlog up, and the flow with it, until the test times out.
    let deadline = tokio::time::Instant::now() + crate::PATIENCE;
    for i in 1..=2000 {
        while store.queued() >= 32 {
            assert!(
                tokio::time::Instant::now() < deadline,
                "a reader of the change stream stopped reading"
            );
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        store.apply(vec![machine(&format!("r{i}"), "Pending", "a")]);
    }
    if let Some(tx) = held {
        // Every change was read while the retention waited: all 2,000 are queued.
        wait_metric(&app, "vitistack_history_pending_events", 2000).await;
        tx.rollback().await.expect("release");
    }
    wait_metric(&app, "vitistack_history_events_written_total", 2001).await;
    let metrics = app.get("/metrics").await.1;
    for (series, want) in [
        ("vitistack_history_events_dropped_total", 0),
        ("vitistack_history_gaps_total", 0),
        (
            "vitistack_change_stream_lagged_total{reader=\"history\"}",
            0,
        ),
    ] {
        assert_eq!(metric(&metrics, series), want, "{series}");
    }
    app.stop().await;
    let left = query::page(
        &d,
        &query::EventQuery {
            until_ms: Some(old + 1),
            ..Default::default()
        },
        10,
    )
    .await
    .expect("page");
    assert!(left.is_empty(), "the retention deleted the old events");
    d.close().await;
}

/// An HTTP receiver recording what it is sent; it answers 500 to its first `fail_first` requests.
struct Receiver {
    url: String,
    got: std::sync::Arc<parking_lot::Mutex<Vec<(axum::http::HeaderMap, String, u16)>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Receiver {
    async fn start(fail_first: usize) -> Receiver {
        use axum::http::StatusCode;
        let got: std::sync::Arc<parking_lot::Mutex<Vec<(axum::http::HeaderMap, String, u16)>>> =
            Default::default();
        let log = got.clone();
        let app = axum::Router::new().route(
            "/hook",
            axum::routing::post(move |headers: axum::http::HeaderMap, body: String| {
                let log = log.clone();
                async move {
                    let mut log = log.lock();
                    let status = if log.len() < fail_first {
                        StatusCode::INTERNAL_SERVER_ERROR
                    } else {
                        StatusCode::NO_CONTENT
                    };
                    log.push((headers, body, status.as_u16()));
                    status
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let url = format!("http://{}/hook", listener.local_addr().expect("addr"));
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Receiver { url, got, task }
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Rows of `webhook_deliveries` for the endpoint `endpoint_url` (stored under its id, never
/// whole): (event type, state, attempts), oldest first.
async fn deliveries(url: &str, endpoint_url: &str) -> Vec<(String, String, i32)> {
    let endpoint = vitistack::history::webhooks::endpoint_id(endpoint_url);
    let endpoint = endpoint.as_str();
    let db = Db::open(url, &PoolSettings::default()).await.expect("open");
    let rows: Vec<(String, String, i32)> = match db.pool() {
        Pool::Sqlite(p) => sqlx::query_as(
            "SELECT event_type, state, attempts FROM webhook_deliveries WHERE endpoint = ?1 ORDER BY id",
        )
        .bind(endpoint)
        .fetch_all(p)
        .await
        .expect("deliveries"),
        Pool::Postgres(p) => sqlx::query_as(
            "SELECT event_type, state, attempts FROM webhook_deliveries WHERE endpoint = $1 ORDER BY id",
        )
        .bind(endpoint)
        .fetch_all(p)
        .await
        .expect("deliveries"),
    };
    db.close().await;
    rows
}

async fn webhooks_are_signed_retried_recorded_and_isolated(db: &TestDb) {
    let good = Receiver::start(1).await;
    // A receiver that accepts connections and never answers.
    let hanging = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let hanging_url = format!(
        "http://{}/hook/T0K3N-in-path",
        hanging.local_addr().expect("addr")
    );
    // An endpoint that refuses connections, its key in the query: its failures are recorded
    // (the error text too), without the key.
    let refused = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let refused_url = format!(
        "http://{}/hook?key=Q-K3Y-in-query",
        refused.local_addr().expect("addr")
    );
    drop(refused);
    let held = tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((s, _)) = hanging.accept().await {
            open.push(s);
        }
    });
    let urls = format!("{hanging_url},{},{refused_url}", good.url);
    let app = start(
        db,
        &[
            "--webhook-urls",
            &urls,
            "--webhook-secret",
            "s3cret-key",
            "--webhook-timeout-seconds",
            "60",
            "--webhook-retry-ms",
            "20",
            "--history-flush-interval-ms",
            "20",
        ],
    )
    .await;
    let store = &app.running().store;
    store.apply(vec![machine("w1", "Pending", "a")]);
    store.apply(vec![machine("w2", "Pending", "a")]);
    store.apply(vec![machine("w1", "Running", "b")]); // machine.updated: not sent by default
    store.apply(vec![Op::Delete(ObjectKey::new(
        &Default::default(),
        Kind::Machine,
        "hist",
        "w1",
    ))]);
    let mut n = 0;
    for _ in 0..200 {
        n = good.got.lock().iter().filter(|g| g.2 == 204).count();
        if n >= 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        n, 3,
        "the good endpoint got every event while the other hangs"
    );
    let got = good.got.lock().clone();
    assert_eq!(got.len(), 4, "one retry after the 500");
    assert_eq!(got[0].1, got[1].1, "the retry resends the same event");
    let mut seen = Vec::new();
    for (headers, body, _) in &got[1..] {
        let sig = headers
            .get("x-vitistack-signature")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        assert_eq!(
            sig,
            vitistack::history::webhooks::signature("s3cret-key", body.as_bytes()),
            "signed with the shared key"
        );
        assert!(
            !body.contains("hunter2") && !body.contains("s3cret"),
            "{body}"
        );
        let v: Value = serde_json::from_str(body).expect("json");
        assert_eq!(
            headers
                .get("x-vitistack-event")
                .and_then(|h| h.to_str().ok()),
            v["type"].as_str()
        );
        seen.push(format!(
            "{} {}",
            v["type"].as_str().unwrap_or("?"),
            v["name"].as_str().unwrap_or("?")
        ));
    }
    assert_eq!(
        seen,
        [
            "infrastructure.machine.created w1",
            "infrastructure.machine.created w2",
            "infrastructure.machine.deleted w1"
        ]
    );
    let mut stored = Vec::new();
    for _ in 0..100 {
        stored = deliveries(&db.url(), &good.url).await;
        if stored.iter().filter(|r| r.1 == "delivered").count() == 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let expected = [
        ("infrastructure.machine.created", "delivered", 2),
        ("infrastructure.machine.created", "delivered", 1),
        ("infrastructure.machine.deleted", "delivered", 1),
    ];
    let stored: Vec<(&str, &str, i32)> = stored
        .iter()
        .map(|(t, s, a)| (t.as_str(), s.as_str(), *a))
        .collect();
    assert_eq!(stored, expected);
    // The hanging endpoint's first event is claimed (pending, before its first attempt ends);
    // the others wait behind it.
    let mut hanging = Vec::new();
    for _ in 0..400 {
        hanging = deliveries(&db.url(), &hanging_url).await;
        if !hanging.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        hanging,
        [(
            "infrastructure.machine.created".to_string(),
            "pending".to_string(),
            0
        )],
        "the hanging endpoint is still on its first attempt"
    );
    let mut failed = Vec::new();
    for _ in 0..400 {
        failed = deliveries(&db.url(), &refused_url).await;
        if failed.iter().filter(|r| r.1 == "failed").count() == 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        failed.iter().filter(|r| r.1 == "failed").count(),
        3,
        "every event failed on the refusing endpoint: {failed:?}"
    );
    // Neither URL's secret part is anywhere in the table: endpoint ids and error texts.
    let rows = crate::table_text(&db.url(), "webhook_deliveries").await;
    for secret in ["T0K3N", "Q-K3Y", "/hook"] {
        assert!(!rows.contains(secret), "{secret} stored: {rows}");
    }
    assert!(rows.contains("connect"), "the error is recorded: {rows}");
    let metrics = app.get("/metrics").await.1;
    assert_eq!(
        metric(
            &metrics,
            "vitistack_webhook_deliveries_total{outcome=\"delivered\"}"
        ),
        3,
        "{metrics}"
    );
    assert!(!metrics.contains("s3cret"));
    held.abort();
}
