//! The datacenters overview, as the old hub's: one card per datacenter with its state, its hosts,
//! VMs, capacity and clusters, links to its lists; a datacenter that is not answering is greyed,
//! with the age of what is shown and why.

use leptos::prelude::*;

use super::Problem;
use crate::format::{gib, percent, percent_class};
use crate::gql::{DatacenterCards, DatacenterState, datacenter_cards};
use crate::net::{self, LinkState};

type Card = datacenter_cards::DatacenterCardsDatacenters;

/// The page; its code is loaded when it is first opened (a separate WebAssembly module).
#[component]
pub fn Datacenters() -> impl IntoView {
    view! {
        <h1>"Datacenters"</h1>
        <Transition fallback=|| view! { <p class="empty">"Loading…"</p> }>
            {move || Suspend::new(async move { cards().await })}
        </Transition>
    }
}

#[leptos::lazy]
fn cards() -> AnyView {
    view! { <Cards/> }.into_any()
}

/// Every card, read again every few seconds and after a reconnection: states change with time
/// alone (a datacenter goes stale without any object changing).
#[component]
fn Cards() -> impl IntoView {
    let state = expect_context::<LinkState>();
    let answer = RwSignal::new(None::<Result<Vec<Card>, String>>);
    let refresh = move || {
        leptos::task::spawn_local(async move {
            let got = net::query::<DatacenterCards>(datacenter_cards::Variables).await;
            answer.set(Some(got.map(|d| d.datacenters)));
        });
    };
    Effect::new(move |_| {
        state.connections.track();
        refresh();
    });
    if let Ok(handle) = set_interval_with_handle(refresh, std::time::Duration::from_secs(3)) {
        on_cleanup(move || handle.clear());
    }
    move || {
        match answer.get() {
        None => view! { <p class="empty">"Loading datacenters…"</p> }.into_any(),
        Some(Err(e)) => view! { <Problem text=e/> }.into_any(),
        Some(Ok(cards)) => view! {
            <div class="dcs" data-testid="datacenters">{cards.into_iter().map(card).collect_view()}</div>
        }
        .into_any(),
    }
    }
}

/// (class, words) of a state.
fn state_of(s: DatacenterState) -> (&'static str, &'static str) {
    match s {
        DatacenterState::Synced => ("ready", "synced"),
        DatacenterState::Connecting => ("progress", "connecting"),
        DatacenterState::Stale => ("failed", "stale"),
        DatacenterState::Unreachable => ("failed", "unreachable"),
        DatacenterState::Other => ("progress", "unknown"),
    }
}

fn card(d: Card) -> impl IntoView {
    let (class, words) = state_of(d.state);
    let away = matches!(
        d.state,
        DatacenterState::Stale | DatacenterState::Unreachable
    );
    let title = if d.key.is_empty() {
        "This cluster".to_string()
    } else {
        d.key.clone()
    };
    let place = d
        .vitistack
        .map(|v| [v.display_name, v.region].join(" · "))
        .unwrap_or_default();
    let age = away.then(|| {
        let age = d
            .age_seconds
            .map_or("never synced".to_string(), |a| format!("{a:.0} s old"));
        let why = d.last_error.unwrap_or_default();
        view! { <p class="dc-age" data-testid="dc-age">"Last known, "{age}". "{why}</p> }
    });
    let c = d.host_capacity;
    let s = d.cluster_summary;
    let cpu = percent(c.vcpus_used, c.vcpus_limit);
    let mem = percent(c.memory_used_bytes, c.memory_limit_bytes);
    let tiles = [
        (
            "Hosts",
            format!("{}/{}", c.ready_hosts, c.hosts),
            if c.ready_hosts < c.hosts {
                "warn"
            } else {
                "ok"
            },
        ),
        (
            "VMs running",
            format!("{}/{}", c.active_vms, c.active_vms + c.stopped_vms),
            "ok",
        ),
        ("vCPU", format!("{cpu:.0}%"), percent_class(cpu)),
        (
            "Memory",
            format!("{mem:.0}% of {} GiB", gib(c.memory_limit_bytes, 0)),
            percent_class(mem),
        ),
        (
            "Clusters ready",
            format!("{}/{}", s.ready, s.total),
            if s.failed > 0 { "err" } else { "ok" },
        ),
        (
            "Hosts that can fail",
            c.hosts_that_can_fail.to_string(),
            if c.hosts_that_can_fail == 0 {
                "err"
            } else {
                "ok"
            },
        ),
    ];
    let link = |page: &str| format!("/{page}{}", super::query_string(&[("dc", d.key.as_str())]));
    let label = title.clone();
    view! {
        <article class=format!("dc {}", if away { "away" } else { "" }) data-testid=format!("dc-{}", d.key)
            aria-label=label>
            <header>
                <h2>{title}</h2>
                <span class=format!("pill {class}") data-testid="dc-state">{words}</span>
            </header>
            <p class="dc-place">{place}</p>
            {age}
            <dl class="dc-tiles">
                {tiles.into_iter().map(|(label, value, class)| view! {
                    <div class=class><dt>{label}</dt><dd>{value}</dd></div>
                }).collect_view()}
            </dl>
            <p class="dc-links">
                <a href=link("clusters")>"Clusters"</a>
                <a href=link("hosts")>"Hosts"</a>
                <a href=link("vms")>"VMs"</a>
                <a href=link("events")>"Events"</a>
            </p>
        </article>
    }
}
