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
