//! Charts drawn as SVG by the view code itself: no chart library, no canvas, so every bar is in
//! the DOM (hover text, keyboard focus, readable by tests and screen readers).

use leptos::prelude::*;

use crate::keyed::{Item, each, keyed};

/// One bar of a stacked bar chart: a name, the used part and the limit.
#[derive(Clone, Debug, PartialEq)]
pub struct Bar {
    pub name: String,
    pub used: f64,
    pub limit: f64,
    /// Where a click on the bar goes.
    pub href: String,
}

const HEIGHT: f64 = 180.0;
const LABEL: f64 = 46.0;
/// Room on the left for the first bar's slanted label.
const MARGIN: f64 = 40.0;

/// Used and available per bar, stacked (the old page's "Node Resource Allocation" charts),
/// drawn to scale against the largest limit; `unit` formats a value for the hover text. Bars are
/// keyed by their place and content: an answer redraws only the bars that moved.
#[component]
pub fn StackedBars(
    title: &'static str,
    #[prop(into)] bars: Signal<Vec<Bar>>,
    unit: fn(f64) -> String,
    used_label: &'static str,
    testid: &'static str,
) -> impl IntoView {
    let view_box = move || {
        let n = bars.with(Vec::len).max(1) as f64;
        format!("0 0 {} {}", (n * 36.0).max(360.0) + MARGIN, HEIGHT + LABEL)
    };
    // Each bar placed: its index, the scale and the step are part of what it draws.
    let drawn = keyed(
        move || {
            let bars = bars.get();
            let scale = bars
                .iter()
                .map(|b| b.limit.max(b.used))
                .fold(0.0, f64::max)
                .max(1.0);
            let step = 36.0_f64.max(360.0 / bars.len().max(1) as f64);
            bars.into_iter()
                .enumerate()
                .map(|(i, bar)| Placed {
                    i,
                    scale,
                    step,
                    bar,
                })
                .collect::<Vec<_>>()
        },
        |p| format!("{}/{}", p.i, p.bar.name),
    );
    view! {
        <figure class="chart" data-testid=testid>
            <figcaption>{title}</figcaption>
            <svg viewBox=view_box preserveAspectRatio="xMinYMin meet" role="group" aria-label=title>
                <g transform=format!("translate({MARGIN} 0)")>
                    <line class="baseline" x1="0" x2="100%" y1=HEIGHT y2=HEIGHT></line>
                    {each(move || drawn().iter().map(|p| {
                        let bar = p.row.clone();
                        Item::new(p.key.clone(), p.version, move || stacked_bar(bar, unit, used_label))
                    }).collect())}
                </g>
            </svg>
            <div class="legend">
                <span class="key used"></span>{used_label}
                <span class="key free"></span>"available"
            </div>
        </figure>
    }
}

/// A bar where it is drawn.
#[derive(Clone, PartialEq)]
struct Placed {
    i: usize,
    scale: f64,
    step: f64,
    bar: Bar,
}

fn stacked_bar(p: Placed, unit: fn(f64) -> String, used_label: &'static str) -> impl IntoView {
    let Placed {
        i,
        scale,
        step,
        bar,
    } = p;
    let x = i as f64 * step + step * 0.15;
    let width = step * 0.7;
    let used_h = bar.used / scale * HEIGHT;
    let free_h = (bar.limit - bar.used).max(0.0) / scale * HEIGHT;
    let over = bar.used > bar.limit;
    let hover = format!(
        "{}: {} of {} {}",
        bar.name,
        unit(bar.used),
        unit(bar.limit),
        used_label
    );
    let label = short(&bar.name);
    let label_x = x + width / 2.0;
    let aria = hover.clone();
    let (click, key) = opens(bar.href);
    view! {
        <g class="bar" role="link" tabindex="0" aria-label=aria on:click=click on:keydown=key>
            <title>{hover}</title>
            <rect class="free" x=x y=HEIGHT - used_h - free_h width=width height=free_h></rect>
            <rect class=if over { "used over" } else { "used" } x=x y=HEIGHT - used_h width=width height=used_h></rect>
            <text class="axis" x=label_x y=HEIGHT + 14.0 text-anchor="end"
                transform=format!("rotate(-35 {label_x} {})", HEIGHT + 14.0)>{label}</text>
        </g>
    }
}

/// Handlers that make an SVG group behave as a link: click, Enter or Space open `href` in the
/// app. (The view macro creates `<a>` in the HTML namespace, which SVG does not draw.)
pub fn opens(
    href: String,
) -> (
    impl Fn(leptos::ev::MouseEvent) + 'static,
    impl Fn(leptos::ev::KeyboardEvent) + 'static,
) {
    let navigate = leptos_router::hooks::use_navigate();
    let go = std::rc::Rc::new(move || navigate(&href, Default::default()));
    let on_key = go.clone();
    (
        move |_| go(),
        move |ev: leptos::ev::KeyboardEvent| {
            if ev.key() == "Enter" || ev.key() == " " {
                ev.prevent_default();
                on_key();
            }
        },
    )
}

/// The last two `-`-separated parts of a name (the old page's `shortName`).
pub fn short(name: &str) -> String {
    let parts: Vec<&str> = name.split('-').collect();
    if parts.len() <= 2 {
        name.to_owned()
    } else {
        parts[parts.len() - 2..].join("-")
    }
}

/// One row of a [`CountBars`] chart.
#[derive(Clone, PartialEq)]
pub struct CountRow {
    pub label: &'static str,
    pub count: i64,
    /// Where the row links to.
    pub href: String,
    /// The bar's colour class.
    pub class: &'static str,
}

/// Horizontal bars: one row per labelled count, each a link; keyed by row and bar.
#[component]
pub fn CountBars(#[prop(into)] rows: Signal<Vec<CountRow>>, testid: &'static str) -> impl IntoView {
    view! {
        <ul class="countbars" data-testid=testid>
            {each(move || rows.with(|rows| {
                let max = rows.iter().map(|r| r.count).max().unwrap_or(0).max(1);
                rows.iter().map(|r| {
                    let r = r.clone();
                    let width = format!("width: {:.1}%", r.count as f64 / max as f64 * 100.0);
                    // Keyed by row, drawn again when its bar changes (its count or the longest).
                    let key = format!("{}/{}/{}", r.label, r.count, width);
                    Item::new(key, 0, move || view! {
                        <li>
                            <a href=r.href>
                                <span class="label">{r.label}</span>
                                <span class="track"><span class=format!("fill {}", r.class) style=width></span></span>
                                <span class="count">{r.count}</span>
                            </a>
                        </li>
                    })
                }).collect()
            }))}
        </ul>
    }
}

/// Milliseconds since the epoch of an RFC 3339 time (the browser parses it).
pub(crate) fn epoch_ms(rfc3339: &str) -> f64 {
    js_sys::Date::parse(rfc3339)
}

/// One phase of a [`Timeline`]: its name, since when, until when (None: still in it) and what it
/// means.
#[derive(Clone, PartialEq)]
pub struct Span {
    pub phase: String,
    pub since: String,
    pub until: Option<String>,
    pub state: crate::gql::PhaseState,
}

/// Phases over time as one horizontal band (the last one runs to now), with the phase names and
/// the start and end times; hover a span for its phase and how long it lasted.
#[component]
pub fn Timeline(#[prop(into)] spans: Signal<Vec<Span>>, testid: &'static str) -> impl IntoView {
    const W: f64 = 1000.0;
    view! {
        <figure class="chart timeline" data-testid=testid>
            {move || {
                let spans = spans.get();
                if spans.is_empty() {
                    return view! { <p class="empty">"No phase recorded yet."</p> }.into_any();
                }
                let now = js_sys::Date::now();
                let start = epoch_ms(&spans[0].since);
                let end = spans.iter().filter_map(|s| s.until.as_deref().map(epoch_ms)).fold(now, f64::max);
                let scale = W / (end - start).max(1.0);
                let bands = spans
                    .iter()
                    .map(|Span { phase, since, until, state }| {
                        let from = epoch_ms(since);
                        let to = until.as_deref().map(epoch_ms).unwrap_or(now);
                        let x = (from - start) * scale;
                        let w = ((to - from) * scale).max(2.0);
                        let secs = ((to - from) / 1000.0).max(0.0);
                        let label = if phase.is_empty() { "no phase".to_owned() } else { phase.clone() };
                        let hover = format!("{label}: {secs:.0} s{}", if until.is_none() { " so far" } else { "" });
                        let class = format!("span {}", crate::format::state_class(*state));
                        let text = (w > 60.0).then(|| view! { <text x=x + 4.0 y="27" class="small">{label.clone()}</text> });
                        view! {
                            <g class="phase">
                                <title>{hover}</title>
                                <rect x=x y="8" width=w height="28" class=class></rect>
                                {text}
                            </g>
                        }
                    })
                    .collect_view();
                let first = crate::format::clock(start);
                let last = crate::format::clock(end);
                view! {
                    <svg viewBox=format!("0 0 {W} 60") preserveAspectRatio="none" role="group" aria-label="Phase history">
                        {bands}
                        <text x="0" y="54" class="small">{first}</text>
                        <text x=W y="54" text-anchor="end" class="small">{last}</text>
                    </svg>
                }
                .into_any()
            }}
        </figure>
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn short_names_keep_the_last_two_parts() {
        assert_eq!(super::short("prod-web-ctp0"), "web-ctp0");
        assert_eq!(super::short("host-1"), "host-1");
    }
}
