//! The past: the banner that says the page shows a past moment, the time control (a slider over
//! the moments the history keeps, a date and time field, "Live", "What changed"), the `?at=` the
//! address keeps while the page shows the past, and the page of what changed between two
//! moments. The control and that page are loaded when first shown (separate WebAssembly modules).

use leptos::prelude::*;
use leptos_router::hooks::{use_location, use_navigate, use_query_map};

use super::Problem;
use crate::format::{clock, iso, local_input, ms_of, plural};
use crate::gql::{GraphChanges, OldestMoment, graph_changes, oldest_moment};
use crate::net::{self, past};

/// Loads this page at moment `at` (None: the present), its other parameters kept: every view is
/// drawn anew for the moment.
fn go(at: Option<f64>) {
    let Some(location) = web_sys::window().map(|w| w.location()) else {
        return;
    };
    let path = location.pathname().unwrap_or_default();
    let search = location.search().unwrap_or_default();
    let mut params: Vec<String> = search
        .trim_start_matches('?')
        .split('&')
        .filter(|p| !p.is_empty() && !p.starts_with("at="))
        .map(str::to_owned)
        .collect();
    if let Some(ms) = at {
        params.push(format!("at={}", js_sys::encode_uri_component(&iso(ms))));
    }
    let url = if params.is_empty() {
        path
    } else {
        format!("{path}?{}", params.join("&"))
    };
    let _ = location.assign(&url);
}

/// The header's button that opens the time control.
#[component]
pub fn HistoryButton(open: RwSignal<bool>) -> impl IntoView {
    view! {
        <button class="theme" type="button" data-testid="history" aria-expanded=move || open.get().to_string()
            aria-label="Past moments" title="Show the fleet as it was at a past moment"
            on:click=move |_| open.update(|o| *o = !*o)>
            // A clock, drawn (not every system's fonts have one).
            <svg aria-hidden="true" viewBox="0 0 16 16" width="14" height="14" fill="none" stroke="currentColor" stroke-width="1.6">
                <circle cx="8" cy="8" r="6.6"></circle><path d="M8 4.2V8l2.6 1.7"></path>
            </svg>
        </button>
    }
}

/// Under the header: at a past moment, the banner that says so (and the way back); the time
/// control when it is open.
#[component]
pub fn TimeBar(open: RwSignal<bool>) -> impl IntoView {
    let banner = past::at().map(|at| {
        let shown = ms_of(&at).map(|ms| format!("{} {}", &local_input(ms)[..10], clock(ms)));
        let text = shown.unwrap_or_else(|| at.clone());
        view! {
            <p class="past-banner" role="status" data-testid="past">
                "Not live: the fleet as it was at "
                <time datetime=at.clone() data-testid="past-moment">{text}</time>
                ". Nothing on this page changes until you return to the present. "
                <a href="/" rel="external" data-testid="back-live" on:click=|ev| { ev.prevent_default(); go(None) }>"Back to live"</a>
            </p>
        }
    });
    view! {
        {banner}
        <KeepMoment/>
        <Show when=move || open.get()>
            <Transition fallback=|| view! { <p class="empty">"Loading the time control…"</p> }>
                {move || Suspend::new(async move { controls().await })}
            </Transition>
        </Show>
    }
}

/// While the page shows the past, its address keeps `?at=` on every page it goes to: a link
/// copied from the address bar, or opened in a new tab, opens the same moment.
#[component]
fn KeepMoment() -> impl IntoView {
    if past::at().is_none() {
        return;
    }
    // A link: its address gets the moment as it is pressed, before the router reads it (the
    // router writes the address bar only once the new page is ready).
    let on_press = wasm_bindgen::closure::Closure::<dyn Fn(web_sys::Event)>::new(moment_in_link);
    if let Some(document) = web_sys::window().and_then(|w| w.document()) {
        use wasm_bindgen::JsCast;
        for event in ["mousedown", "click"] {
            let _ = document.add_event_listener_with_callback_and_bool(
                event,
                on_press.as_ref().unchecked_ref(),
                true,
            );
        }
    }
    // Once for the page's life (the frame is never unmounted).
    on_press.forget();
    // A filter or another page the router went to without a link.
    let location = use_location();
    Effect::new(move |_| {
        location.pathname.track();
        location.search.track();
        set_timeout(add_moment, std::time::Duration::ZERO);
    });
}

/// The link pressed (`event`'s target or an ancestor), on this site and without a moment, gets
/// the page's.
fn moment_in_link(event: web_sys::Event) {
    use wasm_bindgen::JsCast;
    let Some(link) = event
        .target()
        .and_then(|t| t.dyn_into::<web_sys::Element>().ok())
        .and_then(|e| e.closest("a[href]").ok().flatten())
    else {
        return;
    };
    if link.get_attribute("rel").as_deref() == Some("external") {
        return;
    }
    if let Some(href) = link.get_attribute("href")
        && href.starts_with('/')
        && !href.starts_with("//")
        && !href.contains("at=")
    {
        let _ = link.set_attribute("href", &past::href(&href));
    }
}

/// The page's address with the moment added, when it lacks it.
fn add_moment() {
    let Some(window) = web_sys::window() else {
        return;
    };
    let location = window.location();
    let (path, search) = (
        location.pathname().unwrap_or_default(),
        location.search().unwrap_or_default(),
    );
    let search = search.trim_start_matches('?');
    if search.split('&').any(|p| p.starts_with("at=")) {
        return;
    }
    let url = past::href(&if search.is_empty() {
        path
    } else {
        format!("{path}?{search}")
    });
    if let Ok(history) = window.history() {
        let _ = history.replace_state_with_url(&wasm_bindgen::JsValue::NULL, "", Some(&url));
    }
}

#[leptos::lazy]
fn controls() -> AnyView {
    view! { <Controls/> }.into_any()
}

/// The time control: a slider from the oldest moment the history keeps to now, the moment as a
/// local date and time, "Show", "Live" and a link to what changed in the hour before it.
#[component]
fn Controls() -> impl IntoView {
    let oldest = RwSignal::new(None::<Result<Option<String>, String>>);
    leptos::task::spawn_local(async move {
        let answer = net::query_now::<OldestMoment>(oldest_moment::Variables).await;
        let _ = oldest.try_set(Some(answer.map(|d| d.oldest_moment)));
    });
    let now = net::now_ms();
    let shown = past::at().as_deref().and_then(ms_of).unwrap_or(now);
    let picked = RwSignal::new(shown);
    let slider = move || match oldest.get() {
        None => view! { <span class="small">"Reading the history…"</span> }.into_any(),
        Some(Err(e)) => view! { <Problem text=e/> }.into_any(),
        Some(Ok(None)) => {
            view! { <span class="small">"The history keeps no past moment yet."</span> }.into_any()
        }
        Some(Ok(Some(first))) => {
            let min = ms_of(&first).unwrap_or(now).floor();
            view! {
                <input type="range" min=min.to_string() max=now.floor().to_string() step="1000"
                    aria-label="Moment (oldest kept to now)" data-testid="moment-slider"
                    prop:value=move || picked.get().floor().to_string()
                    on:input=move |ev| picked.set(event_target_value(&ev).parse().unwrap_or(now))
                    on:change=move |_| go(Some(picked.get_untracked()))/>
                <span class="small" data-testid="oldest">"kept since "{local_input(min).replace('T', " ")}</span>
            }
            .into_any()
        }
    };
    let changed = move || {
        let to = picked.get();
        changes_href(to - 3_600_000.0, to)
    };
    view! {
        <form class="filters timebar" role="group" aria-label="The moment shown" data-testid="timebar"
            on:submit=move |ev| { ev.prevent_default(); go(Some(picked.get_untracked())) }>
            {slider}
            <label>"Moment "{moment_field(picked, "moment")}</label>
            <button type="submit" data-testid="show-moment">"Show"</button>
            <button type="button" data-testid="live" on:click=|_| go(None)>"Live"</button>
            <a href=changed data-testid="what-changed">"What changed in the hour before"</a>
        </form>
    }
}

on_demand!(Changes, changes_page, ChangesPage);

type Changed = graph_changes::GraphChangesChanges;
type Object = graph_changes::GraphChangesChangesObjects;

/// What changed between two moments (`?from=&to=`, RFC 3339; an hour ago to now by default).
#[component]
fn ChangesPage() -> impl IntoView {
    let query = use_query_map();
    let now = net::now_ms();
    let moments = Memo::new(move |_| {
        let q = query.read();
        let to = q.get("to").as_deref().and_then(ms_of).unwrap_or(now);
        let from = q
            .get("from")
            .as_deref()
            .and_then(ms_of)
            .unwrap_or(to - 3_600_000.0);
        (from, to)
    });
    let (from_in, to_in) = (RwSignal::new(0.0), RwSignal::new(0.0));
    let answer = RwSignal::new(None::<Result<Changed, String>>);
    Effect::new(move |_| {
        let (from, to) = moments.get();
        from_in.set(from);
        to_in.set(to);
        answer.set(None);
        leptos::task::spawn_local(async move {
            let vars = graph_changes::Variables {
                from: iso(from),
                to: iso(to),
                first: Some(500),
            };
            let got = net::query_now::<GraphChanges>(vars).await;
            let _ = answer.try_set(Some(got.map(|d| d.changes)));
        });
    });
    let navigate = use_navigate();
    let compare = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        navigate(
            &changes_href(from_in.get_untracked(), to_in.get_untracked()),
            Default::default(),
        );
    };
    view! {
        <h1>"What changed"</h1>
        <form class="filters" role="search" on:submit=compare>
            <label>"From "{moment_field(from_in, "changes-from")}</label>
            <label>"To "{moment_field(to_in, "changes-to")}</label>
            <button type="submit" data-testid="compare">"Compare"</button>
        </form>
        {move || match answer.get() {
            None => view! { <p class="empty">"Comparing the two moments…"</p> }.into_any(),
            Some(Err(e)) => view! { <Problem text=e/> }.into_any(),
            Some(Ok(c)) => listed(c).into_any(),
        }}
    }
}

/// The page of what changed between two moments (ms).
fn changes_href(from: f64, to: f64) -> String {
    format!(
        "/changes?from={}&to={}",
        js_sys::encode_uri_component(&iso(from)),
        js_sys::encode_uri_component(&iso(to))
    )
}

/// A moment as a local date and time field (seconds), kept in `signal` (ms).
fn moment_field(signal: RwSignal<f64>, testid: &'static str) -> impl IntoView {
    view! {
        <input type="datetime-local" step="1" data-testid=testid prop:value=move || local_input(signal.get())
            on:change=move |ev| if let Some(ms) = ms_of(&event_target_value(&ev)) { signal.set(ms) }/>
    }
}

/// The counts per datacenter and the objects that differ, field by field.
fn listed(c: Changed) -> impl IntoView {
    let per = c
        .datacenters
        .iter()
        .map(|d| {
            let counts = format!(
                "{} added, {} removed, {} changed",
                d.added, d.removed, d.changed
            );
            if d.datacenter.is_empty() {
                counts
            } else {
                format!("{}: {counts}", d.datacenter)
            }
        })
        .collect::<Vec<_>>()
        .join("; ");
    let listed = c.objects.len() as i64;
    let more = if c.total_count > listed {
        format!(" (the first {listed} listed)")
    } else {
        String::new()
    };
    let rows = c.objects.into_iter().map(|o| row(o, &c.to)).collect_view();
    view! {
        <p class="explain" data-testid="changes-summary">
            {format!("{} differ{more}", plural(c.total_count, "object", "objects"))}{(!per.is_empty()).then(|| format!(": {per}."))}
        </p>
        <table class="list" data-testid="changes">
            <thead><tr><th>"Change"</th><th>"Datacenter"</th><th>"Kind"</th><th>"Object"</th><th>"Phase"</th><th>"Fields"</th></tr></thead>
            <tbody>{rows}</tbody>
        </table>
    }
}

/// One object that differs; a cluster links to its page as it was at the later moment.
fn row(o: Object, to: &str) -> AnyView {
    use graph_changes::ObjectChangeType as T;
    let (class, change) = match o.change {
        T::ADDED => ("ready", "added"),
        T::REMOVED => ("failed", "removed"),
        _ => ("progress", "changed"),
    };
    let title = if o.namespace.is_empty() {
        o.name.clone()
    } else {
        format!("{}/{}", o.namespace, o.name)
    };
    let object = if o.kind == "KubernetesCluster" && !matches!(o.change, T::REMOVED) {
        let href = format!(
            "/clusters/{}/{}?at={}",
            o.namespace,
            o.name,
            js_sys::encode_uri_component(to)
        );
        view! { <a href=href rel="external">{title}</a> }.into_any()
    } else {
        title.into_any()
    };
    let phase = match (o.phase_before, o.phase_after) {
        (Some(a), Some(b)) if a != b => format!("{a} \u{2192} {b}"),
        (a, b) => b.or(a).unwrap_or_default(),
    };
    let short = |v: &serde_json::Value| {
        let t = v.to_string();
        if t.chars().count() > 60 {
            format!("{}\u{2026}", t.chars().take(59).collect::<String>())
        } else {
            t
        }
    };
    let fields = o
        .fields
        .iter()
        .map(|f| {
            let text = format!(" {} \u{2192} {}", short(&f.before), short(&f.after));
            view! { <li><code>{f.path.clone()}</code>{text}</li> }
        })
        .collect_view();
    view! {
        <tr data-testid="change">
            <td><span class=format!("pill {class}")>{change}</span></td>
            <td>{o.datacenter}</td>
            <td>{o.kind}</td>
            <td>{object}</td>
            <td>{phase}</td>
            <td><ul class="fields">{fields}</ul></td>
        </tr>
    }
    .into_any()
}
