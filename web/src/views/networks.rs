//! Every NetworkNamespace: ready or why not, VLAN, prefix and the clusters on it; filtered by name,
//! namespace and phase from the URL.

use leptos::prelude::*;

use super::{Problem, UrlFilters, sort_rows, windowed};
use crate::format::status_class;
use crate::gql::{NetworkList, network_list};
use crate::net::{self, LinkState};

type Row = network_list::NetworkListNetworkNamespacesNodes;

#[component]
pub fn Networks() -> impl IntoView {
    let state = expect_context::<LinkState>();
    let f = UrlFilters::new("/networks", &["q", "ns", "phase", "sort"]);
    let (q, ns, phase, sort) = (f.get("q"), f.get("ns"), f.get("phase"), f.get("sort"));
    let networks = net::live_query::<NetworkList>(
        move || network_list::Variables {
            filter: Some(network_list::Filter {
                namespace: Some(ns.get()).filter(|s| !s.is_empty()),
                phase: Some(phase.get()).filter(|s| !s.is_empty()).map(|p| vec![p]),
                label_selector: None,
                search: Some(q.get()).filter(|s| !s.is_empty()),
            }),
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
            "namespace" => format!(
                "{}\u{0}{}",
                n.namespace.as_deref().unwrap_or_default(),
                n.name
            ),
            "phase" => format!("{}\u{0}{}", n.phase.as_deref().unwrap_or_default(), n.name),
            _ => n.name.clone(),
        });
        Some((rows, data.network_namespaces.total_count))
    });
    view! {
        <h1>"Networks"</h1>
        <form class="filters" role="search" on:submit=|ev| ev.prevent_default()>
            <label>"Search" <input type="search" prop:value=q on:input=f.on("q") placeholder="name" data-testid="filter-q"/></label>
            <label>"Namespace" <input type="text" prop:value=ns on:change=f.on("ns") data-testid="filter-ns"/></label>
            <label>"Phase" <input type="text" prop:value=phase on:change=f.on("phase") data-testid="filter-phase"/></label>
        </form>
        {move || match (networks.get(), rows.with(Option::is_some)) {
            (Some(Err(e)), _) => Some(view! { <Problem text=e/> }.into_any()),
            (_, false) => Some(view! { <p class="empty">"Loading networks…"</p> }.into_any()),
            _ => None,
        }}
        <p class="count" data-testid="network-count">
            {move || rows.with(|r| r.as_ref().map(|(rows, total)| format!("{} of {total} networks", rows.len())))}
        </p>
        {windowed(
            "networks",
            view! {
                {f.header("name", "Network namespace")}
                {f.header("namespace", "Namespace")}
                {f.header("phase", "Phase")}
                <th>"Status"</th>
                <th>"VLAN"</th>
                <th>"IPv4 prefix"</th>
                <th>"Clusters"</th>
            },
            rows,
            row,
        )}
    }
}

fn row(n: &Row) -> impl IntoView + use<> {
    let phase = n.phase.clone().unwrap_or_default();
    let class = if n.ready {
        "running"
    } else {
        status_class(&phase)
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
            <td><span class=format!("status {class}")>{if phase.is_empty() { "no status yet".to_owned() } else { phase.clone() }}</span></td>
            <td>{n.status_text.clone().unwrap_or_default()}</td>
            <td class="num">{n.vlan_id.map(|v| v.to_string()).unwrap_or_default()}</td>
            <td>{n.ipv4_prefix.clone().unwrap_or_default()}</td>
            <td>{clusters}</td>
        </tr>
    }
}
