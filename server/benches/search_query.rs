//! `search` over a large fleet: `SEARCH_DATACENTERS` datacenters (default 10), each with the
//! generated fleet of `SEARCH_CLUSTERS` clusters (default 2,300: about 100,000 objects), so one
//! million objects by default. Prints the load time and resident memory, then per kind of search
//! (an exact name, an IP address, a MAC address, a cluster id, a host, a label, a word of names,
//! a namespace) the p50 and p95 of `SEARCH_SAMPLES` different texts (default 200), each asked
//! through the schema for its first page of 50 (no response cache); then the lists: a filtered,
//! sorted page of 100 Machines (and of clusters by stage and health), the same way. Run with
//! `cargo bench --bench search_query`; `SEARCH_ONLY=phase` runs only the cases whose name holds
//! that text (`list` for the lists alone).

use std::time::Instant;

// The same allocator as the `vitistack` binary.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use serde_json::json;
use vitistack::graphql::{SchemaSettings, build_schema};
use vitistack::model::{Datacenter, Kind, Resource};
use vitistack::source::demo::{FleetSpec, fleet};
use vitistack::store::{Op, Store};

const QUERY: &str = "query($t: String!, $f: SearchFilter) { search(text: $t, filter: $f, first: 50) { totalCount nodes { rank field value node { id kind name namespace datacenter } } } }";

fn rss_mib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        })
        .unwrap_or(0)
        >> 10
}

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Whether the case `what` is to run: its name holds `SEARCH_ONLY`, when that is set.
fn chosen(what: &str) -> bool {
    std::env::var("SEARCH_ONLY")
        .ok()
        .is_none_or(|only| what.contains(only.as_str()))
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let datacenters = env("SEARCH_DATACENTERS", 10);
    let clusters = env("SEARCH_CLUSTERS", 2300);
    let samples = env("SEARCH_SAMPLES", 200);
    // As the server keeps it: the aggregates (and each cluster's judgment) with every snapshot.
    let store = Store::new().derive_with(vitistack::domain::aggregates::deriver());
    let started = Instant::now();
    let one = fleet(&FleetSpec::large(clusters));
    for i in 0..datacenters {
        let dc = Datacenter::new(&format!("dc-{i:02}"));
        let objects: Vec<Op> = one
            .iter()
            .map(|r| Op::Upsert(r.clone().in_datacenter(&dc)))
            .collect();
        store.apply_loaded(objects);
    }
    drop(one);
    let snap = store.snapshot();
    println!(
        "search_query: {} objects in {datacenters} datacenters loaded in {:.1} s; RSS {} MiB",
        snap.len(),
        started.elapsed().as_secs_f64(),
        rss_mib()
    );
    // Texts to look for, taken from the objects: spread over the fleet, one per sample.
    let machines: Vec<&Resource> = snap.list(Kind::Machine).map(|r| r.as_ref()).collect();
    let vmis: Vec<&Resource> = snap
        .list(Kind::VirtualMachineInstance)
        .map(|r| r.as_ref())
        .collect();
    let clusters_list: Vec<&Resource> = snap
        .list(Kind::KubernetesCluster)
        .map(|r| r.as_ref())
        .collect();
    let pick = |all: &[&Resource], i: usize| all[(i * 7919) % all.len()].to_value();
    type Texts<'a> = Box<dyn Fn(usize) -> (String, serde_json::Value) + 'a>;
    let cases: Vec<(&str, Texts<'_>)> = vec![
        ("exact name", {
            let m = machines.clone();
            Box::new(move |i| {
                (
                    pick(&m, i)["metadata"]["name"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                    json!(null),
                )
            })
        }),
        ("IP address", {
            let m = machines.clone();
            Box::new(move |i| {
                (
                    pick(&m, i)["status"]["ipAddresses"][0]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                    json!(null),
                )
            })
        }),
        ("MAC address", {
            let m = machines.clone();
            Box::new(move |i| {
                (
                    pick(&m, i)["status"]["networkInterfaces"][0]["macAddress"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                    json!(null),
                )
            })
        }),
        ("cluster id", {
            let c = clusters_list.clone();
            Box::new(move |i| {
                (
                    pick(&c, i)["spec"]["data"]["clusterId"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                    json!(null),
                )
            })
        }),
        ("host (a VMI's node, else a Machine's host name)", {
            // The generated fleet of `FleetSpec::large` has no VMIs: its Machines' host names.
            let (from, path, kind) = if vmis.is_empty() {
                (machines.clone(), "/status/hostname", "Machine")
            } else {
                (vmis.clone(), "/status/nodeName", "VirtualMachineInstance")
            };
            Box::new(move |i| {
                (
                    pick(&from, i)
                        .pointer(path)
                        .and_then(|v| v.as_str())
                        .unwrap_or_default()
                        .to_string(),
                    json!({ "kinds": [kind] }),
                )
            })
        }),
        ("label key=value", {
            let c = clusters_list.clone();
            Box::new(move |i| {
                (
                    format!(
                        "vitistack.io/clusterid={}",
                        pick(&c, i)["spec"]["data"]["clusterId"]
                            .as_str()
                            .unwrap_or_default()
                    ),
                    json!({"kinds": ["Machine"]}),
                )
            })
        }),
        ("name prefix + datacenter", {
            let m = machines.clone();
            Box::new(move |i| {
                let name = pick(&m, i)["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                let cut = name.len().saturating_sub(3);
                (
                    name[..cut].to_string(),
                    json!({"datacenter": format!("dc-{:02}", i % 10)}),
                )
            })
        }),
        (
            "namespace, every kind and datacenter",
            Box::new(|i| (format!("team-{}", i % 8), json!(null))),
        ),
        (
            "namespace, Machines in one datacenter",
            Box::new(|i| {
                (
                    format!("team-{}", i % 8),
                    json!({"kinds": ["Machine"], "datacenter": "dc-00"}),
                )
            }),
        ),
    ];
    let schema = build_schema(&SchemaSettings::default());
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    for (what, texts) in &cases {
        if !chosen(what) {
            continue;
        }
        let mut took = Vec::with_capacity(samples);
        let mut hits = 0u64;
        for i in 0..samples {
            let (text, filter) = texts(i);
            let request = async_graphql::Request::new(QUERY)
                .variables(async_graphql::Variables::from_json(
                    json!({"t": text, "f": filter}),
                ))
                .data(store.snapshot());
            let t = Instant::now();
            let r = rt.block_on(schema.execute(request));
            took.push(t.elapsed().as_secs_f64() * 1e3);
            assert!(r.errors.is_empty(), "{what} `{text}`: {:?}", r.errors);
            let data = r.data.into_json().expect("json");
            let total = data["search"]["totalCount"].as_u64().unwrap_or(0);
            assert!(total > 0, "{what} `{text}` found nothing");
            hits += total;
        }
        took.sort_by(f64::total_cmp);
        println!(
            "search_query: {what:<40} p50 {:>7.2} ms  p95 {:>7.2} ms  max {:>7.2} ms  ({} hits on average)",
            percentile(&took, 0.5),
            percentile(&took, 0.95),
            took[took.len() - 1],
            hits / samples as u64
        );
    }
    lists(&schema, &rt, &store, &machines, samples);
    println!("search_query: RSS {} MiB at the end", rss_mib());
}

const LIST: &str = "query($f: Filter, $s: Sort, $a: String, $r: NodeRole, $c: String) { list: machines(filter: $f, sort: $s, after: $a, first: 100, role: $r, clusterId: $c) { totalCount pageInfo { hasNextPage endCursor } nodes { id name namespace datacenter phase } } }";
const CLUSTERS: &str = "query($f: Filter, $h: ClusterHealth, $st: PipelineStage) { list: clusters(filter: $f, first: 100, health: $h, stage: $st) { totalCount pageInfo { hasNextPage endCursor } nodes { id name namespace datacenter phase } } }";

/// Issue 49's lists: a filtered, sorted page of 100 Machines out of the million objects, each
/// asked `samples` times with different values (no response cache).
fn lists(
    schema: &vitistack::graphql::AppSchema,
    rt: &tokio::runtime::Runtime,
    store: &Store,
    machines: &[&Resource],
    samples: usize,
) {
    use base64::Engine;
    let cursor = |r: &Resource| {
        let parts = [
            "c1",
            "name",
            r.name(),
            r.namespace(),
            r.name(),
            r.datacenter().key(),
        ];
        base64::engine::general_purpose::URL_SAFE_NO_PAD
            .encode(serde_json::to_vec(&parts).expect("json"))
    };
    let phases = ["Running", "Provisioning", "Pending", "Failed"];
    type Vars<'a> = Box<dyn Fn(usize) -> serde_json::Value + 'a>;
    let roles = ["WORKER", "CONTROL_PLANE"];
    let health = ["READY", "ATTENTION", "FAILED"];
    let cluster_of = |i: usize| {
        machines[(i * 7919) % machines.len()]
            .label("vitistack.io/clusterid")
            .unwrap_or_default()
            .to_string()
    };
    let cases: Vec<(&str, &str, Vars<'_>)> = vec![
        (
            "a phase, newest first",
            LIST,
            Box::new(
                |i| json!({"f": {"phase": [phases[i % phases.len()]]}, "s": {"field": "CREATED", "direction": "DESC"}}),
            ),
        ),
        (
            "a datacenter and namespace, by name",
            LIST,
            Box::new(
                |i| json!({"f": {"datacenter": format!("dc-{:02}", i % 10), "namespace": format!("team-{}", i % 8)}}),
            ),
        ),
        (
            "a label selector, by phase",
            LIST,
            Box::new(
                |i| json!({"f": {"labelSelector": if i % 2 == 0 { "vitistack.io/node-role=worker" } else { "vitistack.io/node-role!=worker" }}, "s": {"field": "PHASE"}}),
            ),
        ),
        (
            "a name's substring, by namespace",
            LIST,
            Box::new(
                |i| json!({"f": {"search": format!("wrk{}", i % 10)}, "s": {"field": "NAMESPACE"}}),
            ),
        ),
        (
            "every Machine by name, after a cursor",
            LIST,
            Box::new(|i| json!({"a": cursor(machines[(i * 7919) % machines.len()])})),
        ),
        (
            "a role and a phase, by name",
            LIST,
            Box::new(|i| json!({"r": roles[i % 2], "f": {"phase": [phases[i % phases.len()]]}})),
        ),
        (
            "a cluster id (its Machines), by name",
            LIST,
            Box::new(|i| json!({"c": cluster_of(i)})),
        ),
        (
            "clusters of a health (diagnosed)",
            CLUSTERS,
            Box::new(|i| json!({"h": health[i % health.len()]})),
        ),
        (
            "clusters at a stage in a datacenter",
            CLUSTERS,
            Box::new(
                |i| json!({"st": if i % 2 == 0 { "READY" } else { "NETWORK" }, "f": {"datacenter": format!("dc-{:02}", i % 10)}}),
            ),
        ),
    ];
    for (what, query, vars) in &cases {
        if !chosen(&format!("list, {what}")) {
            continue;
        }
        let mut took = Vec::with_capacity(samples);
        let mut total = 0u64;
        for i in 0..samples {
            let request = async_graphql::Request::new(*query)
                .variables(async_graphql::Variables::from_json(vars(i)))
                .data(store.snapshot());
            let t = Instant::now();
            let r = rt.block_on(schema.execute(request));
            took.push(t.elapsed().as_secs_f64() * 1e3);
            assert!(r.errors.is_empty(), "{what}: {:?}", r.errors);
            let data = r.data.into_json().expect("json");
            total += data["list"]["totalCount"].as_u64().unwrap_or(0);
        }
        took.sort_by(f64::total_cmp);
        println!(
            "search_query: list, {what:<38} p50 {:>7.2} ms  p95 {:>7.2} ms  max {:>7.2} ms  ({} match on average)",
            percentile(&took, 0.5),
            percentile(&took, 0.95),
            took[took.len() - 1],
            total / samples as u64
        );
    }
}
