//! Memory and load time of the benchmark fleet (500 clusters / 10,000 machines) in the store.
//! Prints resident memory before and after, and where the bytes go (allocated and not freed):
//! per kind the bytes of its objects (a deep copy of them, the same rebuilt from their JSON text,
//! and their metadata alone) against their JSON, and what the store adds to the objects. Run with `cargo bench --bench fleet_memory`;
//! `FLEET_MEMORY_HOSTS=1` measures the Kubernetes sync benchmark's mix (hosts, VMs, Nodes) in a
//! store with the server's derived state.

use std::time::Instant;

/// Counts the bytes allocated and not yet freed (the system allocator's own overhead aside).
#[global_allocator]
static ALLOCATED: cap::Cap<std::alloc::System> = cap::Cap::new(std::alloc::System, usize::MAX);

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
    // FLEET_MEMORY_HOSTS=1: the Kubernetes sync benchmark's mix (hosts, their VMs and VMIs,
    // Nodes), held as the server holds it (with its derived state).
    let hosts = std::env::var_os("FLEET_MEMORY_HOSTS").is_some();
    let mut spec = FleetSpec::large(500);
    spec.hosts = hosts;
    let objects = fleet(&spec);
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
    let store = match hosts {
        true => Store::new().derive_with(vitistack::domain::aggregates::deriver()),
        false => Store::new(),
    };
    let t = Instant::now();
    let held_before = ALLOCATED.allocated();
    store.apply(objects.into_iter().map(Op::Upsert).collect());
    let applied = t.elapsed();
    let snap = store.snapshot();
    let held = ALLOCATED.allocated().saturating_sub(held_before);
    kinds(&snap, held, n);
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

/// Bytes a value allocates when made by `make` (and dropped after).
fn bytes_of<T>(make: impl FnOnce() -> T) -> usize {
    let before = ALLOCATED.allocated();
    let made = make();
    let bytes = ALLOCATED.allocated().saturating_sub(before);
    drop(made);
    bytes
}

/// Per kind: objects, bytes per object (a deep copy: all of it, the same rebuilt from its JSON
/// text, then its metadata alone), its JSON's bytes; then `held`, what the store added to them (indexes, maps, derived state).
fn kinds(snap: &vitistack::store::Snapshot, held: usize, n: usize) {
    println!(
        "{:<28} {:>7} {:>9} {:>9} {:>9} {:>9} {:>6}",
        "kind", "objects", "B/object", "rebuilt", "metadata", "JSON", "x JSON"
    );
    let mut objects = 0usize;
    for kind in vitistack::model::Kind::ALL {
        let list: Vec<_> = snap.list(*kind).collect();
        if list.is_empty() {
            continue;
        }
        let count = list.len();
        // Less the vector holding the copies.
        let all = bytes_of(|| list.iter().map(|r| (***r).clone()).collect::<Vec<_>>())
            - count * std::mem::size_of::<vitistack::model::Resource>();
        let meta = bytes_of(|| list.iter().map(|r| r.meta().clone()).collect::<Vec<_>>())
            - count * std::mem::size_of::<vitistack::model::ObjectMeta>();
        // Read back from their JSON text, as a past moment's graph is rebuilt from the timeline's
        // checkpoint: a list grown while read keeps its spare room, which a clone does not show
        // (a source decodes a parsed value instead, which knows each list's length).
        let texts: Vec<(vitistack::model::Kind, &str, String)> = list
            .iter()
            .map(|r| (r.kind(), r.version(), r.to_value().to_string()))
            .collect();
        let rebuilt = bytes_of(|| {
            texts
                .iter()
                .filter_map(|(k, v, t)| vitistack::model::Resource::from_kept_json(*k, v, t).ok())
                .collect::<Vec<_>>()
        }) - count * std::mem::size_of::<vitistack::model::Resource>();
        let json: usize = texts.iter().map(|(_, _, t)| t.len()).sum();
        objects += all;
        println!(
            "{:<28} {:>7} {:>9} {:>9} {:>9} {:>9} {:>6.1}",
            kind.name(),
            count,
            all / count,
            rebuilt / count,
            meta / count,
            json / count,
            all as f64 / json as f64
        );
    }
    // The objects were made before they went into the store: what it holds besides them is
    // what applying them added (their Arcs, the indexes and maps, the derived state).
    println!(
        "{n} objects: {} MiB ({} B each) for the objects themselves, {} MiB ({} B per object) for what the store adds (Arcs, indexes, maps, derived state)",
        objects >> 20,
        objects / n.max(1),
        held >> 20,
        held / n.max(1)
    );
}
