//! The demo's applications: what the inventory shows of them (health, reasons, revisions,
//! nothing of a denied namespace, nothing of a release's values), the cluster UUID kept across a
//! restart, the admin's pause switch, and `applicationChanged` under the simulator.

use serde_json::{Value, json};

use crate::{TempSqlite, acked, recv, send_json, spawn};

const LIST: &str = r#"{ applications(first: 100, sort: {field: HEALTH}) { edges { node { id namespace name revision
    status health reasons chart appUuid readyPods pods { name restarts waiting ready } volumes { name requestedBytes }
    ingresses { hosts } revisions { revision status } kubernetesCluster { name phase applications { name } } } } }
  applicationInventory { paused total clusterUuids { datacenter uuid } byHealth { health count } } }"#;

fn nodes(data: &Value) -> Vec<Value> {
    data["applications"]["edges"]
        .as_array()
        .map(|e| e.iter().map(|e| e["node"].clone()).collect())
        .unwrap_or_default()
}

fn named<'a>(all: &'a [Value], name: &str) -> &'a Value {
    all.iter()
        .find(|a| a["name"] == name)
        .unwrap_or_else(|| panic!("{name} missing: {all:?}"))
}

#[tokio::test]
async fn the_demo_shows_its_applications_and_keeps_its_cluster_uuid_across_a_restart() {
    let db = TempSqlite::default();
    let url = db.url();
    let app = spawn(&["--demo", "--database-url", &url]).await;
    let uuid = cluster_uuid(&app).await;
    let answer = app.query(LIST, json!({})).await;
    assert!(answer.get("errors").is_none(), "{answer}");
    let text = answer.to_string();
    assert!(
        !text.contains(vitistack::source::demo_apps::PLANTED),
        "a release's values were served"
    );
    let all = nodes(&answer["data"]);
    let names: Vec<&str> = all.iter().filter_map(|a| a["name"].as_str()).collect();
    // Worst first; the denied namespace's release is not there.
    assert_eq!(names, ["keycloak", "grafana", "billing-db", "shop"]);
    let keycloak = named(&all, "keycloak");
    assert_eq!(keycloak["health"], "DEGRADED");
    assert!(
        keycloak["reasons"][0]
            .as_str()
            .is_some_and(|r| r.contains("keycloak-1 is crash-looping")),
        "{keycloak}"
    );
    assert_eq!(keycloak["readyPods"], 1);
    let grafana = named(&all, "grafana");
    assert_eq!(grafana["health"], "PENDING_UPGRADE");
    assert_eq!(grafana["revision"], 5);
    assert_eq!(
        grafana["revisions"][1],
        json!({"revision": 4, "status": "deployed"})
    );
    let billing = named(&all, "billing-db");
    assert_eq!(billing["health"], "HEALTHY");
    assert_eq!(billing["appUuid"], "6f1c2a57-3e0b-4c52-9a39-7d2f61c0b8e4");
    assert_eq!(
        billing["volumes"][0]["requestedBytes"],
        json!(50.0 * 1024f64.powi(3))
    );
    let shop = named(&all, "shop");
    assert_eq!(
        shop["ingresses"][0]["hosts"],
        json!(["shop.demo.vitistack.io"])
    );
    assert_eq!(answer["data"]["applicationInventory"]["total"], 4);
    // They run on the demo's cluster annotated with its kube-system UID, and it lists them.
    let on = &shop["kubernetesCluster"];
    assert_eq!(on["phase"], "Ready", "{shop}");
    let mut theirs: Vec<&str> = on["applications"]
        .as_array()
        .map(|a| a.iter().filter_map(|a| a["name"].as_str()).collect())
        .unwrap_or_default();
    theirs.sort_unstable();
    assert_eq!(theirs, ["billing-db", "grafana", "keycloak", "shop"]);
    assert!(
        all.iter()
            .all(|a| a["kubernetesCluster"]["name"] == on["name"])
    );
    let counts = app
        .data(
            "{ infrastructure { applications { total healthy degraded failed pending other } } }",
            json!({}),
        )
        .await;
    assert_eq!(
        counts["infrastructure"]["applications"],
        json!({"total": 4, "healthy": 2, "degraded": 1, "failed": 0, "pending": 1, "other": 0})
    );

    // By id, and by namespace and name.
    let one = app
        .data(
            "query($id: ID) { application(id: $id) { name namespace } }",
            json!({"id": keycloak["id"]}),
        )
        .await;
    assert_eq!(
        one["application"],
        json!({"name": "keycloak", "namespace": "identity"})
    );
    let by_name = app
        .data(
            r#"{ application(namespace: "billing", name: "billing-db") { revision health } }"#,
            json!({}),
        )
        .await;
    assert_eq!(
        by_name["application"],
        json!({"revision": 1, "health": "HEALTHY"})
    );
    let filtered = app
        .data(
            r#"{ applications(filter: {health: [HEALTHY], search: "SHOP"}) { edges { node { name } } } }"#,
            json!({}),
        )
        .await;
    assert_eq!(nodes(&filtered).len(), 1);
    let bad = app
        .error(r#"{ application(id: "bm90LWFuLWlk") { name } }"#, json!({}))
        .await;
    assert_eq!(bad["extensions"]["code"], "BAD_ID", "{bad}");

    // Paged: two, then the rest after the cursor, nothing twice.
    let page = r#"query($after: String) { applications(first: 2, after: $after) { edges { cursor node { name } }
        pageInfo { hasNextPage endCursor } } }"#;
    let p1 = app.data(page, json!({"after": null})).await;
    assert_eq!(p1["applications"]["pageInfo"]["hasNextPage"], true);
    let p2 = app
        .data(
            page,
            json!({"after": p1["applications"]["pageInfo"]["endCursor"]}),
        )
        .await;
    let mut seen: Vec<String> = [nodes(&p1), nodes(&p2)]
        .concat()
        .iter()
        .filter_map(|n| n["name"].as_str().map(str::to_string))
        .collect();
    seen.sort();
    assert_eq!(seen, ["billing-db", "grafana", "keycloak", "shop"]);
    app.stop().await;

    // Restarted on the same database: the same cluster UUID.
    let again = spawn(&["--demo", "--database-url", &url]).await;
    assert_eq!(cluster_uuid(&again).await, uuid);
    again.stop().await;
}

/// The cluster UUID, once kept.
async fn cluster_uuid(app: &crate::TestApp) -> String {
    let deadline = tokio::time::Instant::now() + crate::PATIENCE;
    loop {
        let d = app
            .data(
                "{ applicationInventory { clusterUuids { uuid } } }",
                json!({}),
            )
            .await;
        if let Some(u) = d["applicationInventory"]["clusterUuids"][0]["uuid"].as_str() {
            return u.to_string();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no cluster UUID: {d}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn without_the_inventory_the_fields_say_it_is_off() {
    let app = spawn(&[]).await;
    let e = app
        .error("{ applicationInventory { total } }", json!({}))
        .await;
    assert_eq!(e["extensions"]["code"], "APPLICATIONS_OFF", "{e}");
    let counts = app
        .data("{ infrastructure { applications { total } } }", json!({}))
        .await;
    assert_eq!(counts["infrastructure"]["applications"], Value::Null);
    app.stop().await;
}

#[tokio::test]
async fn only_an_admin_pauses_the_pushes() {
    use crate::auth::{ADMIN, KeysFile, OPERATOR, VIEWER, post, three_keys};
    let keys = KeysFile::new(&three_keys());
    let app = spawn(&["--demo", "--api-keys-file", keys.path()]).await;
    let pause = "mutation { setApplicationsPaused(paused: true) { paused } }";
    for key in [VIEWER, OPERATOR] {
        let (_, _, refused) = post(&app, Some(key), pause).await;
        assert_eq!(
            refused["errors"][0]["extensions"]["code"], "FORBIDDEN",
            "{refused}"
        );
    }
    let (_, _, now) = post(&app, Some(VIEWER), "{ applicationInventory { paused } }").await;
    assert_eq!(
        now["data"]["applicationInventory"]["paused"], false,
        "{now}"
    );
    let (_, _, admin) = post(&app, Some(ADMIN), pause).await;
    assert_eq!(
        admin["data"]["setApplicationsPaused"]["paused"], true,
        "{admin}"
    );
    let (_, _, now) = post(&app, Some(VIEWER), "{ applicationInventory { paused } }").await;
    assert_eq!(now["data"]["applicationInventory"]["paused"], true);
    app.stop().await;
}

/// The crash-looping pod restarts under the simulator: each restart reaches the subscriber,
/// after the snapshot, with the health it had.
#[tokio::test]
async fn application_changed_sends_the_snapshot_then_each_change() {
    let app = spawn(&["--demo", "--simulate", "--simulate-steps-per-second", "50"]).await;
    let mut ws = acked(&app).await;
    send_json(
        &mut ws,
        json!({"id": "a", "type": "subscribe", "payload": {"query":
            "subscription { applicationChanged(snapshot: true, filter: {namespace: \"identity\"}) { type previousHealth application { name health pods { name restarts } } } }"}}),
    )
    .await;
    let first = recv(&mut ws).await;
    assert_eq!(
        first["payload"]["data"]["applicationChanged"]["type"], "ADDED",
        "{first}"
    );
    assert_eq!(
        first["payload"]["data"]["applicationChanged"]["application"]["name"],
        "keycloak"
    );
    let synced = recv(&mut ws).await;
    assert_eq!(
        synced["payload"]["data"]["applicationChanged"]["type"], "SYNCED",
        "{synced}"
    );
    let restarts = |v: &Value| {
        v["payload"]["data"]["applicationChanged"]["application"]["pods"]
            .as_array()
            .and_then(|p| p.iter().find(|p| p["name"] == "keycloak-1"))
            .and_then(|p| p["restarts"].as_u64())
    };
    let before = restarts(&first).expect("restarts");
    let next = recv(&mut ws).await;
    let e = &next["payload"]["data"]["applicationChanged"];
    assert_eq!(e["type"], "UPDATED", "{next}");
    assert_eq!(e["previousHealth"], "DEGRADED");
    assert!(restarts(&next).expect("restarts") > before, "{next}");
    app.stop().await;
}

/// With several datacenters each has its own applications, carrying its key; a look-up by
/// namespace and name that several hold needs the datacenter.
#[tokio::test]
async fn each_datacenter_has_its_own_applications() {
    let app = spawn(&[
        "--demo",
        "--demo-datacenters",
        "3",
        "--demo-outage-seconds",
        "0",
    ])
    .await;
    let d = app
        .data(
            r#"{ applications(first: 100, filter: {datacenter: "oslo"}) { edges { node { datacenter name ingresses { hosts } } } }
                applicationInventory { total } }"#,
            json!({}),
        )
        .await;
    let oslo = nodes(&d);
    assert_eq!(oslo.len(), 4, "{d}");
    assert!(oslo.iter().all(|a| a["datacenter"] == "oslo"));
    assert_eq!(
        named(&oslo, "shop")["ingresses"][0]["hosts"],
        json!(["shop.oslo.demo.vitistack.io"])
    );
    assert_eq!(d["applicationInventory"]["total"], 12);
    let e = app
        .error(
            r#"{ application(namespace: "identity", name: "keycloak") { name } }"#,
            json!({}),
        )
        .await;
    assert_eq!(e["extensions"]["code"], "AMBIGUOUS", "{e}");
    assert_eq!(
        e["extensions"]["datacenters"].as_array().map(Vec::len),
        Some(3),
        "{e}"
    );
    let one = app
        .data(
            r#"{ application(namespace: "identity", name: "keycloak", datacenter: "bergen") { datacenter } }"#,
            json!({}),
        )
        .await;
    assert_eq!(one["application"]["datacenter"], "bergen");
    app.stop().await;
}
