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
