//! Every VirtualMachineInstance: where it runs, its size, its phase and its cluster; filtered by
//! name, namespace, phase, host and cluster from the URL.

use leptos::prelude::*;

use super::list::{
    DATACENTER, Filter, ListPage, ListSpec, NAMESPACE, PHASE, SEARCH, given, server_sort,
    sort_rows, then_name,
};
use super::loaded;
use crate::format::{self, gib, state_class};
use crate::gql::{VmList, vm_list};
use crate::net::{self, LinkState};

type Row = vm_list::VmListVirtualMachineInstancesNodes;

static SPEC: ListSpec = ListSpec {
    title: "Virtual machines",
    path: "/vms",
    testid: "vms",
    count: "vm",
    noun: "VMs",
    loading: "Loading virtual machines…",
    filters: &[
        SEARCH,
        NAMESPACE,
        PHASE,
        DATACENTER,
        Filter::text("host", "Host"),
        Filter::text("cluster", "Cluster id"),
    ],
    columns: &[
        ("VM", Some("name")),
        ("Namespace", Some("namespace")),
        ("Host", Some("host")),
        ("Cluster", None),
        ("vCPUs", None),
        ("GB", None),
        ("Phase", Some("phase")),
    ],
};

on_demand!(Vms, vms_page, VmsPage);

#[component]
fn VmsPage() -> impl IntoView {
    let state = expect_context::<LinkState>();
    let url = SPEC.url();
    let (q, ns, phase, host, cluster, sort) = (
        url.get("q"),
        url.get("ns"),
        url.get("phase"),
        url.get("host"),
        url.get("cluster"),
        url.get("sort"),
    );
    let dc = url.get("dc");
    let vms = net::live::<VmList>(
        move || vm_list::Variables {
            filter: Some(vm_list::Filter {
                namespace: given(ns),
                phase: given(phase).map(|p| vec![p]),
                label_selector: None,
                search: given(q),
                datacenter: given(dc),
            }),
            sort: server_sort(&sort.get())
                .map(|(field, direction)| vm_list::Sort { field, direction }),
            first: Some(500),
            host: given(host),
            cluster_id: given(cluster),
        },
        &["VirtualMachineInstance"],
        state,
    );
    let rows = Memo::new(move |_| {
        let Some(Ok(data)) = vms.get() else {
            return None;
        };
        let mut rows: Vec<Row> = data.virtual_machine_instances.nodes;
        sort_rows(&mut rows, &sort.get(), |key, v| match key {
            "namespace" => then_name(v.namespace.as_deref(), &v.name),
            "phase" => then_name(v.phase.as_deref(), &v.name),
            "host" => then_name(v.node_name.as_deref(), &v.name),
            _ => v.name.clone(),
        });
        Some((rows, data.virtual_machine_instances.total_count))
    });
    view! { <ListPage spec=&SPEC url state=loaded(vms) rows key=|v: &Row| v.id.clone() row/> }
}

fn row(v: Row) -> impl IntoView {
    let host = v.node_name.clone().unwrap_or_default();
    view! {
        <tr>
            <td><a href=format!("/objects/{}", js_sys::encode_uri_component(&v.id))>{v.name.clone()}</a></td>
            <td>{v.namespace.clone().unwrap_or_default()}</td>
            <td><a href=format!("/hosts?q={}", js_sys::encode_uri_component(&host))>{host.clone()}</a></td>
            <td>{v.membership.as_ref().map(|m| m.cluster_id.clone()).unwrap_or_default()}</td>
            <td class="num">{format::cores(v.vcpus)}</td>
            <td class="num">{gib(v.memory_bytes, 0)}</td>
            <td><span class=format!("status {}", state_class(v.phase_state))>{v.phase.clone().unwrap_or_default()}</span></td>
        </tr>
    }
}
