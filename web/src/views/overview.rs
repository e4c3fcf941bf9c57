//! The overview: the fleet in numbers (the old page's tiles, with the server's corrected
//! figures), host allocation charts, clusters by pipeline stage and the ones that need attention.

use leptos::prelude::*;

use super::list::{UrlFilters, each_keyed, given};
use super::{DatacenterNotFound, DatacenterPicker, Loaded, Problem, Sources, Tile, loaded};
use crate::charts::{Bar, CountBars, CountRow, StackedBars};
use crate::format::{self, gib, percent, percent_class, plural};
use crate::gql::{
    ClusterHealth, ClusterList, HostFigures, HostsLive, PipelineStage, SummaryLive, cluster_list,
    host_figures, hosts_live, summary_live,
};
use crate::net::{self, LinkState, Live};

/// The kinds whose changes move host allocation.
pub const HOST_KINDS: &[&str] = &["Node", "VirtualMachineInstance", "VirtualMachine"];
/// The kinds whose changes move a cluster's pipeline and diagnosis, and its VMs' figures.
pub const CLUSTER_KINDS: &[&str] = &[
    "KubernetesCluster",
    "Machine",
    "NetworkNamespace",
    "NetworkConfiguration",
    "ControlPlaneVirtualSharedIP",
    "ClusterStorage",
    "EtcdBackup",
    "VirtualMachine",
    "VirtualMachineInstance",
];

type Capacity = hosts_live::HostsLiveHostsChanged;
type Summary = summary_live::SummaryLiveInfrastructureSummary;
type Attention = cluster_list::ClusterListClustersNodes;

#[component]
pub fn Overview() -> impl IntoView {
    let url = UrlFilters::new("/", ["dc"]);
    let dc = url.get("dc");
    let sources = expect_context::<Sources>();
    // Changes only when the answer does (the sources are polled): the streams stay open.
    let unknown = Memo::new(move |_| sources.unknown(&dc.get()));
    view! {
        <h1>"Overview"</h1>
        <DatacenterPicker url dc/>
        // Another datacenter: the streams are opened anew for it.
        {move || if unknown.get() {
            view! { <DatacenterNotFound dc/> }.into_any()
        } else {
            view! { <Fleet dc=given(dc)/> }.into_any()
        }}
    }
}

/// The page's figures for one datacenter (`dc`), or for the whole fleet.
#[component]
fn Fleet(dc: Option<String>) -> impl IntoView {
    let state = expect_context::<LinkState>();
    let capacity = RwSignal::new(None::<Capacity>);
    let summary = RwSignal::new(None::<Summary>);
    let error = RwSignal::new(None::<String>);
    let datacenter = dc.clone();
    net::subscribe::<HostsLive>(
        hosts_live::Variables { datacenter },
        move |event| match event {
            Ok(data) => capacity.set(Some(data.hosts_changed)),
            Err(e) => error.set(Some(e)),
        },
    );
    let datacenter = dc.clone();
    net::subscribe::<SummaryLive>(
        summary_live::Variables { datacenter },
        move |event| match event {
            Ok(data) => summary.set(Some(data.infrastructure_summary)),
            Err(e) => error.set(Some(e)),
        },
    );
    let hosts = net::live::<HostFigures>(|| host_figures::Variables, HOST_KINDS, state);
    let stage_dc = dc.clone().unwrap_or_default();
    let stages = Signal::derive(move || stage_rows(summary, &stage_dc));
    // The clusters that need attention, asked of the server by health: the failed ones, and
    // enough of the others to fill the list whatever number of them failed.
    let needing = |health: ClusterHealth, first: usize| {
        let datacenter = dc.clone();
        net::live::<ClusterList>(
            move || cluster_list::Variables {
                filter: datacenter.clone().map(|d| cluster_list::Filter {
                    namespace: None,
                    phase: None,
                    label_selector: None,
                    search: None,
                    datacenter: Some(d),
                }),
                sort: None,
                first: Some(first as i64),
                stage: None,
                health: Some(health),
            },
            CLUSTER_KINDS,
            state,
        )
    };
    let failed = needing(ClusterHealth::Failed, ATTENTION_SHOWN);
    let attention = needing(ClusterHealth::Attention, 2 * ATTENTION_SHOWN);
    view! {
        {move || error.get().map(|e| view! { <Problem text=e/> })}
        <Tiles capacity summary/>
        <p class="explain" data-testid="redundancy-explained">
            {move || capacity.with(|c| c.as_ref().filter(|_| synced()).map(redundancy_sentence))}
        </p>
        <Allocation hosts dc/>
        <div class="columns">
            <section aria-labelledby="stages-title">
                <h2 id="stages-title">"Clusters by pipeline stage"</h2>
                <Synced><CountBars rows=stages testid="stages"/></Synced>
            </section>
            <section aria-labelledby="attention-title">
                <h2 id="attention-title">"Needs attention"</h2>
                <Synced><NeedsAttention failed attention summary/></Synced>
            </section>
        </div>
    }
}

/// True once the server has read every kind (until then what it has is partial).
fn synced() -> bool {
    expect_context::<Sources>().synced()
}

/// Its children once the server has read every kind; until then, a line that says it is still
/// reading (partial numbers are not drawn).
#[component]
fn Synced(children: ChildrenFn) -> impl IntoView {
    view! {
        <Show when=synced fallback=|| view! { <p class="empty">"Waiting for the server to finish reading the cluster…"</p> }>
            {children()}
        </Show>
    }
}

/// The fleet in numbers: the old page's tiles, from the two live streams.
#[component]
fn Tiles(
    capacity: RwSignal<Option<Capacity>>,
    summary: RwSignal<Option<Summary>>,
) -> impl IntoView {
    let cap = move |f: fn(&Capacity) -> String| {
        Signal::derive(move || capacity.with(|c| c.as_ref().map(f)))
    };
    let cap_text = move |f: fn(&Capacity) -> String| {
        Signal::derive(move || capacity.with(|c| c.as_ref().map(f).unwrap_or_default()))
    };
    let cap_class = move |f: fn(&Capacity) -> &'static str| {
        Signal::derive(move || capacity.with(|c| c.as_ref().map(f).unwrap_or("")))
    };
    let sum = move |f: fn(&Summary) -> String| {
        Signal::derive(move || summary.with(|s| s.as_ref().map(f)))
    };
    let sum_text = move |f: fn(&Summary) -> String| {
        Signal::derive(move || summary.with(|s| s.as_ref().map(f).unwrap_or_default()))
    };
    let sum_class = move |f: fn(&Summary) -> &'static str| {
        Signal::derive(move || summary.with(|s| s.as_ref().map(f).unwrap_or("")))
    };
    // Problems need both streams; `None` until both have answered.
    let problems = Signal::derive(move || {
        let (hosts, ready) = capacity.with(|c| c.as_ref().map(|c| (c.hosts, c.ready_hosts)))?;
        let vms = capacity.with(|c| c.as_ref().map(|c| c.failed_vms))?;
        let failed = summary.with(|s| s.as_ref().map(|s| s.clusters.failed + s.machines.failed))?;
        Some(failed + vms + (hosts - ready))
    });
    view! {
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
                sub=cap_text(|c| format!("failed · {} VMs pending", c.pending_vms))
                class=Signal::derive(move || if problems.get().unwrap_or(0) > 0 { "err" } else { "ok" })/>
            <Tile label="Cluster CPU" testid="tile-cpu"
                value=cap(|c| format!("{:.0}%", percent(c.vcpus_used, c.vcpus_limit)))
                sub=cap_text(|c| format!("{} / {} vCPUs", format::cores(c.vcpus_used), format::cores(c.vcpus_limit)))
                class=cap_class(|c| percent_class(percent(c.vcpus_used, c.vcpus_limit)))/>
            <super::applications::AppsTile/>
            <DatacentersTile/>
            <Tile label="Cluster memory" testid="tile-memory"
                value=cap(|c| format!("{:.0}%", percent(c.memory_used_bytes, c.memory_limit_bytes)))
                sub=cap_text(|c| format!("{} / {} GB", gib(c.memory_used_bytes, 0), gib(c.memory_limit_bytes, 0)))
                class=cap_class(|c| percent_class(percent(c.memory_used_bytes, c.memory_limit_bytes)))/>
        </section>
    }
}

/// How many datacenters report (synced), of those the server knows, as the old hub's overview
/// counted them; stale and unreachable ones are counted in its line. Shown when there are several
/// (a single cluster's server has its own alone).
#[component]
fn DatacentersTile() -> impl IntoView {
    use crate::gql::DatacenterState;
    let sources = expect_context::<Sources>();
    let several = move || {
        sources
            .0
            .with(|d| d.as_ref().is_some_and(|d| d.datacenters.len() > 1))
    };
    let counts = move || {
        sources.0.with(|d| {
            d.as_ref().map(|d| {
                let all = &d.datacenters;
                let of = |s: DatacenterState| all.iter().filter(|x| x.state == s).count();
                (
                    of(DatacenterState::Synced),
                    all.len(),
                    of(DatacenterState::Stale) + of(DatacenterState::Unreachable),
                )
            })
        })
    };
    view! {
        <Show when=several>
        <Tile label="Datacenters" testid="tile-datacenters"
            value=Signal::derive(move || counts().map(|(n, all, _)| format!("{n}/{all}")))
            sub=Signal::derive(move || match counts() {
                Some((_, _, 0)) | None => "reporting".to_owned(),
                Some((_, _, away)) => format!("reporting · {away} not answering"),
            })
            class=Signal::derive(move || match counts() {
                Some((n, all, _)) if n == all => "ok",
                Some((0, _, _)) => "err",
                _ => "warn",
            })/>
        </Show>
    }
}

/// The two host allocation charts, built once the hosts are there and following them (see
/// `loaded`).
#[component]
fn Allocation(hosts: Live<host_figures::ResponseData>, dc: Option<String>) -> impl IntoView {
    let hosts_state = loaded(hosts);
    let (d, e) = (dc.clone(), dc);
    let cpu_bars = Signal::derive(move || bars(hosts, &d, |a| (a.vcpus_used, a.vcpus_limit)));
    let memory_bars =
        Signal::derive(move || bars(hosts, &e, |a| (a.memory_used_bytes, a.memory_limit_bytes)));
    view! {
        <section aria-labelledby="allocation-title">
            <h2 id="allocation-title">"Host allocation"</h2>
            {move || match hosts_state.get() {
                Loaded::Failed(e) => view! { <Problem text=e/> }.into_any(),
                Loaded::Loading => view! { <p class="empty">"Loading hosts…"</p> }.into_any(),
                Loaded::Ready => view! {
                    <Synced>
                        <div class="charts">
                            <StackedBars title="CPU per host (vCPUs)" bars=cpu_bars unit=format::cores
                                used_label="vCPUs used by VMs" testid="chart-cpu"/>
                            <StackedBars title="Memory per host (GB)" bars=memory_bars unit=|b| gib(b, 1)
                                used_label="GB used by VMs" testid="chart-memory"/>
                        </div>
                    </Synced>
                }.into_any(),
            }}
        </section>
    }
}

/// Used and limit per host (of datacenter `dc`, or all), from the server's allocation figures.
fn bars(
    hosts: Live<host_figures::ResponseData>,
    dc: &Option<String>,
    pick: fn(&host_figures::HostFiguresHostsNodesAllocation) -> (f64, f64),
) -> Vec<Bar> {
    hosts.with(|h| match h {
        Some(Ok(data)) => data
            .hosts
            .nodes
            .iter()
            .filter(|host| dc.as_ref().is_none_or(|d| *d == host.datacenter))
            .map(|host| {
                let (used, limit) = pick(&host.allocation);
                Bar {
                    name: host.name.clone(),
                    used,
                    limit,
                    href: format!(
                        "/hosts{}",
                        super::query_string(&[
                            ("q", &host.name),
                            ("dc", dc.as_deref().unwrap_or_default())
                        ])
                    ),
                }
            })
            .collect(),
        _ => Vec::new(),
    })
}

/// Clusters per pipeline stage, each a link to the clusters at that stage.
fn stage_rows(summary: RwSignal<Option<Summary>>, dc: &str) -> Vec<CountRow> {
    summary.with(|s| {
        let Some(s) = s else { return Vec::new() };
        PipelineStage::ALL
            .iter()
            .map(|stage| CountRow {
                label: stage.label(),
                count: s
                    .clusters
                    .by_stage
                    .iter()
                    .find(|c| c.value == stage.wire())
                    .map_or(0, |c| c.count),
                href: format!(
                    "/clusters{}",
                    super::query_string(&[("stage", stage.wire()), ("dc", dc)])
                ),
                class: if *stage == PipelineStage::Ready {
                    "ok"
                } else {
                    "progress"
                },
            })
            .collect()
    })
}

/// "How many hosts can fail", in words.
fn redundancy_sentence(c: &Capacity) -> String {
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

/// Shown in the attention list at most.
const ATTENTION_SHOWN: usize = 8;

/// Clusters that are not Ready or are degraded: failed first, then by pipeline stage, with the
/// diagnosis; keyed by cluster, so an answer redraws only the clusters that changed. The server
/// picks them (`clusters(health:)`), so the count is of every cluster however many there are;
/// the order is of the ones read (the first failed and the first needing attention, by name).
#[component]
fn NeedsAttention(
    failed: Live<cluster_list::ResponseData>,
    attention: Live<cluster_list::ResponseData>,
    summary: RwSignal<Option<Summary>>,
) -> impl IntoView {
    let (failed_state, attention_state) = (loaded(failed), loaded(attention));
    let state = Memo::new(move |_| match (failed_state.get(), attention_state.get()) {
        (Loaded::Failed(e), _) | (_, Loaded::Failed(e)) => Loaded::Failed(e),
        (Loaded::Ready, Loaded::Ready) if summary.with(Option::is_some) => Loaded::Ready,
        _ => Loaded::Loading,
    });
    // (the clusters to show, how many need attention in all, how many clusters there are).
    let listed = move || {
        let clusters = summary.with(|s| s.as_ref().map_or(0, |s| s.clusters.total));
        failed.with(|f| {
            attention.with(|a| {
                let (Some(Ok(f)), Some(Ok(a))) = (f, a) else {
                    return (Vec::new(), 0, clusters);
                };
                let rest = a.clusters.nodes.iter().filter(|c| !c.diagnosis.failed);
                let mut rows: Vec<Attention> =
                    f.clusters.nodes.iter().chain(rest).cloned().collect();
                rows.sort_by_key(|c| {
                    (
                        !c.diagnosis.failed,
                        c.pipeline.stage.order(),
                        c.name.clone(),
                    )
                });
                rows.truncate(ATTENTION_SHOWN);
                let all = usize::try_from(a.clusters.total_count).unwrap_or(0);
                (rows, all, clusters)
            })
        })
    };
    let more = move || listed().1.saturating_sub(ATTENTION_SHOWN);
    move || {
        match state.get() {
        Loaded::Loading => view! { <p class="empty">"Loading clusters…"</p> }.into_any(),
        Loaded::Failed(e) => view! { <Problem text=e/> }.into_any(),
        Loaded::Ready => view! {
            <Show when=move || { listed().2 > 0 }
                fallback=|| view! { <p class="empty" data-testid="attention-none">"There are no clusters yet."</p> }>
                <Show when=move || { listed().1 > 0 }
                    fallback=|| view! { <p class="empty ok" data-testid="attention-none">"Every cluster is Ready and healthy."</p> }>
                    <ul class="attention-list" data-testid="attention">
                        {each_keyed(move || listed().0, |c: &Attention| c.id.clone(), attention_item)}
                    </ul>
                    <Show when=move || { more() > 0 }>
                        <a href="/clusters?state=attention">{move || format!("{} more…", more())}</a>
                    </Show>
                </Show>
            </Show>
        }
        .into_any(),
    }
    }
}

fn attention_item(c: Attention) -> impl IntoView {
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
    view! {
        <li class=class>
            <a href=href>{c.name.clone()}</a>
            <span class="stage">{c.pipeline.stage.label()}</span>
            <p>{c.diagnosis.summary.clone()}</p>
        </li>
    }
}
