//! The dashboard's pages, and the pieces they share.

pub mod cluster;
pub mod clusters;
pub mod events;
pub mod hosts;
pub mod machines;
pub mod networks;
pub mod new_cluster;
pub mod object;
pub mod operate;
pub mod overview;
pub mod topology;
pub mod vms;

use leptos::prelude::*;

use crate::gql::{SourcesNow, sources_now};
use crate::net::{self, LinkState};

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
pub fn loaded<T: Send + Sync + 'static>(
    query: RwSignal<Option<Result<T, String>>>,
) -> Memo<Loaded> {
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
                if let Ok(data) = net::query::<SourcesNow>(sources_now::Variables).await {
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

/// Rows drawn at a time; the rest of a long list is empty space of the right height.
const WINDOW: usize = 60;
/// Every row's height (CSS keeps rows on one line).
const ROW_HEIGHT: f64 = 34.0;

/// A table that draws only the rows in view (and a margin around them): a list of thousands
/// scrolls like one of sixty. `rows` holds the filtered, sorted rows and the total before filtering.
pub fn windowed<T, V>(
    testid: &'static str,
    head: impl IntoView + 'static,
    rows: Memo<Option<(Vec<T>, i64)>>,
    row: fn(&T) -> V,
) -> impl IntoView
where
    T: Send + Sync + 'static,
    V: IntoView + 'static,
{
    let scroll = RwSignal::new(0.0_f64);
    view! {
        <div class="scroller" on:scroll=move |ev| {
            let el: web_sys::Element = event_target(&ev);
            scroll.set(f64::from(el.scroll_top()));
        }>
            <table class="list" data-testid=testid>
                <thead><tr>{head}</tr></thead>
                <tbody>
                    {move || rows.with(|r| {
                        let rows = r.as_ref().map(|(rows, _)| rows.as_slice()).unwrap_or_default();
                        let shown = rows.len();
                        let start = ((scroll.get() / ROW_HEIGHT) as usize).saturating_sub(10).min(shown);
                        let end = (start + WINDOW).min(shown);
                        let above = start as f64 * ROW_HEIGHT;
                        let below = (shown - end) as f64 * ROW_HEIGHT;
                        view! {
                            <tr class="spacer" aria-hidden="true" style=format!("height: {above}px")></tr>
                            {rows[start..end].iter().map(row).collect_view()}
                            <tr class="spacer" aria-hidden="true" style=format!("height: {below}px")></tr>
                        }
                    })}
                </tbody>
            </table>
        </div>
    }
}

/// `aria-sort` of a column header for the URL's `sort` (`key` ascending, `-key` descending; no
/// sort means by name).
pub fn sort_state(sort: &str, key: &str) -> &'static str {
    if sort == key || (key == "name" && sort.is_empty()) {
        "ascending"
    } else if sort.strip_prefix('-') == Some(key) {
        "descending"
    } else {
        "none"
    }
}

/// The `sort` after a click on `key`'s header: ascending first, then descending.
pub fn next_sort(sort: &str, key: &str) -> String {
    if sort_state(sort, key) == "ascending" {
        format!("-{key}")
    } else {
        key.to_owned()
    }
}

/// The router's navigation, shared by a page's filter handlers.
type Navigate = std::rc::Rc<dyn Fn(&str, leptos_router::NavigateOptions)>;

/// A list page's filters, kept in the URL: each a memo of its query parameter, and a setter
/// that writes one into the URL (typing in a search box replaces the history entry; choosing a
/// filter adds one, so back and forward walk the filters).
#[derive(Clone)]
pub struct UrlFilters {
    path: &'static str,
    keys: &'static [&'static str],
    query: Memo<leptos_router::params::ParamsMap>,
    navigate: Navigate,
}

impl UrlFilters {
    /// The filters of the page at `path`, named `keys`.
    pub fn new(path: &'static str, keys: &'static [&'static str]) -> Self {
        let navigate = leptos_router::hooks::use_navigate();
        UrlFilters {
            path,
            keys,
            query: leptos_router::hooks::use_query_map(),
            navigate: std::rc::Rc::new(move |url, options| navigate(url, options)),
        }
    }

    /// The value of `key` (empty when absent).
    pub fn get(&self, key: &'static str) -> Memo<String> {
        let query = self.query;
        Memo::new(move |_| param(&query.read(), key))
    }

    /// Writes `key` into the URL.
    pub fn set(&self, key: &'static str, value: String) {
        let query = self.query.read_untracked();
        let values: Vec<(&str, String)> = self
            .keys
            .iter()
            .map(|k| {
                (
                    *k,
                    if *k == key {
                        value.clone()
                    } else {
                        param(&query, k)
                    },
                )
            })
            .collect();
        let pairs: Vec<(&str, &str)> = values.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let options = leptos_router::NavigateOptions {
            replace: key == "q",
            ..Default::default()
        };
        (self.navigate)(&format!("{}{}", self.path, query_string(&pairs)), options);
    }

    /// An input handler that writes the input's value into `key`.
    pub fn on(&self, key: &'static str) -> impl Fn(leptos::ev::Event) + use<> {
        let this = self.clone();
        move |ev| this.set(key, event_target_value(&ev))
    }

    /// A sortable column header for `key`.
    pub fn header(&self, key: &'static str, label: &'static str) -> impl IntoView + use<> {
        let sort = self.get("sort");
        let this = self.clone();
        view! {
            <th aria-sort=move || sort_state(&sort.get(), key)>
                <button type="button" on:click=move |_| this.set("sort", next_sort(&sort.get_untracked(), key))>{label}</button>
            </th>
        }
    }
}

/// Sorts `rows` by the URL's `sort` (`key` or `-key`) with `by` giving each key's sort value.
pub fn sort_rows<T>(rows: &mut [T], sort: &str, by: impl Fn(&str, &T) -> String) {
    let key = sort.trim_start_matches('-');
    let key = if key.is_empty() { "name" } else { key };
    rows.sort_by_cached_key(|r| by(key, r));
    if sort.starts_with('-') {
        rows.reverse();
    }
}
