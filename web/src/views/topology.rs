//! The topology as SVG: the datacenter, its hosts coloured by health, and the VMs on each host
//! coloured by phase. Everything can be hovered (details beside the drawing), focused with the
//! keyboard and clicked (a host opens its card, a VM its object).

use leptos::prelude::*;

use super::list::UrlFilters;
use super::overview::HOST_KINDS;
use super::{DatacenterNotFound, DatacenterPicker, Loaded, Problem, Sources, loaded};
use crate::format::{self, bar_class, gib, state_class};
use crate::gql::{DatacenterState, HostList, HostReadiness, host_list};
use crate::keyed::{Item, Keyed, each, keyed};
use crate::net::{self, LinkState, Live};

type Host = host_list::HostListHostsNodes;

const ROW: f64 = 72.0;
const HOST_X: f64 = 290.0;
const HOST_W: f64 = 250.0;
const HOST_H: f64 = 58.0;
const VM_X: f64 = 580.0;
const VM_STEP: f64 = 17.0;
const VMS_PER_LINE: usize = 28;
/// VMs drawn per host (two lines); the rest are counted.
const VMS_SHOWN: usize = VMS_PER_LINE * 2;
/// A datacenter's box: its height (a title and three lines).
const DC_H: f64 = 100.0;
const WIDTH: f64 = VM_X + VM_STEP * VMS_PER_LINE as f64 + 70.0;

/// A host's health class: `ok` (takes VMs), `warn` (Ready but cordoned, tainted or under
/// pressure), `err` (NotReady or Unknown).
fn health(h: &Host) -> &'static str {
    if h.readiness != HostReadiness::Ready {
        "err"
    } else if !h.accepts_vms || !h.pressures.is_empty() {
        "warn"
    } else {
        "ok"
    }
}

/// What the pointer or the keyboard is on: a host's id, or (host, VM index).
type Focus = RwSignal<Option<(String, Option<usize>)>>;

/// The page; its drawing code is loaded when it is first opened (a separate WebAssembly
/// module), so the first page load does not carry it.
#[component]
pub fn Topology() -> impl IntoView {
    view! {
        <Transition fallback=|| view! { <h1>"Topology"</h1><p class="empty">"Loading…"</p> }>
            {move || Suspend::new(async move { drawing().await })}
        </Transition>
    }
}

#[leptos::lazy]
fn drawing() -> AnyView {
    view! { <TopologyPage/> }.into_any()
}

#[component]
fn TopologyPage() -> impl IntoView {
    let state = expect_context::<LinkState>();
    let hosts = net::live::<HostList>(|| host_list::Variables, HOST_KINDS, state);
    let focus: Focus = RwSignal::new(None);
    // Built once the hosts are there; the drawing and the details follow them (see `loaded`).
    let hosts_state = loaded(hosts);
    let url = UrlFilters::new("/topology", ["dc"]);
    let dc = url.get("dc");
    let sources = expect_context::<Sources>();
    let unknown = Memo::new(move |_| sources.unknown(&dc.get()));
    view! {
        <h1>"Topology"</h1>
        <DatacenterPicker url dc/>
        {move || match hosts_state.get() {
            _ if unknown.get() => view! { <DatacenterNotFound dc/> }.into_any(),
            Loaded::Loading => view! { <p class="empty">"Loading hosts…"</p> }.into_any(),
            Loaded::Failed(e) => view! { <Problem text=e/> }.into_any(),
            // Nothing has told the server of a host: no datacenter to draw.
            Loaded::Ready if hosts.with(|h| h.as_ref().and_then(|h| h.as_ref().ok()).is_some_and(|d| d.hosts.nodes.is_empty())) => view! {
                <p class="empty" data-testid="topology-empty">"No datacenters reporting: no host is known yet (a watched cluster's Nodes, or an agent's report)."</p>
            }.into_any(),
            Loaded::Ready => view! {
                <div class="topology">
                    <Drawing hosts focus dc/>
                    <aside class="details" aria-live="polite" data-testid="topology-details">
                        {move || {
                            let focus = focus.get();
                            hosts.with(|h| details(h.and_then(Result::ok), focus))
                        }}
                    </aside>
                </div>
                <div class="legend">
                    <span class="key ok"></span>"takes VMs"
                    <span class="key warn"></span>"cordoned, tainted or under pressure"
                    <span class="key err"></span>"not Ready"
                    <span class="key vm running"></span>"VM running"
                    <span class="key vm scheduling"></span>"VM pending"
                    <span class="key vm error"></span>"VM failed"
                    <span class="key stale"></span>"datacenter not answering"
                </div>
            }.into_any(),
        }}
    }
}

/// Space between two datacenters' hosts.
const GAP: f64 = 28.0;

/// One datacenter's hosts in the drawing: its key, its first host's place and how many.
#[derive(Clone, PartialEq)]
struct Group {
    key: String,
    start: usize,
    count: usize,
}

/// The hosts' datacenters, in the order the hosts are drawn (grouped by datacenter).
fn groups(hosts: &[Keyed<Host>]) -> Vec<Group> {
    let mut out: Vec<Group> = Vec::new();
    for (i, h) in hosts.iter().enumerate() {
        match out.last_mut() {
            Some(g) if g.key == h.row.datacenter => g.count += 1,
            _ => out.push(Group {
                key: h.row.datacenter.clone(),
                start: i,
                count: 1,
            }),
        }
    }
    out
}

/// Where host `i` of a drawing with these groups is drawn (a gap between datacenters).
fn row_y(i: usize, groups: &[Group]) -> f64 {
    let g = groups.iter().take_while(|g| g.start <= i).count().max(1) - 1;
    10.0 + i as f64 * ROW + g as f64 * GAP
}

/// The drawing's height.
fn height(n: usize, groups: &[Group]) -> f64 {
    let gaps = groups.len().max(1) - 1;
    (n as f64 * ROW + gaps as f64 * GAP).max(ROW * 3.0) + 20.0
}

/// Where a datacenter's box starts: centred on its hosts' rows (on the drawing with one).
fn box_y(g: &Group, groups: &[Group], n: usize) -> f64 {
    if groups.len() < 2 {
        return height(n, groups) / 2.0 - DC_H / 2.0;
    }
    let top = row_y(g.start, groups);
    let bottom = row_y(g.start + g.count - 1, groups) + HOST_H;
    (top + bottom) / 2.0 - DC_H / 2.0
}

/// Each datacenter (or the one the filter names), its hosts and their VMs (grouped by datacenter
/// when there are several); each host row keyed by its place and content.
#[component]
fn Drawing(hosts: Live<host_list::ResponseData>, focus: Focus, dc: Memo<String>) -> impl IntoView {
    let nodes = keyed(
        move || {
            let dc = dc.get();
            hosts.with(|h| match h {
                Some(Ok(d)) => {
                    let mut all = d.hosts.nodes.clone();
                    // One datacenter's, when the page's filter names one.
                    all.retain(|h| dc.is_empty() || h.datacenter == dc);
                    // By datacenter, then as the server ordered them (by name).
                    all.sort_by(|a, b| a.datacenter.cmp(&b.datacenter));
                    all
                }
                _ => Vec::new(),
            })
        },
        |h: &Host| h.id.clone(),
    );
    let sources = expect_context::<Sources>();
    // The hosts keyed once per answer, read by the links, the rows and the boxes.
    let nodes = Memo::new(move |_| nodes());
    let layout = Memo::new(move |_| nodes.with(|n| groups(n)));
    let count = move || nodes.with(Vec::len);
    let name = move || {
        hosts
            .data(|d| d.vitistack_name.clone())
            .flatten()
            .unwrap_or_else(|| "Datacenter".into())
    };
    view! {
        <svg viewBox=move || format!("0 0 {WIDTH} {}", layout.with(|g| height(count(), g))) role="group" aria-label="Datacenters, hosts and VMs" data-testid="topology">
            {each(move || nodes.with(|all| layout.with(|groups| all.iter().enumerate().map(|(i, h)| {
                // A line depends only on its host's place, its box's place and its health.
                let class = health(&h.row);
                let y = row_y(i, groups);
                let from = groups
                    .iter()
                    .find(|g| g.start <= i && i < g.start + g.count)
                    .map_or(0.0, |g| box_y(g, groups, all.len()));
                Item::new(format!("{y}/{from}/{class}"), 0, move || link(y, class, from))
            }).collect())))}
            {each(move || nodes.with(|all| layout.with(|groups| groups.iter().map(|g| {
                let hosts = &all[g.start..g.start + g.count];
                let ready = hosts.iter().filter(|h| h.row.readiness == HostReadiness::Ready).count();
                let vms: usize = hosts.iter().map(|h| h.row.vms.len()).sum();
                let running: usize = hosts.iter().map(|h| h.row.vms.iter().filter(|v| v.active).count()).sum();
                // A datacenter that does not answer is drawn as such (its hosts are as last seen).
                let away = matches!(sources.state_of(&g.key), Some(DatacenterState::Stale | DatacenterState::Unreachable));
                let class = if away { "stale" } else if hosts.iter().any(|h| health(&h.row) == "err") { "warn" } else { "ok" };
                // The clusters whose VMs run on its hosts, as the old page counted them.
                let mut clusters: Vec<&str> = hosts.iter().flat_map(|h| h.row.vms.iter().filter_map(|v| v.membership.as_ref().map(|m| m.cluster_id.as_str()))).collect();
                clusters.sort_unstable();
                clusters.dedup();
                // A datacenter by its key; the one of a single-cluster server by its Vitistack.
                let title = if g.key.is_empty() { name() } else { g.key.clone() };
                let title = if away { format!("{title} · not answering") } else { title };
                let y = box_y(g, groups, all.len());
                let lines = [format!("{ready}/{} hosts ready", g.count), format!("{running}/{vms} VMs running"), format::plural(clusters.len() as i64, "cluster", "clusters")];
                Item::new(format!("{}/{y}/{class}/{title}/{lines:?}", g.key), 0, move || view! {
                    <g class=format!("dc {class}") transform=format!("translate(10 {y})") data-testid="topology-dc">
                        <rect width="220" height=DC_H rx="8"></rect>
                        <text x="12" y="24" class="title">{title}</text>
                        <text x="12" y="46">{lines[0].clone()}</text>
                        <text x="12" y="66">{lines[1].clone()}</text>
                        <text x="12" y="86" data-testid="topology-dc-clusters">{lines[2].clone()}</text>
                    </g>
                })
            }).collect())))}
            {each(move || nodes.with(|all| layout.with(|groups| all.iter().enumerate().map(|(i, h)| {
                let row = h.row.clone();
                let y = row_y(i, groups);
                Item::new(format!("{y}/{}", h.key), h.version, move || host_row(y, row, focus))
            }).collect())))}
        </svg>
    }
}

/// The line from a datacenter's box (at `from`) to the host row at `y`, coloured by its health.
fn link(y: f64, class: &'static str, from: f64) -> impl IntoView {
    let y = y + HOST_H / 2.0;
    let d = format!(
        "M 230 {} C 260 {} 260 {y} {HOST_X} {y}",
        from + DC_H / 2.0,
        from + DC_H / 2.0
    );
    view! { <path class=format!("link {class}") d=d></path> }
}

/// What the pointer or the keyboard is on, in words.
fn details(
    data: Option<&host_list::ResponseData>,
    focus: Option<(String, Option<usize>)>,
) -> AnyView {
    let found = focus.zip(data).and_then(|((host, vm), data)| {
        let h = data.hosts.nodes.iter().find(|h| h.id == host)?;
        Some(match vm.and_then(|i| h.vms.get(i)) {
            Some(v) => {
                view! {
                    <h2>{v.name.clone()}</h2>
                    <p>{format!("VM in {} on {}", v.namespace.clone().unwrap_or_default(), h.name)}</p>
                    <p class=format!("status {}", state_class(v.phase_state))>{v.phase.clone().unwrap_or_default()}</p>
                    <p>{format!("{} vCPU · {} GB", format::cores(v.vcpus), gib(v.memory_bytes, 1))}</p>
                    <p>{v.membership.as_ref().map(|m| format!("cluster {}", m.cluster_id))}</p>
                }
                .into_any()
            }
            None => {
                let a = &h.allocation;
                view! {
                    <h2>{h.name.clone()}</h2>
                    <p>{format!("{} · {}", readiness_words(h), h.roles.join(", "))}</p>
                    <p>{format!("CPU {}/{} vCPUs ({:.0}%)", format::cores(a.vcpus_used), format::cores(a.vcpus_limit), a.cpu_percent)}</p>
                    <p>{format!("Memory {}/{} GB ({:.0}%)", gib(a.memory_used_bytes, 1), gib(a.memory_limit_bytes, 1), a.memory_percent)}</p>
                    <p>{format!("{} VMs", h.vms.len())}</p>
                }
                .into_any()
            }
        })
    });
    found.unwrap_or_else(|| {
        view! { <p class="empty">"Point at or tab to a host or a VM for its details; Enter opens it."</p> }
            .into_any()
    })
}

fn readiness_words(h: &Host) -> String {
    let mut words = h.readiness.words().to_owned();
    if h.unschedulable {
        words.push_str(", cordoned");
    }
    for p in &h.pressures {
        words.push_str(", ");
        words.push_str(p);
    }
    words
}

fn host_row(y: f64, h: Host, focus: Focus) -> impl IntoView {
    let class = health(&h);
    let a = &h.allocation;
    let bar = |percent: f64, dy: f64, label: &'static str| {
        let w = (percent.min(100.0) / 100.0 * 110.0).max(if percent > 0.0 { 3.0 } else { 0.0 });
        view! {
            <text x="10" y=dy + 8.0 class="small">{label}</text>
            <rect x="44" y=dy width="110" height="9" class="track"></rect>
            <rect x="44" y=dy width=w height="9" class=format!("fill {}", bar_class(percent))></rect>
        }
    };
    let cpu = bar(a.cpu_percent, 30.0, "CPU");
    let memory = bar(a.memory_percent, 43.0, "MEM");
    let name = h.name.clone();
    let id = h.id.clone();
    // The accessible name comes from <title> (SVG's name), so it names the host first.
    let title = format!(
        "Host {}: {}, {} VMs",
        h.name,
        readiness_words(&h),
        h.vms.len()
    );
    let href = format!("/hosts?q={}", js_sys::encode_uri_component(&h.name));
    let enter = id.clone();
    let vm_count = h.vms.len();
    let dots = h
        .vms
        .iter()
        .take(VMS_SHOWN)
        .enumerate()
        .map(|(j, v)| {
            let cx = VM_X + (j % VMS_PER_LINE) as f64 * VM_STEP + 7.0;
            let cy = y + 16.0 + (j / VMS_PER_LINE) as f64 * VM_STEP + 6.0;
            let phase = v.phase.clone().unwrap_or_default();
            let href = format!("/objects/{}", js_sys::encode_uri_component(&v.id));
            let label = format!("VM {} ({phase})", v.name);
            let title = label.clone();
            let host = id.clone();
            let host2 = id.clone();
            let (click, key) = crate::charts::opens(href);
            view! {
                <g class="vm" role="link" tabindex="0" aria-label=label on:click=click on:keydown=key
                    on:mouseenter=move |_| focus.set(Some((host.clone(), Some(j))))
                    on:focus=move |_| focus.set(Some((host2.clone(), Some(j))))>
                    <title>{title}</title>
                    <circle cx=cx cy=cy r="6" class=format!("vm {}", state_class(v.phase_state))></circle>
                </g>
            }
        })
        .collect_view();
    let more = (vm_count > VMS_SHOWN).then(|| {
        view! { <text x=VM_X + VM_STEP * VMS_PER_LINE as f64 + 8.0 y=y + 40.0 class="small">{format!("+{}", vm_count - VMS_SHOWN)}</text> }
    });
    let focus_name = id.clone();
    let (click, key) = crate::charts::opens(href);
    view! {
        <g class=format!("host {class}") data-testid="topology-host" data-host=name.clone()>
            <g class="link" role="link" tabindex="0" on:click=click on:keydown=key
                on:mouseenter=move |_| focus.set(Some((enter.clone(), None)))
                on:focus=move |_| focus.set(Some((focus_name.clone(), None)))>
                <title>{title}</title>
                <g transform=format!("translate({HOST_X} {y})")>
                    <rect width=HOST_W height=HOST_H rx="6" class="box"></rect>
                    <circle cx="14" cy="14" r="5" class="dot"></circle>
                    <text x="26" y="18" class="title">{name.clone()}</text>
                    <text x=HOST_W - 10.0 y="18" text-anchor="end" class="small">{format!("{vm_count} VMs")}</text>
                    {cpu}
                    {memory}
                </g>
            </g>
            {dots}
            {more}
        </g>
    }
}
