//! History ingest: how many events per second the event log takes, into SQLite and into the
//! machine's PostgreSQL (a database of its own, dropped afterwards).
//!
//! Two figures per engine:
//! - **insert**: rows already made (Machine phase changes from the demo generator, with their
//!   diffs) written by `history::writer::insert` in batches of `HISTORY_BATCH_SIZE` (5,000;
//!   INGEST_BATCH to try others);
//! - **end to end**: changes applied to a store as fast as it takes them, read from its change
//!   stream by the real writer task (diffs computed, batched, written), timed until the last one
//!   is in the database.
//!
//! `cargo bench --bench history_ingest`; env: INGEST_EVENTS (200000), INGEST_POSTGRES (admin
//! URL, default postgres://postgres@127.0.0.1:5432/postgres; `off` to skip PostgreSQL).

use vitistack_testkit::runtime;

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use vitistack::db::Start;
use vitistack::db::health::DbHealth;
use vitistack::db::{Db, Engine, Pool, PoolSettings};
use vitistack::history::writer::{self, HistorySettings};
use vitistack::history::{EventRow, History, HistoryMetrics, row_of};
use vitistack::model::{Kind, Resource};
use vitistack::source::demo::{FleetSpec, fleet};
use vitistack::store::{Op, Store};

fn main() {
    runtime::main(run);
}

const PHASES: [&str; 3] = ["Pending", "Running", "Failed"];

/// The demo's Machines, each in a namespace of its own round, as templates.
fn machines() -> Vec<serde_json::Value> {
    fleet(&FleetSpec::large(50))
        .into_iter()
        .filter(|r| r.kind() == Kind::Machine)
        .map(|r| r.to_value())
        .collect()
}

fn change(templates: &[serde_json::Value], i: usize) -> Op {
    let mut v = templates[i % templates.len()].clone();
    v["status"]["phase"] = json!(PHASES[(i / templates.len()) % PHASES.len()]);
    v["metadata"]["annotations"] = json!({"bench/round": (i / templates.len()).to_string()});
    Op::Upsert(Resource::from_value(Kind::Machine, "v1alpha1", v).expect("machine"))
}

async fn rows(templates: &[serde_json::Value], n: usize) -> Vec<EventRow> {
    let store = Store::with_change_buffer(n + 16);
    let mut rx = store.subscribe();
    let mut out = Vec::with_capacity(n);
    for chunk in (0..n).collect::<Vec<_>>().chunks(1000) {
        store.apply(chunk.iter().map(|i| change(templates, *i)).collect());
        while let Ok(c) = rx.try_recv() {
            out.push(row_of(&c, vitistack::history::now_ms()));
        }
    }
    out
}

async fn count(db: &Db) -> i64 {
    let q = "SELECT COUNT(*) FROM events";
    match db.pool() {
        Pool::Sqlite(p) => sqlx::query_scalar(q).fetch_one(p).await.unwrap_or(0),
        Pool::Postgres(p) => sqlx::query_scalar(q).fetch_one(p).await.unwrap_or(0),
    }
}

async fn bench(name: &str, url: &str, templates: &[serde_json::Value], n: usize) {
    let pool = PoolSettings::default();
    // Insert path.
    let db = Db::open(url, &pool).await.expect("open");
    let made = rows(templates, n).await;
    let started = Instant::now();
    let mut in_insert = Duration::ZERO;
    let batch: usize = std::env::var("INGEST_BATCH")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(HistorySettings::default().batch_size);
    for chunk in made.chunks(batch) {
        let t = Instant::now();
        writer::insert(&db, chunk).await.expect("insert");
        in_insert += t.elapsed();
    }
    let took = started.elapsed();
    let t = Instant::now();
    let bytes: usize = made.chunks(batch).map(|c| writer::copy_text(c).len()).sum();
    println!(
        "{name}: (inside insert {in_insert:.2?}; formatting alone {:.2?} for {} MiB)",
        t.elapsed(),
        bytes >> 20
    );
    assert_eq!(count(&db).await, n as i64, "every row stored");
    println!(
        "{name}: insert {n} events in {took:.2?}: {:.0} events/s",
        n as f64 / took.as_secs_f64()
    );

    // End to end: a fresh table, the real writer task on a store's change stream.
    match db.pool() {
        Pool::Sqlite(p) => {
            for q in [
                "DELETE FROM events",
                "DELETE FROM timeline_versions",
                "DELETE FROM timeline_checkpoints",
            ] {
                sqlx::query(q).execute(p).await.expect("clear");
            }
        }
        Pool::Postgres(p) => {
            sqlx::query("TRUNCATE events, timeline_versions, timeline_checkpoints")
                .execute(p)
                .await
                .expect("clear");
        }
    }
    let store = Arc::new(Store::with_change_buffer(n + 16));
    let history = Arc::new(History::new(
        HistorySettings {
            buffer: n + 16,
            ..HistorySettings::default()
        },
        HistoryMetrics::new().expect("metrics"),
    ));
    let health = Arc::new(DbHealth::new(
        if url.starts_with("sqlite") {
            Engine::Sqlite
        } else {
            Engine::Postgres
        },
        url,
    ));
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let task = writer::spawn(
        Start::Connected(db.clone()),
        history.clone(),
        store.subscribe(),
        health,
        stop_rx,
        vitistack::db::unregistered_counter(),
    );
    history.connected(db.clone());
    let timeline = vitistack::history::timeline::writer::spawn(
        history.clone(),
        store.clone(),
        store.subscribe(),
        None,
        stop_tx.subscribe(),
    );
    let ops: Vec<Vec<Op>> = (0..n)
        .collect::<Vec<_>>()
        .chunks(1000)
        .map(|c| c.iter().map(|i| change(templates, *i)).collect())
        .collect();
    let started = Instant::now();
    for batch in ops {
        store.apply(batch);
        tokio::task::yield_now().await;
    }
    let applied = started.elapsed();
    while history.metrics.written.get() < n as u64 {
        assert!(
            started.elapsed() < Duration::from_secs(600),
            "writer did not finish"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let took = started.elapsed();
    // The timeline beside it (the history keeps both): every change a version, no restart but
    // the first checkpoint.
    let versions = history.metrics.timeline.with_label_values(&["version"]);
    while versions.get() < n as u64 {
        assert!(
            started.elapsed() < Duration::from_secs(600),
            "timeline writer did not finish"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let both = started.elapsed();
    let _ = stop_tx.send(true);
    let _ = task.await;
    let _ = timeline.await;
    assert_eq!(count(&db).await, n as i64, "every event stored");
    assert_eq!(history.metrics.dropped.get(), 0, "nothing dropped");
    let restarts = history
        .metrics
        .timeline
        .with_label_values(&["restart"])
        .get();
    assert_eq!(
        restarts, 1,
        "the timeline missed no change (only its first checkpoint)"
    );
    println!(
        "{name}: end to end {n} changes (applied in {applied:.2?}) written in {took:.2?}: {:.0} events/s; \
         with the timeline's {} versions and {} checkpoints: {both:.2?}, {:.0} changes/s",
        n as f64 / took.as_secs_f64(),
        versions.get(),
        history
            .metrics
            .timeline
            .with_label_values(&["checkpoint"])
            .get(),
        n as f64 / both.as_secs_f64()
    );
    db.close().await;
}

async fn run() {
    let n: usize = std::env::var("INGEST_EVENTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200_000);
    let templates = machines();

    let file = std::env::temp_dir().join(format!("vitistack-ingest-{}.db", std::process::id()));
    bench(
        "sqlite",
        &format!("sqlite://{}", file.display()),
        &templates,
        n,
    )
    .await;
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", file.display()));
    }

    let admin = std::env::var("INGEST_POSTGRES")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into());
    if admin == "off" {
        return;
    }
    use sqlx::Connection;
    let Ok(mut conn) = sqlx::PgConnection::connect(&admin).await else {
        println!("postgres: not reachable at {admin}; skipped");
        return;
    };
    let name = format!("vitistack_bench_{}", std::process::id());
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
        .execute(&mut conn)
        .await
        .expect("create database");
    let base = admin.rsplit_once('/').map_or(admin.as_str(), |(b, _)| b);
    bench("postgres", &format!("{base}/{name}"), &templates, n).await;
    let _ = sqlx::query(sqlx::AssertSqlSafe(format!(
        "DROP DATABASE IF EXISTS {name} WITH (FORCE)"
    )))
    .execute(&mut conn)
    .await;
}
