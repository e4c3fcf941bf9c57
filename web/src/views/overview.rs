//! The overview: the fleet in numbers (the old page's tiles, with the server's corrected
//! figures), host allocation charts, clusters by pipeline stage and the ones that need attention.

use leptos::prelude::*;

use super::{Loaded, Problem, Sources, Tile, loaded};
use crate::charts::{Bar, CountBars, StackedBars};
use crate::format::{self, gib, percent, percent_class, plural, wire};
use crate::gql::{
    ClusterList, HostList, HostsLive, SummaryLive, cluster_list, host_list, hosts_live,
    summary_live,
};
use crate::net::{self, LinkState};

/// The kinds whose changes move host allocation.
pub const HOST_KINDS: &[&str] = &["Node", "VirtualMachineInstance", "VirtualMachine"];
/// The kinds whose changes move a cluster's pipeline and diagnosis.
pub const CLUSTER_KINDS: &[&str] = &[
    "KubernetesCluster",
    "Machine",
    "NetworkNamespace",
    "NetworkConfiguration",
    "ControlPlaneVirtualSharedIP",
    "ClusterStorage",
    "EtcdBackup",
];

#[component]
pub fn Overview() -> impl IntoView {
    let state = expect_context::<LinkState>();
    // Until the server has read every kind, what it has is partial: say so instead of drawing it.
    let sources = expect_context::<Sources>();
    let synced = move || sources.synced();
    let syncing =
        || view! { <p class="empty">"Waiting for the server to finish reading the cluster…"</p> };
    let capacity = RwSignal::new(None::<hosts_live::HostsLiveHostsChanged>);
    let summary = RwSignal::new(None::<summary_live::SummaryLiveInfrastructureSummary>);
    let error = RwSignal::new(None::<String>);
    net::subscribe::<HostsLive>(hosts_live::Variables, move |event| match event {
        Ok(data) => capacity.set(Some(data.hosts_changed)),
        Err(e) => error.set(Some(e)),
    });
    net::subscribe::<SummaryLive>(summary_live::Variables, move |event| match event {
        Ok(data) => summary.set(Some(data.infrastructure_summary)),
        Err(e) => error.set(Some(e)),
    });
    let hosts = net::live_query::<HostList>(|| host_list::Variables, HOST_KINDS, state);
    let clusters = net::live_query::<ClusterList>(
        || cluster_list::Variables {
            filter: None,
            first: Some(500),
        },
        CLUSTER_KINDS,
        state,
    );

    let cap = move |f: fn(&hosts_live::HostsLiveHostsChanged) -> String| {
        Signal::derive(move || capacity.with(|c| c.as_ref().map(f)))
    };
    let cap_text = move |f: fn(&hosts_live::HostsLiveHostsChanged) -> String| {
        Signal::derive(move || capacity.with(|c| c.as_ref().map(f).unwrap_or_default()))
    };
    let cap_class = move |f: fn(&hosts_live::HostsLiveHostsChanged) -> &'static str| {
        Signal::derive(move || capacity.with(|c| c.as_ref().map(f).unwrap_or("")))
    };
    let sum = move |f: fn(&summary_live::SummaryLiveInfrastructureSummary) -> String| {
        Signal::derive(move || summary.with(|s| s.as_ref().map(f)))
    };
    let sum_text = move |f: fn(&summary_live::SummaryLiveInfrastructureSummary) -> String| {
        Signal::derive(move || summary.with(|s| s.as_ref().map(f).unwrap_or_default()))
    };
    let sum_class =
        move |f: fn(&summary_live::SummaryLiveInfrastructureSummary) -> &'static str| {
            Signal::derive(move || summary.with(|s| s.as_ref().map(f).unwrap_or("")))
        };
    // Problems need both streams; `None` until both have answered.
    let problems = Signal::derive(move || {
        let c = capacity.get()?;
        let s = summary.get()?;
        Some(s.clusters.failed + s.machines.failed + (c.hosts - c.ready_hosts))
    });

    // The charts are built once the hosts are there and follow them; see `loaded`.
    let hosts_state = loaded(hosts);
    let cpu_bars = Signal::derive(move || bars(hosts, |a| (a.vcpus_used, a.vcpus_limit)));
    let memory_bars =
        Signal::derive(move || bars(hosts, |a| (a.memory_used_bytes, a.memory_limit_bytes)));
    let stage_rows = Signal::derive(move || {
        summary.with(|s| {
            let Some(s) = s else { return Vec::new() };
            format::STAGES
                .iter()
                .map(|(wire, label)| {
                    let count = s
                        .clusters
                        .by_stage
                        .iter()
                        .find(|c| c.value == *wire)
                        .map_or(0, |c| c.count);
                    let class = if *wire == "READY" { "ok" } else { "progress" };
                    (
                        (*label).to_owned(),
                        count,
                        format!("/clusters?stage={wire}"),
                        class,
                    )
                })
                .collect()
        })
    });

    view! {
        <h1>"Overview"</h1>
        {move || error.get().map(|e| view! { <Problem text=e/> })}
        <section class="tiles" aria-label="The fleet in numbers">
            <Tile label="Hosts" testid="tile-hosts"
                value=cap(|c| format!("{}/{}", c.ready_hosts, c.hosts))
                sub=cap_text(|c| format!("ready · {} accept VMs", c.usable_hosts))
                class=cap_class(|c| if c.ready_hosts == c.hosts { "ok" } else { "warn" })/>
            <Tile label="Clusters" testid="tile-clusters"
                value=sum(|s| format!("{}/{}", s.clusters.ready, s.clusters.total))
                sub=sum_text(|s| format!("ready · {} degraded · {} failed", s.clusters.degraded, s.clusters.failed))
                class=sum_class(|s| if s.clusters.failed > 0 { "err" } else if s.clusters.ready == s.clusters.total { "ok" } else { "warn" })/>
            <Tile label="Redundancy" testid="tile-redundancy"
                value=cap(|c| c.hosts_that_can_fail.to_string())
                sub=cap_text(|c| format!("{} can fail", if c.hosts_that_can_fail == 1 { "host" } else { "hosts" }))
                class=cap_class(|c| match c.hosts_that_can_fail { 0 => "err", 1 => "warn", _ => "ok" })
                title=cap_text(|c| c.redundancy_limit.clone())/>
            <Tile label="VMs" testid="tile-vms"
                value=cap(|c| format!("{}/{}", c.active_vms, c.active_vms + c.stopped_vms))
                sub=Signal::derive(|| "running".to_owned())
                class=cap_class(|c| if c.stopped_vms == 0 { "ok" } else { "warn" })/>
            <Tile label="Problems" testid="tile-problems"
                value=Signal::derive(move || problems.get().map(|p| p.to_string()))
                sub=sum_text(|s| format!("failed · {} clusters in progress", s.clusters.in_progress))
                class=Signal::derive(move || if problems.get().unwrap_or(0) > 0 { "err" } else { "ok" })/>
            <Tile label="Cluster CPU" testid="tile-cpu"
                value=cap(|c| format!("{:.0}%", percent(c.vcpus_used, c.vcpus_limit)))
                sub=cap_text(|c| format!("{} / {} vCPUs", format::cores(c.vcpus_used), format::cores(c.vcpus_limit)))
                class=cap_class(|c| percent_class(percent(c.vcpus_used, c.vcpus_limit)))/>
            <Tile label="Cluster memory" testid="tile-memory"
                value=cap(|c| format!("{:.0}%", percent(c.memory_used_bytes, c.memory_limit_bytes)))
                sub=cap_text(|c| format!("{} / {} GB", gib(c.memory_used_bytes, 0), gib(c.memory_limit_bytes, 0)))
                class=cap_class(|c| percent_class(percent(c.memory_used_bytes, c.memory_limit_bytes)))/>
        </section>
        <p class="explain" data-testid="redundancy-explained">
            {move || capacity.get().filter(|_| synced()).map(|c| redundancy_sentence(&c))}
        </p>

        <section aria-labelledby="allocation-title">
            <h2 id="allocation-title">"Host allocation"</h2>
            {move || match hosts_state.get() {
                Loaded::Failed(e) => view! { <Problem text=e/> }.into_any(),
                Loaded::Loading => view! { <p class="empty">"Loading hosts…"</p> }.into_any(),
                Loaded::Ready if !synced() => syncing().into_any(),
                Loaded::Ready => view! {
                    <div class="charts">
                        <StackedBars title="CPU per host (vCPUs)" bars=cpu_bars unit=format::cores
                            used_label="vCPUs used by VMs" testid="chart-cpu"/>
                        <StackedBars title="Memory per host (GB)" bars=memory_bars unit=|b| gib(b, 1)
                            used_label="GB used by VMs" testid="chart-memory"/>
                    </div>
                }.into_any(),
            }}
        </section>

        <div class="columns">
            <section aria-labelledby="stages-title">
                <h2 id="stages-title">"Clusters by pipeline stage"</h2>
                {move || if synced() {
                    view! { <CountBars rows=stage_rows testid="stages"/> }.into_any()
                } else {
                    syncing().into_any()
                }}
            </section>
            <section aria-labelledby="attention-title">
                <h2 id="attention-title">"Needs attention"</h2>
                {move || if synced() { attention(clusters.get()) } else { syncing().into_any() }}
            </section>
        </div>
    }
}

/// Used and limit per host, from the server's allocation figures.
fn bars(
    hosts: RwSignal<Option<Result<host_list::ResponseData, String>>>,
    pick: fn(&host_list::HostListHostsNodesAllocation) -> (f64, f64),
) -> Vec<Bar> {
    hosts.with(|h| match h {
        Some(Ok(data)) => data
            .hosts
            .nodes
            .iter()
            .map(|host| {
                let (used, limit) = pick(&host.allocation);
                Bar {
                    name: host.name.clone(),
                    used,
                    limit,
                    href: format!("/hosts?q={}", host.name),
                }
            })
            .collect(),
        _ => Vec::new(),
    })
}

/// "How many hosts can fail", in words.
fn redundancy_sentence(c: &hosts_live::HostsLiveHostsChanged) -> String {
    let fail = match c.hosts_that_can_fail {
        0 => "If any host fails, some running VMs have nowhere to go.".to_owned(),
        n => format!(
            "{} can fail (the largest first) and every running VM still fits on the hosts that remain.",
            plural(n, "host", "hosts")
        ),
    };
    if c.redundancy_limit.is_empty() {
        fail
    } else {
        format!(
            "{fail} The limit: {}.",
            c.redundancy_limit.trim_end_matches('.')
        )
    }
}

/// Clusters that are not Ready: failed first, then by pipeline stage, with the diagnosis.
fn attention(clusters: Option<Result<cluster_list::ResponseData, String>>) -> AnyView {
    let data = match clusters {
        None => return view! { <p class="empty">"Loading clusters…"</p> }.into_any(),
        Some(Err(e)) => return view! { <Problem text=e/> }.into_any(),
        Some(Ok(data)) => data,
    };
    let mut rows: Vec<_> = data
        .clusters
        .nodes
        .into_iter()
        .filter(|c| !c.diagnosis.ready || c.diagnosis.degraded)
        .collect();
    if data.clusters.total_count == 0 {
        return view! { <p class="empty" data-testid="attention-none">"There are no clusters yet."</p> }
            .into_any();
    }
    if rows.is_empty() {
        return view! { <p class="empty ok" data-testid="attention-none">"Every cluster is Ready and healthy."</p> }.into_any();
    }
    let order = |stage: &str| {
        format::STAGES
            .iter()
            .position(|(w, _)| *w == stage)
            .unwrap_or(99)
    };
    rows.sort_by_key(|c| {
        (
            !c.diagnosis.failed,
            order(&wire(&c.pipeline.stage)),
            c.name.clone(),
        )
    });
    let more = rows.len().saturating_sub(8);
    let items = rows
        .into_iter()
        .take(8)
        .map(|c| {
            let href = format!(
                "/clusters/{}/{}",
                c.namespace.clone().unwrap_or_default(),
                c.name
            );
            let class = if c.diagnosis.failed {
                "attention failed"
            } else {
                "attention"
            };
            let stage = format::stage_label(&wire(&c.pipeline.stage));
            view! {
                <li class=class>
                    <a href=href>{c.name.clone()}</a>
                    <span class="stage">{stage}</span>
                    <p>{c.diagnosis.summary.clone()}</p>
                </li>
            }
        })
        .collect_view();
    view! {
        <ul class="attention-list" data-testid="attention">{items}</ul>
        {(more > 0).then(|| view! { <a href="/clusters?state=attention">{format!("{more} more…")}</a> })}
    }
    .into_any()
}
