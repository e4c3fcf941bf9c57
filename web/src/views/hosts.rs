//! Hosts as cards (the old page's "Nodes & Virtual Machines"): readiness, cordon and pressure,
//! CPU and memory allocation against the server's limits, and the VMs placed on each.

use leptos::prelude::*;

use super::list::{UrlFilters, each_keyed};
use super::overview::HOST_KINDS;
use super::{Loaded, Problem, loaded};
use crate::charts::short;
use crate::format::{self, bar_class, gib, state_class};
use crate::gql::{HostList, HostReadiness, host_list};
use crate::net::{self, LinkState};

type Host = host_list::HostListHostsNodes;

on_demand!(Hosts, hosts_page, HostsPage);

#[component]
fn HostsPage() -> impl IntoView {
    let state = expect_context::<LinkState>();
    let url = UrlFilters::new("/hosts", ["q", "dc"]);
    let q = url.get("q");
    let dc = url.get("dc");
    let hosts = net::live::<HostList>(|| host_list::Variables, HOST_KINDS, state);
    let shown = move || {
        let needle = q.get().to_lowercase();
        let dc = dc.get();
        hosts
            .data(|d| {
                d.hosts
                    .nodes
                    .iter()
                    .filter(|h| dc.is_empty() || h.datacenter == dc)
                    .filter(|h| {
                        needle.is_empty()
                            || h.name.to_lowercase().contains(&needle)
                            || h.vms
                                .iter()
                                .any(|v| v.name.to_lowercase().contains(&needle))
                    })
                    .cloned()
                    .collect()
            })
            .unwrap_or_default()
    };
    let state = loaded(hosts);
    view! {
        <h1>"Hosts"</h1>
        <form class="filters" role="search" on:submit=|ev| ev.prevent_default()>
            <label>"Search" <input type="search" prop:value=q data-testid="filter-q" placeholder="host or VM name"
                on:input=url.on("q")/></label>
            <label>"Datacenter" <input type="search" prop:value=dc data-testid="filter-dc"
                on:input=url.on("dc")/></label>
        </form>
        {move || match state.get() {
            Loaded::Loading => view! { <p class="empty">"Loading hosts…"</p> }.into_any(),
            Loaded::Failed(e) => view! { <Problem text=e/> }.into_any(),
            Loaded::Ready => view! {
                <div class="cards" data-testid="hosts">
                    {each_keyed(shown, |h: &Host| h.id.clone(), card)}
                </div>
            }
            .into_any(),
        }}
    }
}

fn meter(label: String, percent: f64) -> impl IntoView {
    let width = format!("width: {:.1}%", percent.min(100.0));
    let name = label.clone();
    view! {
        <div class="meter">
            <span>{label}</span>
            <div class="track" role="meter" aria-label=name aria-valuemin="0" aria-valuemax="100" aria-valuenow=format!("{percent:.0}")>
                <div class=format!("fill {}", bar_class(percent)) style=width></div>
            </div>
        </div>
    }
}

fn card(h: Host) -> impl IntoView {
    // Unique in the page: two datacenters may each have a host of this name.
    let anchor = if h.datacenter.is_empty() {
        format!("host-{}", h.name)
    } else {
        format!("host-{}-{}", h.datacenter, h.name)
    };
    let ready = h.readiness == HostReadiness::Ready;
    let a = &h.allocation;
    let cpu = meter(
        format!(
            "CPU ({}/{} vCPUs used by VMs)",
            format::cores(a.vcpus_used),
            format::cores(a.vcpus_limit)
        ),
        a.cpu_percent,
    );
    let memory = meter(
        format!(
            "Memory ({}/{} GB used by VMs)",
            gib(a.memory_used_bytes, 1),
            gib(a.memory_limit_bytes, 1)
        ),
        a.memory_percent,
    );
    let mut flags = Vec::new();
    if h.unschedulable {
        flags.push("cordoned".to_owned());
    }
    flags.extend(h.pressures.iter().cloned());
    let flags = flags
        .into_iter()
        .map(|f| view! { <span class="badge warn">{f}</span> })
        .collect_view();
    let roles = h
        .roles
        .iter()
        .map(|r| view! { <span class="badge role">{r.clone()}</span> })
        .collect_view();
    let vm_count = h.vms.len();
    let vms = h
        .vms
        .into_iter()
        .map(|v| {
            let class = format!("status {}", state_class(v.phase_state));
            let phase = v.phase.unwrap_or_default();
            let title = format!("{}/{}", v.namespace.unwrap_or_default(), v.name);
            view! {
                <li class="vm" title=title>
                    <span class="name">{short(&v.name)}</span>
                    <span class=class>{phase}</span>
                    <span>{format!("{} vCPU · {} GB", format::cores(v.vcpus), gib(v.memory_bytes, 0))}</span>
                </li>
            }
        })
        .collect_view();
    let status = h.readiness.words();
    view! {
        <article class="card host" id=anchor data-testid="host-card">
            <header>
                <h2>{h.name.clone()}</h2>
                {roles}
                {flags}
                <span class=if ready { "badge ok" } else { "badge err" }>{status}</span>
            </header>
            {cpu}
            {memory}
            <h3>{format!("Virtual machines ({vm_count})")}</h3>
            <ul class="vms">{vms}</ul>
        </article>
    }
}
