//! Charts drawn as SVG by the view code itself: no chart library, no canvas, so every bar is in
//! the DOM (hover text, keyboard focus, readable by tests and screen readers).

use leptos::prelude::*;

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
/// drawn to scale against the largest limit; `unit` formats a value for the hover text.
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
    let drawn = move || {
        let bars = bars.get();
        let scale = bars
            .iter()
            .map(|b| b.limit.max(b.used))
            .fold(0.0, f64::max)
            .max(1.0);
        let step = 36.0_f64.max(360.0 / bars.len().max(1) as f64);
        bars.into_iter()
            .enumerate()
            .map(|(i, bar)| {
                let x = i as f64 * step + step * 0.15;
                let width = step * 0.7;
                let used_h = bar.used / scale * HEIGHT;
                let free_h = (bar.limit - bar.used).max(0.0) / scale * HEIGHT;
                let over = bar.used > bar.limit;
                let hover = format!("{}: {} of {} {}", bar.name, unit(bar.used), unit(bar.limit), used_label);
                let label = short(&bar.name);
                let label_x = x + width / 2.0;
                let aria = hover.clone();
                view! {
                    <g class="bar">
                        <a href=bar.href aria-label=aria>
                            <title>{hover}</title>
                            <rect class="free" x=x y=HEIGHT - used_h - free_h width=width height=free_h></rect>
                            <rect class=if over { "used over" } else { "used" } x=x y=HEIGHT - used_h width=width height=used_h></rect>
                            <text class="axis" x=label_x y=HEIGHT + 14.0 text-anchor="end"
                                transform=format!("rotate(-35 {label_x} {})", HEIGHT + 14.0)>{label}</text>
                        </a>
                    </g>
                }
            })
            .collect_view()
    };
    view! {
        <figure class="chart" data-testid=testid>
            <figcaption>{title}</figcaption>
            <svg viewBox=view_box preserveAspectRatio="xMinYMin meet" role="group" aria-label=title>
                <g transform=format!("translate({MARGIN} 0)")>
                    <line class="baseline" x1="0" x2="100%" y1=HEIGHT y2=HEIGHT></line>
                    {drawn}
                </g>
            </svg>
            <div class="legend">
                <span class="key used"></span>{used_label}
                <span class="key free"></span>"available"
            </div>
        </figure>
    }
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

/// Horizontal bars: one row per labelled count, each a link.
#[component]
pub fn CountBars(
    #[prop(into)] rows: Signal<Vec<(String, i64, String, &'static str)>>,
    testid: &'static str,
) -> impl IntoView {
    let max = move || {
        rows.with(|r| r.iter().map(|(_, n, _, _)| *n).max().unwrap_or(0))
            .max(1) as f64
    };
    view! {
        <ul class="countbars" data-testid=testid>
            {move || {
                let max = max();
                rows.get()
                    .into_iter()
                    .map(|(label, count, href, class)| {
                        let width = format!("width: {:.1}%", count as f64 / max * 100.0);
                        view! {
                            <li>
                                <a href=href>
                                    <span class="label">{label}</span>
                                    <span class="track"><span class=format!("fill {class}") style=width></span></span>
                                    <span class="count">{count}</span>
                                </a>
                            </li>
                        }
                    })
                    .collect_view()
            }}
        </ul>
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
