//! Every Machine in one sortable, filterable table (cluster, namespace, phase, role, name); each
//! filter is part of the URL.

use super::{Problem, UrlFilters, sort_rows, windowed};
use crate::format::{gib, status_class, wire};
use crate::gql::{MachineList, machine_list};
use crate::net::{self, LinkState};
use leptos::prelude::*;

type Row = machine_list::MachineListMachinesNodes;

#[component]
pub fn Machines() -> impl IntoView {
    let state = expect_context::<LinkState>();
    let f = UrlFilters::new(
        "/machines",
        &["q", "ns", "phase", "cluster", "role", "sort"],
    );
    let (q, ns, phase, cluster, role, sort) = (
        f.get("q"),
        f.get("ns"),
        f.get("phase"),
        f.get("cluster"),
        f.get("role"),
        f.get("sort"),
    );
    let machines = net::live_query::<MachineList>(
        move || machine_list::Variables {
            filter: Some(machine_list::Filter {
                namespace: Some(ns.get()).filter(|s| !s.is_empty()),
                phase: Some(phase.get()).filter(|s| !s.is_empty()).map(|p| vec![p]),
                label_selector: Some(cluster.get())
                    .filter(|s| !s.is_empty())
                    .map(|c| format!("vitistack.io/clusterid={c}")),
                search: Some(q.get()).filter(|s| !s.is_empty()),
            }),
            first: Some(500),
        },
        &["Machine"],
        state,
    );
    let rows = Memo::new(move |_| {
        let Some(Ok(data)) = machines.get() else {
            return None;
        };
        let (role, sort) = (role.get(), sort.get());
        let mut rows: Vec<Row> = data
            .machines
            .nodes
            .into_iter()
            .filter(|m| {
                role.is_empty() || m.role.as_ref().map(wire).as_deref() == Some(role.as_str())
            })
            .collect();
        sort_rows(&mut rows, &sort, |key, m| match key {
            "namespace" => format!(
                "{}\u{0}{}",
                m.namespace.as_deref().unwrap_or_default(),
                m.name
            ),
            "phase" => format!("{}\u{0}{}", m.phase.as_deref().unwrap_or_default(), m.name),
            "cluster" => format!(
                "{}\u{0}{}",
                m.cluster_id.as_deref().unwrap_or_default(),
                m.name
            ),
            _ => m.name.clone(),
        });
        Some((rows, data.machines.total_count))
    });
    view! {
        <h1>"Machines"</h1>
        <form class="filters" role="search" on:submit=|ev| ev.prevent_default()>
            <label>"Search" <input type="search" prop:value=q on:input=f.on("q") placeholder="name" data-testid="filter-q"/></label>
            <label>"Cluster id" <input type="text" prop:value=cluster on:change=f.on("cluster") data-testid="filter-cluster"/></label>
            <label>"Namespace" <input type="text" prop:value=ns on:change=f.on("ns") data-testid="filter-ns"/></label>
            <label>"Phase" <input type="text" prop:value=phase on:change=f.on("phase") data-testid="filter-phase"/></label>
            <label>"Role"
                <select on:change=f.on("role") prop:value=role data-testid="filter-role">
                    <option value="">"Any"</option>
                    <option value="CONTROL_PLANE" selected=move || role.get() == "CONTROL_PLANE">"Control plane"</option>
                    <option value="WORKER" selected=move || role.get() == "WORKER">"Worker"</option>
                </select>
            </label>
        </form>
        {move || match (machines.get(), rows.with(Option::is_some)) {
            (Some(Err(e)), _) => Some(view! { <Problem text=e/> }.into_any()),
            (_, false) => Some(view! { <p class="empty">"Loading machines…"</p> }.into_any()),
            _ => None,
        }}
        <p class="count" data-testid="machine-count">
            {move || rows.with(|r| r.as_ref().map(|(rows, total)| format!("{} of {total} machines", rows.len())))}
        </p>
        {windowed(
            "machines",
            view! {
                {f.header("name", "Machine")}
                {f.header("namespace", "Namespace")}
                {f.header("cluster", "Cluster")}
                <th>"Role"</th>
                <th>"Pool"</th>
                <th>"Class"</th>
                <th>"vCPUs"</th>
                <th>"GB"</th>
                {f.header("phase", "Phase")}
            },
            rows,
            row,
        )}
    }
}

fn row(m: &Row) -> impl IntoView + use<> {
    let namespace = m.namespace.clone().unwrap_or_default();
    let phase = m.phase.clone().unwrap_or_default();
    let cluster = m.cluster_id.clone().unwrap_or_default();
    view! {
        <tr>
            <td><a href=format!("/objects/{}", js_sys::encode_uri_component(&m.id))>{m.name.clone()}</a></td>
            <td>{namespace}</td>
            <td><a href=format!("/machines?cluster={}", js_sys::encode_uri_component(&cluster))>{cluster.clone()}</a></td>
            <td>{m.role.as_ref().map(wire).unwrap_or_default().replace('_', " ").to_ascii_lowercase()}</td>
            <td>{m.node_pool.clone().unwrap_or_default()}</td>
            <td>{m.machine_class_name.clone().unwrap_or_default()}</td>
            <td class="num">{m.resources.vcpus}</td>
            <td class="num">{m.resources.memory_bytes.map(|b| gib(b as f64, 0)).unwrap_or_default()}</td>
            <td><span class=format!("status {}", status_class(&phase))>{phase.clone()}</span></td>
        </tr>
    }
}
