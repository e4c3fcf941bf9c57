use serde_json::{Value as Json, json};

use super::*;
use crate::graphql::{SchemaSettings, build_fast_schema, build_schema};
use crate::source::demo::{FleetSpec, fleet};
use crate::store::{Op, Snapshot, Store};

/// QueryDocuments, each with requests that pass validation and requests that fail it, where whether a
/// request passes depends on its variables or its operation name: a remembered validation must
/// never stand in for one that would fail.
const REQUESTS: &[(&str, Option<&str>, &str)] = &[
    (
        "query Q($n: Int, $f: Filter) { machines(first: $n, filter: $f) { totalCount nodes { name phase } } }",
        None,
        r#"[{"n": 3}, {"n": 3, "f": {"phase": ["Running"]}}, {"n": 3, "f": {"bogus": 1}},
            {"n": "three"}, {"n": 3, "f": {"phase": "Running"}}, {}]"#,
    ),
    (
        // Complexity grows with $n: 2 passes, 500 is over the limit.
        "query($n: Int) { clusters(first: $n) { nodes { name machines(first: $n) { nodes { name } } } } }",
        None,
        r#"[{"n": 2}, {"n": 500}]"#,
    ),
    (
        "query($r: NodeRole) { clusters(first: 2) { nodes { machines(role: $r, first: 2) { nodes { name role } } } } }",
        None,
        r#"[{"r": "WORKER"}, {"r": "NOPE"}, {"r": "CONTROL_PLANE"}]"#,
    ),
    (
        "query A { clusters(first: 1) { totalCount } } query B { machines(first: 1) { totalCount } }",
        Some("A"),
        "[{}]",
    ),
    (
        "query A { clusters(first: 1) { totalCount } } query B { machines(first: 1) { totalCount } }",
        Some("B"),
        "[{}]",
    ),
    (
        "query A { clusters(first: 1) { totalCount } } query B { machines(first: 1) { totalCount } }",
        Some("C"),
        "[{}]",
    ),
    (
        "query A { clusters(first: 1) { totalCount } } query B { machines(first: 1) { totalCount } }",
        None,
        "[{}]",
    ),
    ("{ nope }", None, "[{}]"),
    ("{ clusters(", None, "[{}]"),
    ("{ ...F } fragment F on Query { ...F }", None, "[{}]"),
    (
        include_str!("../../../../e2e/load/counts.graphql"),
        None,
        "[{}]",
    ),
];

fn requests() -> Vec<(String, Option<String>, async_graphql::Variables)> {
    let mut out = Vec::new();
    for (query, op, vars) in REQUESTS {
        let vars: Vec<Json> = serde_json::from_str(vars).unwrap_or_default();
        assert!(!vars.is_empty(), "variables of {query}");
        for v in vars {
            out.push((
                query.to_string(),
                op.map(str::to_string),
                async_graphql::Variables::from_json(v),
            ));
        }
    }
    // Over the alias limit (100 aliases), and over the token limit (10,000 tokens).
    let aliases = (0..101).map(|i| format!("a{i}: clusters(first: 1) {{ totalCount }}"));
    let tokens = (0..3400).map(|i| format!("b{i}: __typename"));
    for fields in [aliases.collect::<Vec<_>>(), tokens.collect()] {
        let query = format!("{{ {} }}", fields.join(" "));
        out.push((query, None, async_graphql::Variables::default()));
    }
    out
}

fn request(
    (query, op, vars): &(String, Option<String>, async_graphql::Variables),
) -> async_graphql::Request {
    let mut r = async_graphql::Request::new(query.clone()).variables(vars.clone());
    if let Some(op) = op {
        r = r.operation_name(op.clone());
    }
    r
}

fn demo() -> Arc<Snapshot> {
    let store = Store::new().derive_with(crate::domain::aggregates::deriver());
    store.apply(
        fleet(&FleetSpec {
            clusters: 4,
            ..FleetSpec::demo()
        })
        .into_iter()
        .map(Op::Upsert)
        .collect(),
    );
    store.snapshot()
}

fn documents(max_bytes: usize) -> QueryDocuments {
    QueryDocuments::new(
        build_fast_schema(&SchemaSettings::default()),
        SchemaSettings::default().limits,
        max_bytes,
        prometheus::IntCounter::new("h", "h").expect("counter"),
        prometheus::IntCounter::new("m", "m").expect("counter"),
    )
}

/// The answer through the known documents (prepared, run on the fast schema once validated).
async fn through(
    docs: &QueryDocuments,
    strict: &AppSchema,
    r: async_graphql::Request,
    snap: &Arc<Snapshot>,
) -> (Json, bool) {
    let mut r = r;
    let key = RequestKey::of(&r);
    let plan = docs.prepare(&mut r, key.as_ref());
    let response = docs
        .execute(strict, &plan, key.as_ref(), r.data(snap.clone()))
        .await;
    (
        serde_json::to_value(response).unwrap_or(Json::Null),
        plan.validated,
    )
}

/// Refused before running: no data, and errors without a path.
fn refused(answer: &Json) -> bool {
    answer["data"].is_null()
        && answer["errors"]
            .as_array()
            .is_some_and(|e| !e.is_empty() && e.iter().all(|e| e.get("path").is_none()))
}

/// The reference: the schema validating strictly, with the limits as an async-graphql extension
/// (checked while parsing, as they were before the documents checked them).
fn reference() -> AppSchema {
    let settings = SchemaSettings::default();
    crate::graphql::with_data(
        async_graphql::Schema::build(
            crate::graphql::QueryRoot::default(),
            crate::graphql::mutation::MutationRoot,
            crate::graphql::subscription::SubscriptionRoot,
        ),
        &settings,
    )
    .extension(crate::graphql::limits::Enforce(settings.limits))
    .finish()
}

/// Every request, in several orders and each sent again, gets through the known documents
/// exactly the answer of strict validation, a fresh parse and the limits checked while parsing
/// (data, errors, messages, positions), and most repeated requests skip validation.
#[tokio::test]
async fn answers_equal_strictly_validated_answers_in_any_order() {
    let strict = build_schema(&SchemaSettings::default());
    let reference = reference();
    let snap = demo();
    let all = requests();
    let mut fresh = Vec::new();
    for r in &all {
        let mut answer = reference.execute(request(r).data(snap.clone())).await;
        // (Too-deep documents are refused in our words, naming MAX_QUERY_DEPTH.)
        crate::graphql::limits::name_depth_errors(&mut answer, 16);
        fresh.push(serde_json::to_value(answer).unwrap_or(Json::Null));
    }
    let refused = fresh.iter().filter(|a| refused(a)).count();
    assert!(
        refused >= 10 && refused < all.len() - 5,
        "the requests mix refusals ({refused}) and answers"
    );
    let mut skipped = 0;
    for seed in 0..8u64 {
        let docs = documents(16 << 20);
        // A seeded shuffle, every request twice.
        let mut order: Vec<usize> = (0..all.len()).chain(0..all.len()).collect();
        let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        for i in (1..order.len()).rev() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            order.swap(i, (x % (i as u64 + 1)) as usize);
        }
        for i in order {
            let (answer, validated) = through(&docs, &strict, request(&all[i]), &snap).await;
            assert_eq!(
                answer, fresh[i],
                "seed {seed}: {:?} with {}",
                all[i].0, all[i].2
            );
            skipped += usize::from(validated);
        }
    }
    assert!(
        skipped >= 8 * (all.len() - refused) / 2,
        "validation skipped {skipped} times"
    );
}

/// A text is parsed once; a request is validated strictly until it has passed once with the same
/// operation and variables; a refused request is validated every time.
#[tokio::test]
async fn a_document_is_parsed_once_and_a_request_validated_once() {
    let strict = build_schema(&SchemaSettings::default());
    let snap = demo();
    let docs = documents(16 << 20);
    let q = "query($n: Int) { clusters(first: $n) { totalCount nodes { name } } }";
    let with = |n: Json| {
        async_graphql::Request::new(q)
            .variables(async_graphql::Variables::from_json(json!({"n": n})))
    };
    let (a, validated) = through(&docs, &strict, with(json!(2)), &snap).await;
    assert!(!validated);
    assert!(docs.known_queries(q), "a GET of it needs no parse");
    assert!(
        !docs.known_queries("{ clusters { totalCount } }"),
        "not seen yet"
    );
    assert_eq!(
        a["data"]["clusters"]["nodes"].as_array().map(Vec::len),
        Some(2)
    );
    assert_eq!((docs.hits.get(), docs.misses.get()), (0, 1));
    let (b, validated) = through(&docs, &strict, with(json!(2)), &snap).await;
    assert!(validated, "the same request again skips validation");
    assert_eq!(a, b);
    assert_eq!((docs.hits.get(), docs.misses.get()), (1, 1));
    let (_, validated) = through(&docs, &strict, with(json!(3)), &snap).await;
    assert!(!validated, "other variables are validated");
    let (c, validated) = through(&docs, &strict, with(json!(3)), &snap).await;
    assert!(validated);
    assert_eq!(
        c["data"]["clusters"]["nodes"].as_array().map(Vec::len),
        Some(3)
    );
    for _ in 0..2 {
        let (e, validated) = through(&docs, &strict, with(json!("x")), &snap).await;
        assert!(!validated, "a refused request is never remembered");
        assert!(refused(&e), "{e}");
    }
    assert_eq!((docs.hits.get(), docs.misses.get()), (5, 1));
    assert_eq!(docs.len(), 1);
    let sub = "subscription { infrastructureSummary { clusters { total } } }";
    through(&docs, &strict, async_graphql::Request::new(sub), &snap).await;
    assert!(
        !docs.known_queries(sub),
        "a subscription is parsed to be refused over GET"
    );
    // Off: parsed every time, validated every time, same answers.
    let off = documents(0);
    for _ in 0..2 {
        let (d, validated) = through(&off, &strict, with(json!(2)), &snap).await;
        assert!(!validated);
        assert_eq!(d, a);
    }
    assert_eq!((off.hits.get(), off.misses.get(), off.len()), (0, 2, 0));
}

/// Many distinct documents hold at most the bound, and one larger than half of it is not kept.
#[tokio::test]
async fn documents_stay_within_the_bound() {
    let strict = build_schema(&SchemaSettings::default());
    let snap = demo();
    let max = 200 * 1024;
    let docs = documents(max);
    for i in 0..1000 {
        let q = format!("query Q{i} {{ clusters(first: 1) {{ totalCount }} }}");
        through(
            &docs,
            &strict,
            async_graphql::Request::new(q.clone()),
            &snap,
        )
        .await;
        let least = size_of(&q);
        assert!(
            docs.len() * least <= max,
            "{} documents of {least} bytes",
            docs.len()
        );
    }
    assert!(docs.len() >= 5, "documents are kept: {}", docs.len());
    // Few tokens (a comment is none), many bytes.
    let big = format!(
        "{{ clusters(first: 1) {{ totalCount }} }} # {}",
        "x".repeat(8000)
    );
    assert!(size_of(&big) > max / 2);
    let mut r = async_graphql::Request::new(big.clone());
    docs.prepare(&mut r, None);
    assert!(
        docs.known.find(big.as_str()).is_none(),
        "a document over half the bound is not kept"
    );
}
