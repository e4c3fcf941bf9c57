//! The event log, newest first, filtered by kind, namespace, name, type, datacenter and who asked
//! for the change (each a URL parameter); new events appear at the top as they happen.

use leptos::prelude::*;

use super::list::{Filter, Input, UrlFilters, each_keyed, given};
use super::{Loaded, Problem, loaded};
use crate::format::state_class;
use crate::gql::{EventList, event_list};
use crate::net::{self, LinkState};

type Event = event_list::EventListEventsNodes;

const FILTERS: &[Filter] = &[
    Filter {
        key: "kind",
        label: "Kind",
        input: Input::Text("Machine"),
    },
    Filter {
        key: "ns",
        label: "Namespace",
        input: Input::Text(""),
    },
    Filter {
        key: "name",
        label: "Name",
        input: Input::Text(""),
    },
    Filter {
        key: "type",
        label: "Type",
        input: Input::Text("infrastructure.machine.created"),
    },
    Filter {
        key: "by",
        label: "Changed by",
        input: Input::Text("key:ops"),
    },
    super::list::DATACENTER,
];

on_demand!(Events, events_page, EventsPage);

#[component]
fn EventsPage() -> impl IntoView {
    let state = expect_context::<LinkState>();
    let url = UrlFilters::new("/events", FILTERS.iter().map(|f| f.key));
    let (kind, ns, name, ty, by, dc) = (
        url.get("kind"),
        url.get("ns"),
        url.get("name"),
        url.get("type"),
        url.get("by"),
        url.get("dc"),
    );
    let events = net::live_all::<EventList>(
        move || event_list::Variables {
            filter: Some(event_list::EventFilter {
                object_id: None,
                uid: None,
                kind: given(kind),
                namespace: given(ns),
                name: given(name),
                types: given(ty).map(|t| vec![t]),
                since: None,
                until: None,
                actor: given(by),
                datacenter: given(dc),
            }),
            first: Some(200),
        },
        state,
    );
    let state = loaded(events);
    view! {
        <h1>"Events"</h1>
        {url.form(FILTERS)}
        {move || match state.get() {
            Loaded::Loading => view! { <p class="empty">"Loading events…"</p> }.into_any(),
            Loaded::Failed(e) => view! { <Problem text=e/> }.into_any(),
            Loaded::Ready => view! {
                <Show when=move || events.data(|d| !d.events.nodes.is_empty()).unwrap_or(false) fallback=|| view! { <p class="empty">"No events match."</p> }>
                    <table class="list" data-testid="events">
                        <thead><tr><th>"When (UTC)"</th><th>"Event"</th><th>"Object"</th><th>"Phase"</th><th>"Changed by"</th></tr></thead>
                        <tbody>{each_keyed(
                            // Entries never change: a new answer adds the new rows, drops the old.
                            move || events.data(|d| d.events.nodes.clone()).unwrap_or_default(),
                            |e: &Event| e.id.clone(),
                            row,
                        )}</tbody>
                    </table>
                </Show>
            }
            .into_any(),
        }}
    }
}

fn row(e: Event) -> impl IntoView {
    let target = if e.namespace.is_empty() {
        format!("{} {}", e.kind, e.name)
    } else {
        format!("{} {}/{}", e.kind, e.namespace, e.name)
    };
    let link = match e.object {
        Some(o) => view! { <a href=format!("/objects/{}", js_sys::encode_uri_component(&o.id))>{target}</a> }.into_any(),
        None => view! { <span>{target}</span> }.into_any(),
    };
    let phases = match (e.phase_before.as_deref(), e.phase_after.as_deref()) {
        (Some(b), Some(a)) if b != a => format!("{b} → {a}"),
        (_, Some(a)) => a.to_owned(),
        (Some(b), None) => format!("{b} → gone"),
        _ => String::new(),
    };
    let what = match e.dropped {
        Some(n) => format!("{n} events dropped (the history buffer was full)"),
        None => e.type_.clone(),
    };
    view! {
        <tr>
            <td><time>{e.at.replace('T', " ").trim_end_matches('Z').to_owned()}</time></td>
            <td>{what}</td>
            <td>{link}</td>
            <td><span class=format!("status {}", state_class(e.phase_state_after))>{phases}</span></td>
            <td>{e.actor.unwrap_or_default()}</td>
        </tr>
    }
}
