//! Any object by its global id: kind, phase, conditions, labels and the object itself (as the
//! server shows it: credentials already blanked).

use leptos::prelude::*;
use leptos_router::hooks::use_params_map;

use super::{Problem, param};
use crate::gql::{ObjectById, object_by_id};
use crate::net;

on_demand!(Object, object_page, ObjectPage);

#[component]
fn ObjectPage() -> impl IntoView {
    let params = use_params_map();
    let id = Memo::new(move |_| param(&params.read(), "id"));
    let object = RwSignal::new(None::<Result<object_by_id::ResponseData, String>>);
    Effect::new(move |_| {
        let id = id.get();
        leptos::task::spawn_local(async move {
            let answer = net::query::<ObjectById>(object_by_id::Variables { id }).await;
            let _ = object.try_set(Some(answer));
        });
    });
    move || match object.get() {
        None => view! { <p class="empty">"Loading…"</p> }.into_any(),
        Some(Err(e)) => view! { <Problem text=e/> }.into_any(),
        Some(Ok(data)) => match data.node {
            None => view! { <Problem text="This object no longer exists."/> }.into_any(),
            Some(o) => {
                let raw = pretty(&o.raw);
                let conditions = o
                    .conditions
                    .into_iter()
                    .map(|c| {
                        view! {
                            <tr>
                                <td>{c.type_}</td><td>{c.status}</td><td>{c.reason.unwrap_or_default()}</td>
                                <td>{c.message.unwrap_or_default()}</td><td>{c.last_transition_time.unwrap_or_default()}</td>
                            </tr>
                        }
                    })
                    .collect_view();
                let labels = o
                    .labels
                    .into_iter()
                    .map(|l| view! { <li><code>{format!("{}={}", l.key, l.value)}</code></li> })
                    .collect_view();
                view! {
                    <p class="crumbs">{o.kind.clone()}" · "{o.api_version}</p>
                    <h1 data-testid="object-name">{o.name}</h1>
                    <dl class="facts">
                        <dt>"Kind"</dt><dd data-testid="object-kind">{o.kind}</dd>
                        <dt>"Namespace"</dt><dd>{o.namespace.unwrap_or_default()}</dd>
                        <dt>"Phase"</dt><dd>{o.phase.unwrap_or_default()}</dd>
                        <dt>"Created"</dt><dd>{o.created_at.unwrap_or_default()}</dd>
                    </dl>
                    <h2>"Conditions"</h2>
                    <table class="list">
                        <thead><tr><th>"Type"</th><th>"Status"</th><th>"Reason"</th><th>"Message"</th><th>"Since"</th></tr></thead>
                        <tbody>{conditions}</tbody>
                    </table>
                    <h2>"Labels"</h2>
                    <ul class="labels">{labels}</ul>
                    <h2>"Object"</h2>
                    <pre class="raw" tabindex="0" aria-label="The object as JSON">{raw}</pre>
                }
                .into_any()
            }
        },
    }
}

/// `value` as indented JSON, by the browser's JSON.stringify (smaller than serde_json's pretty
/// printer in the WebAssembly).
fn pretty(value: &serde_json::Value) -> String {
    let compact = value.to_string();
    js_sys::JSON::parse(&compact)
        .and_then(|v| {
            js_sys::JSON::stringify_with_replacer_and_space(
                &v,
                &wasm_bindgen::JsValue::NULL,
                &wasm_bindgen::JsValue::from(2),
            )
        })
        .ok()
        .and_then(|s| s.as_string())
        .unwrap_or(compact)
}
