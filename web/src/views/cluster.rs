//! One cluster, live: where it is in the operators' pipeline, why it is not Ready (each blocker
//! linked to its object), its machines by role and pool, network, VIP, and what just changed.

use leptos::prelude::*;
use leptos_router::hooks::use_params_map;

use super::list::{Item, each, each_keyed};
use super::operate::{Operate, Shape};
use super::{Problem, param};
use crate::charts::{Span, Timeline};
use crate::format::{self, gib, state_class};
use crate::gql::{
    ClusterHistory, ClusterId, ClusterLive, cluster_history, cluster_id, cluster_live,
};
use crate::net;

type Shown = cluster_live::ClusterLiveClusterChangedCluster;

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

/// A change the page saw, newest first (`n` counts them: the feed's key; `version` is the
/// object's (datacenter, uid, resourceVersion) when the event names one).
#[derive(Clone, PartialEq)]
struct Seen {
    n: u64,
    at: f64,
    what: String,
    version: Option<(String, String, String)>,
}

/// Where the live view is: waiting for the first event, the cluster is gone, or it is there.
#[derive(Clone, Copy, PartialEq)]
enum Showing {
    Loading,
    Deleted,
    Present,
}

#[component]
fn ClusterLiveView(id: String) -> impl IntoView {
    let cluster = RwSignal::new(None::<Option<Shown>>);
    let error = RwSignal::new(None::<String>);
    let feed = RwSignal::new(Vec::<Seen>::new());
    // Changes seen since the page opened (the feed keeps only the newest 50).
    let seen = RwSignal::new(0_u64);
    // The store sequence of the newest change shown (a benchmark matches it to the server's).
    let last = RwSignal::new(0_i64);
    net::subscribe::<ClusterLive>(cluster_live::Variables { id }, move |event| match event {
        Ok(data) => {
            let event = data.cluster_changed;
            // A change already shown is not shown again: after a reconnection another replica
            // may send one this page saw from the first (its watch a little behind).
            let version = event.changed.as_ref().and_then(|c| {
                let o = c.object.as_ref()?;
                Some((
                    o.datacenter.clone(),
                    o.uid.clone(),
                    o.resource_version.clone()?,
                ))
            });
            let repeated = version.is_some()
                && feed.with_untracked(|f| f.iter().any(|s| s.version == version));
            if let Some(changed) = event.changed.filter(|_| !repeated) {
                let what = format!(
                    "{} {} {}",
                    changed.type_.wire(),
                    changed.kind.unwrap_or_default(),
                    changed.name.unwrap_or_default()
                );
                let n = seen.get_untracked() + 1;
                feed.update(|f| {
                    f.insert(
                        0,
                        Seen {
                            n,
                            at: net::now_ms(),
                            what,
                            version,
                        },
                    );
                    f.truncate(50);
                });
                seen.set(n);
                last.set(event.sequence);
            }
            cluster.set(Some(event.cluster));
        }
        Err(e) => error.set(Some(e)),
    });
    let showing = Memo::new(
        move |_| match cluster.with(|c| c.as_ref().map(Option::is_some)) {
            None => Showing::Loading,
            Some(false) => Showing::Deleted,
            Some(true) => Showing::Present,
        },
    );
    let shown = Current(cluster);
    // The change panel keeps its state (sizes typed, preview, outcome) across live updates.
    let shape = Memo::new(move |_| shown.with(|c| c.map(shape_of)));
    view! {
        {move || error.get().map(|e| view! { <Problem text=e/> })}
        {move || match showing.get() {
            Showing::Loading => view! { <p class="empty">"Loading…"</p> }.into_any(),
            Showing::Deleted => view! { <Problem text="This cluster was deleted."/> }.into_any(),
            Showing::Present => view! { <Details shown/> }.into_any(),
        }}
        <Operate shape/>
        <Feed feed seen last/>
    }
}

/// What changed since the page opened, newest first.
#[component]
fn Feed(feed: RwSignal<Vec<Seen>>, seen: RwSignal<u64>, last: RwSignal<i64>) -> impl IntoView {
    view! {
        <section aria-labelledby="feed-title">
            <h2 id="feed-title">"Live changes"
                <span class="count">{move || match seen.get() {
                    0 => String::new(),
                    n => format!(" ({n} since this page opened, newest 50 shown)"),
                }}</span>
            </h2>
            <ol class="feed" data-testid="feed" data-changes=move || seen.get().to_string() data-sequence=move || last.get().to_string()>
                <Show when=move || seen.get() == 0>
                    <li class="empty">"Nothing has changed since this page opened."</li>
                </Show>
                {each(move || feed.with(|f| f.iter().map(|s| {
                    let (at, what) = (s.at, s.what.clone());
                    Item::new(s.n.to_string(), 0, move || view! { <li><time>{format::clock(at)}</time>" "{what}</li> })
                }).collect()))}
            </ol>
        </section>
    }
}

/// The cluster as the last event showed it (None before the first, Some(None) once deleted).
#[derive(Clone, Copy)]
struct Current(RwSignal<Option<Option<Shown>>>);

impl Current {
    /// Reads the cluster shown (None when there is none), tracked.
    fn with<R>(self, f: impl FnOnce(Option<&Shown>) -> R) -> R {
        self.0.with(|c| f(c.as_ref().and_then(Option::as_ref)))
    }
}

/// A value of the cluster shown, read with `f` (None once it is gone).
fn read<T: 'static>(
    shown: Current,
    f: fn(&Shown) -> T,
) -> impl Fn() -> Option<T> + Copy + Send + Sync + 'static {
    move || shown.with(|c| c.map(f))
}

/// The cluster: its stage and diagnosis, the pipeline, what blocks it, its facts and machines.
#[component]
fn Details(shown: Current) -> impl IntoView {
    let name = read(shown, |c| c.name.clone());
    let stage = read(shown, |c| c.pipeline.stage.label());
    let class = read(shown, |c| {
        let d = &c.diagnosis;
        format!(
            "pill {}",
            format::health_class(d.ready, d.degraded, d.failed)
        )
    });
    let summary = read(shown, |c| c.diagnosis.summary.clone());
    view! {
        <h1>{name}" "<span class=class data-testid="cluster-stage">{stage}</span></h1>
        <p class="summary" data-testid="diagnosis">{summary}</p>
        <ol class="pipeline" aria-label="Pipeline" data-testid="pipeline">
            {each_keyed(
                move || shown.with(|c| c.map(|c| c.pipeline.steps.clone()).unwrap_or_default()),
                |s| s.stage.wire().to_owned(),
                step,
            )}
        </ol>
        <ul class="blockers" data-testid="blockers">
            {each_keyed(
                move || shown.with(|c| c.map(|c| c.diagnosis.blockers.clone()).unwrap_or_default()),
                |b| format!("{}/{}/{}", b.kind, b.namespace.clone().unwrap_or_default(), b.name),
                blocker,
            )}
            {each_keyed(
                move || shown.with(|c| c.map(|c| c.diagnosis.warnings.clone()).unwrap_or_default()),
                |w| format!("{}/{}/{}", w.kind, w.namespace.clone().unwrap_or_default(), w.name),
                warning,
            )}
        </ul>
        {move || shown.with(|c| c.cloned().map(facts))}
        <Machines shown/>
    }
}

type Step = cluster_live::ClusterLiveClusterChangedClusterPipelineSteps;
type Blocker = cluster_live::ClusterLiveClusterChangedClusterDiagnosisBlockers;
type Warning = cluster_live::ClusterLiveClusterChangedClusterDiagnosisWarnings;
type Machine = cluster_live::ClusterLiveClusterChangedClusterMachinesNodes;

fn step(s: Step) -> impl IntoView {
    let state = s.state.wire();
    let class = format!("step {}", state.to_ascii_lowercase().replace('_', "-"));
    let title = s.detail.clone();
    view! {
        <li class=class title=title>
            <span class="name">{s.stage.label()}</span>
            <span class="state">{state.replace('_', " ").to_ascii_lowercase()}</span>
            <span class="detail">{s.detail}</span>
        </li>
    }
}

/// A link to an object's page, or its name when it does not exist.
fn object_link(id: Option<String>, target: String, missing: &'static str) -> AnyView {
    match id {
        Some(id) => {
            view! { <a href=format!("/objects/{}", js_sys::encode_uri_component(&id))>{target}</a> }
                .into_any()
        }
        None => view! { <span>{target}{missing}</span> }.into_any(),
    }
}

fn blocker(b: Blocker) -> impl IntoView {
    let link = object_link(
        b.object.map(|o| o.id),
        format!("{} {}", b.kind, b.name),
        " (missing)",
    );
    let class = if b.terminal {
        "blocker terminal"
    } else {
        "blocker"
    };
    view! {
        <li class=class>
            <span class="stage">{b.stage.label()}</span>
            {link}
            <p>{b.reason}</p>
        </li>
    }
}

fn warning(w: Warning) -> impl IntoView {
    let link = object_link(w.object.map(|o| o.id), format!("{} {}", w.kind, w.name), "");
    view! { <li class="blocker warning">{link}<p>{w.reason}</p></li> }
}

/// `name (phase)`, or `missing`.
fn named_phase(name: Option<(String, Option<String>)>) -> String {
    name.map(|(n, p)| format!("{n} ({})", p.unwrap_or_else(|| "no phase".into())))
        .unwrap_or_else(|| "missing".into())
}

fn facts(c: Shown) -> impl IntoView {
    let network = named_phase(c.network_namespace.map(|n| (n.name, n.phase)));
    let vip = named_phase(c.control_plane_vip.map(|v| (v.name, v.phase)));
    let link = |id: &str, text: String| {
        view! { <li><a href=format!("/objects/{}", js_sys::encode_uri_component(id))>{text}</a></li> }
    };
    let storage = c
        .cluster_storages
        .iter()
        .map(|s| {
            let kind = s
                .storage_type
                .as_deref()
                .map(|t| format!(", {t}"))
                .unwrap_or_default();
            let phase = s.phase.clone().unwrap_or_else(|| "no phase".into());
            link(&s.id, format!("{} ({phase}{kind})", s.name))
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
            link(&b.id, format!("{} ({})", b.name, parts.join(", ")))
        })
        .collect_view();
    let none = |empty: bool| empty.then(|| view! { <li class="empty">"none"</li> });
    let storage_empty = none(c.cluster_storages.is_empty());
    let backups_empty = none(c.etcd_backups.is_empty());
    let pools = c
        .node_pools
        .into_iter()
        .map(|p| view! { <li>{format!("{}: {}/{} machines ({})", p.name, p.ready_replicas, p.replicas, p.machine_class_name)}</li> })
        .collect_view();
    view! {
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
    }
}

/// The cluster's machines by role, pool and name; keyed by machine.
#[component]
fn Machines(shown: Current) -> impl IntoView {
    let machines = move || {
        let mut machines = shown.with(|c| c.map(|c| c.machines.nodes.clone()).unwrap_or_default());
        machines.sort_by_key(|m| {
            (
                m.role.map(|r| r.words()),
                m.node_pool.clone(),
                m.name.clone(),
            )
        });
        machines
    };
    view! {
        <h2>"Machines"</h2>
        <table class="list" data-testid="machines">
            <thead><tr><th>"Machine"</th><th>"Role"</th><th>"Pool"</th><th>"Class"</th><th>"vCPUs"</th><th>"GB"</th><th>"Phase"</th></tr></thead>
            <tbody>{each_keyed(machines, |m| m.name.clone(), machine_row)}</tbody>
        </table>
    }
}

fn machine_row(m: Machine) -> impl IntoView {
    let memory = m
        .resources
        .memory_bytes
        .map(|b| gib(b as f64, 0))
        .unwrap_or_default();
    view! {
        <tr>
            <td>{m.name}</td>
            <td>{m.role.map(|r| r.words()).unwrap_or_default()}</td>
            <td>{m.node_pool.unwrap_or_default()}</td>
            <td>{m.machine_class_name.unwrap_or_default()}</td>
            <td class="num">{m.resources.vcpus}</td>
            <td class="num">{memory}</td>
            <td><span class=format!("status {}", state_class(m.phase_state))>{m.phase.unwrap_or_default()}</span></td>
        </tr>
    }
}

/// What the change panel needs of the cluster.
fn shape_of(c: &Shown) -> Shape {
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

/// The phases the cluster went through, as a timeline, fetched again whenever it changes (from
/// the present at any moment the page shows); each step opens the cluster as it was then.
#[component]
fn History(key: Memo<(String, String)>) -> impl IntoView {
    let state = expect_context::<crate::net::LinkState>();
    let history = net::live_on::<ClusterHistory>(
        move || {
            let (namespace, name) = key.get();
            cluster_history::Variables { namespace, name }
        },
        Some(vec!["KubernetesCluster".into()]),
        state,
        true,
    );
    let spans = Signal::derive(move || match history.get() {
        Some(Ok(data)) => data
            .cluster
            .map(|c| {
                c.phase_timeline
                    .into_iter()
                    .map(|p| Span {
                        phase: p.phase,
                        since: p.since,
                        until: p.until,
                        state: p.phase_state,
                    })
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
            <p class="steps">{move || {
                let (namespace, name) = key.get();
                spans.get().into_iter().map(|s| {
                    let at = step_moment(&s.since, s.until.as_deref());
                    let href = format!("/clusters/{namespace}/{name}?at={}", js_sys::encode_uri_component(&at));
                    let label = if s.phase.is_empty() { "no phase".to_owned() } else { s.phase };
                    view! { <a href=href rel="external" data-testid="step" title="The cluster as it was in this step">{label}" "{format::clock(crate::charts::epoch_ms(&s.since))}</a>" " }
                }).collect_view()
            }}</p>
        </section>
    }
}

/// A moment inside a step of the timeline (its middle; a step still running: a second in, or
/// now if sooner), as RFC 3339: a link to it shows the cluster in that step.
fn step_moment(since: &str, until: Option<&str>) -> String {
    let from = crate::charts::epoch_ms(since);
    let to = until
        .map(crate::charts::epoch_ms)
        .unwrap_or_else(|| (from + 2_000.0).min(net::now_ms()));
    format::iso(from + ((to - from) / 2.0).max(0.0).floor())
}
