//! The event log, newest first, filtered by kind, namespace, name, type and who asked for the
//! change (each a URL parameter); new events appear at the top as they happen.

use leptos::prelude::*;

use super::{Problem, UrlFilters};
use crate::format::status_class;
use crate::gql::{EventList, event_list};
use crate::net::{self, LinkState};

#[component]
pub fn Events() -> impl IntoView {
    let state = expect_context::<LinkState>();
    let f = UrlFilters::new("/events", &["kind", "ns", "name", "type", "by"]);
    let (kind, ns, name, ty) = (f.get("kind"), f.get("ns"), f.get("name"), f.get("type"));
    let by = f.get("by");
    let events = net::live_query_all::<EventList>(
        move || event_list::Variables {
            filter: Some(event_list::EventFilter {
                object_id: None,
                uid: None,
                kind: Some(kind.get()).filter(|s| !s.is_empty()),
                namespace: Some(ns.get()).filter(|s| !s.is_empty()),
                name: Some(name.get()).filter(|s| !s.is_empty()),
                types: Some(ty.get()).filter(|s| !s.is_empty()).map(|t| vec![t]),
                since: None,
                until: None,
                actor: Some(by.get()).filter(|s| !s.is_empty()),
            }),
            first: Some(200),
        },
        state,
    );
    view! {
        <h1>"Events"</h1>
        <form class="filters" role="search" on:submit=|ev| ev.prevent_default()>
            <label>"Kind" <input type="text" prop:value=kind on:change=f.on("kind") placeholder="Machine" data-testid="filter-kind"/></label>
            <label>"Namespace" <input type="text" prop:value=ns on:change=f.on("ns") data-testid="filter-ns"/></label>
            <label>"Name" <input type="text" prop:value=name on:change=f.on("name") data-testid="filter-name"/></label>
            <label>"Type" <input type="text" prop:value=ty on:change=f.on("type") placeholder="infrastructure.machine.created" data-testid="filter-type"/></label>
            <label>"Changed by" <input type="text" prop:value=by on:change=f.on("by") placeholder="key:ops" data-testid="filter-by"/></label>
        </form>
        {move || match events.get() {
            None => view! { <p class="empty">"Loading events…"</p> }.into_any(),
            Some(Err(e)) => view! { <Problem text=e/> }.into_any(),
            Some(Ok(data)) if data.events.nodes.is_empty() => view! { <p class="empty">"No events match."</p> }.into_any(),
            Some(Ok(data)) => {
                let rows = data.events.nodes.into_iter().map(|e| {
                    let target = format!("{} {}", e.kind, if e.namespace.is_empty() { e.name.clone() } else { format!("{}/{}", e.namespace, e.name) });
                    let link = match e.object {
                        Some(o) => view! { <a href=format!("/objects/{}", js_sys::encode_uri_component(&o.id))>{target}</a> }.into_any(),
                        None => view! { <span>{target}</span> }.into_any(),
                    };
                    let after = e.phase_after.clone().unwrap_or_default();
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
                            <td><span class=format!("status {}", status_class(&after))>{phases}</span></td>
                            <td>{e.actor.unwrap_or_default()}</td>
                        </tr>
                    }
                }).collect_view();
                view! {
                    <table class="list" data-testid="events">
                        <thead><tr><th>"When (UTC)"</th><th>"Event"</th><th>"Object"</th><th>"Phase"</th><th>"Changed by"</th></tr></thead>
                        <tbody>{rows}</tbody>
                    </table>
                }.into_any()
            }
        }}
    }
}
