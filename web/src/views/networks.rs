//! Every NetworkNamespace: ready or why not, VLAN, prefix and the clusters on it; filtered by name,
//! namespace and phase from the URL.

use leptos::prelude::*;

use super::list::{
    DATACENTER, ListPage, ListSpec, NAMESPACE, PHASE, SEARCH, given, server_sort, sort_rows,
    then_name,
};
use super::loaded;
use crate::format::state_class;
use crate::gql::{NetworkList, PhaseState, network_list};
use crate::net::{self, LinkState};

type Row = network_list::NetworkListNetworkNamespacesNodes;

static SPEC: ListSpec = ListSpec {
    title: "Networks",
    path: "/networks",
    testid: "networks",
    count: "network",
    noun: "networks",
    loading: "Loading networks…",
    filters: &[SEARCH, NAMESPACE, PHASE, DATACENTER],
    columns: &[
        ("Network namespace", Some("name")),
        ("Namespace", Some("namespace")),
        ("Phase", Some("phase")),
        ("Status", None),
        ("VLAN", None),
        ("IPv4 prefix", None),
        ("Clusters", None),
    ],
};

on_demand!(Networks, networks_page, NetworksPage);

#[component]
fn NetworksPage() -> impl IntoView {
    let state = expect_context::<LinkState>();
    let url = SPEC.url();
    let (q, ns, phase, sort) = (
        url.get("q"),
        url.get("ns"),
        url.get("phase"),
        url.get("sort"),
    );
    let dc = url.get("dc");
    let networks = net::live::<NetworkList>(
        move || network_list::Variables {
            filter: Some(network_list::Filter {
                namespace: given(ns),
                phase: given(phase).map(|p| vec![p]),
                label_selector: None,
                search: given(q),
                datacenter: given(dc),
            }),
            sort: server_sort(&sort.get())
                .map(|(field, direction)| network_list::Sort { field, direction }),
            first: Some(500),
        },
        &["NetworkNamespace", "KubernetesCluster"],
        state,
    );
    let rows = Memo::new(move |_| {
        let Some(Ok(data)) = networks.get() else {
            return None;
        };
        let mut rows = data.network_namespaces.nodes;
        sort_rows(&mut rows, &sort.get(), |key, n| match key {
            "namespace" => then_name(n.namespace.as_deref(), &n.name),
            "phase" => then_name(n.phase.as_deref(), &n.name),
            _ => n.name.clone(),
        });
        Some((rows, data.network_namespaces.total_count))
    });
    view! { <ListPage spec=&SPEC url state=loaded(networks) rows key=|n: &Row| n.id.clone() row/> }
}

fn row(n: Row) -> impl IntoView {
    let phase = n
        .phase
        .clone()
        .unwrap_or_else(|| "no status yet".to_owned());
    let state = if n.ready {
        PhaseState::Running
    } else {
        n.phase_state
    };
    let clusters = n
        .clusters
        .iter()
        .map(|c| {
            let href = format!(
                "/clusters/{}/{}",
                c.namespace.clone().unwrap_or_default(),
                c.name
            );
            view! { <a href=href>{c.name.clone()}</a>" " }
        })
        .collect_view();
    view! {
        <tr>
            <td><a href=format!("/objects/{}", js_sys::encode_uri_component(&n.id))>{n.name.clone()}</a></td>
            <td>{n.namespace.clone().unwrap_or_default()}</td>
            <td><span class=format!("status {}", state_class(state))>{phase}</span></td>
            <td>{n.status_text.clone().unwrap_or_default()}</td>
            <td class="num">{n.vlan_id.map(|v| v.to_string()).unwrap_or_default()}</td>
            <td>{n.ipv4_prefix.clone().unwrap_or_default()}</td>
            <td>{clusters}</td>
        </tr>
    }
}
