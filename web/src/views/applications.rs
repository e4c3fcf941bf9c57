//! The applications (Helm releases and what they run): a list with each one's health, filters
//! and deep links, and one application's page: its pods with status and restarts, services,
//! volumes, ingresses as links, and its revisions as a timeline. Both are loaded on demand
//! (separate WebAssembly modules) and read again whenever `applicationChanged` reports a change.

use leptos::prelude::*;
use leptos_router::hooks::{use_params_map, use_query_map};

use super::Problem;
use super::list::UrlFilters;
use crate::format::gib;
use crate::gql::{
    ApplicationDetail, ApplicationList, ApplicationsLive, application_detail, application_list,
    applications_live,
};
use crate::net::{self, LinkState};

type Row = application_list::ApplicationListApplicationsEdgesNode;
type Detail = application_detail::ApplicationDetailApplication;

/// The healths in the API, worst first, with the pill class each gets.
const HEALTHS: &[(&str, &str)] = &[
    ("FAILED", "failed"),
    ("DEGRADED", "failed"),
    ("PENDING_ROLLBACK", "progress"),
    ("PENDING_UPGRADE", "progress"),
    ("PENDING_INSTALL", "progress"),
    ("UNINSTALLING", "progress"),
    ("UNKNOWN", "progress"),
    ("HEALTHY", "ready"),
];

fn health_class(wire: &str) -> &'static str {
    HEALTHS
        .iter()
        .find(|(h, _)| *h == wire)
        .map_or("progress", |(_, c)| c)
}

/// `PENDING_UPGRADE` as "pending upgrade".
fn health_words(wire: &str) -> String {
    wire.to_lowercase().replace('_', " ")
}

/// `fetch` kept current in a signal: read now, after each reconnection, and again after each
/// change `applicationChanged` reports in `namespace` of `datacenter` (both `None`: anywhere).
/// Changes that arrive while a read is on its way are answered by one more read, not one each.
fn watched<T: Send + Sync + 'static>(
    namespace: Option<String>,
    datacenter: Option<String>,
    fetch: impl Fn() -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<T, String>>>>
    + Clone
    + 'static,
) -> RwSignal<Option<Result<T, String>>> {
    use std::cell::Cell;
    use std::rc::Rc;
    let state = expect_context::<LinkState>();
    let answer = RwSignal::new(None);
    let reading = Rc::new(Cell::new(false));
    let again = Rc::new(Cell::new(false));
    let refresh = move || {
        if reading.replace(true) {
            again.set(true);
            return;
        }
        let (fetch, reading, again) = (fetch.clone(), reading.clone(), again.clone());
        leptos::task::spawn_local(async move {
            loop {
                answer.set(Some(fetch().await));
                if !again.replace(false) {
                    break;
                }
            }
            reading.set(false);
        });
    };
    let first = refresh.clone();
    Effect::new(move |_| {
        state.connections.track();
        first();
    });
    net::subscribe::<ApplicationsLive>(
        applications_live::Variables {
            namespace,
            datacenter,
        },
        move |_| refresh(),
    );
    answer
}

/// The overview's applications tile (its code is loaded on demand: the overview is the first
/// page, and its first load has a budget); nothing when the inventory is off.
#[component]
pub fn AppsTile() -> impl IntoView {
    view! {
        <Transition fallback=|| ()>
            {move || Suspend::new(async move { tile().await })}
        </Transition>
    }
}

#[leptos::lazy]
fn tile() -> AnyView {
    view! { <Counts/> }.into_any()
}

#[component]
fn Counts() -> impl IntoView {
    use crate::gql::{ApplicationCounts, application_counts};
    let answer = watched(None, None, || {
        Box::pin(async {
            net::query::<ApplicationCounts>(application_counts::Variables)
                .await
                .map(|d| d.infrastructure.applications)
        })
    });
    move || {
        let Some(Ok(Some(a))) = answer.get() else {
            return ().into_any();
        };
        let class = if a.failed + a.degraded > 0 {
            "warn"
        } else {
            "ok"
        };
        view! {
            <a class=format!("tile {class}") href="/applications">
                <div class="tile-label">"Applications"</div>
                <div class="tile-value" data-testid="tile-applications">{format!("{}/{}", a.healthy, a.total)}</div>
                <div class="tile-sub">{format!("healthy · {} degraded · {} failed", a.degraded, a.failed)}</div>
            </a>
        }
        .into_any()
    }
}

/// The list page.
#[component]
pub fn Applications() -> impl IntoView {
    view! {
        <h1>"Applications"</h1>
        <Transition fallback=|| view! { <p class="empty">"Loading…"</p> }>
            {move || Suspend::new(async move { list().await })}
        </Transition>
    }
}

#[leptos::lazy]
fn list() -> AnyView {
    view! { <List/> }.into_any()
}

#[component]
fn List() -> impl IntoView {
    let url = UrlFilters::new("/applications", ["q", "health", "dc"]);
    let q = url.get("q");
    let health = url.get("health");
    let dc = url.get("dc");
    let answer = watched(None, None, || {
        Box::pin(async {
            net::query::<ApplicationList>(application_list::Variables)
                .await
                .map(|d| {
                    d.applications
                        .edges
                        .into_iter()
                        .map(|e| e.node)
                        .collect::<Vec<Row>>()
                })
        })
    });
    let shown = move || -> Option<Result<Vec<Row>, String>> {
        let needle = q.get().to_lowercase();
        let health = health.get();
        let dc = dc.get();
        answer.get().map(|r| {
            r.map(|rows| {
                rows.into_iter()
                    .filter(|a| dc.is_empty() || a.datacenter == dc)
                    .filter(|a| health.is_empty() || a.health.wire() == health)
                    .filter(|a| {
                        needle.is_empty()
                            || [&a.name, &a.namespace, &a.chart]
                                .iter()
                                .any(|f| f.to_lowercase().contains(&needle))
                    })
                    .collect()
            })
        })
    };
    view! {
        <form class="filters" role="search" on:submit=|ev| ev.prevent_default()>
            <label>"Search" <input type="search" prop:value=q data-testid="filter-q"
                placeholder="release, namespace or chart" on:input=url.on("q")/></label>
            <label>"Health" <select data-testid="filter-health" prop:value=health on:change=url.on("health")>
                <option value="">"any"</option>
                {HEALTHS.iter().map(|(h, _)| view! { <option value=*h>{health_words(h)}</option> }).collect_view()}
            </select></label>
            <label>"Datacenter" <input type="search" prop:value=dc data-testid="filter-dc"
                on:input=url.on("dc")/></label>
        </form>
        {move || match shown() {
            None => view! { <p class="empty">"Loading applications…"</p> }.into_any(),
            Some(Err(e)) => view! { <Problem text=e/> }.into_any(),
            Some(Ok(rows)) if rows.is_empty() => view! {
                <p class="empty" data-testid="applications-empty">"No application matches."</p>
            }.into_any(),
            Some(Ok(rows)) => view! {
                <table class="list" data-testid="applications">
                    <thead><tr>
                        <th>"Release"</th><th>"Namespace"</th><th>"Chart"</th><th>"Revision"</th>
                        <th>"Health"</th><th>"Pods ready"</th><th>"Why"</th>
                    </tr></thead>
                    <tbody>{rows.into_iter().map(row).collect_view()}</tbody>
                </table>
            }.into_any(),
        }}
    }
}

fn row(a: Row) -> impl IntoView {
    let h = a.health.wire();
    let href = format!(
        "/applications/{}/{}{}",
        a.namespace,
        a.name,
        super::query_string(&[("dc", a.datacenter.as_str())])
    );
    let pods = format!("{}/{}", a.ready_pods, a.pods.len());
    view! {
        <tr data-testid=format!("app-{}-{}", a.namespace, a.name)>
            <td><a href=href>{a.name.clone()}</a></td>
            <td>{a.namespace.clone()}</td>
            <td>{format!("{} {}", a.chart, a.chart_version)}</td>
            <td class="num">{a.revision}</td>
            <td><span class=format!("pill {}", health_class(h)) data-testid="health">{health_words(h)}</span></td>
            <td class="num">{pods}</td>
            <td class="summary">{a.reasons.join("; ")}</td>
        </tr>
    }
}

/// One application's page.
#[component]
pub fn Application() -> impl IntoView {
    view! {
        <Transition fallback=|| view! { <p class="empty">"Loading…"</p> }>
            {move || Suspend::new(async move { detail().await })}
        </Transition>
    }
}

#[leptos::lazy]
fn detail() -> AnyView {
    view! { <Page/> }.into_any()
}

#[component]
fn Page() -> impl IntoView {
    let params = use_params_map();
    let query = use_query_map();
    // Another application: a view of its own (its own subscription).
    let key = Memo::new(move |_| {
        let p = params.read();
        (
            p.get("namespace").unwrap_or_default(),
            p.get("name").unwrap_or_default(),
            query.read().get("dc").unwrap_or_default(),
        )
    });
    move || {
        let (namespace, name, dc) = key.get();
        view! { <Shown namespace name dc/> }
    }
}

/// One application, read again whenever its namespace's applications change.
#[component]
fn Shown(namespace: String, name: String, dc: String) -> impl IntoView {
    let datacenter = (!dc.is_empty()).then_some(dc);
    let vars = application_detail::Variables {
        namespace: Some(namespace.clone()),
        name: Some(name),
        datacenter: datacenter.clone(),
    };
    let answer = watched(Some(namespace), datacenter, move || {
        let vars = vars.clone();
        Box::pin(async move {
            net::query::<ApplicationDetail>(vars)
                .await
                .map(|d| d.application)
        })
    });
    move || match answer.get() {
        None => view! { <p class="empty">"Loading the application…"</p> }.into_any(),
        Some(Err(e)) => view! { <Problem text=e/> }.into_any(),
        Some(Ok(None)) => view! { <p class="empty">"There is no such application."</p> }.into_any(),
        Some(Ok(Some(a))) => page(a).into_any(),
    }
}

fn page(a: Detail) -> impl IntoView {
    let h = a.health.wire();
    let total = a.pods.len();
    let place = if a.datacenter.is_empty() {
        a.namespace.clone()
    } else {
        format!("{} · {}", a.datacenter, a.namespace)
    };
    let reasons = (!a.reasons.is_empty()).then(|| {
        view! {
            <ul class="reasons" data-testid="reasons">
                {a.reasons.iter().map(|r| view! { <li>{r.clone()}</li> }).collect_view()}
            </ul>
        }
    });
    let pods = a
        .pods
        .into_iter()
        .map(|p| {
            let class = if p.ready {
                "ready"
            } else if p.waiting.is_empty() {
                "progress"
            } else {
                "failed"
            };
            let status = if p.waiting.is_empty() {
                p.phase.clone()
            } else {
                p.waiting.join(", ")
            };
            view! {
                <tr data-testid=format!("pod-{}", p.name)>
                    <td>{p.name.clone()}</td>
                    <td><span class=format!("pill {class}")>{status}</span></td>
                    <td>{if p.ready { "yes" } else { "no" }}</td>
                    <td class="num" data-testid="restarts">{p.restarts}</td>
                    <td class="summary">{p.image.clone()}</td>
                </tr>
            }
        })
        .collect_view();
    let services = a
        .services
        .into_iter()
        .map(|s| {
            let ports: Vec<String> = s.ports.iter().map(ToString::to_string).collect();
            view! { <li>{s.name}" "<span class="muted">{ports.join(", ")}</span></li> }
        })
        .collect_view();
    let volumes = a
        .volumes
        .into_iter()
        .map(|v| {
            let size = v
                .requested_bytes
                .map(|b| format!("{} GiB", gib(b, 0)))
                .unwrap_or_default();
            view! { <li>{v.name}" "<span class="muted">{size}</span></li> }
        })
        .collect_view();
    let ingresses = a.ingresses.into_iter().flat_map(|i| i.hosts).map(|host| {
        let href = format!("https://{host}/");
        view! { <li><a href=href rel="noopener" target="_blank" data-testid="ingress">{host}</a></li> }
    }).collect_view();
    // The tenant cluster it runs on, where the inventory knows it.
    let on_cluster = a.kubernetes_cluster.map(|c| {
        let href = format!("/clusters/{}/{}", c.namespace.unwrap_or_default(), c.name);
        view! {
            <p data-testid="app-cluster">"Runs on cluster "<a href=href>{c.name.clone()}</a>
                " "<span class="muted">{c.phase.unwrap_or_default()}</span></p>
        }
    });
    let live = a.revision;
    let timeline = a.revisions.into_iter().rev().map(|r| {
        let class = match r.status.as_str() {
            "deployed" => "ready",
            "failed" => "failed",
            s if s.starts_with("pending") => "progress",
            _ => "",
        };
        let when = r.updated.clone().unwrap_or_default().replace('T', " ").trim_end_matches('Z').to_string();
        view! {
            <li class=format!("rev {class}{}", if r.revision == live { " live" } else { "" })
                data-testid=format!("rev-{}", r.revision)>
                <strong>{format!("#{}", r.revision)}</strong>
                <span>{r.status.clone()}</span>
                <span class="muted">{format!("{} · app {}", r.chart_version, r.app_version)}</span>
                <span class="muted">{when}</span>
            </li>
        }
    }).collect_view();
    view! {
        <div class="app-head">
            <h1 data-testid="app-title">{a.name.clone()}</h1>
            <span class=format!("pill {}", health_class(h)) data-testid="health">{health_words(h)}</span>
        </div>
        <p class="muted">{format!("{place} · {} {} (app {}) · revision {} {}", a.chart, a.chart_version, a.app_version, a.revision, a.status)}</p>
        {on_cluster}
        {reasons}
        <h2>"Revisions"</h2>
        <ol class="timeline" data-testid="revisions">{timeline}</ol>
        <h2>{format!("Pods ({}/{total} ready)", a.ready_pods)}</h2>
        <table class="list" data-testid="pods">
            <thead><tr><th>"Pod"</th><th>"Status"</th><th>"Ready"</th><th>"Restarts"</th><th>"Image"</th></tr></thead>
            <tbody>{pods}</tbody>
        </table>
        <div class="columns">
            <section><h2>"Services"</h2><ul data-testid="services">{services}</ul></section>
            <section><h2>"Volumes"</h2><ul data-testid="volumes">{volumes}</ul></section>
            <section><h2>"Ingresses"</h2><ul data-testid="ingresses">{ingresses}</ul></section>
        </div>
    }
}
