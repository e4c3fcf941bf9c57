//! Two replicas of the binary on one PostgreSQL, watching one cluster: both serve, only the
//! holder of the Lease delivers webhooks, and when it dies the other takes the Lease over and
//! delivers from then on; a replica that stops normally hands the Lease over; a holder cut off
//! from the API server steps down.

use std::time::Duration;

use serde_json::Value;
use vitistack_testkit::postgres::TempPostgres;
use vitistack_testkit::proc::spawn_server;

use crate::{Harness, KubeApi, PATIENCE, kube_api, machine};

const LEASE: &str = "vitistack-test";
const NAMESPACE: &str = "vitistack";

/// A replica: its process and address.
struct Replica {
    /// Ends with the replica.
    child: vitistack_testkit::proc::TestChild,
    base: String,
}

impl Replica {
    fn start(h: &Harness, db: &TempPostgres, hook: &str, name: &str) -> Replica {
        let env = [
            ("DATABASE_URL", db.url()),
            ("LEADER_ELECTION", "true".to_string()),
            ("LEASE_NAME", LEASE.to_string()),
            ("POD_NAME", name.to_string()),
            ("POD_NAMESPACE", NAMESPACE.to_string()),
            ("LEASE_DURATION_SECONDS", "6".to_string()),
            ("WEBHOOK_URLS", hook.to_string()),
            // The holder keeps changes back a second before writing them: a replica that does
            // not write the timeline answers a moment just past only once it is written.
            ("HISTORY_FLUSH_INTERVAL_MS", "1000".to_string()),
            ("WATCH_TIMEOUT_SECONDS", "2".to_string()),
            ("WRITE_VITISTACK_STATUS", "true".to_string()),
        ];
        Replica::with_env(h, &env)
    }

    fn with_env(h: &Harness, env: &[(&str, String)]) -> Replica {
        let (child, port) = spawn_server(env!("CARGO_BIN_EXE_vitistack"), &h.dir, env);
        Replica {
            child,
            base: format!("http://127.0.0.1:{port}"),
        }
    }

    async fn get(&self, path: &str) -> Option<(u16, String)> {
        let r = reqwest::get(format!("{}{path}", self.base)).await.ok()?;
        let code = r.status().as_u16();
        Some((code, r.text().await.ok()?))
    }

    /// `/health`'s leader check, once the replica answers.
    async fn leader(&self) -> Option<Value> {
        let (_, body) = self.get("/health").await?;
        let v: Value = serde_json::from_str(&body).ok()?;
        Some(v["checks"]["leader"].clone())
    }

    async fn leading(&self) -> bool {
        self.leader().await.is_some_and(|l| l["leading"] == true)
    }

    /// A metric's value (the line `name value`).
    async fn metric(&self, line_start: &str) -> Option<f64> {
        let (_, text) = self.get("/metrics").await?;
        text.lines()
            .find(|l| l.starts_with(line_start))
            .and_then(|l| l.rsplit(' ').next()?.parse().ok())
    }

    async fn ready(&self) -> bool {
        self.get("/ready")
            .await
            .is_some_and(|(code, _)| code == 200)
    }
}

/// Wait (generously) until `cond` holds.
async fn until<F: std::future::Future<Output = bool>>(what: &str, cond: impl Fn() -> F) {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while !cond().await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn holder(api: &KubeApi) -> Option<String> {
    api.object("leases", NAMESPACE, LEASE)?["spec"]["holderIdentity"]
        .as_str()
        .map(str::to_string)
}

/// Webhook bodies about a created machine named `name`.
fn created(bodies: &parking_lot::Mutex<Vec<String>>, name: &str) -> usize {
    bodies
        .lock()
        .iter()
        .filter_map(|b| serde_json::from_str::<Value>(b).ok())
        .filter(|b| b["type"] == "infrastructure.machine.created" && b["name"] == name)
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_on_one_postgres_deliver_each_webhook_once_and_hand_the_lease_over() {
    let mut defs = kube_api::watched_resources();
    defs.push(kube_api::leases());
    let api = KubeApi::start(&defs, Duration::from_millis(200)).await;
    api.apply("machines", machine("team-a", "m0", "c1"));
    api.apply(
        "vitistacks",
        serde_json::json!({"metadata": {"name": "vitistack"}, "spec": {"displayName": "South"}}),
    );
    let h = Harness::unstarted(api);
    let db = TempPostgres::create().await;
    let (hook, bodies) = crate::secrets::receiver().await;

    // The first replica takes the Lease; the second serves the same graph without it.
    let a = Replica::start(&h, &db, &hook, "replica-a");
    until("replica-a ready and leading", || async {
        a.ready().await && a.leading().await
    })
    .await;
    assert_eq!(holder(&h.api).as_deref(), Some("replica-a"));
    let report = a.leader().await.expect("health");
    assert_eq!(report["election"], true);
    assert_eq!(report["identity"], "replica-a");
    assert_eq!(report["lease"], format!("{NAMESPACE}/{LEASE}"));
    let mut b = Replica::start(&h, &db, &hook, "replica-b");
    until("replica-b ready", || b.ready()).await;
    assert!(!b.leading().await, "both replicas lead");
    assert_eq!(b.metric("vitistack_leader ").await, Some(0.0));
    assert_eq!(a.metric("vitistack_leader ").await, Some(1.0));

    // A change reaches both replicas; its webhook is sent once, by the leader.
    h.api.apply("machines", machine("team-a", "m1", "c1"));
    until("m1 delivered", || async { created(&bodies, "m1") > 0 }).await;
    let query = r#"{"query":"{ machines { totalCount } }"}"#;
    for r in [&a, &b] {
        until("m1 served by both", || async {
            let res = reqwest::Client::new()
                .post(format!("{}/graphql", r.base))
                .header("content-type", "application/json")
                .body(query)
                .send()
                .await;
            match res {
                Ok(res) => res
                    .json::<Value>()
                    .await
                    .is_ok_and(|v| v["data"]["machines"]["totalCount"] == 2),
                Err(_) => false,
            }
        })
        .await;
    }
    // The moment just past, asked of the replica that does not write the timeline, holds m1
    // (it waits for the holder to write it).
    let now = jiff::Timestamp::now().to_string();
    let past = serde_json::json!({
        "query": "query($t: String!) { at(time: $t) { machines { totalCount } } }",
        "variables": {"t": now},
    });
    let then: Value = reqwest::Client::new()
        .post(format!("{}/graphql", b.base))
        .json(&past)
        .send()
        .await
        .expect("at, asked of replica-b")
        .json()
        .await
        .expect("json");
    assert_eq!(
        then["data"]["at"]["machines"]["totalCount"], 2,
        "at {now}: {then}"
    );
    assert_eq!(
        b.metric("vitistack_webhook_deliveries_total{outcome=\"delivered\"}")
            .await
            .unwrap_or(0.0),
        0.0,
        "the replica without the Lease delivered webhooks"
    );
    // The Vitistack's status (WRITE_VITISTACK_STATUS on both) is written by the holder only.
    until("the status counting m1", || async {
        active_machines(&h.api) == Some(2)
    })
    .await;
    assert!(a.metric("vitistack_status_writes_total ").await >= Some(1.0));
    assert_eq!(
        b.metric("vitistack_status_writes_total ").await,
        Some(0.0),
        "the replica without the Lease wrote the Vitistack's status"
    );

    // The leader dies without a word: the other takes the Lease once it runs out. A change made
    // before the takeover (no replica leads) is delivered by the new holder, and what the old one
    // delivered is not sent again (the new holder saw m1 too, as a follower).
    // (Once the holder has recorded m1 as delivered: a holder killed between the receiver's
    // answer and that record leaves the claim pending, and its successor sends m1 again with the
    // same X-Vitistack-Delivery, which receivers drop.)
    until("m1 recorded as delivered", || async {
        db.scalar_i64(
            "SELECT count(*) FROM webhook_deliveries WHERE event_type = \
             'infrastructure.machine.created' AND state = 'delivered'",
        )
        .await
            == 1
    })
    .await;
    drop(a);
    h.api.apply("machines", machine("team-a", "m-gap", "c1"));
    until("replica-b leading", || b.leading()).await;
    assert_eq!(holder(&h.api).as_deref(), Some("replica-b"));
    until("m-gap delivered by the new holder", || async {
        created(&bodies, "m-gap") > 0
    })
    .await;
    until("the new holder's status counting m-gap", || async {
        active_machines(&h.api) == Some(3)
    })
    .await;
    assert!(b.metric("vitistack_status_writes_total ").await >= Some(1.0));
    h.api.apply("machines", machine("team-a", "m2", "c1"));
    until("m2 delivered", || async { created(&bodies, "m2") > 0 }).await;
    assert_eq!(created(&bodies, "m1"), 1, "m1 delivered twice");
    assert_eq!(created(&bodies, "m2"), 1, "m2 delivered twice");

    // A replica that stops normally gives the Lease up, and a waiting one takes it; a change
    // during the handover is delivered once.
    let a = Replica::start(&h, &db, &hook, "replica-a");
    until("replica-a ready", || a.ready()).await;
    assert!(!a.leading().await, "replica-a took a Lease replica-b holds");
    let pid = b.child.id().to_string();
    let _ = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status();
    h.api
        .apply("machines", machine("team-a", "m-handover", "c1"));
    let _ = b.child.wait();
    until("replica-a leading again", || a.leading()).await;
    assert_eq!(holder(&h.api).as_deref(), Some("replica-a"));
    h.api.apply("machines", machine("team-a", "m3", "c1"));
    until("m3 and m-handover delivered", || async {
        created(&bodies, "m3") > 0 && created(&bodies, "m-handover") > 0
    })
    .await;
    for m in ["m1", "m-gap", "m2", "m-handover", "m3"] {
        assert_eq!(created(&bodies, m), 1, "{m} delivered more than once");
    }
    // Each was claimed once per endpoint: one delivered row per event in the shared database.
    // (The holder records a delivery after the receiver has answered: wait for the fifth record.)
    let delivered = || {
        db.scalar_i64(
            "SELECT count(*) FROM webhook_deliveries WHERE event_type = \
             'infrastructure.machine.created' AND state = 'delivered'",
        )
    };
    until("five deliveries recorded", || async {
        delivered().await >= 5
    })
    .await;
    assert_eq!(
        delivered().await,
        5,
        "one delivered row per machine created"
    );

    // An API server that stops answering: the holder cannot renew, and steps down rather than
    // go on leading while another replica could take over; once it answers again, it leads.
    h.api.unplug(true);
    until("replica-a stepping down", || async { !a.leading().await }).await;
    assert_eq!(a.metric("vitistack_leader ").await, Some(0.0));
    h.api.unplug(false);
    until("replica-a leading after the API server is back", || {
        a.leading()
    })
    .await;
}

/// `status.activeMachines` of the Vitistack.
fn active_machines(api: &KubeApi) -> Option<i64> {
    api.object("vitistacks", "", "vitistack")?["status"]["activeMachines"].as_i64()
}

/// Hosts of datacenter `dc` a replica serves.
async fn hosts_of(r: &Replica, dc: &str) -> Option<u64> {
    let res = reqwest::Client::new()
        .post(format!("{}/graphql", r.base))
        .json(&serde_json::json!({"query": "query($dc: String) { hosts(filter: {datacenter: $dc}) { totalCount } }",
                                  "variables": {"dc": dc}}))
        .send()
        .await
        .ok()?;
    let v: Value = res.json().await.ok()?;
    v["data"]["hosts"]["totalCount"].as_u64()
}

/// The old status page's agents behind a Service of two replicas: a report reaches one, and both
/// serve it (PostgreSQL tells the other); a replica started later lists the datacenter from the
/// last report before its agent reports again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agents_report_to_one_replica_is_served_by_both_and_after_a_restart() {
    let api = KubeApi::start(&kube_api::watched_resources(), Duration::from_millis(200)).await;
    let h = Harness::unstarted(api);
    let db = TempPostgres::create().await;
    let tokens = h.dir.join("hub-tokens");
    std::fs::write(&tokens, "oslo oslo-token-0123456789abcdef\n").expect("tokens");
    let env = [
        ("DATABASE_URL", db.url()),
        ("HUB_TOKENS_FILE", tokens.display().to_string()),
        ("WATCH_TIMEOUT_SECONDS", "2".to_string()),
    ];
    let a = Replica::with_env(&h, &env);
    let b = Replica::with_env(&h, &env);
    until("both ready", || async {
        a.ready().await && b.ready().await
    })
    .await;
    assert_eq!(hosts_of(&b, "oslo").await, Some(0));

    let report = serde_json::json!({
        "datacenter": "oslo",
        "nodes": [
            {"name": "kv-01", "roles": ["worker"], "status": "Ready", "cpuCapacity": 32,
             "memoryCapMB": 131072, "cpuAllocatable": 31, "memAllocMB": 129024, "vms": []},
            {"name": "kv-02", "roles": ["worker"], "status": "Ready", "cpuCapacity": 16,
             "memoryCapMB": 65536, "cpuAllocatable": 15, "memAllocMB": 64512, "vms": []}
        ],
        "clusters": [],
        "updated": "2026-11-26T08:00:00Z",
        "agentOnlyField": "not kept"
    });
    let res = reqwest::Client::new()
        .post(format!("{}/api/report", a.base))
        .bearer_auth("oslo-token-0123456789abcdef")
        .json(&report)
        .send()
        .await
        .expect("report");
    assert_eq!(res.status().as_u16(), 204);
    assert_eq!(
        hosts_of(&a, "oslo").await,
        Some(2),
        "the replica the agent reached"
    );
    until("the other replica serving oslo's hosts", || async {
        hosts_of(&b, "oslo").await == Some(2)
    })
    .await;
    // What is kept is what the server read: an unknown field of the agent's is not.
    let kept = db
        .scalar_i64("SELECT count(*) FROM hub_reports WHERE datacenter = 'oslo' AND body NOT LIKE '%agentOnlyField%'")
        .await;
    assert_eq!(kept, 1);

    // A replica started now lists oslo from the last report, before the agent reports again.
    drop(b);
    let c = Replica::with_env(&h, &env);
    until("a new replica ready", || c.ready()).await;
    until("the new replica serving oslo's hosts", || async {
        hosts_of(&c, "oslo").await == Some(2)
    })
    .await;
    let (_, health) = c.get("/health").await.expect("health");
    assert!(health.contains("oslo"), "{health}");
}
