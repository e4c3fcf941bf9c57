//! The dashboard-sized query over a generated fleet of 500 clusters / 10,000 machines:
//! one page of 50 clusters with every machine, its NetworkConfiguration and MachineClass.

use criterion::{Criterion, criterion_group, criterion_main};

// The same allocator as the `vitistack` binary.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;
use vitistack::graphql::{SchemaSettings, build_schema};
use vitistack::source::demo::{FleetSpec, fleet};
use vitistack::store::Op;
use vitistack::store::Store;

/// The query the load script sends too (`e2e/load/dashboard.graphql`).
pub const DASHBOARD: &str = include_str!("../../e2e/load/dashboard.graphql");

/// `store` with the generated fleet `spec` in it.
fn loaded(store: Store, spec: &FleetSpec) -> Store {
    store.apply_loaded(fleet(spec).into_iter().map(Op::Upsert).collect());
    store
}

fn dashboard(c: &mut Criterion) {
    let store = loaded(Store::new(), &FleetSpec::large(500));
    let schema = build_schema(&SchemaSettings::default());
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    let check =
        rt.block_on(schema.execute(async_graphql::Request::new(DASHBOARD).data(store.snapshot())));
    assert!(check.errors.is_empty(), "{:?}", check.errors);
    let mut group = c.benchmark_group("dashboard");
    group.sample_size(30);
    group.bench_function("50_clusters_x_20_machines", |b| {
        b.iter(|| {
            let r = rt.block_on(
                schema.execute(async_graphql::Request::new(DASHBOARD).data(store.snapshot())),
            );
            std::hint::black_box(r.data);
        })
    });
    // Kept parts (PART_CACHE_MB): the page again with nothing changed (every cluster reused),
    // and with one machine on the page changed before each request (its cluster resolved again).
    let parts = std::sync::Arc::new(vitistack::graphql::parts::PartCache::new(
        64 << 20,
        prometheus::IntCounter::new("h", "h").expect("counter"),
        prometheus::IntCounter::new("m", "m").expect("counter"),
    ));
    let with_parts = |snap: std::sync::Arc<vitistack::store::Snapshot>| {
        let request = async_graphql::Request::new(DASHBOARD);
        let key = vitistack::graphql::parts::RequestKey::of(&request);
        let request = request.data(snap.clone());
        match parts.for_request(key.as_ref(), snap) {
            Some(p) => request.data(p),
            None => request,
        }
    };
    let first = rt.block_on(schema.execute(with_parts(store.snapshot())));
    assert_eq!(first.data, check.data);
    group.bench_function("kept_parts_unchanged", |b| {
        b.iter(|| {
            let r = rt.block_on(schema.execute(with_parts(store.snapshot())));
            std::hint::black_box(r.data);
        })
    });
    let page = check.data.clone().into_json().expect("json");
    let name = page["clusters"]["nodes"][0]["machines"]["nodes"][0]["name"].clone();
    let on_page = store
        .snapshot()
        .list(vitistack::model::Kind::Machine)
        .find(|m| m.name() == name)
        .map(|m| (**m).clone())
        .expect("a machine on the page");
    let mut flip = false;
    group.bench_function("kept_parts_one_change_each", |b| {
        b.iter(|| {
            flip = !flip;
            let mut v = on_page.to_value();
            v["status"]["phase"] = serde_json::json!(if flip { "Failed" } else { "Running" });
            store.apply(vec![Op::Upsert(
                vitistack::source::demo::decode(v).expect("decodes"),
            )]);
            let r = rt.block_on(schema.execute(with_parts(store.snapshot())));
            std::hint::black_box(r.data);
        })
    });
    group.bench_function("cluster_summary_500", |b| {
        b.iter(|| {
            let r = rt.block_on(
                schema.execute(
                    async_graphql::Request::new(
                        "{ clusterSummary { total ready byStage { value count } } }",
                    )
                    .data(store.snapshot()),
                ),
            );
            std::hint::black_box(r.data);
        })
    });
    group.finish();

    // The counts behind `infrastructure`: walked over the fleet (a store without aggregates) or
    // read from the aggregates the store keeps; and what keeping them costs a write.
    let kept = loaded(
        Store::new().derive_with(vitistack::domain::aggregates::deriver()),
        &FleetSpec::large(500),
    );
    const COUNTS: &str = "{ infrastructure { machines { total running failed byPhase { value count } vcpus } \
        networks { namespaces readyNamespaces allocatedIps } clusters { total ready failed byStage { value count } } } }";
    let mut group = c.benchmark_group("infrastructure");
    group.sample_size(30);
    for (name, s) in [("walk_500", &store), ("kept_500", &kept)] {
        group.bench_function(name, |b| {
            b.iter(|| {
                let r = rt.block_on(
                    schema.execute(async_graphql::Request::new(COUNTS).data(s.snapshot())),
                );
                std::hint::black_box(r.data);
            })
        });
    }
    // The same through the known documents (DOCUMENT_CACHE_MB): not parsed again, not validated
    // again (the server's path; `kept_500` parses and validates every time).
    let documents = vitistack::graphql::documents::QueryDocuments::new(
        vitistack::graphql::build_fast_schema(&SchemaSettings::default()),
        SchemaSettings::default().limits,
        16 << 20,
        prometheus::IntCounter::new("h", "h").expect("counter"),
        prometheus::IntCounter::new("m", "m").expect("counter"),
    );
    group.bench_function("kept_500_known_document", |b| {
        b.iter(|| {
            let mut r = async_graphql::Request::new(COUNTS);
            let key = vitistack::graphql::parts::RequestKey::of(&r);
            let plan = documents.prepare(&mut r, key.as_ref());
            let r = rt.block_on(documents.execute(
                &schema,
                &plan,
                key.as_ref(),
                r.data(kept.snapshot()),
            ));
            std::hint::black_box(r.data);
        })
    });
    // One Machine's phase flips per write (its cluster's pipeline is evaluated again).
    let machine = store
        .snapshot()
        .list(vitistack::model::Kind::Machine)
        .next()
        .map(|m| (**m).clone())
        .expect("a machine");
    for (name, s) in [
        ("write_without_aggregates", &store),
        ("write_keeping_aggregates", &kept),
    ] {
        let mut flip = false;
        group.bench_function(name, |b| {
            b.iter(|| {
                flip = !flip;
                let mut v = machine.to_value();
                v["status"]["phase"] = serde_json::json!(if flip { "Failed" } else { "Running" });
                if let Some(m) = v.as_object_mut() {
                    m.remove("apiVersion");
                    m.remove("kind");
                }
                let r =
                    vitistack::model::Resource::from_value(machine.kind(), machine.version(), v)
                        .expect("decodes");
                std::hint::black_box(s.apply(vec![Op::Upsert(r)]));
            })
        });
    }
    group.finish();
}

/// `hostCapacity` of the 500-cluster demo (83 hosts, 8,000 VMs): computed (the redundancy packs
/// every active VM) or taken from the snapshot's memo, as every reader after the first is; and
/// computed on the 1,310-cluster demo (about 100,000 objects, 20,960 VMs), the first load of the
/// dashboard's overview on a fresh server.
fn capacity(c: &mut Criterion) {
    let store = loaded(Store::new(), &FleetSpec::large_demo(500));
    let o = vitistack::domain::hosts::Overcommit::default();
    let snap = store.snapshot();
    let mut group = c.benchmark_group("host_capacity");
    group.sample_size(20);
    group.bench_function("computed_500", |b| {
        b.iter(|| std::hint::black_box(vitistack::graphql::types::host_capacity_full(&snap, o)))
    });
    group.bench_function("memo_500", |b| {
        b.iter(|| std::hint::black_box(vitistack::graphql::types::host_capacity(&snap, o, None)))
    });
    drop(snap);
    drop(store);
    let store = loaded(Store::new(), &FleetSpec::large_demo(1310));
    let snap = store.snapshot();
    group.bench_function("computed_1310", |b| {
        b.iter(|| std::hint::black_box(vitistack::graphql::types::host_capacity_full(&snap, o)))
    });
    group.finish();
}

criterion_group!(benches, dashboard, capacity);
criterion_main!(benches);
