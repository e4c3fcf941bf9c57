//! The response cache: repeated queries on an unchanged graph are answered from memory, and a
//! change is visible to the very next query (never a stale answer).

use serde_json::json;
use vitistack::model::{Kind, Resource};
use vitistack::store::Op;

use crate::{metric, spawn};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repeated_queries_are_served_from_the_cache_and_never_stale() {
    let app = spawn(&["--demo"]).await;
    let store = app.running().store.clone();
    let q = "query($ns: String) { sequence machines(first: 3, filter: {namespace: $ns}) { totalCount nodes { name phase } } }";
    let hits = |m: &str| metric(m, "vitistack_graphql_cache_hits_total");

    let first = app.query(q, json!({"ns": "cache-test"})).await;
    let hits_before = hits(&app.get("/metrics").await.1);
    let second = app.query(q, json!({"ns": "cache-test"})).await;
    assert_eq!(first, second);
    assert_eq!(hits(&app.get("/metrics").await.1), hits_before + 1);
    assert_eq!(first["data"]["machines"]["totalCount"], 0);

    // Other variables: a different answer, not the cached one.
    let other = app.query(q, json!({"ns": null})).await;
    assert!(
        other["data"]["machines"]["totalCount"]
            .as_u64()
            .unwrap_or(0)
            > 0,
        "{other}"
    );

    // A change anywhere: the next query sees it.
    let m = Resource::from_value(
        Kind::Machine,
        "v1alpha1",
        json!({"metadata": {"name": "fresh", "namespace": "cache-test"},
               "spec": {"provider": "kubevirt"}, "status": {"phase": "Pending"}}),
    )
    .expect("machine");
    let seq = store.apply(vec![Op::Upsert(m)])[0].seq;
    let third = app.query(q, json!({"ns": "cache-test"})).await;
    assert_eq!(third["data"]["sequence"], seq);
    assert_eq!(third["data"]["machines"]["totalCount"], 1);
    assert_eq!(third["data"]["machines"]["nodes"][0]["name"], "fresh");

    // Answers that depend on the clock and the watches are always computed afresh.
    let m = app.get("/metrics").await.1;
    let before = hits(&m);
    for _ in 0..3 {
        app.data("{ sources { mode ready } }", json!({})).await;
    }
    assert_eq!(hits(&app.get("/metrics").await.1), before);

    // Errors are not kept either: a bad cursor is refused every time.
    let bad = "{ machines(first: 1, after: \"nope\") { totalCount } }";
    for _ in 0..2 {
        assert!(
            app.error(bad, json!({})).await["message"]
                .as_str()
                .is_some()
        );
    }
    assert_eq!(hits(&app.get("/metrics").await.1), before);
}

/// A change drops the answers kept whole, but the parts of a page it did not touch are reused:
/// the next answer shows the change, equals the answer of a server that keeps nothing, and all
/// clusters but the changed one came from kept parts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_change_the_untouched_parts_of_a_page_are_reused() {
    let app = spawn(&["--demo"]).await;
    let plain = spawn(&["--demo", "--response-cache-mb", "0", "--part-cache-mb", "0"]).await;
    let q = "{ clusters(first: 50) { nodes { name phase machines(first: 100) { nodes { name phase machineClass { name } } } } } }";
    let part_hits = |m: &str| metric(m, "vitistack_graphql_part_hits_total");

    let first = app.data(q, json!({})).await;
    assert_eq!(first, plain.data(q, json!({})).await);
    let clusters = first["clusters"]["nodes"].as_array().map_or(0, Vec::len) as i64;
    assert!(clusters > 3, "{first}");
    let (at, name) = first["clusters"]["nodes"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
        .find_map(|(i, c)| Some((i, c["machines"]["nodes"][0]["name"].as_str()?.to_owned())))
        .expect("a cluster with machines");
    let hits_before = part_hits(&app.get("/metrics").await.1);

    // That cluster's first machine fails, in both servers.
    for a in [&app, &plain] {
        let store = &a.running().store;
        let machine = store
            .snapshot()
            .list(Kind::Machine)
            .find(|m| m.name() == name)
            .expect("the machine")
            .clone();
        let mut v = machine.to_value();
        v["status"]["phase"] = json!("Failed");
        if let Some(m) = v.as_object_mut() {
            m.remove("apiVersion");
            m.remove("kind");
        }
        let m = Resource::from_value(Kind::Machine, machine.version(), v).expect("machine");
        store.apply(vec![Op::Upsert(m)]);
    }
    let second = app.data(q, json!({})).await;
    assert_eq!(
        second["clusters"]["nodes"][at]["machines"]["nodes"][0]["phase"],
        "Failed"
    );
    assert_eq!(second, plain.data(q, json!({})).await);
    let reused = part_hits(&app.get("/metrics").await.1) - hits_before;
    assert!(
        reused >= clusters - 1,
        "{reused} parts reused of {clusters} clusters"
    );
}
