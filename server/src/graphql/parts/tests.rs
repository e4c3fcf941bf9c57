use serde_json::{Value as Json, json};

use super::*;
use crate::graphql::{AppSchema, SchemaSettings, build_schema};
use crate::source::churn::Churn;
use crate::source::demo::{FleetSpec, fleet};
use crate::store::{Op, Store};

/// Queries that put connection items inside connection items, select them through fragments,
/// aliases, `edges { node }` and variables, and mix in parts that cannot be kept (a diagnosis
/// reads whole kinds; `history` is an error without a database).
const QUERIES: &[(&str, &str)] = &[
    (
        "dashboard",
        include_str!("../../../../e2e/load/dashboard.graphql"),
    ),
    (
        "fragments",
        r#"query Q($first: Int!, $class: Boolean!) {
          a: clusters(first: 4) { edges { cursor node { ...C } } }
          b: clusters(first: 6) { nodes { name diagnosis { ready stage summary blockers { kind name reason } } } }
          networkNamespaces(first: 10) { nodes { name
            machines(first: $first) { totalCount nodes { ...M } }
            networkConfigurations(first: 5) { nodes { name phase interfaces { name ipv4Addresses } } } } }
        }
        fragment C on KubernetesCluster { name phase machines(first: $first) { nodes { ...M } } }
        fragment M on Machine { name phase role machineClass @include(if: $class) { name cpu { vcpus } } }"#,
    ),
    (
        "whole kinds",
        r#"{ vitistacks(first: 2) { nodes { name clusterCount machineCount } }
             hosts(first: 4) { nodes { name allocation { vcpusUsed memoryUsedBytes vms } vms { name } } } }"#,
    ),
    (
        "errors",
        r#"{ machines(first: 5) { nodes { name history(first: 2) { sequence } } } }"#,
    ),
];

fn variables(name: &str) -> async_graphql::Variables {
    match name {
        "fragments" => async_graphql::Variables::from_json(json!({"first": 4, "class": true})),
        _ => async_graphql::Variables::default(),
    }
}

async fn answer(
    schema: &AppSchema,
    name: &str,
    query: &str,
    parts: Option<RequestParts>,
    snap: Arc<Snapshot>,
) -> Json {
    let mut request = async_graphql::Request::new(query)
        .variables(variables(name))
        .data(snap);
    if let Some(parts) = parts {
        request = request.data(parts);
    }
    serde_json::to_value(schema.execute(request).await).unwrap_or(Json::Null)
}

/// After random changes (edits, deletions, re-creations, pipeline steps), every answer built
/// with kept parts equals the answer built afresh, byte for byte, over many seeds; and parts are
/// both reused and resolved again along the way.
#[tokio::test]
async fn answers_with_kept_parts_equal_fresh_answers_after_random_changes() {
    let schema = build_schema(&SchemaSettings::default());
    let hits = prometheus::IntCounter::new("h", "h").expect("counter");
    let misses = prometheus::IntCounter::new("m", "m").expect("counter");
    let mut queries_with_errors = 0;
    for seed in 0..12u64 {
        let spec = FleetSpec {
            clusters: 6,
            ..FleetSpec::demo()
        };
        let store = Store::new().derive_with(crate::domain::aggregates::deriver());
        store.apply(fleet(&spec).into_iter().map(Op::Upsert).collect());
        let cache = Arc::new(PartCache::new(64 << 20, hits.clone(), misses.clone()));
        let mut churn = Churn::new(&spec, seed);
        for step in 0..40 {
            if step > 0 {
                store.apply(churn.batch(&store.snapshot()));
            }
            let snap = store.snapshot();
            for (name, query) in QUERIES {
                let request = async_graphql::Request::new(*query).variables(variables(name));
                let parts = cache.for_request(RequestKey::of(&request).as_ref(), snap.clone());
                assert!(parts.is_some());
                let kept = answer(&schema, name, query, parts, snap.clone()).await;
                let fresh = answer(&schema, name, query, None, snap.clone()).await;
                assert_eq!(kept, fresh, "seed {seed}, step {step}, query {name}");
                if kept.get("errors").is_some() {
                    queries_with_errors += 1;
                    assert_eq!(*name, "errors", "{kept}");
                }
            }
        }
    }
    assert!(queries_with_errors > 0, "the error case ran");
    assert!(
        hits.get() > 1000,
        "parts were reused: {} hits, {} misses",
        hits.get(),
        misses.get()
    );
    assert!(
        misses.get() > 1000,
        "parts were resolved again: {} hits, {} misses",
        hits.get(),
        misses.get()
    );
}

/// The demo fleet in a store, the schema, and a part cache of `max_bytes` with its hit and miss
/// counters.
fn demo_with_cache(
    max_bytes: usize,
) -> (
    AppSchema,
    Store,
    Arc<PartCache>,
    prometheus::IntCounter,
    prometheus::IntCounter,
) {
    let store = Store::new();
    store.apply(
        fleet(&FleetSpec::demo())
            .into_iter()
            .map(Op::Upsert)
            .collect(),
    );
    let hits = prometheus::IntCounter::new("h", "h").expect("counter");
    let misses = prometheus::IntCounter::new("m", "m").expect("counter");
    let cache = Arc::new(PartCache::new(max_bytes, hits.clone(), misses.clone()));
    (
        build_schema(&SchemaSettings::default()),
        store,
        cache,
        hits,
        misses,
    )
}

/// A part reused on an unchanged graph is the part resolved the first time; a change to one
/// machine resolves that machine's part (and its cluster's) again, and no other.
#[tokio::test]
async fn a_change_resolves_again_only_the_parts_that_read_it() {
    let (schema, store, cache, hits, misses) = demo_with_cache(64 << 20);
    let query =
        "{ clusters(first: 50) { nodes { name machines(first: 100) { nodes { name phase } } } } }";
    let run = |snap: Arc<Snapshot>| {
        let parts = cache.for_request(
            RequestKey::of(&async_graphql::Request::new(query)).as_ref(),
            snap.clone(),
        );
        answer(&schema, "q", query, parts, snap)
    };
    let first = run(store.snapshot()).await;
    let clusters = first["data"]["clusters"]["nodes"]
        .as_array()
        .map_or(0, Vec::len) as u64;
    let machines: u64 = first["data"]["clusters"]["nodes"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| c["machines"]["nodes"].as_array().map_or(0, Vec::len) as u64)
        .sum();
    assert!(clusters >= 2 && machines >= 4, "{first}");
    assert_eq!((hits.get(), misses.get()), (0, clusters + machines));

    // Nothing changed: every cluster is reused whole (its machines are not even looked at).
    assert_eq!(run(store.snapshot()).await, first);
    assert_eq!((hits.get(), misses.get()), (clusters, clusters + machines));

    // One machine changes phase: its cluster and the machine are resolved again, its siblings
    // and the other clusters are reused.
    let (at, cluster) = first["data"]["clusters"]["nodes"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
        .find(|(_, c)| c["machines"]["nodes"][0]["name"].is_string())
        .expect("a cluster with machines");
    let name = cluster["machines"]["nodes"][0]["name"]
        .as_str()
        .expect("a machine");
    let snap = store.snapshot();
    let machine = snap
        .list(crate::model::Kind::Machine)
        .find(|m| m.name() == name)
        .expect("the machine")
        .clone();
    let mut v = machine.to_value();
    v["status"]["phase"] = json!("Failed");
    store.apply(vec![Op::Upsert(
        crate::source::demo::decode(v).expect("decodes"),
    )]);
    let third = run(store.snapshot()).await;
    assert_eq!(
        third["data"]["clusters"]["nodes"][at]["machines"]["nodes"][0]["phase"],
        "Failed"
    );
    assert_eq!(
        third,
        answer(&schema, "q", query, None, store.snapshot()).await
    );
    let siblings = cluster["machines"]["nodes"].as_array().map_or(0, Vec::len) as u64 - 1;
    assert_eq!(
        (hits.get(), misses.get()),
        (
            clusters + (clusters - 1) + siblings,
            clusters + machines + 2
        )
    );
}

/// Every part counts the text of the request it belongs to: a large document cannot keep more
/// than the bound alive through many small parts (here no part of a 600 KB document fits a
/// 1 MiB cache, so the same request resolves every item again).
#[tokio::test]
async fn a_large_document_cannot_hold_more_than_the_bound() {
    let (schema, store, cache, hits, misses) = demo_with_cache(1 << 20);
    let query = format!(
        "# {}\n{{ machines(first: 20) {{ nodes {{ name phase }} }} }}",
        "x".repeat(600_000)
    );
    for _ in 0..2 {
        let snap = store.snapshot();
        let parts = cache.for_request(
            RequestKey::of(&async_graphql::Request::new(&query)).as_ref(),
            snap.clone(),
        );
        let answer = answer(&schema, "large", &query, parts, snap).await;
        assert_eq!(
            answer["data"]["machines"]["nodes"]
                .as_array()
                .map_or(0, Vec::len),
            20
        );
    }
    assert_eq!((hits.get(), misses.get()), (0, 40));
}
