//! Search from every page: the header's magnifier (or `/`) opens a field under it, each keystroke
//! asks the server's `search` (at the moment the page shows), the best hits drop down, and Enter
//! or a click opens the object's page (a cluster's own page for a cluster). A button, not a field
//! in the header: at 1440 px the header has no room left for one.

use leptos::prelude::*;
use leptos_router::hooks::use_navigate;

use crate::gql::{Search, search};
use crate::net;

/// How many hits the box shows.
const SHOWN: i64 = 8;

/// One hit as the box shows it.
#[derive(Clone, PartialEq)]
struct Shown {
    href: String,
    kind: String,
    name: String,
    place: String,
    matched: String,
}

fn shown(e: search::SearchSearchNodes) -> Shown {
    let n = e.node;
    let namespace = n.namespace.clone().unwrap_or_default();
    let href = if n.kind == "KubernetesCluster" {
        format!(
            "/clusters/{}/{}",
            js_sys::encode_uri_component(&namespace),
            js_sys::encode_uri_component(&n.name)
        )
    } else {
        format!("/objects/{}", js_sys::encode_uri_component(&n.id))
    };
    let place = match (namespace.is_empty(), n.datacenter.is_empty()) {
        (true, true) => String::new(),
        (false, true) => namespace,
        (true, false) => n.datacenter,
        (false, false) => format!("{namespace} · {}", n.datacenter),
    };
    let matched = match e.field {
        search::SearchField::NAME => String::new(),
        search::SearchField::NAMESPACE => "namespace".into(),
        search::SearchField::LABEL => format!("label {}", e.value),
        search::SearchField::IP_ADDRESS => format!("IP {}", e.value),
        search::SearchField::MAC_ADDRESS => format!("MAC {}", e.value),
        search::SearchField::HOST => format!("host {}", e.value),
        search::SearchField::IMAGE => format!("image {}", e.value),
        search::SearchField::CLUSTER_ID => format!("cluster id {}", e.value),
        search::SearchField::Other(_) => e.value,
    };
    Shown {
        href: net::past::href(&href),
        kind: n.kind,
        name: n.name,
        place,
        matched,
    }
}

/// Whether a key press is typed into a field (where `/` is a character, not a shortcut).
fn typing(ev: &web_sys::KeyboardEvent) -> bool {
    use wasm_bindgen::JsCast;
    ev.target()
        .and_then(|t| t.dyn_into::<web_sys::Element>().ok())
        .is_some_and(|el| {
            matches!(el.tag_name().as_str(), "INPUT" | "TEXTAREA" | "SELECT")
                || el.has_attribute("contenteditable")
        })
}

/// The magnifier and its panel.
#[component]
pub fn SearchBox() -> impl IntoView {
    let input = NodeRef::<leptos::html::Input>::new();
    let text = RwSignal::new(String::new());
    // The answer to the newest text only: an older answer arriving late is dropped.
    let asked = StoredValue::new(0u64);
    let hits = RwSignal::new(None::<Result<(Vec<Shown>, i64), String>>);
    let active = RwSignal::new(0usize);
    let open = RwSignal::new(false);
    Effect::new(move |_| {
        let t = text.get();
        let n = asked.get_value() + 1;
        asked.set_value(n);
        active.set(0);
        if t.trim().is_empty() {
            hits.set(None);
            return;
        }
        leptos::task::spawn_local(async move {
            let vars = search::Variables {
                text: t,
                first: SHOWN,
            };
            let got = net::query::<Search>(vars).await.map(|d| {
                let total = d.search.total_count;
                (d.search.nodes.into_iter().map(shown).collect(), total)
            });
            if asked.try_get_value() == Some(n) {
                let _ = hits.try_set(Some(got));
            }
        });
    });
    let handle = window_event_listener(leptos::ev::keydown, move |ev| {
        if ev.key() == "/" && !typing(&ev) && !ev.ctrl_key() && !ev.meta_key() {
            ev.prevent_default();
            open.set(true);
        }
    });
    on_cleanup(move || handle.remove());
    let navigate = use_navigate();
    let go = move |href: String| {
        open.set(false);
        text.set(String::new());
        navigate(&href, Default::default());
    };
    // The list is shown (and the field says so) while there is an answer.
    let listed = move || hits.with(|h| h.is_some());
    let count = move || {
        hits.with(|h| {
            h.as_ref()
                .and_then(|r| r.as_ref().ok())
                .map_or(0, |(v, _)| v.len())
        })
    };
    let keys = {
        let go = go.clone();
        move |ev: leptos::ev::KeyboardEvent| match ev.key().as_str() {
            "ArrowDown" => {
                ev.prevent_default();
                active.update(|a| *a = (*a + 1).min(count().saturating_sub(1)));
            }
            "ArrowUp" => {
                ev.prevent_default();
                active.update(|a| *a = a.saturating_sub(1));
            }
            "Enter" => {
                ev.prevent_default();
                let href = hits.with_untracked(|h| {
                    let (v, _) = h.as_ref()?.as_ref().ok()?;
                    v.get(active.get_untracked()).map(|s| s.href.clone())
                });
                if let Some(href) = href {
                    go(href);
                }
            }
            "Escape" => open.set(false),
            _ => {}
        }
    };
    let list = move || {
        let go = go.clone();
        hits.get().map(move |answer| match answer {
            Err(e) => view! { <p class="search-none" role="alert">{e}</p> }.into_any(),
            Ok((v, _)) if v.is_empty() => {
                view! { <p class="search-none" data-testid="search-none">"Nothing matches."</p> }.into_any()
            }
            Ok((v, total)) => {
                let more = (total > v.len() as i64).then(|| {
                    view! { <li class="search-more">{format!("{} more: type more to narrow", total - v.len() as i64)}</li> }
                });
                let rows = v
                    .into_iter()
                    .enumerate()
                    .map(|(i, s)| {
                        let go = go.clone();
                        let href = s.href.clone();
                        view! {
                            <li role="option" id=format!("search-hit-{i}")
                                aria-selected=move || (active.get() == i).to_string()
                                class:active=move || active.get() == i>
                                // Pressed, the box keeps its focus (its blur would close the list
                                // before the click arrives).
                                <a href=s.href.clone() data-testid="search-hit"
                                    on:mousedown=|ev| ev.prevent_default()
                                    on:click=move |ev| { ev.prevent_default(); go(href.clone()); }>
                                    <span class="search-kind">{s.kind}</span>
                                    <span class="search-name">{s.name}</span>
                                    <span class="search-place">{s.place}</span>
                                    <span class="search-matched">{s.matched}</span>
                                </a>
                            </li>
                        }
                    })
                    .collect_view();
                view! { <ul id="search-hits" role="listbox" aria-label="Search results">{rows}{more}</ul> }.into_any()
            }
        })
    };
    // Focused as soon as it is drawn (the panel opens with it).
    Effect::new(move |_| {
        if let Some(el) = input.get() {
            let _ = el.focus();
        }
    });
    view! {
        <div class="search" role="search">
            // Pressed while the panel is open, the field keeps its focus: the click closes it.
            <button class="theme" type="button" data-testid="search-open" aria-label="Search"
                title="Search everything: name, address, label, host, cluster id (/)"
                aria-expanded=move || open.get().to_string()
                on:mousedown=|ev| ev.prevent_default()
                on:click=move |_| open.update(|o| *o = !*o)>
                // A magnifier, drawn (not every system's fonts have one).
                <svg aria-hidden="true" viewBox="0 0 16 16" width="14" height="14" fill="none" stroke="currentColor" stroke-width="1.6">
                    <circle cx="6.8" cy="6.8" r="4.8"></circle><path d="M10.4 10.4L14.5 14.5"></path>
                </svg>
            </button>
            {move || open.get().then(|| view! {
                <div class="search-drop">
                    <input type="search" node_ref=input data-testid="search" placeholder="Name, address, label, host, cluster id"
                        role="combobox" aria-label="Search everything"
                        aria-autocomplete="list"
                        aria-expanded=move || listed().to_string()
                        aria-controls=move || listed().then_some("search-hits")
                        aria-activedescendant=move || (listed() && count() > 0).then(|| format!("search-hit-{}", active.get()))
                        prop:value=move || text.get_untracked()
                        on:input=move |ev| text.set(event_target_value(&ev))
                        on:blur=move |_| open.set(false)
                        on:keydown=keys.clone()/>
                    {list.clone()}
                </div>
            })}
        </div>
    }
}
