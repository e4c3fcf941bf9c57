//! A caller limited to namespaces (an API key with `namespaces=`) sees only those namespaces'
//! objects on every path: lists, counts and summaries, look-ups by id and by name,
//! relationships, the REST routes, history, the graph at a past moment and what changed since,
//! subscriptions and mutations; the same query asked by an admin and by a tenant gets each its
//! own answer from the cache.

use serde_json::{Value, json};

use super::auth::{KeysFile, post, post_vars};
use super::protocol::SseReader;
use super::spawn;

const TENANT: &str = "tenant-key-0123456789abcdef";
const OTHER: &str = "other-key-0123456789abcdef";
const ROOT: &str = "root-key-0123456789abcdef";

const CLUSTERS: &str = "{ clusters(first: 500) { totalCount nodes { id name namespace } } \
                        clusterSummary { total } hosts { totalCount } }";

fn namespaces(v: &Value, list: &str) -> Vec<String> {
    let mut out: Vec<String> = v["data"][list]["nodes"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|n| n["namespace"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out.dedup();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_limited_to_namespaces_sees_only_them_on_every_path() {
    let keys = KeysFile::new(&format!(
        "tenant operator {TENANT} namespaces=team-1\n\
         other viewer {OTHER} namespaces=team-1\n\
         root admin {ROOT}\n"
    ));
    let app = spawn(&[
        "--api-keys-file",
        keys.path(),
        "--metrics-require-key",
        "true",
        "--demo",
    ])
    .await;

    // Lists, counts and summaries: the admin sees every team, the tenant its own.
    let (_, _, all) = post(&app, Some(ROOT), CLUSTERS).await;
    let (_, _, mine) = post(&app, Some(TENANT), CLUSTERS).await;
    let teams = namespaces(&all, "clusters");
    assert!(teams.len() > 2, "the demo has several teams: {teams:?}");
    assert_eq!(namespaces(&mine, "clusters"), ["team-1"], "{mine}");
    let total = |v: &Value| v["data"]["clusters"]["totalCount"].as_u64().unwrap_or(0);
    let team1 = all["data"]["clusters"]["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .filter(|n| n["namespace"] == "team-1")
        .count() as u64;
    assert!(team1 > 0 && team1 < total(&all));
    assert_eq!(total(&mine), team1, "{mine}");
    assert_eq!(
        mine["data"]["clusterSummary"]["total"], team1,
        "the summary counts only the tenant's clusters"
    );
    assert!(all["data"]["hosts"]["totalCount"].as_u64() > Some(0));
    assert_eq!(
        mine["data"]["hosts"]["totalCount"], 0,
        "hosts are cluster-scoped: a namespace's Role does not show them"
    );
    // The same text from another caller with the same namespaces: the same answer (one scope).
    let (_, _, same) = post(&app, Some(OTHER), CLUSTERS).await;
    assert_eq!(same["data"], mine["data"]);

    // Look-ups: another team's cluster is NOT_FOUND (null), never forbidden; one's own is there.
    let foreign = all["data"]["clusters"]["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .find(|n| n["namespace"] == "team-2")
        .cloned()
        .expect("a team-2 cluster");
    let own = mine["data"]["clusters"]["nodes"][0].clone();
    let by_id = "query($id: ID!) { node(id: $id) { id } }";
    let (_, _, v) = post_vars(&app, Some(TENANT), by_id, json!({"id": foreign["id"]})).await;
    assert_eq!(v["data"]["node"], Value::Null, "{v}");
    let (_, _, v) = post_vars(&app, Some(ROOT), by_id, json!({"id": foreign["id"]})).await;
    assert_eq!(v["data"]["node"]["id"], foreign["id"], "{v}");
    let (_, _, v) = post_vars(&app, Some(TENANT), by_id, json!({"id": own["id"]})).await;
    assert_eq!(v["data"]["node"]["id"], own["id"], "{v}");
    let by_name = "query($ns: String!, $n: String!) { cluster(namespace: $ns, name: $n) { name } }";
    let (_, _, v) = post_vars(
        &app,
        Some(TENANT),
        by_name,
        json!({"ns": "team-2", "n": foreign["name"]}),
    )
    .await;
    assert_eq!(v["data"]["cluster"], Value::Null, "{v}");
    assert!(!v.to_string().contains("FORBIDDEN"), "{v}");

    // Relationships within the scope resolve; every machine is the tenant's.
    let (_, _, v) = post(
        &app,
        Some(TENANT),
        "{ machines(first: 500) { nodes { namespace cluster { namespace } } } }",
    )
    .await;
    assert_eq!(namespaces(&v, "machines"), ["team-1"], "{v}");
    assert!(
        v["data"]["machines"]["nodes"]
            .as_array()
            .expect("machines")
            .iter()
            .any(|m| m["cluster"]["namespace"] == "team-1"),
        "{v}"
    );

    // REST: the old aggregator's clusters route lists the tenant's only.
    let res = app
        .client
        .get(format!("{}/api/v1/clusters", app.base))
        .bearer_auth(TENANT)
        .send()
        .await
        .expect("rest");
    assert_eq!(res.headers()["x-total-count"], team1.to_string().as_str());
    let body: Value = res.json().await.expect("json");
    assert!(
        body["clusters"]
            .as_array()
            .expect("clusters")
            .iter()
            .all(|c| c["namespace"] == "team-1"),
        "{body}"
    );
    // The metrics show the whole fleet: behind a key, not for a limited one.
    let res = app
        .client
        .get(format!("{}/metrics", app.base))
        .bearer_auth(TENANT)
        .send()
        .await
        .expect("metrics");
    assert_eq!(res.status().as_u16(), 403);
    let res = app
        .client
        .get(format!("{}/metrics", app.base))
        .bearer_auth(ROOT)
        .send()
        .await
        .expect("metrics");
    assert_eq!(res.status().as_u16(), 200);

    // `me` says what the tenant sees.
    let (_, _, v) = post(
        &app,
        Some(TENANT),
        "{ me { name limited sees { datacenter namespaces kinds } } }",
    )
    .await;
    assert_eq!(v["data"]["me"]["limited"], true, "{v}");
    assert_eq!(
        v["data"]["me"]["sees"][0]["namespaces"],
        json!(["team-1"]),
        "{v}"
    );
    assert!(
        v["data"]["me"]["sees"][0]["kinds"]
            .as_array()
            .is_some_and(|k| k.contains(&json!("KubernetesCluster")) && !k.contains(&json!("Node"))),
        "{v}"
    );

    // A subscription's snapshot and events: the tenant's namespace only.
    let sub = "subscription { resourceChanged(kinds: [\"KubernetesCluster\"], snapshot: true) \
               { type object { ... on KubernetesCluster { namespace name } } } }";
    let stream = app
        .client
        .post(format!("{}/graphql/stream", app.base))
        .bearer_auth(TENANT)
        .json(&json!({ "query": sub }))
        .send()
        .await
        .expect("sse");
    let mut sse = SseReader::new(stream);
    let mut seen = Vec::new();
    loop {
        let (_, v) = sse.next().await;
        let ev = &v["data"]["resourceChanged"];
        if ev["type"] == "SYNCED" {
            break;
        }
        seen.push(
            ev["object"]["namespace"]
                .as_str()
                .unwrap_or("?")
                .to_string(),
        );
    }
    assert_eq!(seen.len() as u64, team1, "{seen:?}");
    assert!(seen.iter().all(|n| n == "team-1"), "{seen:?}");

    // A moment before the mutations below (once the timeline keeps one): the past is seen as
    // the present is.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while post(&app, Some(ROOT), "{ oldestMoment }").await.2["data"]["oldestMoment"].is_null() {
        assert!(
            std::time::Instant::now() < deadline,
            "the timeline keeps no moment"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let before = vitistack::history::rfc3339(vitistack::history::now_ms());

    // Mutations: another team's cluster is NOT_FOUND to the tenant, its own changes, and the
    // history shows the tenant its own change but not the admin's in team-2.
    let pause = "mutation($ns: String!, $n: String!) { \
                 pauseClusterReconciliation(namespace: $ns, name: $n) { changed } }";
    let (_, _, v) = post_vars(
        &app,
        Some(TENANT),
        pause,
        json!({"ns": "team-2", "n": foreign["name"]}),
    )
    .await;
    assert_eq!(v["errors"][0]["extensions"]["code"], "NOT_FOUND", "{v}");
    let (_, _, v) = post_vars(
        &app,
        Some(TENANT),
        pause,
        json!({"ns": "team-1", "n": own["name"]}),
    )
    .await;
    assert_eq!(
        v["data"]["pauseClusterReconciliation"]["changed"], true,
        "{v}"
    );
    let (_, _, v) = post_vars(
        &app,
        Some(ROOT),
        pause,
        json!({"ns": "team-2", "n": foreign["name"]}),
    )
    .await;
    assert_eq!(
        v["data"]["pauseClusterReconciliation"]["changed"], true,
        "{v}"
    );
    // The tenant's subscription gets its own change, and nothing of team-2.
    loop {
        let (_, v) = sse.next().await;
        let ev = &v["data"]["resourceChanged"];
        assert_eq!(ev["object"]["namespace"], "team-1", "{v}");
        if ev["object"]["name"] == own["name"] && ev["type"] == "MODIFIED" {
            break;
        }
    }
    let history = "{ events(first: 100) { nodes { namespace actor } } }";
    let wait_for = |key: &'static str, actor: &'static str| {
        let app = &app;
        async move {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
            loop {
                let (_, _, v) = post(app, Some(key), history).await;
                let nodes = v["data"]["events"]["nodes"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
                if nodes.iter().any(|n| n["actor"] == actor) {
                    return nodes;
                }
                assert!(
                    std::time::Instant::now() < deadline,
                    "no event by {actor}: {v}"
                );
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
        }
    };
    // The admin's change is recorded (the admin sees it) …
    let everyone = wait_for(ROOT, "key:root").await;
    assert!(everyone.iter().any(|n| n["namespace"] == "team-2"));
    // … and the tenant's history holds its own change and nothing of another team.
    let own_history = wait_for(TENANT, "key:tenant").await;
    assert!(
        own_history.iter().all(|n| n["namespace"] == "team-1"),
        "{own_history:?}"
    );

    // The past, as the tenant may see it: the graph at `before` holds its namespace only (and
    // the admin's, every team), and what changed since names its own change and not team-2's.
    let at = format!("query($t: String!) {{ at(time: $t) {CLUSTERS} }}");
    let past = |key: &'static str| {
        let (app, at) = (&app, &at);
        let t = before.clone();
        async move {
            let (_, _, v) = post_vars(app, Some(key), at, json!({"t": t})).await;
            v
        }
    };
    let (mine_then, all_then) = (past(TENANT).await, past(ROOT).await);
    let then = |v: &Value| json!({"data": v["data"]["at"].clone()});
    assert_eq!(
        namespaces(&then(&mine_then), "clusters"),
        ["team-1"],
        "{mine_then}"
    );
    assert!(
        namespaces(&then(&all_then), "clusters").len() > 2,
        "{all_then}"
    );
    assert_eq!(
        mine_then["data"]["at"]["clusters"]["totalCount"], team1,
        "{mine_then}"
    );
    assert_eq!(
        mine_then["data"]["at"]["clusterSummary"]["total"], team1,
        "{mine_then}"
    );
    assert_eq!(mine_then["data"]["at"]["hosts"]["totalCount"], 0);
    let changed = "query($f: String!, $t: String!) { changes(from: $f, to: $t, first: 500) \
                   { totalCount objects { namespace name } } }";
    let changes_seen = |key: &'static str| {
        let (app, from, foreign, own) = (&app, before.clone(), &foreign, &own);
        async move {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
            loop {
                let to = vitistack::history::rfc3339(vitistack::history::now_ms());
                let (_, _, v) =
                    post_vars(app, Some(key), changed, json!({"f": from, "t": to})).await;
                let objects = v["data"]["changes"]["objects"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
                let paused = |ns: &str, name: &Value| {
                    objects
                        .iter()
                        .any(|o| o["namespace"] == ns && &o["name"] == name)
                };
                // The admin's list holds both changes once the timeline has them; the tenant's,
                // its own.
                let done = match key {
                    ROOT => paused("team-2", &foreign["name"]) && paused("team-1", &own["name"]),
                    _ => paused("team-1", &own["name"]),
                };
                if done {
                    return objects;
                }
                assert!(
                    std::time::Instant::now() < deadline,
                    "{key}: the changes lack a pause: {v}"
                );
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
        }
    };
    changes_seen(ROOT).await;
    let own_changes = changes_seen(TENANT).await;
    assert!(
        own_changes.iter().all(|o| o["namespace"] == "team-1"),
        "{own_changes:?}"
    );
    app.stop().await;
}
