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

fn dashboard(c: &mut Criterion) {
    let store = Store::new();
    store.apply_loaded(
        fleet(&FleetSpec::large(500))
            .into_iter()
            .map(Op::Upsert)
            .collect(),
    );
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
}

criterion_group!(benches, dashboard);
criterion_main!(benches);
