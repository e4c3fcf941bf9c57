//! Every KubernetesCluster in one sortable, filterable table; each filter is part of the URL.

use leptos::prelude::*;

use super::overview::CLUSTER_KINDS;
use super::{Problem, UrlFilters, windowed};
use crate::format::{self, wire};
use crate::gql::{ClusterList, cluster_list};
use crate::net::{self, LinkState};

type Row = cluster_list::ClusterListClustersNodes;

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

    view! {
        <h1>"Clusters"</h1>
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

fn row(c: &Row) -> impl IntoView + use<> {
    let namespace = c.namespace.clone().unwrap_or_default();
    let href = format!("/clusters/{namespace}/{}", c.name);
    let class = if c.diagnosis.failed {
        "failed"
    } else if !c.diagnosis.ready || c.diagnosis.degraded {
        "progress"
    } else {
        "ready"
    };
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
