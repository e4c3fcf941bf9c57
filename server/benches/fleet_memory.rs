//! Memory and load time of the benchmark fleet (500 clusters / 10,000 machines) in the store.
//! Prints resident memory before and after; run with `cargo bench --bench fleet_memory`.

use std::time::Instant;

use vitistack::source::demo::{FleetSpec, fleet};
use vitistack::store::{Op, Store};

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let before = rss_kib();
    let started = Instant::now();
    let objects = fleet(&FleetSpec::large(500));
    let generated = started.elapsed();
    let n = objects.len();
    let after_generate = rss_kib();
    if std::env::var_os("FLEET_MEMORY_DETAIL").is_some() {
        // Cloning allocates exactly the live size of the objects, without the generator's garbage.
        let json: usize = objects.iter().map(|r| r.to_value().to_string().len()).sum();
        let r0 = rss_kib();
        let copy = objects.clone();
        println!(
            "detail: JSON {} MiB; one clone of the objects takes {} MiB",
            json >> 20,
            (rss_kib() - r0) >> 10
        );
        drop(copy);
    }
    let store = Store::new();
    let t = Instant::now();
    store.apply(objects.into_iter().map(Op::Upsert).collect());
    let applied = t.elapsed();
    let snap = store.snapshot();
    println!(
        "fleet_memory: {n} objects ({} machines, {} clusters); generate {:.0} ms, apply {:.0} ms; RSS {} MiB before, {} MiB with the objects generated, {} MiB in the store",
        snap.count(vitistack::model::Kind::Machine),
        snap.count(vitistack::model::Kind::KubernetesCluster),
        generated.as_secs_f64() * 1e3,
        applied.as_secs_f64() * 1e3,
        before / 1024,
        after_generate / 1024,
        rss_kib() / 1024
    );
}
