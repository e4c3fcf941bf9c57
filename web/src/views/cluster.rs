//! One cluster, live: where it is in the operators' pipeline, why it is not Ready (each blocker
//! linked to its object), its machines by role and pool, network, VIP, and what just changed.

use leptos::prelude::*;
use leptos_router::hooks::use_params_map;

use super::operate::{Operate, Shape};
use super::{Problem, param};
use crate::charts::Timeline;
use crate::format::{self, gib, status_class, wire};
use crate::gql::{
    ClusterHistory, ClusterId, ClusterLive, cluster_history, cluster_id, cluster_live,
};
use crate::net;

type Live = cluster_live::ClusterLiveClusterChangedCluster;

#[component]
pub fn Cluster() -> impl IntoView {
    let params = use_params_map();
    let key = Memo::new(move |_| {
        let p = params.read();
        (param(&p, "namespace"), param(&p, "name"))
    });
    // The global id first (the subscription takes one), then the live view.
    let id = RwSignal::new(None::<Result<Option<String>, String>>);
    let state = expect_context::<crate::net::LinkState>();
    Effect::new(move |_| {
        // Asked again at every (re)connection: a page opened before signing in was refused.
        state.connections.track();
        let (namespace, name) = key.get();
        id.set(None);
        leptos::task::spawn_local(async move {
            let answer = net::query::<ClusterId>(cluster_id::Variables { namespace, name }).await;
            let _ = id.try_set(Some(answer.map(|d| d.cluster.map(|c| c.id))));
        });
    });
    view! {
        <p class="crumbs"><a href="/clusters">"Clusters"</a>" / "{move || key.get().0}</p>
        {move || match id.get() {
            None => view! { <p class="empty">"Loading…"</p> }.into_any(),
            Some(Err(e)) => view! { <Problem text=e/> }.into_any(),
            Some(Ok(None)) => {
                let (namespace, name) = key.get();
                view! { <Problem text=format!("There is no cluster {name} in namespace {namespace}.")/> }.into_any()
            }
            Some(Ok(Some(id))) => view! { <ClusterLiveView id/> }.into_any(),
        }}
        <History key/>
    }
}

/// A change the page saw, newest first.
#[derive(Clone, PartialEq)]
struct Seen {
    at: f64,
    what: String,
}

#[component]
fn ClusterLiveView(id: String) -> impl IntoView {
    let cluster = RwSignal::new(None::<Option<Live>>);
    let error = RwSignal::new(None::<String>);
    let feed = RwSignal::new(Vec::<Seen>::new());
    // Changes seen since the page opened (the feed keeps only the newest 50).
    let seen = RwSignal::new(0_u64);
    // The store sequence of the newest change shown (a benchmark matches it to the server's).
    let last = RwSignal::new(0_i64);
    net::subscribe::<ClusterLive>(cluster_live::Variables { id }, move |event| match event {
        Ok(data) => {
            let event = data.cluster_changed;
            if let Some(changed) = event.changed {
                let what = format!(
                    "{} {} {}",
                    wire(&changed.type_),
                    changed.kind.unwrap_or_default(),
                    changed.name.unwrap_or_default()
                );
                feed.update(|f| {
                    f.insert(
                        0,
                        Seen {
                            at: net::now_ms(),
                            what,
                        },
                    );
                    f.truncate(50);
                });
                seen.update(|n| *n += 1);
                last.set(event.sequence);
            }
            cluster.set(Some(event.cluster));
        }
        Err(e) => error.set(Some(e)),
    });
    // The change panel keeps its state (sizes typed, preview, outcome) across live updates.
    let shape =
        Memo::new(move |_| cluster.with(|c| c.as_ref().and_then(|c| c.as_ref().map(shape_of))));
    view! {
        {move || error.get().map(|e| view! { <Problem text=e/> })}
        {move || match cluster.get() {
            None => view! { <p class="empty">"Loading…"</p> }.into_any(),
            Some(None) => view! { <Problem text="This cluster was deleted."/> }.into_any(),
            Some(Some(c)) => details(c).into_any(),
        }}
        <Operate shape/>
        <section aria-labelledby="feed-title">
            <h2 id="feed-title">"Live changes"
                <span class="count">{move || match seen.get() {
                    0 => String::new(),
                    n => format!(" ({n} since this page opened, newest 50 shown)"),
                }}</span>
            </h2>
            <ol class="feed" data-testid="feed" data-changes=move || seen.get().to_string() data-sequence=move || last.get().to_string()>
                {move || {
                    let f = feed.get();
                    if f.is_empty() {
                        return view! { <li class="empty">"Nothing has changed since this page opened."</li> }.into_any();
                    }
                    f.into_iter()
                        .map(|s| view! { <li><time>{format::clock(s.at)}</time>" "{s.what}</li> })
                        .collect_view()
                        .into_any()
                }}
            </ol>
        </section>
    }
}

fn details(c: Live) -> impl IntoView {
    let stage = wire(&c.pipeline.stage);
    let d = c.diagnosis;
    let state_class = format::health_class(d.ready, d.degraded, d.failed);
    let steps = c
        .pipeline
        .steps
        .into_iter()
        .map(|s| {
            let state = wire(&s.state);
            let class = format!("step {}", state.to_ascii_lowercase().replace('_', "-"));
            let label = format::stage_label(&wire(&s.stage));
            view! {
                <li class=class title=s.detail.clone()>
                    <span class="name">{label}</span>
                    <span class="state">{state.replace('_', " ").to_ascii_lowercase()}</span>
                    <span class="detail">{s.detail.clone()}</span>
                </li>
            }
        })
        .collect_view();
    let blockers = d
        .blockers
        .into_iter()
        .map(|b| {
            let target = format!("{} {}", b.kind, b.name);
            let link = match b.object {
                Some(o) => view! { <a href=format!("/objects/{}", js_sys::encode_uri_component(&o.id))>{target}</a> }.into_any(),
                None => view! { <span>{target}" (missing)"</span> }.into_any(),
            };
            let class = if b.terminal { "blocker terminal" } else { "blocker" };
            view! {
                <li class=class>
                    <span class="stage">{format::stage_label(&wire(&b.stage))}</span>
                    {link}
                    <p>{b.reason}</p>
                </li>
            }
        })
        .collect_view();
    let warnings = d
        .warnings
        .into_iter()
        .map(|w| {
            let target = format!("{} {}", w.kind, w.name);
            let link = match w.object {
                Some(o) => view! { <a href=format!("/objects/{}", js_sys::encode_uri_component(&o.id))>{target}</a> }.into_any(),
                None => view! { <span>{target}</span> }.into_any(),
            };
            view! { <li class="blocker warning">{link}<p>{w.reason}</p></li> }
        })
        .collect_view();
    let mut machines = c.machines.nodes;
    machines.sort_by_key(|m| {
        (
            m.role.as_ref().map(wire),
            m.node_pool.clone(),
            m.name.clone(),
        )
    });
    let machine_rows = machines
        .into_iter()
        .map(|m| {
            let phase = m.phase.unwrap_or_default();
            let memory = m.resources.memory_bytes.map(|b| gib(b as f64, 0)).unwrap_or_default();
            view! {
                <tr>
                    <td>{m.name}</td>
                    <td>{m.role.as_ref().map(wire).unwrap_or_default().replace('_', " ").to_ascii_lowercase()}</td>
                    <td>{m.node_pool.unwrap_or_default()}</td>
                    <td>{m.machine_class_name.unwrap_or_default()}</td>
                    <td class="num">{m.resources.vcpus}</td>
                    <td class="num">{memory}</td>
                    <td><span class=format!("status {}", status_class(&phase))>{phase.clone()}</span></td>
                </tr>
            }
        })
        .collect_view();
    let pools = c
        .node_pools
        .into_iter()
        .map(|p| view! { <li>{format!("{}: {}/{} machines ({})", p.name, p.ready_replicas, p.replicas, p.machine_class_name)}</li> })
        .collect_view();
    let network = c
        .network_namespace
        .map(|n| {
            format!(
                "{} ({})",
                n.name,
                n.phase.unwrap_or_else(|| "no phase".into())
            )
        })
        .unwrap_or_else(|| "missing".into());
    let vip = c
        .control_plane_vip
        .map(|v| {
            format!(
                "{} ({})",
                v.name,
                v.phase.unwrap_or_else(|| "no phase".into())
            )
        })
        .unwrap_or_else(|| "missing".into());
    let link = |id: &str, text: String| {
        view! { <a href=format!("/objects/{}", js_sys::encode_uri_component(id))>{text}</a> }
    };
    let storage = c
        .cluster_storages
        .iter()
        .map(|s| {
            let text = format!(
                "{} ({}{})",
                s.name,
                s.phase.clone().unwrap_or_else(|| "no phase".into()),
                s.storage_type
                    .as_deref()
                    .map(|t| format!(", {t}"))
                    .unwrap_or_default()
            );
            view! { <li>{link(&s.id, text)}</li> }
        })
        .collect_view();
    let backups = c
        .etcd_backups
        .iter()
        .map(|b| {
            let mut parts = vec![b.phase.clone().unwrap_or_else(|| "no phase".into())];
            parts.extend(b.schedule.as_ref().map(|s| format!("schedule {s}")));
            parts.extend(
                b.last_backup_time
                    .as_ref()
                    .map(|t| format!("last {}", t.replace('T', " "))),
            );
            parts.extend(
                b.backup_count
                    .map(|n| format::plural(n, "backup", "backups")),
            );
            view! { <li>{link(&b.id, format!("{} ({})", b.name, parts.join(", ")))}</li> }
        })
        .collect_view();
    let none = |what: &'static str| view! { <li class="empty">{what}</li> };
    let storage_empty = c.cluster_storages.is_empty().then(|| none("none"));
    let backups_empty = c.etcd_backups.is_empty().then(|| none("none"));
    view! {
        <h1>{c.name.clone()}" "<span class=format!("pill {state_class}") data-testid="cluster-stage">{format::stage_label(&stage)}</span></h1>
        <p class="summary" data-testid="diagnosis">{d.summary}</p>
        <ol class="pipeline" aria-label="Pipeline" data-testid="pipeline">{steps}</ol>
        <ul class="blockers" data-testid="blockers">{blockers}{warnings}</ul>
        <dl class="facts">
            <dt>"Namespace"</dt><dd>{c.namespace.unwrap_or_default()}</dd>
            <dt>"Cluster id"</dt><dd>{c.cluster_id}</dd>
            <dt>"Provider"</dt><dd>{c.provider}</dd>
            <dt>"Version"</dt><dd>{c.version}</dd>
            <dt>"Environment"</dt><dd>{c.environment}</dd>
            <dt>"Datacenter"</dt><dd>{c.datacenter_name}</dd>
            <dt>"Phase"</dt><dd>{c.phase.unwrap_or_default()}</dd>
            <dt>"Message"</dt><dd>{c.message.unwrap_or_default()}</dd>
            <dt>"Network"</dt><dd>{network}</dd>
            <dt>"Control-plane VIP"</dt><dd>{vip}</dd>
            <dt>"Control plane"</dt><dd>{format!("{} × {}", c.control_plane.replicas, c.control_plane.machine_class_name)}</dd>
            <dt>"Storage"</dt><dd><ul class="inline" data-testid="storage">{storage}{storage_empty}</ul></dd>
            <dt>"etcd backups"</dt><dd><ul class="inline" data-testid="backups">{backups}{backups_empty}</ul></dd>
        </dl>
        <h2>"Node pools"</h2>
        <ul class="pools">{pools}</ul>
        <h2>"Machines"</h2>
        <table class="list" data-testid="machines">
            <thead><tr><th>"Machine"</th><th>"Role"</th><th>"Pool"</th><th>"Class"</th><th>"vCPUs"</th><th>"GB"</th><th>"Phase"</th></tr></thead>
            <tbody>{machine_rows}</tbody>
        </table>
    }
}

/// What the change panel needs of the cluster.
fn shape_of(c: &Live) -> Shape {
    Shape {
        namespace: c.namespace.clone().unwrap_or_default(),
        name: c.name.clone(),
        control_plane: c.control_plane.replicas,
        pools: c
            .node_pools
            .iter()
            .map(|p| (p.name.clone(), p.replicas))
            .collect(),
        paused: c
            .annotations
            .iter()
            .any(|a| a.key == "upgrade.vitistack.io/do-not-reconcile" && !a.value.is_empty()),
    }
}

/// The phases the cluster went through, as a timeline, fetched again whenever it changes.
#[component]
fn History(key: Memo<(String, String)>) -> impl IntoView {
    let state = expect_context::<crate::net::LinkState>();
    let history = net::live_query::<ClusterHistory>(
        move || {
            let (namespace, name) = key.get();
            cluster_history::Variables { namespace, name }
        },
        &["KubernetesCluster"],
        state,
    );
    let spans = Signal::derive(move || match history.get() {
        Some(Ok(data)) => data
            .cluster
            .map(|c| {
                c.phase_timeline
                    .into_iter()
                    .map(|p| (p.phase, p.since, p.until))
                    .collect()
            })
            .unwrap_or_default(),
        _ => Vec::new(),
    });
    let ready = move || {
        history
            .get()
            .and_then(|h| h.ok())
            .and_then(|d| d.cluster)
            .map(|c| match c.time_to_ready_seconds {
                Some(s) => format!("Ready {s:.0} s after it was created."),
                None => "Not Ready yet.".to_owned(),
            })
    };
    view! {
        <section aria-labelledby="history-title">
            <h2 id="history-title">"Phase history"</h2>
            <p class="explain" data-testid="time-to-ready">{ready}</p>
            <Timeline spans testid="timeline"/>
        </section>
    }
}
