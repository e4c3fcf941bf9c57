//! The live dashboard: a Leptos client-side app that reads everything through the server's
//! GraphQL API (queries over HTTP, subscriptions over one graphql-transport-ws socket).

mod charts;
mod format;
mod gql;
mod keyed;
mod net;
mod signin;
mod views;

use leptos::prelude::*;
use leptos_router::components::{A, Route, Router, Routes};
use leptos_router::path;

use net::{Link, LinkState};

/// The allocator, counting the bytes in use: WebAssembly memory only grows, so its size alone
/// cannot tell a leak from a high-water mark (the soak benchmark reads both).
#[global_allocator]
static ALLOCATOR: cap::Cap<std::alloc::System> = cap::Cap::new(std::alloc::System, usize::MAX);

/// Bytes allocated and not yet freed by the app.
#[wasm_bindgen::prelude::wasm_bindgen(js_name = heapInUse)]
pub fn heap_in_use() -> f64 {
    ALLOCATOR.allocated() as f64
}

/// The page frame: header with navigation, connection badge and theme switch; the views below.
#[component]
fn App() -> impl IntoView {
    let state = net::connect();
    provide_context(state);
    views::Sources::provide(state);
    signin::Session::provide(state);
    // The time control is open while the page shows the past.
    let past_open = RwSignal::new(net::past::at().is_some());
    view! {
        <Router>
            <a class="skip" href="#main">"Skip to content"</a>
            <header class="top">
                <A href="/" attr:class="brand">"Viti Stack"</A>
                <nav aria-label="Views">
                    <A href="/">"Overview"</A>
                    <A href="/datacenters">"Datacenters"</A>
                    <A href="/clusters">"Clusters"</A>
                    <A href="/machines">"Machines"</A>
                    <A href="/networks">"Networks"</A>
                    <A href="/vms">"VMs"</A>
                    <A href="/applications">"Applications"</A>
                    <A href="/hosts">"Hosts"</A>
                    <A href="/topology">"Topology"</A>
                    <A href="/events">"Events"</A>
                </nav>
                <div class="spacer"></div>
                <views::search::SearchBox/>
                <views::past::HistoryButton open=past_open/>
                <Badge state/>
                <signin::Account state/>
                <ThemeSwitch/>
            </header>
            <views::past::TimeBar open=past_open/>
            <views::SyncBanner/>
            <views::AwayBanner/>
            <main id="main">
                <Routes fallback=|| view! { <p class="empty">"There is no such page."</p> }>
                    <Route path=path!("/") view=views::overview::Overview/>
                    <Route path=path!("/datacenters") view=views::datacenters::Datacenters/>
                    <Route path=path!("/clusters") view=views::clusters::Clusters/>
                    <Route path=path!("/clusters/:namespace/:name") view=views::cluster::Cluster/>
                    <Route path=path!("/machines") view=views::machines::Machines/>
                    <Route path=path!("/networks") view=views::networks::Networks/>
                    <Route path=path!("/vms") view=views::vms::Vms/>
                    <Route path=path!("/hosts") view=views::hosts::Hosts/>
                    <Route path=path!("/applications") view=views::applications::Applications/>
                    <Route path=path!("/applications/:namespace/:name") view=views::applications::Application/>
                    <Route path=path!("/topology") view=views::topology::Topology/>
                    <Route path=path!("/events") view=views::events::Events/>
                    <Route path=path!("/changes") view=views::past::Changes/>
                    <Route path=path!("/objects/:id") view=views::object::Object/>
                </Routes>
            </main>
        </Router>
    }
}

/// Connection state and the time of the last change, as the old page's badge; "Past" while the
/// page shows a past moment (nothing on it is live then).
#[component]
fn Badge(state: LinkState) -> impl IntoView {
    let past = net::past::at().is_some();
    let class = move || match state.link.get() {
        _ if past => "badge reconnecting",
        Link::Live => "badge live",
        Link::Connecting | Link::Reconnecting => "badge reconnecting",
        Link::Disconnected => "badge disconnected",
    };
    view! {
        <span class="updated" data-testid="updated" title="When the last change arrived">
            // "Updated" is read out, not shown: the time beside the badge says it.
            {move || state.last_change.get().map(|ms| view! { <span class="sr">"Updated "</span>{format::clock(ms)} })}
        </span>
        <span class=class role="status" data-testid="connection">{move || if past { "Past" } else { state.link.get().label() }}</span>
    }
}

/// Dark by default; the choice is kept in this browser.
#[component]
fn ThemeSwitch() -> impl IntoView {
    let storage = || web_sys::window().and_then(|w| w.local_storage().ok().flatten());
    let saved = storage().and_then(|s| s.get_item("theme").ok().flatten());
    let light = RwSignal::new(saved.as_deref() == Some("light"));
    Effect::new(move |_| {
        let theme = if light.get() { "light" } else { "dark" };
        if let Some(root) = web_sys::window()
            .and_then(|w| w.document())
            .and_then(|d| d.document_element())
        {
            let _ = root.set_attribute("data-theme", theme);
        }
        if let Some(s) = storage() {
            let _ = s.set_item("theme", theme);
        }
    });
    // An icon (the header fits one row at 1440 px); its name says what it does.
    let name = move || {
        if light.get() {
            "Dark theme"
        } else {
            "Light theme"
        }
    };
    view! {
        <button class="theme" type="button" aria-pressed=move || light.get().to_string()
            aria-label=name title=name on:click=move |_| light.update(|l| *l = !*l)>
            <span aria-hidden="true">{move || if light.get() { "\u{263E}" } else { "\u{2600}" }}</span>
        </button>
    }
}

#[wasm_bindgen::prelude::wasm_bindgen(start)]
pub fn main() {
    #[cfg(feature = "panic-hook")]
    console_error_panic_hook::set_once();
    leptos::mount::mount_to_body(App);
}
