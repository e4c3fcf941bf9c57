//! Every VirtualMachineInstance: where it runs, its size, its phase and its cluster; filtered by
//! name, namespace, phase, host and cluster from the URL.

use leptos::prelude::*;

use super::{Problem, UrlFilters, sort_rows, windowed};
use crate::format::{self, gib, status_class};
use crate::gql::{VmList, vm_list};
use crate::net::{self, LinkState};

type Row = vm_list::VmListVirtualMachineInstancesNodes;

#[component]
pub fn Vms() -> impl IntoView {
    let state = expect_context::<LinkState>();
    let f = UrlFilters::new("/vms", &["q", "ns", "phase", "host", "cluster", "sort"]);
    let (q, ns, phase, host, cluster, sort) = (
        f.get("q"),
        f.get("ns"),
        f.get("phase"),
        f.get("host"),
        f.get("cluster"),
        f.get("sort"),
    );
    let vms = net::live_query::<VmList>(
        move || vm_list::Variables {
            filter: Some(vm_list::Filter {
                namespace: Some(ns.get()).filter(|s| !s.is_empty()),
                phase: Some(phase.get()).filter(|s| !s.is_empty()).map(|p| vec![p]),
                label_selector: None,
                search: Some(q.get()).filter(|s| !s.is_empty()),
            }),
            first: Some(500),
        },
        &["VirtualMachineInstance"],
        state,
    );
    let rows = Memo::new(move |_| {
        let Some(Ok(data)) = vms.get() else {
            return None;
        };
        let (host, cluster) = (host.get(), cluster.get());
        let mut rows: Vec<Row> = data
            .virtual_machine_instances
            .nodes
            .into_iter()
            .filter(|v| host.is_empty() || v.node_name.as_deref() == Some(host.as_str()))
            .filter(|v| {
                cluster.is_empty()
                    || v.membership
                        .as_ref()
                        .is_some_and(|m| m.cluster_id == cluster)
            })
            .collect();
        sort_rows(&mut rows, &sort.get(), |key, v| match key {
            "namespace" => format!(
                "{}\u{0}{}",
                v.namespace.as_deref().unwrap_or_default(),
                v.name
            ),
            "phase" => format!("{}\u{0}{}", v.phase.as_deref().unwrap_or_default(), v.name),
            "host" => format!(
                "{}\u{0}{}",
                v.node_name.as_deref().unwrap_or_default(),
                v.name
            ),
            _ => v.name.clone(),
        });
        Some((rows, data.virtual_machine_instances.total_count))
    });
    view! {
        <h1>"Virtual machines"</h1>
        <form class="filters" role="search" on:submit=|ev| ev.prevent_default()>
            <label>"Search" <input type="search" prop:value=q on:input=f.on("q") placeholder="name" data-testid="filter-q"/></label>
            <label>"Namespace" <input type="text" prop:value=ns on:change=f.on("ns") data-testid="filter-ns"/></label>
            <label>"Phase" <input type="text" prop:value=phase on:change=f.on("phase") data-testid="filter-phase"/></label>
            <label>"Host" <input type="text" prop:value=host on:change=f.on("host") data-testid="filter-host"/></label>
            <label>"Cluster id" <input type="text" prop:value=cluster on:change=f.on("cluster") data-testid="filter-cluster"/></label>
        </form>
        {move || match (vms.get(), rows.with(Option::is_some)) {
            (Some(Err(e)), _) => Some(view! { <Problem text=e/> }.into_any()),
            (_, false) => Some(view! { <p class="empty">"Loading virtual machines…"</p> }.into_any()),
            _ => None,
        }}
        <p class="count" data-testid="vm-count">
            {move || rows.with(|r| r.as_ref().map(|(rows, total)| format!("{} of {total} VMs", rows.len())))}
        </p>
        {windowed(
            "vms",
            view! {
                {f.header("name", "VM")}
                {f.header("namespace", "Namespace")}
                {f.header("host", "Host")}
                <th>"Cluster"</th>
                <th>"vCPUs"</th>
                <th>"GB"</th>
                {f.header("phase", "Phase")}
            },
            rows,
            row,
        )}
    }
}

fn row(v: &Row) -> impl IntoView + use<> {
    let phase = v.phase.clone().unwrap_or_default();
    let host = v.node_name.clone().unwrap_or_default();
    view! {
        <tr>
            <td><a href=format!("/objects/{}", js_sys::encode_uri_component(&v.id))>{v.name.clone()}</a></td>
            <td>{v.namespace.clone().unwrap_or_default()}</td>
            <td><a href=format!("/hosts?q={}", js_sys::encode_uri_component(&host))>{host.clone()}</a></td>
            <td>{v.membership.as_ref().map(|m| m.cluster_id.clone()).unwrap_or_default()}</td>
            <td class="num">{format::cores(v.vcpus)}</td>
            <td class="num">{gib(v.memory_bytes, 0)}</td>
            <td><span class=format!("status {}", status_class(&phase))>{phase.clone()}</span></td>
        </tr>
    }
}
