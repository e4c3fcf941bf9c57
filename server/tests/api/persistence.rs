//! Embedded-mode persistence, on SQLite and on the machine's PostgreSQL (each test gets a
//! database of its own): objects survive a restart, deletions too, the demo seeds only an empty
//! database, `vitistack import` stores what a server then serves, and a database that is away
//! at start-up neither stops the API nor loses the objects once it returns.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::{Value, json};
use vitistack::db::{Db, PoolSettings, objects};
use vitistack::model::Kind;
use vitistack::store::{ObjectKey, Op};

use vitistack_testkit::postgres::TempPostgres;

use crate::{TempSqlite, TestApp, fixtures, spawn};

/// A database of the test's own.
pub enum TestDb {
    Sqlite(TempSqlite),
    Postgres(TempPostgres),
}

impl TestDb {
    pub fn sqlite() -> TestDb {
        TestDb::Sqlite(TempSqlite::default())
    }

    /// A fresh PostgreSQL database; fails the test when the server is not running.
    pub async fn postgres() -> TestDb {
        TestDb::Postgres(TempPostgres::create().await)
    }

    /// Host and port of the PostgreSQL server.
    pub fn postgres_server() -> String {
        vitistack_testkit::postgres::server()
    }

    pub fn url(&self) -> String {
        match self {
            TestDb::Sqlite(f) => f.url(),
            TestDb::Postgres(p) => p.url(),
        }
    }

    /// The same database reached through `addr` (a proxy) instead.
    pub fn url_via(&self, addr: std::net::SocketAddr) -> String {
        match self {
            TestDb::Sqlite(f) => f.url(),
            TestDb::Postgres(p) => p.url_via(addr),
        }
    }

    /// Every stored object's key and uid, read straight from the database.
    pub async fn stored(&self) -> Vec<(ObjectKey, String)> {
        stored_at(&self.url()).await
    }
}

/// Every object stored in the database at `url`, key and uid, sorted.
async fn stored_at(url: &str) -> Vec<(ObjectKey, String)> {
    let db = Db::open(url, &PoolSettings::default()).await.expect("open");
    let (objects, skipped) = objects::load(&db).await.expect("load");
    db.close().await;
    assert!(skipped.is_empty(), "rows that do not decode: {skipped:?}");
    let mut keys: Vec<_> = objects
        .iter()
        .map(|r| (ObjectKey::of(r), r.uid().to_string()))
        .collect();
    keys.sort();
    keys
}

/// Generate one test per engine from an `async fn(TestDb)` (the module invoking it imports
/// `TestDb`).
macro_rules! on_both_engines {
    ($($case:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    let db = super::TestDb::sqlite();
                    super::$case(&db).await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    let db = super::TestDb::postgres().await;
                    super::$case(&db).await;
                }
            )*
        }
    };
}

on_both_engines!(
    objects_survive_a_restart_with_their_identity,
    deletions_survive_a_restart_and_the_demo_seeds_only_an_empty_database,
    import_command_stores_what_the_server_then_serves,
    database_health_and_metrics_tell_the_truth,
    a_database_away_at_start_up_gets_every_object_when_it_returns,
    an_object_deleted_while_the_database_was_away_stays_deleted,
    merged_objects_never_reuse_a_resource_version,
    a_large_manifest_directory_loads_with_nothing_dropped,
    idle_connections_are_capped_and_closed_after_their_idle_time,
);

/// DB_MAX_IDLE_CONNS is a cap, as in Go's database/sql (at most that many stay open while idle),
/// and DB_CONN_MAX_IDLE_TIME closes connections idle for longer (down to the one SQLite keeps).
async fn idle_connections_are_capped_and_closed_after_their_idle_time(db: &TestDb) {
    async fn burst(db: &Db, n: usize) {
        use vitistack::db::Pool;
        // n connections in use at once, then all given back.
        match db.pool() {
            Pool::Sqlite(p) => {
                let held = futures::future::join_all((0..n).map(|_| p.acquire())).await;
                assert!(held.iter().all(Result::is_ok));
            }
            Pool::Postgres(p) => {
                let held = futures::future::join_all((0..n).map(|_| p.acquire())).await;
                assert!(held.iter().all(Result::is_ok));
            }
        }
        assert!(db.connections().1 + db.connections().0 >= n as u32);
    }
    async fn idle_until(db: &Db, at_most: u32) -> (u32, u32, u32) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        loop {
            let c = db.connections();
            if c.0 <= at_most {
                return c;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "idle connections stayed at {} (cap {at_most})",
                c.0
            );
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    }
    let settings = PoolSettings {
        max_open: 8,
        max_idle: 2,
        max_idle_time: None,
        ..PoolSettings::default()
    };
    let capped = Db::open(&db.url(), &settings).await.expect("open");
    burst(&capped, 6).await;
    // Given back (sqlx returns them in the background), then trimmed to the cap.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while capped.connections().1 > 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "{:?}",
            capped.connections()
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let (idle, _, _) = idle_until(&capped, 2).await;
    assert!(idle >= 1, "the cap closes the excess, not every connection");
    capped.close().await;

    let settings = PoolSettings {
        max_open: 8,
        max_idle: 8,
        max_idle_time: Some(std::time::Duration::from_millis(300)),
        ..PoolSettings::default()
    };
    let timed = Db::open(&db.url(), &settings).await.expect("open");
    burst(&timed, 6).await;
    // Down to the floor of one connection (kept for SQLite's in-memory databases).
    idle_until(&timed, 1).await;
    timed.close().await;
}

const CLUSTERS: &str = "{ sequence clusters(first: 500) { totalCount nodes { namespace name uid createdAt resourceVersion } } }";

pub async fn start(db: &TestDb, extra: &[&str]) -> TestApp {
    let url = db.url();
    let mut args = vec!["--database-url", url.as_str()];
    args.extend_from_slice(extra);
    spawn(&args).await
}

async fn objects_survive_a_restart_with_their_identity(db: &TestDb) {
    let upstream = fixtures().join("upstream");
    let first = start(db, &["--demo", upstream.to_str().expect("utf-8")]).await;
    let before = first.data(CLUSTERS, json!({})).await;
    let objects_before = first.running().store.snapshot().len();
    first.stop().await;
    assert_eq!(
        db.stored().await.len(),
        objects_before,
        "every object written on stop"
    );

    // No demo, no manifests: everything comes from the database.
    let second = start(db, &[]).await;
    assert_eq!(second.running().restored, objects_before);
    let after = second.data(CLUSTERS, json!({})).await;
    assert_eq!(
        after["clusters"], before["clusters"],
        "same clusters with the same uid, creation time and resourceVersion"
    );
    assert_eq!(after["sequence"], before["sequence"]);
    assert!(before["clusters"]["totalCount"].as_i64().unwrap_or(0) >= 14);

    // New writes continue the sequence instead of reusing resourceVersions.
    let seq_before = before["sequence"].as_u64().expect("sequence");
    let store = &second.running().store;
    let mut m = store
        .snapshot()
        .list(Kind::Machine)
        .next()
        .map(|r| (**r).clone())
        .expect("a machine");
    m.meta_mut()
        .labels
        .get_or_insert_with(Default::default)
        .insert("touched", "yes");
    let change = store.apply(vec![Op::Upsert(m)]);
    assert_eq!(change[0].seq, seq_before + 1);
    second.stop().await;
}

async fn deletions_survive_a_restart_and_the_demo_seeds_only_an_empty_database(db: &TestDb) {
    let first = start(db, &["--demo"]).await;
    let snap = first.running().store.snapshot();
    let victim = snap
        .list(Kind::KubernetesCluster)
        .next()
        .map(|r| ObjectKey::of(r))
        .expect("a cluster");
    let total = snap.len();
    first
        .running()
        .store
        .apply(vec![Op::Delete(victim.clone())]);
    first.stop().await;

    // --demo again: the database is not empty, so the deleted cluster stays deleted.
    let second = start(db, &["--demo"]).await;
    let snap = second.running().store.snapshot();
    assert_eq!(snap.len(), total - 1);
    assert!(snap.get_key(&victim).is_none(), "{victim} came back");
    let stored = db.stored().await;
    assert!(stored.iter().all(|(k, _)| k != &victim));
    second.stop().await;
}

async fn import_command_stores_what_the_server_then_serves(db: &TestDb) {
    let bin = env!("CARGO_BIN_EXE_vitistack");
    let run = |args: Vec<String>| {
        let out = std::process::Command::new(bin)
            .args(&args)
            .output()
            .expect("run vitistack");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned()
                + &String::from_utf8_lossy(&out.stderr),
        )
    };
    let url = db.url();
    let (code, out) = run(vec!["migrate".into(), "--database-url".into(), url.clone()]);
    assert_eq!(code, Some(0), "{out}");
    // The newest of the migrations shipped in the binary (one file per step, in both engines).
    let steps = std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../migrations/sqlite"))
        .expect("migrations")
        .filter(|e| {
            e.as_ref()
                .is_ok_and(|e| e.path().extension().is_some_and(|x| x == "sql"))
        })
        .count();
    assert!(
        out.contains(&format!("schema is at migration {steps} ({steps} applied)")),
        "{out}"
    );

    // Refused files store nothing, and the command says so with exit 1.
    let invalid = fixtures().join("invalid");
    let (code, out) = run(vec![
        "import".into(),
        "--database-url".into(),
        url.clone(),
        invalid.display().to_string(),
    ]);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("7 files refused"), "{out}");
    assert!(db.stored().await.is_empty());

    let upstream = fixtures().join("upstream");
    let (code, out) = run(vec![
        "import".into(),
        "--database-url".into(),
        url.clone(),
        upstream.display().to_string(),
    ]);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("objects created or changed"), "{out}");
    let stored = db.stored().await;
    assert!(stored.len() >= 30, "{} stored", stored.len());

    // Importing the same files again changes nothing.
    let (_, out) = run(vec![
        "import".into(),
        "--database-url".into(),
        url.clone(),
        upstream.display().to_string(),
    ]);
    assert!(out.contains(": 0 objects created or changed"), "{out}");
    assert_eq!(db.stored().await, stored, "same objects, same uids");

    // A server started on that database serves the imported objects, with their uids.
    let app = start(db, &[]).await;
    let data = app
        .data(
            "{ clusters(first: 100) { nodes { namespace name uid } } }",
            json!({}),
        )
        .await;
    let served: Vec<(String, String)> = data["clusters"]["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .map(|n| {
            (
                n["name"].as_str().unwrap_or_default().to_string(),
                n["uid"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    let stored_clusters: Vec<(String, String)> = stored
        .iter()
        .filter(|(k, _)| k.kind == Kind::KubernetesCluster)
        .map(|(k, uid)| (k.name.to_string(), uid.clone()))
        .collect();
    assert!(!served.is_empty());
    let mut served_sorted = served.clone();
    served_sorted.sort();
    let mut stored_sorted = stored_clusters;
    stored_sorted.sort();
    assert_eq!(served_sorted, stored_sorted);
    app.stop().await;
}

async fn database_health_and_metrics_tell_the_truth(db: &TestDb) {
    let app = start(db, &["--demo"]).await;
    let (code, body) = app.get("/health/database").await;
    assert_eq!(code, 200, "{body}");
    let health: Value = serde_json::from_str(&body).expect("json");
    assert_eq!(health["status"], "up");
    let engine = if matches!(db, TestDb::Sqlite(_)) {
        "sqlite"
    } else {
        "postgres"
    };
    assert_eq!(health["engine"], engine);
    let (_, metrics) = app.get("/metrics").await;
    assert!(metrics.contains("vitistack_database_up 1"), "{metrics}");
    app.stop().await;
}

/// A TCP proxy to the PostgreSQL server that refuses connections until switched on, and can cut
/// the connections it carries (the database "goes away" mid-stream).
pub struct Proxy {
    pub addr: std::net::SocketAddr,
    pub on: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
    live: Arc<parking_lot::Mutex<Vec<tokio::task::JoinHandle<()>>>>,
}

impl Proxy {
    pub async fn start(upstream: String) -> Proxy {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let on = Arc::new(AtomicBool::new(false));
        let live: Arc<parking_lot::Mutex<Vec<tokio::task::JoinHandle<()>>>> = Arc::default();
        let (flag, conns) = (on.clone(), live.clone());
        let task = tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                if !flag.load(Ordering::Acquire) {
                    drop(client);
                    continue;
                }
                let upstream = upstream.clone();
                conns.lock().push(tokio::spawn(async move {
                    if let Ok(mut server) = tokio::net::TcpStream::connect(upstream).await {
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                    }
                }));
            }
        });
        Proxy {
            addr,
            on,
            task,
            live,
        }
    }

    /// Refuse new connections and drop every open one.
    pub fn cut(&self) {
        self.on.store(false, Ordering::Release);
        for c in self.live.lock().drain(..) {
            c.abort();
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
        self.cut();
    }
}

/// A database that is away when a server starts and can be brought back: PostgreSQL through a
/// proxy that refuses until switched on; SQLite as a path in a directory that does not exist
/// yet (it appears, holding a copy of the database's file, when the database "returns").
struct Away {
    proxy: Proxy,
    blocked_dir: std::path::PathBuf,
    url: String,
}

impl Away {
    async fn new(db: &TestDb) -> Away {
        let proxy = Proxy::start(TestDb::postgres_server()).await;
        let blocked_dir =
            std::env::temp_dir().join(format!("vitistack-missing-{}", uuid::Uuid::new_v4()));
        let url = match db {
            TestDb::Sqlite(_) => format!("sqlite://{}/x.db", blocked_dir.display()),
            TestDb::Postgres(_) => db.url_via(proxy.addr),
        };
        Away {
            proxy,
            blocked_dir,
            url,
        }
    }

    /// The database becomes reachable.
    fn come_back(&self, db: &TestDb) {
        match db {
            TestDb::Sqlite(file) => {
                std::fs::create_dir_all(&self.blocked_dir).expect("mkdir");
                for suffix in ["", "-wal", "-shm"] {
                    let from = format!("{}{suffix}", file.0.display());
                    if std::path::Path::new(&from).exists() {
                        std::fs::copy(
                            &from,
                            format!("{}/x.db{suffix}", self.blocked_dir.display()),
                        )
                        .expect("copy");
                    }
                }
            }
            TestDb::Postgres(_) => self.proxy.on.store(true, Ordering::Release),
        }
    }

    /// What the database the server now writes to holds.
    async fn stored(&self, db: &TestDb) -> Vec<(ObjectKey, String)> {
        match db {
            TestDb::Sqlite(_) => stored_at(&self.url).await,
            TestDb::Postgres(_) => db.stored().await,
        }
    }

    /// The URL to read the database the server now writes to.
    fn now_url(&self, db: &TestDb) -> String {
        match db {
            TestDb::Sqlite(_) => self.url.clone(),
            TestDb::Postgres(_) => db.url(),
        }
    }
}

impl Drop for Away {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.blocked_dir);
    }
}

/// A server on `away`'s database (away at start-up), connecting with a short timeout.
async fn start_away(away: &Away, extra: &[&str]) -> TestApp {
    let mut args = vec![
        "--database-url",
        away.url.as_str(),
        "--db-connect-timeout-seconds",
        "1",
    ];
    args.extend_from_slice(extra);
    spawn(&args).await
}

/// Wait until the database is up again and every pending object write has landed.
async fn wait_written(app: &TestApp) {
    crate::eventually("the database back, every object written", || async {
        let (code, body) = app.get("/health/database").await;
        let report: Value = serde_json::from_str(&body).expect("json");
        code == 200 && report["pending_writes"] == 0 && report["written"].as_u64() > Some(0)
    })
    .await;
}

fn a_machine(name: &str, phase: &str) -> Op {
    Op::Upsert(
        vitistack::model::Resource::from_value(
            Kind::Machine,
            "v1alpha1",
            json!({"metadata": {"name": name, "namespace": "merge"},
                   "spec": {"provider": "kubevirt"}, "status": {"phase": phase}}),
        )
        .expect("machine"),
    )
}

/// An object the graph deleted while the database was away must not come back when the
/// database returns and its objects are merged in; what it stored and nobody touched does.
async fn an_object_deleted_while_the_database_was_away_stays_deleted(db: &TestDb) {
    let earlier = start(db, &[]).await;
    earlier.running().store.apply(vec![
        a_machine("deleted-meanwhile", "Running"),
        a_machine("kept", "Running"),
    ]);
    earlier.stop().await;
    assert_eq!(db.stored().await.len(), 2);

    let away = Away::new(db).await;
    let app = start_away(&away, &[]).await;
    let store = app.running().store.clone();
    // The graph has it too (from a manifest, an import…), and deletes it while the database is
    // away.
    store.apply(vec![a_machine("deleted-meanwhile", "Running")]);
    store.apply(vec![Op::Delete(ObjectKey::new(
        &Default::default(),
        Kind::Machine,
        "merge",
        "deleted-meanwhile",
    ))]);
    away.come_back(db);
    wait_written(&app).await;
    let snap = store.snapshot();
    assert!(
        snap.get(&Default::default(), Kind::Machine, "merge", "kept")
            .is_some(),
        "merged in"
    );
    assert!(
        snap.get(
            &Default::default(),
            Kind::Machine,
            "merge",
            "deleted-meanwhile"
        )
        .is_none(),
        "it came back from the database"
    );
    app.stop().await;
    let names: Vec<String> = away
        .stored(db)
        .await
        .into_iter()
        .map(|(k, _)| k.name.to_string())
        .collect();
    assert_eq!(names, ["kept"]);
}

/// Objects merged in after an outage keep their uid; their next versions must not repeat the
/// versions their history already holds (rows are unique by uid, resourceVersion and change, so
/// a repeated version would silently lose the new event).
async fn merged_objects_never_reuse_a_resource_version(db: &TestDb) {
    let earlier = start(db, &["--history-flush-interval-ms", "20"]).await;
    for phase in [
        "Pending", "Creating", "Running", "Stopping", "Stopped", "Running",
    ] {
        earlier.running().store.apply(vec![a_machine("m", phase)]);
    }
    crate::eventually("six events written", || async {
        crate::metric_opt(
            &earlier.get("/metrics").await.1,
            "vitistack_history_events_written_total",
        ) == Some(6.0)
    })
    .await;
    let old_rv: u64 = earlier
        .running()
        .store
        .snapshot()
        .get(&Default::default(), Kind::Machine, "merge", "m")
        .and_then(|m| m.meta().resource_version.clone())
        .and_then(|v| v.parse().ok())
        .expect("rv");
    earlier.stop().await;

    let away = Away::new(db).await;
    let app = start_away(&away, &["--history-flush-interval-ms", "20"]).await;
    let store = app.running().store.clone();
    away.come_back(db);
    wait_written(&app).await;
    let merged = store
        .snapshot()
        .get(&Default::default(), Kind::Machine, "merge", "m")
        .cloned()
        .expect("merged in");
    let merged_rv: u64 = merged
        .meta()
        .resource_version
        .as_deref()
        .and_then(|v| v.parse().ok())
        .expect("rv");
    assert!(merged_rv > old_rv, "{merged_rv} <= {old_rv}");
    // Two changes after the merge: both are in the history, with the same uid as before.
    store.apply(vec![a_machine("m", "Failed")]);
    store.apply(vec![a_machine("m", "Running")]);
    crate::eventually("two more events written", || async {
        crate::metric_opt(
            &app.get("/metrics").await.1,
            "vitistack_history_events_written_total",
        ) == Some(2.0)
    })
    .await;
    let url = away.now_url(db);
    app.stop().await;
    let d = Db::open(&url, &PoolSettings::default())
        .await
        .expect("open");
    let rows = vitistack::history::query::recent_by_uid(&d, &[merged.uid().to_string()], 100)
        .await
        .expect("history");
    d.close().await;
    let rows = rows.get(&*merged.uid()).cloned().unwrap_or_default();
    let phases: Vec<Option<&str>> = rows
        .iter()
        .rev()
        .map(|r| r.phase_after.as_deref())
        .collect();
    assert_eq!(
        phases,
        [
            Some("Pending"),
            Some("Creating"),
            Some("Running"),
            Some("Stopping"),
            Some("Stopped"),
            Some("Running"),
            Some("Failed"),
            Some("Running")
        ],
        "every event of the object, none lost to a repeated version"
    );
}

async fn a_database_away_at_start_up_gets_every_object_when_it_returns(db: &TestDb) {
    // Something stored earlier, which must be merged in when the database returns.
    let earlier = start(db, &["--demo"]).await;
    let earlier_count = earlier.running().store.snapshot().len();
    earlier.stop().await;
    let upstream = fixtures().join("upstream");
    let away = Away::new(db).await;
    let app = start_away(&away, &[upstream.to_str().expect("utf-8")]).await;
    let (code, body) = app.get("/health/database").await;
    assert_eq!(code, 503, "{body}");
    assert!(body.contains("\"status\":\"down\""), "{body}");
    assert!(!body.contains("password"), "{body}");
    // The live API works without the database.
    let (code, _) = app.get("/ready").await;
    assert_eq!(code, 200);
    let data = app.data("{ clusters { totalCount } }", json!({})).await;
    assert!(data["clusters"]["totalCount"].as_i64().unwrap_or(0) > 0);
    let (_, metrics) = app.get("/metrics").await;
    assert!(metrics.contains("vitistack_database_up 0"), "{metrics}");

    away.come_back(db);
    wait_written(&app).await;
    // The objects stored earlier were merged into the live graph, and the table now holds
    // everything the server serves.
    let serving = app.running().store.snapshot().len();
    assert!(serving >= earlier_count, "{serving} < {earlier_count}");
    app.stop().await;
    assert_eq!(away.stored(db).await.len(), serving);
}

/// 500 clusters × 20 machines with their networks, VIPs and the rest (21,000+ objects) in a
/// manifest directory, loaded at start-up: every object reaches the graph and the database, no
/// reader of the change stream falls behind, and none of it is history (it is the state the
/// server starts from, not news).
async fn a_large_manifest_directory_loads_with_nothing_dropped(db: &TestDb) {
    let dir = std::env::temp_dir().join(format!("vitistack-large-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).expect("dir");
    let fleet = vitistack::source::demo::fleet(&vitistack::source::demo::FleetSpec::large(500));
    let total = fleet.len();
    assert!(total > 21_000, "{total} objects");
    let mut files: std::collections::BTreeMap<String, String> = Default::default();
    for r in &fleet {
        let file = if r.namespace().is_empty() {
            "cluster-scoped".to_string()
        } else {
            r.namespace().to_string()
        };
        let text = files.entry(file).or_default();
        text.push_str(&r.to_value().to_string());
        text.push_str("\n---\n");
    }
    for (name, text) in &files {
        std::fs::write(dir.join(format!("{name}.yaml")), text).expect("write");
    }
    let app = start(db, &[dir.to_str().expect("utf-8")]).await;
    assert_eq!(app.running().import.refused_files(), 0);
    assert_eq!(app.running().store.snapshot().len(), total);
    wait_written(&app).await;
    let metrics = app.get("/metrics").await.1;
    for series in [
        "vitistack_change_stream_lagged_total{reader=\"fanout\"}",
        "vitistack_change_stream_lagged_total{reader=\"object_writer\"}",
        "vitistack_change_stream_lagged_total{reader=\"history\"}",
        "vitistack_history_events_dropped_total",
        "vitistack_history_gaps_total",
        "vitistack_history_events_written_total",
    ] {
        assert_eq!(crate::metric(&metrics, series), 0, "{series}");
    }
    app.stop().await;
    assert_eq!(
        db.stored().await.len(),
        total,
        "every object in the database"
    );
    let d = Db::open(&db.url(), &PoolSettings::default())
        .await
        .expect("open");
    let events = vitistack::history::query::page(&d, &Default::default(), 10)
        .await
        .expect("events");
    d.close().await;
    assert!(
        events.is_empty(),
        "start-up state is not history: {events:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
