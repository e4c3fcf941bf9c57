//! Every KubernetesCluster in one sortable, filterable table; each filter is part of the URL.

use leptos::prelude::*;

use super::list::{
    DATACENTER, Filter, Input, Item, ListPage, ListSpec, NAMESPACE, PHASE, SEARCH, each,
    each_keyed, given, server_sort,
};
use super::overview::CLUSTER_KINDS;
use super::{Loaded, Problem, loaded};
use crate::charts::short;
use crate::format::{self, state_class};
use crate::gql::{
    ClusterHealth, ClusterList, ClusterVms, PipelineStage, cluster_list, cluster_vms,
};
use crate::net::{self, LinkState};

type Row = cluster_list::ClusterListClustersNodes;

/// Up to this many clusters are also shown as cards above the table (the old page's switch).
const CARDS_UP_TO: usize = 6;

static SPEC: ListSpec = ListSpec {
    title: "Clusters",
    path: "/clusters",
    testid: "clusters",
    count: "cluster",
    noun: "clusters",
    loading: "Loading clusters…",
    filters: &[
        SEARCH,
        NAMESPACE,
        PHASE,
        DATACENTER,
        Filter {
            key: "stage",
            label: "Stage",
            input: Input::Choice(stages),
        },
        Filter {
            key: "state",
            label: "State",
            input: Input::Choice(states),
        },
    ],
    columns: &[
        ("Cluster", Some("name")),
        ("Namespace", Some("namespace")),
        ("Phase", Some("phase")),
        ("Stage", Some("stage")),
        ("Machines", None),
        ("VMs", None),
        ("Running", None),
        ("vCPU", None),
        ("Memory", None),
        ("Hosts", None),
        ("Errors", None),
        ("Diagnosis", None),
    ],
};

fn stages() -> Vec<(&'static str, &'static str)> {
    PipelineStage::ALL
        .iter()
        .map(|s| (s.wire(), s.label()))
        .collect()
}

fn states() -> Vec<(&'static str, &'static str)> {
    vec![
        ("attention", "Needs attention"),
        ("failed", "Failed"),
        ("ready", "Ready"),
    ]
}

#[component]
pub fn Clusters() -> impl IntoView {
    let state = expect_context::<LinkState>();
    let url = SPEC.url();
    let (q, ns, phase, stage, health, sort) = (
        url.get("q"),
        url.get("ns"),
        url.get("phase"),
        url.get("stage"),
        url.get("state"),
        url.get("sort"),
    );
    let dc = url.get("dc");
    let clusters = net::live::<ClusterList>(
        move || cluster_list::Variables {
            filter: Some(cluster_list::Filter {
                namespace: given(ns),
                phase: given(phase).map(|p| vec![p]),
                label_selector: None,
                search: given(q),
                datacenter: given(dc),
            }),
            sort: server_sort(&sort.get())
                .map(|(field, direction)| cluster_list::Sort { field, direction }),
            first: Some(500),
            stage: PipelineStage::from_wire(&stage.get()),
            health: match health.get().as_str() {
                "ready" => Some(ClusterHealth::Ready),
                "attention" => Some(ClusterHealth::Attention),
                "failed" => Some(ClusterHealth::Failed),
                _ => None,
            },
        },
        CLUSTER_KINDS,
        state,
    );
    let rows = Memo::new(move |_| {
        let Some(Ok(data)) = clusters.get() else {
            return None;
        };
        let sort = sort.get();
        let mut rows: Vec<Row> = data.clusters.nodes;
        match sort.trim_start_matches('-') {
            "stage" => rows.sort_by_key(|c| (c.pipeline.stage.order(), c.name.clone())),
            "namespace" => rows.sort_by_key(|c| (c.namespace.clone(), c.name.clone())),
            "phase" => rows.sort_by_key(|c| (c.phase.clone(), c.name.clone())),
            _ => rows.sort_by_key(|c| c.name.clone()),
        }
        if sort.starts_with('-') {
            rows.reverse();
        }
        Some((rows, data.clusters.total_count))
    });
    // Six clusters or fewer are also cards, keyed by cluster alone: a card is built when its
    // cluster starts to be shown and then follows its row itself (rebuilding every card on every
    // answer fetched each card's VMs again and left reactive state behind).
    let cards = move || {
        rows.with(|r| match r {
            Some((rows, _)) if rows.len() <= CARDS_UP_TO => {
                rows.iter().map(|c| c.id.clone()).collect()
            }
            _ => Vec::new(),
        })
    };
    // The cards' code is loaded when cards are first shown (a separate WebAssembly module).
    let extra = move || {
        view! {
            <Show when=move || !cards().is_empty()>
                <Transition fallback=|| ()>
                    {move || Suspend::new(async move { card_grid(Signal::derive(cards), rows).await })}
                </Transition>
            </Show>
        }
    };
    view! {
        <ListPage spec=&SPEC url state=loaded(clusters) rows key=|c: &Row| c.id.clone() row
            intro=|| view! { <super::new_cluster::NewCluster/> } extra/>
    }
}

/// A cluster's health class: failed, progress (not Ready or degraded) or ready.
fn health(c: &Row) -> &'static str {
    let d = &c.diagnosis;
    format::health_class(d.ready, d.degraded, d.failed)
}

fn row(c: Row) -> impl IntoView {
    let namespace = c.namespace.clone().unwrap_or_default();
    let href = format!("/clusters/{namespace}/{}", c.name);
    let class = health(&c);
    let v = &c.vm_totals;
    // The old page's status column: how many VMs are in error, or OK.
    let (errors, errors_class) = match v.errors {
        0 => ("OK".to_owned(), "num ok"),
        n => (format!("{n} error"), "num err"),
    };
    view! {
        <tr class=class>
            <td><a href=href>{c.name.clone()}</a></td>
            <td>{namespace}</td>
            <td>{c.phase.clone().unwrap_or_default()}</td>
            <td><span class=format!("stage {class}")>{c.pipeline.stage.label()}</span></td>
            <td class="num">{c.desired_machines}</td>
            <td class="num">{v.total}</td>
            <td class="num">{format!("{}/{}", v.running, v.total)}</td>
            <td class="num">{format::cores(v.vcpus)}</td>
            <td class="num">{format!("{} GB", format::gib(v.memory_bytes, 1))}</td>
            <td class="num">{v.hosts}</td>
            <td class=errors_class>{errors}</td>
            <td class="summary" title=c.diagnosis.summary.clone()>{c.diagnosis.summary.clone()}</td>
        </tr>
    }
}

#[leptos::lazy]
fn card_grid(ids: Signal<Vec<String>>, rows: Memo<Option<(Vec<Row>, i64)>>) -> AnyView {
    view! {
        <div class="cards" data-testid="cluster-cards">
            {each(move || ids.get().into_iter().map(|id| {
                Item::scoped(id.clone(), move || view! { <ClusterCard id rows/> })
            }).collect())}
        </div>
    }
    .into_any()
}

/// Six clusters or fewer are drawn as cards, as the old page did: each cluster's VMs as pills
/// coloured by status, and a line of totals. The card follows its cluster's row.
#[component]
fn ClusterCard(id: String, rows: Memo<Option<(Vec<Row>, i64)>>) -> impl IntoView {
    let card = move || {
        rows.with(|r| {
            r.as_ref()
                .and_then(|(rows, _)| rows.iter().find(|c| c.id == id).cloned())
        })
    };
    let Some(first) = untrack(card.clone()) else {
        return ().into_any();
    };
    let namespace = first.namespace.clone().unwrap_or_default();
    let href = format!("/clusters/{namespace}/{}", first.name);
    let header = move || {
        card().map(|c| {
            let class = health(&c);
            view! {
                <header class=class>
                    <h2><a href=href.clone()>{format!("⎈ {}", c.name)}</a></h2>
                    <span class=format!("stage {class}")>{c.pipeline.stage.label()}</span>
                </header>
                <p class="summary">{c.diagnosis.summary}</p>
            }
        })
    };
    view! {
        <article class="card cluster" data-testid="cluster-card">
            {header}
            <CardVms namespace cluster_id=first.cluster_id datacenter=first.datacenter/>
        </article>
    }
    .into_any()
}

type CardVm = cluster_vms::ClusterVmsVirtualMachinesNodes;

/// A card's VMs as pills (each a link to its object) and their totals: those of its own
/// datacenter (another datacenter may have a namespace and cluster id of the same name).
#[component]
fn CardVms(namespace: String, cluster_id: String, datacenter: String) -> impl IntoView {
    let state = expect_context::<LinkState>();
    let vms = net::live::<ClusterVms>(
        move || cluster_vms::Variables {
            filter: Some(cluster_vms::Filter {
                namespace: Some(namespace.clone()),
                phase: None,
                label_selector: None,
                search: None,
                datacenter: Some(datacenter.clone()),
            }),
        },
        &["VirtualMachine", "VirtualMachineInstance"],
        state,
    );
    let mine = Memo::new(move |_| {
        vms.with(|v| match v {
            Some(Ok(data)) => data
                .virtual_machines
                .nodes
                .iter()
                .filter(|v| {
                    v.membership
                        .as_ref()
                        .is_some_and(|m| m.cluster_id == cluster_id)
                })
                .cloned()
                .collect(),
            _ => Vec::new(),
        })
    });
    let state = loaded(vms);
    view! {
        {move || match state.get() {
            Loaded::Loading => Some(view! { <p class="empty">"Loading VMs…"</p> }.into_any()),
            Loaded::Failed(e) => Some(view! { <Problem text=e/> }.into_any()),
            Loaded::Ready => None,
        }}
        <ul class="pills">
            {each_keyed(move || mine.get(), |v: &CardVm| v.id.clone(), pill)}
        </ul>
        <Show when=move || state.get() == Loaded::Ready && mine.with(Vec::is_empty)>
            <p class="empty">"No KubeVirt VMs (another machine provider, or none made yet)."</p>
        </Show>
        <Show when=move || state.get() == Loaded::Ready>
            <footer data-testid="cluster-card-totals">{move || mine.with(|v| totals(v))}</footer>
        </Show>
    }
}

fn pill(v: CardVm) -> impl IntoView {
    let title = format!("{}/{}", v.namespace.clone().unwrap_or_default(), v.name);
    let href = format!("/objects/{}", js_sys::encode_uri_component(&v.id));
    view! {
        <li><a class=format!("pill {}", state_class(v.phase_state)) href=href title=title>
            <span class="name">{short(&v.name)}</span>
            <span class="status">{v.phase.clone().unwrap_or_default()}</span>
        </a></li>
    }
}

/// "2/3 running · 6 vCPU · 12.0 GB memory · 2 hosts".
fn totals(vms: &[CardVm]) -> String {
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
    format!(
        "{running}/{} running · {} vCPU · {} GB memory · {}",
        vms.len(),
        format::cores(vcpus),
        format::gib(memory, 1),
        format::plural(hosts.len() as i64, "host", "hosts")
    )
}
