//! The dashboard's pages, and the pieces they share.

/// A page whose code is a WebAssembly module of its own, fetched when the page is first opened
/// (the first page load does not carry it): `$page`, the route's component, shows "Loading…"
/// until `$loader` has fetched `$view`, the page itself. A `Transition`, here and wherever a
/// view's code is loaded on demand: a `Suspense` shows its fallback again whenever a query read
/// inside it fetches again, so a list replaced itself with "Loading…" at every change and came
/// back as new elements (losing a selection, the scroll, a half-typed form).
macro_rules! on_demand {
    ($page:ident, $loader:ident, $view:ident) => {
        /// The page; its code is loaded when it is first opened (a separate WebAssembly module).
        #[component]
        pub fn $page() -> impl IntoView {
            view! {
                <Transition fallback=|| view! { <p class="empty">"Loading…"</p> }>
                    {move || Suspend::new(async move { $loader().await })}
                </Transition>
            }
        }

        #[leptos::lazy]
        fn $loader() -> AnyView {
            $view().into_any()
        }
    };
}

pub mod applications;
pub mod cluster;
pub mod clusters;
pub mod datacenters;
pub mod events;
pub mod hosts;
pub mod list;
pub mod machines;
pub mod networks;
pub mod new_cluster;
pub mod object;
pub mod operate;
pub mod overview;
pub mod past;
pub mod plan;
pub mod search;
pub mod topology;
pub mod vms;

use leptos::prelude::*;

use crate::gql::{DatacenterState, SourcesNow, sources_now};
use crate::net::{self, LinkState, Live};

/// Where a live query is: waiting for its first answer, failed (why), or answered.
#[derive(Clone, PartialEq)]
pub enum Loaded {
    Loading,
    Failed(String),
    Ready,
}

/// The state of `query`, changing only when the state does (not with every new answer). A view
/// that switches on it keeps its branch across answers, and the branch reads the answers itself:
/// a branch rebuilt on every answer left part of its reactive state behind each time (the app's
/// WebAssembly heap grew by ~5 KiB per answer on the overview; measured with
/// `e2e/web/heapprobe.mjs`).
pub fn loaded<T: 'static>(query: Live<T>) -> Memo<Loaded> {
    Memo::new(move |_| {
        query.with(|q| match q {
            None => Loaded::Loading,
            Some(Err(e)) => Loaded::Failed(e.clone()),
            Some(Ok(_)) => Loaded::Ready,
        })
    })
}

/// One overview number: a label, the value (`…` until the server has answered and has read every
/// kind from its sources, never a made-up or partial zero), a line under it and a colour class.
#[component]
pub fn Tile(
    label: &'static str,
    testid: &'static str,
    #[prop(into)] value: Signal<Option<String>>,
    #[prop(into)] sub: Signal<String>,
    #[prop(into)] class: Signal<&'static str>,
    #[prop(optional)] title: Option<Signal<String>>,
) -> impl IntoView {
    let sources = expect_context::<Sources>();
    let value = Signal::derive(move || if sources.synced() { value.get() } else { None });
    let sub = Signal::derive(move || {
        if sources.0.with(Option::is_none) {
            "waiting for the server".to_owned()
        } else if !sources.synced() {
            "syncing with the cluster".to_owned()
        } else {
            sub.get()
        }
    });
    view! {
        <div class=move || format!("tile {}", if value.with(Option::is_none) { "pending" } else { class.get() })
            aria-busy=move || value.with(Option::is_none).to_string()
            title=move || title.map(|t| t.get()).unwrap_or_default()>
            <div class="tile-label">{label}</div>
            <div class="tile-value" data-testid=testid>{move || value.get().unwrap_or_else(|| "…".into())}</div>
            <div class="tile-sub">{move || if value.with(Option::is_none) && sources.synced() { "waiting for the server".into() } else { sub.get() }}</div>
        </div>
    }
}

/// An error from the server, in words.
#[component]
pub fn Problem(#[prop(into)] text: String) -> impl IntoView {
    view! { <p class="problem" role="alert">{text}</p> }
}

/// What the server has read from its sources (kinds synced, stale), polled while the page is
/// open: the sync banner shows it, and the overview's tiles wait for it.
#[derive(Clone, Copy)]
pub struct Sources(RwSignal<Option<sources_now::ResponseData>>);

impl Sources {
    /// Start polling and provide the context (once, in the app's frame).
    pub fn provide(state: LinkState) {
        let sources = RwSignal::new(None::<sources_now::ResponseData>);
        let refresh = move || {
            leptos::task::spawn_local(async move {
                if let Ok(data) = net::query_now::<SourcesNow>(sources_now::Variables).await {
                    sources.set(Some(data));
                }
            });
        };
        Effect::new(move |_| {
            state.connections.track();
            refresh();
        });
        // Sources change with time alone (staleness); a short poll is the honest way to show it.
        if let Ok(handle) = set_interval_with_handle(refresh, std::time::Duration::from_secs(3)) {
            on_cleanup(move || handle.clear());
        }
        provide_context(Sources(sources));
    }

    /// True once the server has read every kind it serves (until then its numbers are partial).
    pub fn synced(self) -> bool {
        self.0.with(|d| d.as_ref().is_some_and(|d| d.sources.ready))
    }
}

impl Sources {
    /// The state of datacenter `key` (None until the server has said, or when it knows none).
    pub fn state_of(self, key: &str) -> Option<DatacenterState> {
        self.0.with(|d| {
            d.as_ref()?
                .datacenters
                .iter()
                .find(|x| x.key == key)
                .map(|x| x.state)
        })
    }

    /// `dc` names no datacenter the server knows (false while it has not said which it knows).
    pub fn unknown(self, dc: &str) -> bool {
        !dc.is_empty()
            && self.0.with(|d| {
                d.as_ref()
                    .is_some_and(|d| !d.datacenters.iter().any(|x| x.key == dc))
            })
    }
}

/// A datacenter in the URL (`?dc=`) that the server does not know: said, with the ones it knows,
/// in place of figures that would all be zero.
#[component]
pub fn DatacenterNotFound(dc: Memo<String>) -> impl IntoView {
    let sources = expect_context::<Sources>();
    let known = move || {
        sources.0.with(|d| {
            d.iter()
                .flat_map(|d| &d.datacenters)
                .map(|x| x.key.clone())
                .filter(|k| !k.is_empty())
                .collect::<Vec<_>>()
                .join(", ")
        })
    };
    view! {
        <p class="problem" role="alert" data-testid="dc-not-found">
            {move || format!("Datacenter \u{201c}{}\u{201d} not found. ", dc.get())}
            {move || { let k = known(); if k.is_empty() { String::new() } else { format!("Known: {k}.") } }}
        </p>
    }
}

/// The datacenter filter of a page that draws the whole fleet (the overview, the topology):
/// `dc` in the URL, chosen among the datacenters the server knows; shown when there are several
/// (or the URL names one).
#[component]
pub fn DatacenterPicker(url: list::UrlFilters, dc: Memo<String>) -> impl IntoView {
    let sources = expect_context::<Sources>();
    let keys = move || {
        sources.0.with(|d| {
            d.as_ref()
                // A single cluster's own datacenter has no key: "All datacenters" is it.
                .map(|d| {
                    d.datacenters
                        .iter()
                        .map(|x| x.key.clone())
                        .filter(|k| !k.is_empty())
                        .collect()
                })
                .unwrap_or_else(Vec::new)
        })
    };
    view! {
        <form class="filters" role="search" on:submit=|ev| ev.prevent_default()
            hidden=move || { keys().len() < 2 && dc.get().is_empty() }>
                <label>"Datacenter" <select data-testid="filter-dc" on:change=url.on("dc")>
                    <option value="" selected=move || dc.get().is_empty()>"All datacenters"</option>
                    {move || keys().into_iter().map(|k| {
                        let (chosen, label) = (k.clone(), k.clone());
                        view! { <option value=k selected=move || dc.get() == chosen>{label}</option> }
                    }).collect_view()}
                </select></label>
        </form>
    }
}

/// While the server is still syncing (or a kind went stale), what it has and has not read yet:
/// the numbers on the page are partial, and this says so.
#[component]
pub fn SyncBanner() -> impl IntoView {
    let sources = expect_context::<Sources>().0;
    move || {
        let data = sources.get()?;
        let s = data.sources;
        let stale: Vec<_> = s.kinds.iter().filter(|k| k.stale).collect();
        if s.ready && stale.is_empty() {
            return None;
        }
        let served: Vec<_> = s.kinds.iter().filter(|k| k.served != Some(false)).collect();
        let synced = served.iter().filter(|k| k.synced).count();
        let headline = if !stale.is_empty() {
            format!(
                "{} may be behind the cluster: the numbers below can be out of date.",
                stale
                    .iter()
                    .map(|k| k.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        } else {
            format!(
                "Syncing with the cluster: {synced} of {} kinds read. Numbers are partial until it finishes.",
                served.len()
            )
        };
        let kinds = served
            .iter()
            .map(|k| {
                let (class, state) = if k.stale {
                    (
                        "stale",
                        format!("stale {:.0} s", k.stale_seconds.unwrap_or(0.0)),
                    )
                } else if k.synced {
                    ("synced", format!("{} objects", k.objects))
                } else {
                    ("waiting", "listing…".into())
                };
                let title = k.error.clone().unwrap_or_default();
                view! { <li class=class title=title>{k.name.clone()}" "<span>{state}</span></li> }
            })
            .collect_view();
        Some(view! {
            <section class="sync" role="status" data-testid="sync">
                <p>{headline}</p>
                <progress max=served.len().to_string() value=synced.to_string()></progress>
                <ul>{kinds}</ul>
            </section>
        })
    }
}

/// Datacenters that are away (stale or unreachable): their objects are the last known, and the
/// page says so on every view, with their age.
#[component]
pub fn AwayBanner() -> impl IntoView {
    let sources = expect_context::<Sources>().0;
    move || {
        let away: Vec<String> = sources.with(|d| {
            d.iter()
                .flat_map(|d| &d.datacenters)
                .filter(|d| {
                    matches!(
                        d.state,
                        DatacenterState::Stale | DatacenterState::Unreachable
                    )
                })
                .map(|d| match d.age_seconds {
                    Some(age) => format!("{} ({age:.0} s old)", d.key),
                    None => format!("{} (never synced)", d.key),
                })
                .collect()
        });
        (!away.is_empty()).then(|| {
            view! {
                <p class="away-banner" role="status" data-testid="away">
                    "Not answering: "{away.join(", ")}". Their objects are shown as last known. "
                    <a href="/datacenters">"Datacenters"</a>
                </p>
            }
        })
    }
}

/// The value of a URL query parameter (empty when absent).
pub fn param(map: &leptos_router::params::ParamsMap, key: &str) -> String {
    map.get(key).unwrap_or_default()
}

/// A URL query string from pairs, leaving out empty values.
pub fn query_string(pairs: &[(&str, &str)]) -> String {
    let parts: Vec<String> = pairs
        .iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(k, v)| format!("{k}={}", js_sys::encode_uri_component(v)))
        .collect();
    if parts.is_empty() {
        String::new()
    } else {
        format!("?{}", parts.join("&"))
    }
}
