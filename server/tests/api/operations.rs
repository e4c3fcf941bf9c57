//! Running it in production: the old aggregator's `vitistack_operator_*` metrics with bounded
//! labels, JSON logs in the documented shape with request ids, the log level changed while
//! running, and a SIGTERM that loses nothing (the `vitistack` binary as a process).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use crate::auth::{ADMIN, KeysFile, VIEWER, three_keys};
use crate::documented::{differences, documented};
use crate::persistence::TestDb;
use crate::process::Process;
use crate::{eventually, metric, spawn};

/// Series of a family in a `/metrics` text: label maps and values.
fn series(text: &str, family: &str) -> Vec<(BTreeMap<String, String>, f64)> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (name, value) = l.rsplit_once(' ')?;
            let (metric, labels) = match name.split_once('{') {
                Some((m, rest)) => (m, rest.trim_end_matches('}')),
                None => (name, ""),
            };
            (metric == family).then(|| {
                let labels = labels
                    .split("\",")
                    .filter(|p| !p.is_empty())
                    .filter_map(|p| {
                        let (k, v) = p.split_once("=\"")?;
                        Some((k.to_string(), v.trim_end_matches('"').to_string()))
                    })
                    .collect();
                (labels, value.parse().unwrap_or(f64::NAN))
            })
        })
        .collect()
}

fn sum(text: &str, family: &str) -> f64 {
    series(text, family).iter().map(|(_, v)| v).sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_old_metrics_are_exposed_with_bounded_labels_and_the_graphs_figures() {
    let app = spawn(&["--demo"]).await;
    // 10,000 distinct paths: object-like ids on a templated route, and paths no route knows.
    let client = app.client.clone();
    let base = app.base.clone();
    let sent: Vec<u16> = futures::future::join_all((0..4).map(|worker| {
        let (client, base) = (client.clone(), base.clone());
        async move {
            let mut statuses = Vec::new();
            for i in 0..2_500 {
                let path = if i % 2 == 0 {
                    format!("/v1/machineproviders/{}", uuid::Uuid::new_v4())
                } else {
                    format!("/no/such/page-{worker}-{i}")
                };
                let res = client
                    .get(format!("{base}{path}"))
                    .send()
                    .await
                    .expect("GET");
                statuses.push(res.status().as_u16());
            }
            statuses
        }
    }))
    .await
    .into_iter()
    .flatten()
    .collect();
    assert_eq!(sent.len(), 10_000);
    // The old base URL answers the probes and the metrics too (as the routes they stand for).
    for (old, new) in [
        ("/api/v1/health", "/health"),
        ("/api/v1/ready", "/ready"),
        ("/api/v1/clusters", "/api/v1/clusters"),
    ] {
        let (a, b) = (app.get(old).await, app.get(new).await);
        assert_eq!(a.0, 200, "{old}: {}", a.1);
        assert_eq!(a.0, b.0, "{old} and {new}");
        let (a, b): (Value, Value) = (
            serde_json::from_str(&a.1).expect("JSON"),
            serde_json::from_str(&b.1).expect("JSON"),
        );
        assert_eq!(a["status"], b["status"], "{old} and {new}");
    }
    let (status, old_text) = app.get("/api/v1/metrics").await;
    assert_eq!(status, 200);
    assert!(old_text.contains("# TYPE vitistack_operator_clusters_total gauge\n"));
    let (status, text) = app.get("/metrics").await;
    assert_eq!(status, 200);

    // Every family of the old table, with its type and exactly its labels.
    let table = documented("metrics");
    for (family, spec) in table.as_object().expect("metrics table") {
        let ty = spec["type"].as_str().expect("type");
        assert!(
            text.contains(&format!("# TYPE {family} {ty}\n")),
            "{family} is not exposed as a {ty}"
        );
        let wanted: BTreeSet<String> = spec["labels"]
            .as_array()
            .expect("labels")
            .iter()
            .map(|l| l.as_str().expect("label").to_string())
            .collect();
        let sample = if ty == "histogram" {
            format!("{family}_count")
        } else {
            family.clone()
        };
        let all = series(&text, &sample);
        assert!(!all.is_empty(), "{family} has no series:\n{text}");
        for (labels, _) in &all {
            let got: BTreeSet<String> = labels.keys().cloned().collect();
            assert_eq!(got, wanted, "{family} labels");
        }
    }

    // Route templates, never raw paths: the 10,000 requests are two series.
    let requests = series(&text, "vitistack_operator_api_requests_total");
    let endpoints: BTreeSet<&str> = requests
        .iter()
        .map(|(l, _)| l["endpoint"].as_str())
        .collect();
    assert!(
        endpoints.contains("/v1/machineproviders/{uid}") && endpoints.contains("/{*path}"),
        "{endpoints:?}"
    );
    // Under the old base URL routes are named as the old operator named them.
    assert!(
        endpoints.contains("/clusters") && endpoints.contains("/health"),
        "{endpoints:?}"
    );
    assert!(
        !endpoints.iter().any(|e| e.starts_with("/api/v1/")),
        "{endpoints:?}"
    );
    assert!(
        requests.len() < 20,
        "{} request series after 10,000 distinct paths: {requests:?}",
        requests.len()
    );
    assert!(!text.contains("page-0-1"), "a raw path is a label value");
    let templated: f64 = requests
        .iter()
        .filter(|(l, _)| l["endpoint"] == "/v1/machineproviders/{uid}")
        .map(|(l, v)| {
            assert_eq!(l["status"], "404", "unknown uids answer 404");
            *v
        })
        .sum();
    assert_eq!(templated, 5_000.0);
    assert!(
        sum(
            &text,
            "vitistack_operator_api_request_duration_seconds_count"
        ) >= 10_000.0
    );

    // The figures are the graph's.
    let data = app
        .data(
            "{ clusters(first: 1) { totalCount } machines(first: 1) { totalCount } version { version commit } operators { operator status } }",
            json!({}),
        )
        .await;
    assert_eq!(
        sum(&text, "vitistack_operator_clusters_total"),
        data["clusters"]["totalCount"].as_f64().expect("count")
    );
    assert_eq!(
        sum(&text, "vitistack_operator_machines_total"),
        data["machines"]["totalCount"].as_f64().expect("count")
    );
    let info = series(&text, "vitistack_operator_info");
    assert_eq!(info.len(), 1);
    assert_eq!(
        info[0].0["version"],
        data["version"]["version"].as_str().expect("v")
    );
    assert_eq!(
        info[0].0["commit"],
        data["version"]["commit"].as_str().expect("c")
    );
    for o in data["operators"].as_array().expect("operators") {
        let name = o["operator"].as_str().expect("name");
        let state = o["status"].as_str().expect("status").to_lowercase();
        assert_eq!(
            metric(
                &text,
                &format!(
                    "vitistack_operator_operator_status{{operator=\"{name}\",status=\"{state}\"}}"
                )
            ),
            1,
            "{name} is {state}"
        );
    }
    // The demo fleet was loaded through the store: every object was an event, counted by the
    // old operator's event types (each machine one `infrastructure.machine.created`).
    let created = metric(
        &text,
        "vitistack_operator_events_processed_total{event_type=\"infrastructure.machine.created\",status=\"success\"}",
    );
    assert!(
        created as f64 >= data["machines"]["totalCount"].as_f64().expect("count"),
        "{created} machine.created events"
    );
    assert!(
        metric(
            &text,
            "vitistack_operator_events_processed_total{event_type=\"infrastructure.cluster.updated\",status=\"success\"}",
        ) as f64
            >= data["clusters"]["totalCount"].as_f64().expect("count")
    );
    let types: BTreeSet<String> = series(&text, "vitistack_operator_events_processed_total")
        .into_iter()
        .map(|(l, _)| l["event_type"].clone())
        .collect();
    for t in [
        "infrastructure.machine.created",
        "infrastructure.machine.deleted",
        "infrastructure.cluster.updated",
        "infrastructure.operator.status",
        "infrastructure.network.configured",
    ] {
        assert!(types.contains(t), "{t} missing: {types:?}");
    }
    assert!(!types.contains("added"), "{types:?}");
    // The cache counters follow ours.
    let ours = metric(&text, "vitistack_graphql_cache_misses_total");
    assert_eq!(
        metric(
            &text,
            "vitistack_operator_cache_misses_total{cache_type=\"response\"}"
        ),
        ours
    );
    assert!(
        metric(
            &text,
            "vitistack_operator_database_connections{state=\"max\"}"
        ) >= 1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logs_are_json_lines_with_request_ids_and_the_level_changes_while_running() {
    let keys = KeysFile::new(&three_keys());
    let db = TestDb::sqlite();
    let url = db.url();
    let server = Process::start(&[("API_KEYS_FILE", keys.path()), ("DATABASE_URL", &url)]);
    let client = reqwest::Client::new();
    let get = |path: &str, id: &str| {
        client
            .get(format!("{}{path}", server.base))
            .header("x-request-id", id)
            .header("user-agent", "ops-test/1.0")
            .bearer_auth(VIEWER)
            .send()
    };

    // A request id is taken, returned, and carried into the log line.
    let res = get("/api/v1/clusters", "abc-123").await.expect("GET");
    assert_eq!(res.status(), 200);
    assert_eq!(res.headers()["x-request-id"], "abc-123");
    // One that is not a sensible token is replaced by a new one.
    let hostile = "x".repeat(300);
    let res = get("/v1/vitistack/name", &hostile).await.expect("GET");
    let made = res.headers()["x-request-id"]
        .to_str()
        .expect("id")
        .to_string();
    assert!(uuid::Uuid::parse_str(&made).is_ok(), "{made}");
    // Probes are not logged.
    get("/health", "probe-1").await.expect("GET");
    get("/ready", "probe-2").await.expect("GET");
    get("/v1/info/version", "after-probes").await.expect("GET");
    eventually("the request lines", || async {
        server.request_line("after-probes").is_some() && server.request_line(&made).is_some()
    })
    .await;
    let line = server.request_line("abc-123").expect("logged");
    let mut out = Vec::new();
    differences("log", &documented("log"), &line, &mut out);
    assert!(out.is_empty(), "{out:?}\n{line}");
    assert_eq!(line["level"], "info");
    assert_eq!(line["component"], "http");
    assert_eq!(line["method"], "GET");
    assert_eq!(line["path"], "/api/v1/clusters");
    assert_eq!(line["statusCode"], 200);
    assert_eq!(line["userAgent"], "ops-test/1.0");
    for probe in ["probe-1", "probe-2"] {
        assert!(
            server.log().iter().all(|l| l["requestId"] != probe),
            "{probe} was logged"
        );
    }
    // Every line is JSON with the documented head, and no key is ever logged.
    for l in server.log() {
        for key in ["timestamp", "level", "component", "message"] {
            assert!(l.get(key).is_some(), "{key} missing: {l}");
        }
    }
    let all = server.lines.lock().expect("lines").join("\n");
    assert!(
        !all.contains(VIEWER) && !all.contains(ADMIN),
        "a key was logged"
    );

    // The level changes at runtime: admin only, a bad level is refused with the reason.
    let put = |key: &'static str, body: Value| {
        client
            .put(format!("{}/admin/log-level", server.base))
            .header("x-request-id", "level-change")
            .bearer_auth(key)
            .json(&body)
            .send()
    };
    let res = put(VIEWER, json!({"level": "warn"})).await.expect("PUT");
    assert_eq!(res.status(), 403);
    let res = put(ADMIN, json!({"level": "no[such"})).await.expect("PUT");
    assert_eq!(res.status(), 400);
    let body: Value = res.json().await.expect("JSON");
    assert_eq!(body["code"], "BAD_LEVEL", "{body}");
    let res = put(ADMIN, json!({"level": "warn"})).await.expect("PUT");
    assert_eq!(res.status(), 200);
    assert_eq!(res.json::<Value>().await.expect("JSON")["level"], "warn");
    get("/v1/info/version", "while-warn").await.expect("GET");
    let res = put(ADMIN, json!({"level": "info"})).await.expect("PUT");
    assert_eq!(res.status(), 200);
    get("/v1/info/version", "back-at-info").await.expect("GET");
    eventually("the line after the level came back", || async {
        server.request_line("back-at-info").is_some()
    })
    .await;
    // A line logged while a request is served carries the request's id, method and path.
    let changed = server
        .log()
        .into_iter()
        .find(|l| l["message"] == "log level changed" && l["level"] == "info")
        .expect("the level change is logged");
    assert_eq!(
        (&changed["requestId"], &changed["method"], &changed["path"]),
        (
            &json!("level-change"),
            &json!("PUT"),
            &json!("/admin/log-level")
        ),
        "{changed}"
    );
    // Lines are written in order: the request made at warn would be above this one.
    assert!(
        server.request_line("while-warn").is_none(),
        "an info line was logged at warn"
    );
    drop(db);
}

/// Rows in the history table for `kind`.
/// Import one manifest file through the API as the admin; the GraphQL answer.
async fn import_as_admin(client: &reqwest::Client, base: &str, name: &str, content: &str) -> Value {
    client
        .post(format!("{base}/graphql"))
        .bearer_auth(ADMIN)
        .json(&json!({
            "query": "mutation($f: [ManifestFileInput!]!) { importManifests(files: $f) { changed } }",
            "variables": {"f": [{"name": name, "content": content}]},
        }))
        .send()
        .await
        .expect("POST")
        .json()
        .await
        .expect("JSON")
}

async fn history_rows(db: &TestDb, kind: &str) -> i64 {
    let sql = "SELECT COUNT(*) FROM events WHERE kind = $1";
    match db {
        TestDb::Sqlite(_) => {
            let pool = sqlx::SqlitePool::connect(&db.url()).await.expect("sqlite");
            let n: i64 = sqlx::query_scalar(sql)
                .bind(kind)
                .fetch_one(&pool)
                .await
                .expect("count");
            pool.close().await;
            n
        }
        TestDb::Postgres(_) => {
            let pool = sqlx::PgPool::connect(&db.url()).await.expect("postgres");
            let n: i64 = sqlx::query_scalar(sql)
                .bind(kind)
                .fetch_one(&pool)
                .await
                .expect("count");
            pool.close().await;
            n
        }
    }
}

async fn drains_at_sigterm(db: TestDb) {
    let keys = KeysFile::new(&three_keys());
    let url = db.url();
    let mut server = Process::start(&[("API_KEYS_FILE", keys.path()), ("DATABASE_URL", &url)]);
    // A subscriber, acknowledged.
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let mut req = format!("{}/graphql/ws", server.base.replacen("http", "ws", 1))
        .into_client_request()
        .expect("request");
    req.headers_mut().insert(
        "Sec-WebSocket-Protocol",
        "graphql-transport-ws".parse().expect("header"),
    );
    let (mut ws, _) = tokio_tungstenite::connect_async(req)
        .await
        .expect("connect");
    crate::send_json(
        &mut ws,
        json!({"type": "connection_init", "payload": {"authorization": format!("Bearer {VIEWER}")}}),
    )
    .await;
    assert_eq!(crate::recv(&mut ws).await["type"], "connection_ack");

    // 1,000 changes in one write, then SIGTERM the moment the write is answered: the history
    // writer has them queued, not written.
    let manifests: String = (0..1_000)
        .map(|n| format!("---\napiVersion: vitistack.io/v1alpha1\nkind: MachineClass\nmetadata:\n  name: drain-{n}\nspec:\n  displayName: x\n  enabled: true\n  category: standard\n  machineProviders: [kubevirt]\n  cpu:\n    cores: 1\n  memory:\n    quantity: 1Gi\n"))
        .collect();
    let client = reqwest::Client::new();
    let res = import_as_admin(&client, &server.base, "drain.yaml", &manifests).await;
    assert_eq!(res["data"]["importManifests"]["changed"], 1_000, "{res}");
    server.terminate();

    let closed = crate::recv(&mut ws).await;
    assert_eq!(closed["close"], 1001, "{closed}");
    assert_eq!(closed["reason"], "Server is shutting down");

    assert_eq!(server.exited().await, Some(0), "{:?}", server.log());
    assert_eq!(history_rows(&db, "MachineClass").await, 1_000);
    // The objects were written too: a restart serves them.
    let again = spawn(&["--database-url", &url]).await;
    let data = again
        .data("{ machineClasses(first: 1) { totalCount } }", json!({}))
        .await;
    assert_eq!(data["machineClasses"]["totalCount"], 1_000);
    again.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_closes_sockets_with_1001_and_loses_no_change_sqlite() {
    drains_at_sigterm(TestDb::sqlite()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_closes_sockets_with_1001_and_loses_no_change_postgres() {
    drains_at_sigterm(TestDb::postgres().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_turns_ready_to_503_while_serving_on_for_the_delay() {
    let db = TestDb::sqlite();
    let url = db.url();
    let mut server = Process::start(&[
        ("ANONYMOUS_READ_FROM", "127.0.0.0/8"),
        ("DATABASE_URL", &url),
        ("SHUTDOWN_DELAY_SECONDS", "3"),
    ]);
    let client = reqwest::Client::new();
    let status = |path: &'static str| {
        let request = client.get(format!("{}{path}", server.base)).send();
        async move { request.await.map(|r| r.status().as_u16()).ok() }
    };
    assert_eq!(status("/ready").await, Some(200));
    server.terminate();
    eventually("/ready answers 503", || async {
        status("/ready").await == Some(503)
    })
    .await;
    // Still serving meanwhile: queries are answered, only the probes say "going".
    assert_eq!(status("/v1/info/version").await, Some(200));
    assert_eq!(status("/health/live").await, Some(503));
    assert_eq!(server.exited().await, Some(0));
    assert!(
        server.log().iter().any(|l| l["message"]
            .as_str()
            .is_some_and(|m| m.contains("SHUTDOWN_DELAY_SECONDS"))),
        "the delay is logged"
    );
}

/// Both writers on one SQLite file under load: the object writer and the history writer, while
/// the simulator writes and rounds of 3,000 changed objects are imported. Both writers gather
/// large batches (flushed every 2 s, or at 50,000), so their transactions meet. Contention
/// between our own writers is not an error: no `database is locked`, no retry, no gap in the
/// history, every object stored. (The busy timeout is `DB_CONNECT_TIMEOUT_SECONDS`: 1 s here, so
/// a writer left waiting on SQLite's own lock behind a large batch fails.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_writers_take_turns_under_load_nothing_locked_nothing_lost() {
    const ROUNDS: usize = 6;
    const OBJECTS: usize = 3_000;
    let keys = KeysFile::new(&three_keys());
    let db = TestDb::sqlite();
    let url = db.url();
    let mut server = Process::start_with(
        &["serve", "--demo"],
        &[
            ("API_KEYS_FILE", keys.path()),
            ("DATABASE_URL", &url),
            ("SIMULATE", "true"),
            ("SIMULATE_STEPS_PER_SECOND", "200"),
            ("DB_CONNECT_TIMEOUT_SECONDS", "1"),
            ("DB_BATCH_SIZE", "50000"),
            ("DB_FLUSH_INTERVAL_MS", "2000"),
            ("HISTORY_BATCH_SIZE", "50000"),
            ("HISTORY_FLUSH_INTERVAL_MS", "2000"),
        ],
    );
    let client = reqwest::Client::new();
    for round in 0..ROUNDS {
        let manifests: String = (0..OBJECTS)
            .map(|n| format!("---\napiVersion: vitistack.io/v1alpha1\nkind: MachineClass\nmetadata:\n  name: load-{n}\nspec:\n  displayName: round {round}\n  enabled: true\n  category: standard\n  machineProviders: [kubevirt]\n  cpu:\n    cores: 1\n  memory:\n    quantity: 1Gi\n"))
            .collect();
        let file = format!("round-{round}.yaml");
        let res = import_as_admin(&client, &server.base, &file, &manifests).await;
        assert_eq!(res["data"]["importManifests"]["changed"], OBJECTS, "{res}");
    }
    server.terminate();
    assert_eq!(server.exited().await, Some(0));
    let troubles: Vec<Value> = server
        .log()
        .into_iter()
        .filter(|l| {
            let line = l.to_string();
            line.contains("locked") || line.contains("retrying") || l["level"] == "error"
        })
        .collect();
    assert!(troubles.is_empty(), "{troubles:#?}");
    let pool = sqlx::SqlitePool::connect(&url).await.expect("sqlite");
    let events: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM events WHERE kind = 'MachineClass' AND name LIKE 'load-%'",
    )
    .fetch_one(&pool)
    .await
    .expect("events");
    assert_eq!(
        events,
        (ROUNDS * OBJECTS) as i64,
        "every change is in the history"
    );
    let gaps: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM events WHERE dropped IS NOT NULL")
        .fetch_one(&pool)
        .await
        .expect("gaps");
    assert_eq!(gaps, 0, "no gap in the history");
    let stored: Vec<String> = sqlx::query_scalar(
        "SELECT body FROM objects WHERE kind = 'MachineClass' AND name LIKE 'load-%'",
    )
    .fetch_all(&pool)
    .await
    .expect("objects");
    assert_eq!(stored.len(), OBJECTS);
    let last = format!("round {}", ROUNDS - 1);
    assert!(
        stored.iter().all(|b| b.contains(&last)),
        "every object stored as last imported"
    );
    pool.close().await;
}
