//! Several datacenters without a cluster (`DEMO_DATACENTERS`): each its own fleet and simulator,
//! lists filtered and paged by datacenter, and a datacenter that goes away and comes back.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use super::{eventually, spawn};

async fn states(app: &super::TestApp) -> Vec<(String, String, Value)> {
    let d = app
        .data_of_any_state("{ datacenters { key state lastError } }", json!({}))
        .await;
    d["datacenters"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|d| {
                    (
                        d["key"].as_str().unwrap_or_default().to_string(),
                        d["state"].as_str().unwrap_or_default().to_string(),
                        d["lastError"].clone(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn the_demo_with_three_datacenters_pages_them_apart_and_one_goes_away_and_comes_back() {
    let app = spawn(&[
        "--demo",
        "--simulate",
        "--demo-datacenters",
        "3",
        "--demo-outage-seconds",
        "6",
        "--dc-probe-interval-seconds",
        "1",
        "--dc-stale-after-seconds",
        "1",
    ])
    .await;
    let keys: Vec<String> = states(&app).await.into_iter().map(|(k, _, _)| k).collect();
    assert_eq!(keys, ["bergen", "oslo", "trondheim"]);

    // Each datacenter has a fleet of its own: clusters and hosts, filtered by datacenter.
    let mut total = 0;
    for dc in &keys {
        let d = app
            .data_of_any_state(
                "query($dc: String) { clusters(filter: {datacenter: $dc}) { totalCount nodes { datacenter } }
                  hosts(filter: {datacenter: $dc}) { totalCount } }",
                json!({"dc": dc}),
            )
            .await;
        let n = d["clusters"]["totalCount"].as_u64().unwrap_or_default();
        assert!(n > 0, "{dc} has clusters: {d}");
        assert!(
            d["clusters"]["nodes"]
                .as_array()
                .is_some_and(|c| c.iter().all(|c| c["datacenter"] == dc.as_str())),
            "{d}"
        );
        assert!(d["hosts"]["totalCount"].as_u64().unwrap_or_default() > 0);
        total += d["hosts"]["totalCount"].as_u64().unwrap_or_default();
    }

    // Every datacenter has hosts of the same names: paging one at a time meets each
    // (datacenter, name) exactly once, in name order, then datacenter.
    let mut seen: Vec<(String, String)> = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let d = app
            .data_of_any_state(
                "query($after: String) { hosts(first: 1, after: $after) { totalCount
                   pageInfo { hasNextPage endCursor } nodes { name datacenter } } }",
                json!({"after": after}),
            )
            .await;
        assert_eq!(d["hosts"]["totalCount"].as_u64(), Some(total));
        for n in d["hosts"]["nodes"].as_array().expect("nodes") {
            seen.push((
                n["name"].as_str().unwrap_or_default().to_string(),
                n["datacenter"].as_str().unwrap_or_default().to_string(),
            ));
        }
        if d["hosts"]["pageInfo"]["hasNextPage"] != true {
            break;
        }
        after = d["hosts"]["pageInfo"]["endCursor"]
            .as_str()
            .map(String::from);
    }
    assert_eq!(seen.len() as u64, total, "each host once: {seen:?}");
    let unique: BTreeSet<&(String, String)> = seen.iter().collect();
    assert_eq!(unique.len(), seen.len(), "no host twice: {seen:?}");
    let mut sorted = seen.clone();
    sorted.sort();
    assert_eq!(sorted, seen, "name, then datacenter");
    assert!(
        seen.windows(2).any(|w| w[0].0 == w[1].0),
        "the same host name in several datacenters: {seen:?}"
    );

    // Now and then one goes away: STALE with the reason, its data kept and flagged in answers;
    // then it comes back.
    let away = std::cell::RefCell::new(String::new());
    eventually("a demo datacenter away", || {
        let (app, away) = (&app, &away);
        async move {
            match states(app).await.into_iter().find(|(_, s, e)| {
                s == "STALE" && e.as_str().is_some_and(|e| e.contains("simulated outage"))
            }) {
                Some((k, _, _)) => {
                    *away.borrow_mut() = k;
                    true
                }
                None => false,
            }
        }
    })
    .await;
    eventually("an answer naming the away datacenter", || async {
        let answer = app
            .query("{ clusters(first: 1) { totalCount } }", json!({}))
            .await;
        answer["data"]["clusters"]["totalCount"]
            .as_u64()
            .unwrap_or_default()
            > 0
            && answer["errors"].as_array().is_some_and(|e| {
                e.iter()
                    .any(|e| e["extensions"]["code"] == "DATACENTER_UNAVAILABLE")
            })
    })
    .await;
    let away = away.into_inner();
    eventually("the away datacenter SYNCED again", || async {
        states(&app)
            .await
            .iter()
            .any(|(k, s, _)| *k == away && s == "SYNCED")
    })
    .await;
    app.stop().await;
}

/// Each datacenter's hosts carry only its own VMs: its figures are its own, they add up to the
/// fleet's, the fleet's spare hosts are its weakest datacenter's, and a cluster planned in one
/// datacenter is placed on that datacenter's hosts only.
#[tokio::test]
async fn each_datacenter_has_its_own_capacity_and_plans_use_its_hosts_only() {
    use super::auth::{ADMIN, KeysFile, post, three_keys};
    let keys = KeysFile::new(&three_keys());
    let app = spawn(&[
        "--demo",
        "--demo-datacenters",
        "3",
        "--api-keys-file",
        keys.path(),
    ])
    .await;
    let capacity = "hosts readyHosts usableHosts activeVms stoppedVms vcpusUsed hostsThatCanFail redundancyLimit";
    // One query reads one snapshot: the parts and the whole are of the same moment.
    let (_, _, v) = post(
        &app,
        Some(ADMIN),
        &format!(
            "{{ hostCapacity {{ {capacity} }} clusterSummary {{ total ready }}
               datacenters {{ key hostCapacity {{ {capacity} }} clusterSummary {{ total ready }} }} }}"
        ),
    )
    .await;
    let d = &v["data"];
    let dcs = d["datacenters"].as_array().expect("datacenters");
    assert_eq!(dcs.len(), 3, "{v}");
    let sum = |path: &[&str]| -> f64 {
        dcs.iter()
            .map(|dc| {
                path.iter()
                    .fold(dc, |v, k| &v[*k])
                    .as_f64()
                    .unwrap_or(f64::NAN)
            })
            .sum()
    };
    for field in [
        "hosts",
        "readyHosts",
        "usableHosts",
        "activeVms",
        "stoppedVms",
    ] {
        assert_eq!(
            sum(&["hostCapacity", field]),
            d["hostCapacity"][field].as_f64().unwrap_or(f64::NAN),
            "{field}: {v}"
        );
    }
    for field in ["total", "ready"] {
        assert_eq!(
            sum(&["clusterSummary", field]),
            d["clusterSummary"][field].as_f64().unwrap_or(f64::NAN),
            "{field}: {v}"
        );
    }
    let fleet_hosts = d["hostCapacity"]["hosts"].as_u64().unwrap_or_default();
    for dc in dcs {
        let hosts = dc["hostCapacity"]["hosts"].as_u64().unwrap_or_default();
        assert!(hosts > 0 && hosts < fleet_hosts, "{dc}");
    }
    // A VM cannot move to another datacenter's host: the fleet can lose only as many hosts as
    // its weakest datacenter, which the limit names.
    let (weakest, spare) = dcs
        .iter()
        .map(|dc| {
            (
                dc["key"].as_str().unwrap_or_default(),
                dc["hostCapacity"]["hostsThatCanFail"]
                    .as_u64()
                    .unwrap_or(u64::MAX),
            )
        })
        .min_by_key(|(_, n)| *n)
        .expect("one");
    assert_eq!(d["hostCapacity"]["hostsThatCanFail"].as_u64(), Some(spare));
    let limit = d["hostCapacity"]["redundancyLimit"]
        .as_str()
        .unwrap_or_default();
    assert!(limit.starts_with(&format!("{weakest}: ")), "{limit}");

    // A plan in oslo counts oslo's hosts, not the fleet's.
    let oslo = dcs.iter().find(|dc| dc["key"] == "oslo").expect("oslo");
    let (_, _, ns) = post(
        &app,
        Some(ADMIN),
        r#"{ networkNamespaces(filter: {datacenter: "oslo"}, first: 1) { nodes { namespace name } } }"#,
    )
    .await;
    let nn = &ns["data"]["networkNamespaces"]["nodes"][0];
    let input = json!({"namespace": nn["namespace"], "name": "planned-in-oslo", "networkNamespaceName": nn["name"],
        "datacenter": "oslo", "region": "south", "zone": "az1", "project": "p", "workspace": "w", "workorder": "wo-1",
        "environment": "dev", "version": "1.33.1", "controlPlane": {"replicas": 1, "machineClass": "small"},
        "nodePools": []});
    let (_, _, plan) = super::auth::post_vars(
        &app,
        Some(ADMIN),
        r#"mutation($i: ClusterInput!) { clusterPlan(input: $i, datacenter: "oslo") { capacity { hosts hostsThatCanFailBefore } } }"#,
        json!({"i": input}),
    )
    .await;
    let cap = &plan["data"]["clusterPlan"]["capacity"];
    assert_eq!(cap["hosts"], oslo["hostCapacity"]["usableHosts"], "{plan}");
    assert_eq!(
        cap["hostsThatCanFailBefore"], oslo["hostCapacity"]["hostsThatCanFail"],
        "{plan}"
    );
    app.stop().await;
}

/// The overview's two streams for one datacenter: `hostsChanged` and `infrastructureSummary`
/// with `datacenter` send that datacenter's figures (as its `Datacenter` fields answer, and as
/// the queries `hostCapacity` and `infrastructure` with `datacenter` do), not the fleet's.
#[tokio::test]
async fn the_live_figures_of_one_datacenter_are_its_own() {
    use super::{open_ws, recv, send_json};
    let app = spawn(&["--demo", "--demo-datacenters", "3"]).await;
    let d = app
        .data_of_any_state(
            r#"{ hostCapacity { hosts activeVms } machines { totalCount }
                 oslo: machines(filter: {datacenter: "oslo"}) { totalCount }
                 datacenters { key hostCapacity { hosts readyHosts activeVms stoppedVms vcpusUsed hostsThatCanFail }
                   clusterSummary { total ready failed } } }"#,
            json!({}),
        )
        .await;
    let oslo = d["datacenters"]
        .as_array()
        .and_then(|a| a.iter().find(|x| x["key"] == "oslo"))
        .cloned()
        .expect("oslo");
    let mut ws = open_ws(&app, Some("graphql-transport-ws")).await;
    send_json(&mut ws, json!({"type": "connection_init"})).await;
    assert_eq!(recv(&mut ws).await["type"], "connection_ack");
    send_json(
        &mut ws,
        json!({"id": "h", "type": "subscribe", "payload": {"query":
            "subscription($dc: String) { hostsChanged(datacenter: $dc) { hosts readyHosts activeVms stoppedVms vcpusUsed hostsThatCanFail } }",
            "variables": {"dc": "oslo"}}}),
    )
    .await;
    send_json(
        &mut ws,
        json!({"id": "i", "type": "subscribe", "payload": {"query":
            "subscription($dc: String) { infrastructureSummary(datacenter: $dc) { machines { total } clusters { total ready failed } } }",
            "variables": {"dc": "oslo"}}}),
    )
    .await;
    let mut firsts = std::collections::BTreeMap::new();
    while firsts.len() < 2 {
        let v = recv(&mut ws).await;
        assert_eq!(v["type"], "next", "{v}");
        firsts.insert(
            v["id"].as_str().unwrap_or_default().to_string(),
            v["payload"]["data"].clone(),
        );
    }
    assert_eq!(firsts["h"]["hostsChanged"], oslo["hostCapacity"]);
    assert_eq!(
        firsts["i"]["infrastructureSummary"]["clusters"],
        oslo["clusterSummary"]
    );
    assert_eq!(
        firsts["i"]["infrastructureSummary"]["machines"]["total"],
        d["oslo"]["totalCount"]
    );
    // The queries with `datacenter` answer what the streams send first (a page at a past
    // moment asks them inside `at`).
    let q = app
        .data_of_any_state(
            r#"query($dc: String) { hostCapacity(datacenter: $dc) { hosts readyHosts activeVms stoppedVms vcpusUsed hostsThatCanFail }
                 infrastructure(datacenter: $dc) { machines { total } clusters { total ready failed } } }"#,
            json!({"dc": "oslo"}),
        )
        .await;
    assert_eq!(q["hostCapacity"], firsts["h"]["hostsChanged"]);
    assert_eq!(q["infrastructure"], firsts["i"]["infrastructureSummary"]);
    // And they are not the fleet's.
    assert_ne!(
        firsts["h"]["hostsChanged"]["hosts"],
        d["hostCapacity"]["hosts"]
    );
    assert_ne!(
        firsts["i"]["infrastructureSummary"]["machines"]["total"],
        d["machines"]["totalCount"]
    );
}
