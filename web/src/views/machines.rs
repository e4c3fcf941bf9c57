//! Every Machine in one sortable, filterable table (cluster, namespace, phase, role, name); each
//! filter is part of the URL.

use leptos::prelude::*;

use super::list::{
    DATACENTER, Filter, Input, ListPage, ListSpec, NAMESPACE, PHASE, SEARCH, given, server_sort,
    sort_rows, then_name,
};
use super::loaded;
use crate::format::{gib, state_class};
use crate::gql::{MachineList, NodeRole, machine_list};
use crate::net::{self, LinkState};

type Row = machine_list::MachineListMachinesNodes;

static SPEC: ListSpec = ListSpec {
    title: "Machines",
    path: "/machines",
    testid: "machines",
    count: "machine",
    noun: "machines",
    loading: "Loading machines…",
    filters: &[
        SEARCH,
        Filter::text("cluster", "Cluster id"),
        NAMESPACE,
        PHASE,
        DATACENTER,
        Filter {
            key: "role",
            label: "Role",
            input: Input::Choice(roles),
        },
    ],
    columns: &[
        ("Machine", Some("name")),
        ("Namespace", Some("namespace")),
        ("Cluster", Some("cluster")),
        ("Role", None),
        ("Pool", None),
        ("Class", None),
        ("vCPUs", None),
        ("GB", None),
        ("Phase", Some("phase")),
    ],
};

fn roles() -> Vec<(&'static str, &'static str)> {
    vec![("CONTROL_PLANE", "Control plane"), ("WORKER", "Worker")]
}

on_demand!(Machines, machines_page, MachinesPage);

#[component]
fn MachinesPage() -> impl IntoView {
    let state = expect_context::<LinkState>();
    let url = SPEC.url();
    let (q, ns, phase, cluster, role, sort) = (
        url.get("q"),
        url.get("ns"),
        url.get("phase"),
        url.get("cluster"),
        url.get("role"),
        url.get("sort"),
    );
    let dc = url.get("dc");
    let machines = net::live::<MachineList>(
        move || machine_list::Variables {
            filter: Some(machine_list::Filter {
                namespace: given(ns),
                phase: given(phase).map(|p| vec![p]),
                label_selector: None,
                search: given(q),
                datacenter: given(dc),
            }),
            sort: server_sort(&sort.get())
                .map(|(field, direction)| machine_list::Sort { field, direction }),
            first: Some(500),
            role: NodeRole::from_wire(&role.get()),
            cluster_id: given(cluster),
        },
        &["Machine"],
        state,
    );
    let rows = Memo::new(move |_| {
        let Some(Ok(data)) = machines.get() else {
            return None;
        };
        let sort = sort.get();
        let mut rows: Vec<Row> = data.machines.nodes;
        sort_rows(&mut rows, &sort, |key, m| match key {
            "namespace" => then_name(m.namespace.as_deref(), &m.name),
            "phase" => then_name(m.phase.as_deref(), &m.name),
            "cluster" => then_name(m.cluster_id.as_deref(), &m.name),
            _ => m.name.clone(),
        });
        Some((rows, data.machines.total_count))
    });
    view! { <ListPage spec=&SPEC url state=loaded(machines) rows key=|m: &Row| m.id.clone() row/> }
}

fn row(m: Row) -> impl IntoView {
    let cluster = m.cluster_id.clone().unwrap_or_default();
    view! {
        <tr>
            <td><a href=format!("/objects/{}", js_sys::encode_uri_component(&m.id))>{m.name.clone()}</a></td>
            <td>{m.namespace.clone().unwrap_or_default()}</td>
            <td><a href=format!("/machines?cluster={}", js_sys::encode_uri_component(&cluster))>{cluster.clone()}</a></td>
            <td>{m.role.map(NodeRole::words).unwrap_or_default()}</td>
            <td>{m.node_pool.clone().unwrap_or_default()}</td>
            <td>{m.machine_class_name.clone().unwrap_or_default()}</td>
            <td class="num">{m.resources.vcpus}</td>
            <td class="num">{m.resources.memory_bytes.map(|b| gib(b as f64, 0)).unwrap_or_default()}</td>
            <td><span class=format!("status {}", state_class(m.phase_state))>{m.phase.clone().unwrap_or_default()}</span></td>
        </tr>
    }
}
