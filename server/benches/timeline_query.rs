//! The fleet as it was, at scale: how long the overview takes at a past moment of a 10,000-object
//! fleet with 30 days of history at one change per second (2,592,000 changes), on SQLite.
//!
//! The history is written straight into a fresh database in the timeline's format (the demo
//! generator's benchmark fleet with hosts and VMs as the first checkpoint, then each change a
//! merge patch of one object's status and an annotation, one second apart, with a checkpoint
//! whenever the versions since the last one take `CHECKPOINT_RATIO` times its bytes, as the writer does), then the
//! overview query is answered at `TIMELINE_MOMENTS` random moments: cold (each moment rebuilt) and
//! again (from the cache of rebuilt graphs); then at moments a step apart, as the time control
//! dragged forward or a replay asks them (each carried forward from the one before). Prints
//! p50/p95/max of each and the bytes per change.
//!
//! `cargo bench --bench timeline_query`; env: TIMELINE_CLUSTERS (120: about 10,000 objects),
//! TIMELINE_CHANGES (2592000), TIMELINE_MOMENTS (100), TIMELINE_DB (a path; default a file in
//! /var/tmp, removed afterwards).

use std::sync::Arc;
use std::time::Instant;

use serde_json::{Value, json};
use vitistack::db::{Db, Pool, PoolSettings};
use vitistack::graphql::{SchemaSettings, build_schema};
use vitistack::history::timeline::read::Past;
use vitistack::history::timeline::writer::{CHECKPOINT_FLOOR, CHECKPOINT_RATIO, stored_value};
use vitistack::history::timeline::{Body, ROW_OVERHEAD, encode_checkpoint};
use vitistack::model::merge_patch;
use vitistack::source::demo::{FleetSpec, fleet};
use vitistack::store::Store;
use vitistack_testkit::runtime;

// The server's allocator (server/src/main.rs): rebuilding a moment allocates and frees a whole
// graph, and under glibc malloc a third of the time went to the allocator.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    runtime::main(run);
}

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

const OVERVIEW: &str = "{ infrastructure { machines { total running failed } \
    clusters { total ready degraded failed inProgress byStage { value count } } } \
    clusterSummary { total ready failed } \
    hostCapacity { hosts readyHosts activeVms vcpusUsed vcpusLimit hostsThatCanFail redundancyLimit } \
    machines(first: 1) { totalCount } clusters(first: 1) { totalCount } }";

/// A small linear congruential generator: the same history on every run.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
}

const PHASES: [&str; 4] = ["Running", "Provisioning", "Failed", "Running"];

async fn run() {
    let clusters = env("TIMELINE_CLUSTERS", 120) as usize;
    let changes = env("TIMELINE_CHANGES", 2_592_000);
    let moments = env("TIMELINE_MOMENTS", 100);
    let path = std::env::var("TIMELINE_DB")
        .unwrap_or_else(|_| format!("/var/tmp/timeline-bench-{}.db", std::process::id()));
    // TIMELINE_KEEP=1 with TIMELINE_DB: a history written by an earlier run is asked again.
    let keep = std::env::var("TIMELINE_KEEP").is_ok_and(|v| v == "1");
    if !keep {
        let _ = std::fs::remove_file(&path);
    }
    let db = Db::open(&format!("sqlite:{path}"), &PoolSettings::default())
        .await
        .expect("database");
    let kept: Option<i64> = sqlx::query_scalar("SELECT min(at_ms) FROM timeline_checkpoints")
        .fetch_one(sqlite(&db))
        .await
        .expect("the checkpoints");
    match kept {
        Some(_) => println!("history: kept from an earlier run ({path})"),
        None => write_history(&db, &path, clusters, changes).await,
    }
    let start_ms: i64 = sqlx::query_scalar("SELECT min(at_ms) FROM timeline_checkpoints")
        .fetch_one(sqlite(&db))
        .await
        .expect("the first checkpoint");
    let changes: i64 = sqlx::query_scalar("SELECT count(*) FROM timeline_versions")
        .fetch_one(sqlite(&db))
        .await
        .expect("the versions");
    let changes = changes as u64;
    ask(&db, start_ms, changes, moments).await;
    db.close().await;
    if std::env::var("TIMELINE_DB").is_err() {
        for f in [path.clone(), format!("{path}-wal"), format!("{path}-shm")] {
            let _ = std::fs::remove_file(f);
        }
    }
}

/// 30 days (`changes` seconds) of the benchmark fleet's history, written into `db`.
async fn write_history(db: &Db, path: &str, clusters: usize, changes: u64) {
    let objects: Vec<Value> = fleet(&FleetSpec::large_demo(clusters))
        .iter()
        .map(stored_value)
        .collect();
    let n = objects.len();
    let start_ms = vitistack::clock::now_ms() - (changes as i64) * 1000 - 60_000;

    // The history, written as the timeline keeps it.
    let began = Instant::now();
    let mut current = objects.clone();
    let mut rng = Lcg(42);
    let mut version_id: i64 = 0;
    let mut since = 0u64;
    let mut last_cp = write_checkpoint(db, start_ms, 0, &current).await;
    let mut batch: Vec<(i64, i64, Vec<u8>)> = Vec::with_capacity(5_000);
    let mut version_bytes = 0u64;
    for i in 0..changes {
        let at = start_ms + 1000 * (i as i64 + 1);
        let o = (rng.next() as usize) % n;
        let before = current[o].clone();
        let v = &mut current[o];
        if v.get("status").is_none_or(|s| !s.is_object()) {
            v["status"] = json!({});
        }
        v["status"]["phase"] = json!(PHASES[(rng.next() % 4) as usize]);
        v["metadata"]["annotations"]["bench/step"] = json!(i.to_string());
        v["metadata"]["resourceVersion"] = json!((n as u64 + i + 1).to_string());
        let body = match merge_patch::diff(&before, v) {
            Some(p) => Body::Patch(p),
            None => Body::Full(v.clone()),
        }
        .encode();
        since += body.len() as u64 + ROW_OVERHEAD;
        version_bytes += body.len() as u64 + ROW_OVERHEAD;
        batch.push((at, o as i64 + 1, body));
        version_id += 1;
        if batch.len() == 5_000 || since >= (CHECKPOINT_RATIO * last_cp).max(CHECKPOINT_FLOOR) {
            insert(db, &batch).await;
            batch.clear();
        }
        if since >= (CHECKPOINT_RATIO * last_cp).max(CHECKPOINT_FLOOR) {
            last_cp = write_checkpoint(db, at, version_id, &current).await;
            since = 0;
        }
    }
    insert(db, &batch).await;
    let written = began.elapsed();
    let file = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0)
        + std::fs::metadata(format!("{path}-wal"))
            .map(|m| m.len())
            .unwrap_or(0);
    let checkpoints: i64 = sqlx::query_scalar("SELECT count(*) FROM timeline_checkpoints")
        .fetch_one(sqlite(db))
        .await
        .expect("count");
    println!(
        "history: {n} objects, {changes} changes over {:.1} days, {checkpoints} checkpoints, written in {:.1} s; \
         {:.0} B/change in versions, {:.0} B/change on disk (file)",
        changes as f64 / 86_400.0,
        written.as_secs_f64(),
        version_bytes as f64 / changes.max(1) as f64,
        file as f64 / changes.max(1) as f64,
    );
}

/// The overview at `moments` random moments of the history from `start_ms` on: each timed
/// cold (rebuilt), then asked again of the same graph (the query alone), then the whole pass again
/// (from the cache).
async fn ask(db: &Db, start_ms: i64, changes: u64, moments: u64) {
    let mut rng = Lcg(7);
    let store = Arc::new(Store::new().derive_with(vitistack::domain::aggregates::deriver()));
    let schema = build_schema(&SchemaSettings::default());
    let past = Past::new(256 << 20, moment_counter());
    let mut picks = Vec::new();
    for _ in 0..moments {
        picks.push(start_ms + 1000 + (rng.next() as i64 % (changes as i64 * 1000)));
    }
    let report = |what: &str, mut took: Vec<f64>, past: &Past| {
        took.sort_by(f64::total_cmp);
        let q = |p: f64| took[((took.len() as f64 - 1.0) * p).round() as usize];
        println!(
            "overview at {} moments, {what}: p50 {:.1} ms, p95 {:.1} ms, max {:.1} ms; cache {:?}",
            took.len(),
            q(0.5),
            q(0.95),
            q(1.0),
            past.held()
        );
    };
    let overview = |snap| async {
        let t = Instant::now();
        let r = schema
            .execute(async_graphql::Request::new(OVERVIEW).data(snap))
            .await;
        assert!(r.errors.is_empty(), "{:?}", r.errors);
        t.elapsed().as_secs_f64() * 1000.0
    };
    for pass in ["cold (rebuilt)", "again (cached)"] {
        let (mut took, mut query) = (Vec::new(), Vec::new());
        for at in &picks {
            let t = Instant::now();
            let snap = past.at(db, &store, *at).await.expect("a past graph").graph;
            overview(snap.clone()).await;
            took.push(t.elapsed().as_secs_f64() * 1000.0);
            query.push(overview(snap).await);
        }
        report(pass, took, &past);
        if pass.starts_with("cold") {
            report("the query alone (its graph built)", query, &past);
        }
    }
    // The time control dragged forward (a thousandth of the range a step) and a replay (a minute
    // a step), each from a random moment with an empty cache: every moment after the first is
    // carried forward from the one before.
    let range_ms = changes as i64 * 1000;
    for (what, step_ms) in [
        ("dragged forward, a 1/1000 step each", range_ms / 1000),
        ("replayed, a minute a step", 60_000),
    ] {
        let past = Past::new(256 << 20, moment_counter());
        let from = start_ms + 1000 + (rng.next() as i64 % (range_ms / 2));
        let mut took = Vec::new();
        for i in 0..moments as i64 {
            let t = Instant::now();
            let snap = past
                .at(db, &store, from + i * step_ms)
                .await
                .expect("a past graph")
                .graph;
            overview(snap).await;
            took.push(t.elapsed().as_secs_f64() * 1000.0);
        }
        // The first moment is a cold one.
        took.remove(0);
        report(what, took, &past);
    }
}

async fn insert(db: &Db, rows: &[(i64, i64, Vec<u8>)]) {
    if rows.is_empty() {
        return;
    }
    {
        let mut tx = sqlite(db).begin().await.expect("begin");
        for chunk in rows.chunks(300) {
            let mut b =
                sqlx::QueryBuilder::new("INSERT INTO timeline_versions (at_ms, object, body) ");
            b.push_values(chunk, |mut b, (at, object, body)| {
                b.push_bind(*at).push_bind(*object).push_bind(body.clone());
            });
            b.build().execute(&mut *tx).await.expect("insert");
        }
        tx.commit().await.expect("commit");
    }
}

/// The whole graph as a checkpoint after version `after`; its bytes.
async fn write_checkpoint(db: &Db, at: i64, after: i64, objects: &[Value]) -> u64 {
    let numbered: Vec<(i64, Value)> = objects
        .iter()
        .enumerate()
        .map(|(i, v)| (i as i64 + 1, v.clone()))
        .collect();
    let body = encode_checkpoint(&numbered);
    let len = body.len() as u64;
    {
        sqlx::query(
            "INSERT INTO timeline_checkpoints (at_ms, after_version, objects, max_object, before_bytes, body, continues) \
             VALUES ($1, $2, $3, $4, 0, $5, TRUE)",
        )
        .bind(at)
        .bind(after)
        .bind(numbered.len() as i64)
        .bind(numbered.len() as i64)
        .bind(body)
        .execute(sqlite(db))
        .await
        .expect("checkpoint");
    }
    len + ROW_OVERHEAD
}

/// A counter of the moments asked, unregistered.
fn moment_counter() -> prometheus::IntCounterVec {
    vitistack::history::HistoryMetrics::new()
        .expect("metrics")
        .past_moments
}

fn sqlite(db: &Db) -> &sqlx::SqlitePool {
    match db.pool() {
        Pool::Sqlite(p) => p,
        Pool::Postgres(_) => unreachable!("the benchmark's database is SQLite"),
    }
}
