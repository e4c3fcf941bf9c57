//! Every KubernetesCluster in one sortable, filterable table; each filter is part of the URL.

use leptos::prelude::*;

use super::overview::CLUSTER_KINDS;
use super::{Problem, UrlFilters, windowed};
use crate::charts::short;
use crate::format::status_class;
use crate::format::{self, wire};
use crate::gql::{ClusterList, ClusterVms, cluster_list, cluster_vms};
use crate::net::{self, LinkState};

type Row = cluster_list::ClusterListClustersNodes;

/// Up to this many clusters are also shown as cards above the table (the old page's switch).
const CARDS_UP_TO: usize = 6;

#[component]
pub fn Clusters() -> impl IntoView {
    let state = expect_context::<LinkState>();
    let f = UrlFilters::new("/clusters", &["q", "ns", "phase", "stage", "state", "sort"]);
    let (q, ns, phase, stage, health, sort) = (
        f.get("q"),
        f.get("ns"),
        f.get("phase"),
        f.get("stage"),
        f.get("state"),
        f.get("sort"),
    );
    let clusters = net::live_query::<ClusterList>(
        move || cluster_list::Variables {
            filter: Some(cluster_list::Filter {
                namespace: Some(ns.get()).filter(|s| !s.is_empty()),
                phase: Some(phase.get()).filter(|s| !s.is_empty()).map(|p| vec![p]),
                label_selector: None,
                search: Some(q.get()).filter(|s| !s.is_empty()),
            }),
            first: Some(500),
        },
        CLUSTER_KINDS,
        state,
    );
    let rows = Memo::new(move |_| {
        let Some(Ok(data)) = clusters.get() else {
            return None;
        };
        let (stage, health, sort) = (stage.get(), health.get(), sort.get());
        let mut rows: Vec<Row> = data
            .clusters
            .nodes
            .into_iter()
            .filter(|c| stage.is_empty() || wire(&c.pipeline.stage) == stage)
            .filter(|c| match health.as_str() {
                "ready" => c.diagnosis.ready && !c.diagnosis.degraded,
                "attention" => !c.diagnosis.ready || c.diagnosis.degraded,
                "failed" => c.diagnosis.failed,
                _ => true,
            })
            .collect();
        let order = |c: &Row| {
            format::STAGES
                .iter()
                .position(|(w, _)| *w == wire(&c.pipeline.stage))
                .unwrap_or(99)
        };
        match sort.trim_start_matches('-') {
            "stage" => rows.sort_by_key(|c| (order(c), c.name.clone())),
            "namespace" => rows.sort_by_key(|c| (c.namespace.clone(), c.name.clone())),
            "phase" => rows.sort_by_key(|c| (c.phase.clone(), c.name.clone())),
            _ => rows.sort_by_key(|c| c.name.clone()),
        }
        if sort.starts_with('-') {
            rows.reverse();
        }
        Some((rows, data.clusters.total_count))
    });

    // Which clusters get a card, one `namespace\tname\tclusterId` line each: a card is built when
    // its cluster starts to be shown and then follows its row (rebuilding every card on every
    // answer fetched each card's VMs again and left reactive state behind). A string, since the
    // app has string memos already: a new memo type costs the dashboard's size budget ~1 KB.
    let card_keys = Memo::new(move |_| {
        rows.with(|r| match r {
            Some((rows, _)) if !rows.is_empty() && rows.len() <= CARDS_UP_TO => rows
                .iter()
                .map(|c| {
                    let namespace = c.namespace.as_deref().unwrap_or_default();
                    format!("{namespace}\t{}\t{}\n", c.name, c.cluster_id)
                })
                .collect(),
            _ => String::new(),
        })
    });

    view! {
        <h1>"Clusters"</h1>
        <super::new_cluster::NewCluster/>
        <form class="filters" role="search" on:submit=|ev| ev.prevent_default()>
            <label>"Search" <input type="search" prop:value=q on:input=f.on("q") placeholder="name" data-testid="filter-q"/></label>
            <label>"Namespace" <input type="text" prop:value=ns on:change=f.on("ns") data-testid="filter-ns"/></label>
            <label>"Phase" <input type="text" prop:value=phase on:change=f.on("phase") data-testid="filter-phase"/></label>
            <label>"Stage"
                <select on:change=f.on("stage") data-testid="filter-stage" prop:value=stage>
                    <option value="">"Any"</option>
                    {format::STAGES.iter().map(|(w, l)| view! { <option value=*w selected=move || stage.get() == *w>{*l}</option> }).collect_view()}
                </select>
            </label>
            <label>"State"
                <select on:change=f.on("state") data-testid="filter-state" prop:value=health>
                    <option value="">"Any"</option>
                    <option value="attention" selected=move || health.get() == "attention">"Needs attention"</option>
                    <option value="failed" selected=move || health.get() == "failed">"Failed"</option>
                    <option value="ready" selected=move || health.get() == "ready">"Ready"</option>
                </select>
            </label>
        </form>
        {move || match (clusters.get(), rows.with(Option::is_some)) {
            (Some(Err(e)), _) => Some(view! { <Problem text=e/> }.into_any()),
            (_, false) => Some(view! { <p class="empty">"Loading clusters…"</p> }.into_any()),
            _ => None,
        }}
        <p class="count" data-testid="cluster-count">
            {move || rows.with(|r| r.as_ref().map(|(rows, total)| format!("{} of {total} clusters", rows.len())))}
        </p>
        {move || {
            let keys = card_keys.get();
            (!keys.is_empty()).then(|| {
                let cards = keys
                    .lines()
                    .filter_map(|line| {
                        let mut parts = line.split('\t').map(str::to_owned);
                        let (namespace, name, cluster_id) = (parts.next()?, parts.next()?, parts.next()?);
                        Some(view! { <ClusterCard namespace name cluster_id rows/> })
                    })
                    .collect_view();
                view! { <div class="cards" data-testid="cluster-cards">{cards}</div> }
            })
        }}
        {windowed(
            "clusters",
            view! {
                {f.header("name", "Cluster")}
                {f.header("namespace", "Namespace")}
                {f.header("phase", "Phase")}
                {f.header("stage", "Stage")}
                <th>"Machines"</th>
                <th>"Diagnosis"</th>
            },
            rows,
            row,
        )}
    }
}

/// The row of cluster `(namespace, name)`, when it is listed.
fn find<'a>(rows: &'a Option<(Vec<Row>, i64)>, key: &(String, String)) -> Option<&'a Row> {
    rows.as_ref()?
        .0
        .iter()
        .find(|c| c.name == key.1 && c.namespace.as_deref() == Some(key.0.as_str()))
}

/// A cluster's health class: failed, progress (not Ready or degraded) or ready.
fn health(c: &Row) -> &'static str {
    let d = &c.diagnosis;
    format::health_class(d.ready, d.degraded, d.failed)
}

fn row(c: &Row) -> impl IntoView + use<> {
    let namespace = c.namespace.clone().unwrap_or_default();
    let href = format!("/clusters/{namespace}/{}", c.name);
    let class = health(c);
    view! {
        <tr class=class>
            <td><a href=href>{c.name.clone()}</a></td>
            <td>{namespace}</td>
            <td>{c.phase.clone().unwrap_or_default()}</td>
            <td><span class=format!("stage {class}")>{format::stage_label(&wire(&c.pipeline.stage))}</span></td>
            <td class="num">{c.desired_machines}</td>
            <td class="summary" title=c.diagnosis.summary.clone()>{c.diagnosis.summary.clone()}</td>
        </tr>
    }
}

/// Six clusters or fewer are drawn as cards, as the old page did: each cluster's VMs as pills
/// coloured by status, and a line of totals.
#[component]
fn ClusterCard(
    namespace: String,
    name: String,
    cluster_id: String,
    rows: Memo<Option<(Vec<Row>, i64)>>,
) -> impl IntoView {
    let state = expect_context::<LinkState>();
    // The card's row as it is now (its stage, health and diagnosis change while it is shown).
    let key = (namespace.clone(), name.clone());
    let vms = net::live_query::<ClusterVms>(
        {
            let namespace = namespace.clone();
            move || cluster_vms::Variables {
                filter: Some(cluster_vms::Filter {
                    namespace: Some(namespace.clone()),
                    phase: None,
                    label_selector: None,
                    search: None,
                }),
            }
        },
        &["VirtualMachine", "VirtualMachineInstance"],
        state,
    );
    let href = format!("/clusters/{namespace}/{name}");
    let body = move || match vms.get() {
        None => view! { <p class="empty">"Loading VMs…"</p> }.into_any(),
        Some(Err(e)) => view! { <Problem text=e/> }.into_any(),
        Some(Ok(data)) => {
            let vms: Vec<_> = data
                .virtual_machines
                .nodes
                .into_iter()
                .filter(|v| {
                    v.membership
                        .as_ref()
                        .is_some_and(|m| m.cluster_id == cluster_id)
                })
                .collect();
            let running = vms
                .iter()
                .filter(|v| v.phase.as_deref() == Some("Running"))
                .count();
            let vcpus: f64 = vms.iter().map(|v| v.vcpus).sum();
            let memory: f64 = vms.iter().map(|v| v.memory_bytes).sum();
            let mut hosts: Vec<&str> = vms
                .iter()
                .filter_map(|v| v.instance.as_ref()?.node_name.as_deref())
                .collect();
            hosts.sort_unstable();
            hosts.dedup();
            let totals = format!(
                "{running}/{} running · {} vCPU · {} GB memory · {}",
                vms.len(),
                format::cores(vcpus),
                format::gib(memory, 1),
                format::plural(hosts.len() as i64, "host", "hosts")
            );
            let pills = vms
                .iter()
                .map(|v| {
                    let phase = v.phase.clone().unwrap_or_default();
                    let title = format!("{}/{}", v.namespace.clone().unwrap_or_default(), v.name);
                    let href = format!("/objects/{}", js_sys::encode_uri_component(&v.id));
                    let class = format!("pill {}", status_class(&phase));
                    view! {
                        <li><a class=class href=href title=title>
                            <span class="name">{short(&v.name)}</span>
                            <span class="status">{phase}</span>
                        </a></li>
                    }
                })
                .collect_view();
            let empty = vms.is_empty().then(|| view! { <p class="empty">"No KubeVirt VMs (another machine provider, or none made yet)."</p> });
            view! {
                <ul class="pills">{pills}</ul>
                {empty}
                <footer data-testid="cluster-card-totals">{totals}</footer>
            }
            .into_any()
        }
    };
    view! {
        <article class="card cluster" data-testid="cluster-card">
            {move || rows.with(|r| find(r, &key).map(|c| {
                let class = health(c);
                view! {
                    <header class=class>
                        <h2><a href=href.clone()>{format!("⎈ {}", c.name)}</a></h2>
                        <span class=format!("stage {class}")>{format::stage_label(&wire(&c.pipeline.stage))}</span>
                    </header>
                    <p class="summary">{c.diagnosis.summary.clone()}</p>
                }
            }))}
            {body}
        </article>
    }
}
