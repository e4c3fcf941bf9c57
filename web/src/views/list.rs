//! Lists: the windowed table (scrolling draws only the rows that come into view, and a new
//! answer redraws only the rows that changed), the one list page the machines, VMs, networks and
//! clusters share, and the filters it keeps in the URL.

use std::rc::Rc;
use std::sync::Arc;

use leptos::prelude::*;

use super::{Loaded, Problem, param, query_string};
use crate::keyed::keyed_items;
pub use crate::keyed::{Item, each, each_keyed};

/// Rows drawn at a time; the rest of a long list is empty space of the right height.
const WINDOW: usize = 60;
/// Every row's height (CSS keeps rows on one line).
const ROW_HEIGHT: f64 = 34.0;

/// The rows to draw for a list of `shown` rows scrolled to `scroll` pixels: from, to.
fn window(shown: usize, scroll: f64) -> (usize, usize) {
    let start = ((scroll / ROW_HEIGHT) as usize)
        .saturating_sub(10)
        .min(shown);
    (start, (start + WINDOW).min(shown))
}

/// A table that draws only the rows in view (and a margin around them): a list of thousands
/// scrolls like one of sixty. Rows are keyed by `key` and their content: scrolling adds and
/// removes rows at the edges, and a new answer redraws only the rows whose content changed.
pub fn windowed<T, V>(
    testid: &'static str,
    head: impl IntoView + 'static,
    rows: Memo<Option<(Vec<T>, i64)>>,
    key: fn(&T) -> String,
    row: fn(T) -> V,
) -> impl IntoView
where
    T: Clone + PartialEq + Send + Sync + 'static,
    V: IntoView + 'static,
{
    let scroll = RwSignal::new(0.0_f64);
    let span = Memo::new(move |_| {
        let shown = rows.with(|r| r.as_ref().map_or(0, |(r, _)| r.len()));
        (shown, window(shown, scroll.get()))
    });
    // Only the rows in the window are keyed: a row scrolled back into view is drawn anew.
    let visible = keyed_items(
        Arc::new(move || {
            let (_, (start, end)) = span.get();
            rows.with(|r| {
                r.as_ref()
                    .map(|(r, _)| r[start..end].to_vec())
                    .unwrap_or_default()
            })
        }),
        key,
        row,
    );
    let spacer = move |above: bool| {
        move || {
            let (shown, (start, end)) = span.get();
            let n = if above { start } else { shown - end };
            format!("height: {}px", n as f64 * ROW_HEIGHT)
        }
    };
    view! {
        <div class="scroller" on:scroll=move |ev| {
            let el: web_sys::Element = event_target(&ev);
            scroll.set(f64::from(el.scroll_top()));
        }>
            <table class="list" data-testid=testid>
                <thead><tr>{head}</tr></thead>
                <tbody>
                    <tr class="spacer" aria-hidden="true" style=spacer(true)></tr>
                    {each(visible)}
                    <tr class="spacer" aria-hidden="true" style=spacer(false)></tr>
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

/// Sorts `rows` by the URL's `sort` (`key` or `-key`) with `by` giving each key's sort value.
pub fn sort_rows<T>(rows: &mut [T], sort: &str, by: impl Fn(&str, &T) -> String) {
    let key = sort.trim_start_matches('-');
    let key = if key.is_empty() { "name" } else { key };
    rows.sort_by_cached_key(|r| by(key, r));
    if sort.starts_with('-') {
        rows.reverse();
    }
}

/// The server's order for a URL's `sort` (`name`, `-phase`, …) when the server can sort by it:
/// a list of 500 of many thousand objects is then the first 500 in that order, not the first
/// 500 by name sorted again here. `None` for a column only this page sorts (it sorts the rows
/// it has).
pub fn server_sort(sort: &str) -> Option<(crate::gql::SortField, crate::gql::SortDirection)> {
    use crate::gql::{SortDirection, SortField};
    let field = match sort.trim_start_matches('-') {
        "" | "name" => SortField::Name,
        "namespace" => SortField::Namespace,
        "phase" => SortField::Phase,
        _ => return None,
    };
    let direction = match sort.starts_with('-') {
        true => SortDirection::Desc,
        false => SortDirection::Asc,
    };
    Some((field, direction))
}

/// The filter's value, or None when it is empty (as a query's filter takes it).
pub fn given(value: Memo<String>) -> Option<String> {
    Some(value.get()).filter(|s| !s.is_empty())
}

/// A sort value: `first`, then the name (rows with the same `first` in name order).
pub fn then_name(first: Option<&str>, name: &str) -> String {
    format!("{}\u{0}{name}", first.unwrap_or_default())
}

/// The router's navigation, shared by a page's filter handlers.
type Navigate = Rc<dyn Fn(&str, leptos_router::NavigateOptions)>;

/// A list page's filters, kept in the URL: each a memo of its query parameter, and a setter
/// that writes one into the URL (typing in a search box replaces the history entry; choosing a
/// filter adds one, so back and forward walk the filters).
#[derive(Clone)]
pub struct UrlFilters {
    path: &'static str,
    keys: Rc<[&'static str]>,
    query: Memo<leptos_router::params::ParamsMap>,
    navigate: Navigate,
}

impl UrlFilters {
    /// The filters of the page at `path`, named `keys`.
    pub fn new(path: &'static str, keys: impl IntoIterator<Item = &'static str>) -> Self {
        let navigate = leptos_router::hooks::use_navigate();
        UrlFilters {
            path,
            keys: keys.into_iter().collect(),
            query: leptos_router::hooks::use_query_map(),
            navigate: Rc::new(move |url, options| navigate(url, options)),
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

    /// One filter's label and input, written into the URL.
    fn input(&self, filter: &'static Filter) -> AnyView {
        let value = self.get(filter.key);
        let testid = format!("filter-{}", filter.key);
        match filter.input {
            Input::Search(placeholder) => view! {
                <label>{filter.label}" "<input type="search" prop:value=value on:input=self.on(filter.key)
                    placeholder=placeholder data-testid=testid/></label>
            }
            .into_any(),
            Input::Text(placeholder) => view! {
                <label>{filter.label}" "<input type="text" prop:value=value on:change=self.on(filter.key)
                    placeholder=placeholder data-testid=testid/></label>
            }
            .into_any(),
            Input::Choice(choices) => {
                let options = choices()
                    .into_iter()
                    .map(|(wire, words)| {
                        view! { <option value=wire selected=move || value.get() == wire>{words}</option> }
                    })
                    .collect_view();
                view! {
                    <label>{filter.label}
                        <select on:change=self.on(filter.key) prop:value=value data-testid=testid>
                            <option value="">"Any"</option>
                            {options}
                        </select>
                    </label>
                }
                .into_any()
            }
        }
    }

    /// The page's filter form.
    pub fn form(&self, filters: &'static [Filter]) -> impl IntoView + use<> {
        let inputs = filters.iter().map(|f| self.input(f)).collect_view();
        view! { <form class="filters" role="search" on:submit=|ev| ev.prevent_default()>{inputs}</form> }
    }
}

/// How a filter is entered.
pub enum Input {
    /// A search box, applied as one types (placeholder).
    Search(&'static str),
    /// A text field, applied when it changes (placeholder).
    Text(&'static str),
    /// A choice among (value, words).
    Choice(fn() -> Vec<(&'static str, &'static str)>),
}

/// One filter of a list page: its URL parameter (and `filter-KEY` test id), label and input.
pub struct Filter {
    pub key: &'static str,
    pub label: &'static str,
    pub input: Input,
}

impl Filter {
    /// A text filter on `key`, applied when it changes.
    pub const fn text(key: &'static str, label: &'static str) -> Filter {
        Filter {
            key,
            label,
            input: Input::Text(""),
        }
    }
}

/// The search box every list page has (by name).
pub const SEARCH: Filter = Filter {
    key: "q",
    label: "Search",
    input: Input::Search("name"),
};
/// The namespace filter every list page has.
pub const NAMESPACE: Filter = Filter::text("ns", "Namespace");
/// The phase filter every list page has.
pub const PHASE: Filter = Filter::text("phase", "Phase");
/// The datacenter filter every list page has (`dc`, as the old page's `?dc=`).
pub const DATACENTER: Filter = Filter::text("dc", "Datacenter");

/// What a list page is: its title, URL, filters, columns and words.
pub struct ListSpec {
    pub title: &'static str,
    pub path: &'static str,
    /// The table's test id; the count line's is `COUNT-count`.
    pub testid: &'static str,
    pub count: &'static str,
    /// Plural noun of the count line (`machines`).
    pub noun: &'static str,
    /// While the first answer is on its way.
    pub loading: &'static str,
    pub filters: &'static [Filter],
    /// (header, the `sort` key it sorts by, if it does).
    pub columns: &'static [(&'static str, Option<&'static str>)],
}

impl ListSpec {
    /// The page's URL filters (and its `sort`).
    pub fn url(&'static self) -> UrlFilters {
        UrlFilters::new(
            self.path,
            self.filters.iter().map(|f| f.key).chain(["sort"]),
        )
    }
}

/// A list page: title, filters, the query's state, "N of TOTAL", then the windowed table.
/// `rows` holds the filtered, sorted rows and the total before filtering; `extra` goes between
/// the count and the table, `intro` under the title.
#[component]
pub fn ListPage<T, V>(
    spec: &'static ListSpec,
    url: UrlFilters,
    state: Memo<Loaded>,
    rows: Memo<Option<(Vec<T>, i64)>>,
    key: fn(&T) -> String,
    row: fn(T) -> V,
    #[prop(optional, into)] intro: ViewFn,
    #[prop(optional, into)] extra: ViewFn,
) -> impl IntoView
where
    T: Clone + PartialEq + Send + Sync + 'static,
    V: IntoView + 'static,
{
    let head = spec
        .columns
        .iter()
        .map(|(label, sort)| match sort {
            Some(key) => url.header(key, label).into_any(),
            None => view! { <th>{*label}</th> }.into_any(),
        })
        .collect_view();
    view! {
        <h1>{spec.title}</h1>
        {intro.run()}
        {url.form(spec.filters)}
        {move || match state.get() {
            Loaded::Failed(e) => Some(view! { <Problem text=e/> }.into_any()),
            Loaded::Loading => Some(view! { <p class="empty">{spec.loading}</p> }.into_any()),
            Loaded::Ready => None,
        }}
        <p class="count" data-testid=format!("{}-count", spec.count)>
            {move || rows.with(|r| r.as_ref().map(|(rows, total)| format!("{} of {total} {}", rows.len(), spec.noun)))}
        </p>
        {extra.run()}
        {windowed(spec.testid, head, rows, key, row)}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_window_follows_the_scroll() {
        assert_eq!(window(5, 0.0), (0, 5));
        assert_eq!(window(1000, 0.0), (0, WINDOW));
        // 20 rows down: drawn from 10 rows above the first visible one.
        assert_eq!(window(1000, 20.0 * ROW_HEIGHT), (10, 10 + WINDOW));
        assert_eq!(window(3, 5000.0), (3, 3));
    }

    #[test]
    fn headers_sort_ascending_then_descending() {
        assert_eq!(sort_state("", "name"), "ascending");
        assert_eq!(next_sort("", "name"), "-name");
        assert_eq!(next_sort("-phase", "phase"), "phase");
        let mut rows = vec!["b", "a", "c"];
        sort_rows(&mut rows, "-name", |_, r| r.to_string());
        assert_eq!(rows, ["c", "b", "a"]);
    }
}
