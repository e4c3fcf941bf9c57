//! How the dashboard talks to the server: GraphQL queries over `POST /graphql` (here), one
//! graphql-transport-ws connection to `/graphql/ws` that carries every subscription (`ws`), and
//! queries kept current by the changes it announces (`live`).

use graphql_client::{GraphQLQuery, Response};
use serde_json::Value;
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;

mod live;
pub mod past;
mod ws;

pub use live::{Live, live, live_all, live_on};
pub use ws::{Link, LinkState, connect, subscribe};

fn js_error(e: JsValue) -> String {
    e.as_string()
        .or_else(|| js_sys::JSON::stringify(&e).ok().and_then(|s| s.as_string()))
        .unwrap_or_else(|| "request failed".into())
}

/// Milliseconds since the epoch (the browser's clock).
pub fn now_ms() -> f64 {
    js_sys::Date::now()
}

/// Where this tab keeps its key: the session's storage, gone when the tab closes.
const KEY_ITEM: &str = "vitistack-key";

fn session() -> Option<web_sys::Storage> {
    web_sys::window().and_then(|w| w.session_storage().ok().flatten())
}

/// The key this tab signed in with.
pub fn key() -> Option<String> {
    session()
        .and_then(|s| s.get_item(KEY_ITEM).ok().flatten())
        .filter(|k| !k.is_empty())
}

/// The server refused this tab's credential (or lack of one): the sign-in form shows.
/// Keep `key` for this tab and connect again with it (every view refetches).
pub fn sign_in(key: &str) {
    if let Some(s) = session() {
        let _ = s.set_item(KEY_ITEM, key.trim());
    }
    ws::reconnect();
}

/// Forget this tab's key and connect again without it.
pub fn sign_out() {
    if let Some(s) = session() {
        let _ = s.remove_item(KEY_ITEM);
    }
    ws::reconnect();
}

/// Runs one query or mutation and returns its data, or the errors' messages joined. A query is
/// asked at the moment the page shows (`past`): the present, or the `?at=` in its address.
pub async fn query<Q: GraphQLQuery>(variables: Q::Variables) -> Result<Q::ResponseData, String> {
    let body = Q::build_query(variables);
    match past::at().and_then(|at| past::wrap(body.query, &at)) {
        Some(text) => {
            let mut body = serde_json::to_value(&body).map_err(|e| e.to_string())?;
            body["query"] = Value::String(text);
            decode::<Q>(post_at(&body).await?)
        }
        None => query_now::<Q>(body.variables).await,
    }
}

/// [`query`] answered from the present whatever moment the page shows (what the server says
/// about itself, and the cluster's history, whose steps open past moments).
pub async fn query_now<Q: GraphQLQuery>(
    variables: Q::Variables,
) -> Result<Q::ResponseData, String> {
    let body = serde_json::to_value(Q::build_query(variables)).map_err(|e| e.to_string())?;
    decode::<Q>(post(&body).await?)
}

/// [`post`] for a request asked inside `at`: its data is under `at` (errors stay where they are).
async fn post_at(body: &Value) -> Result<Value, String> {
    let mut answer = post(body).await?;
    if let Some(data) = answer.get_mut("data").filter(|d| !d.is_null()) {
        *data = data["at"].take();
    }
    Ok(answer)
}

/// Posts one GraphQL request and returns the answer as JSON.
async fn post(body: &Value) -> Result<Value, String> {
    let init = web_sys::RequestInit::new();
    init.set_method("POST");
    init.set_body(&JsValue::from_str(&body.to_string()));
    let headers = web_sys::Headers::new().map_err(js_error)?;
    headers
        .set("content-type", "application/json")
        .map_err(js_error)?;
    headers
        .set("accept", "application/graphql-response+json")
        .map_err(js_error)?;
    if let Some(key) = key() {
        headers
            .set("authorization", &format!("Bearer {key}"))
            .map_err(js_error)?;
    }
    init.set_headers(&headers);
    let (status, text) = fetch("/graphql", &init).await?;
    if status == 401 {
        ws::refused();
    }
    serde_json::from_str(&text).map_err(|e| format!("unreadable answer: {e}"))
}

/// One request: the answer's status and text.
pub async fn fetch(url: &str, init: &web_sys::RequestInit) -> Result<(u16, String), String> {
    let request = web_sys::Request::new_with_str_and_init(url, init).map_err(js_error)?;
    let window = web_sys::window().ok_or("no window")?;
    let response: web_sys::Response = JsFuture::from(window.fetch_with_request(&request))
        .await
        .map_err(js_error)?
        .dyn_into()
        .map_err(js_error)?;
    let text = JsFuture::from(response.text().map_err(js_error)?)
        .await
        .map_err(js_error)?;
    Ok((response.status(), text.as_string().unwrap_or_default()))
}

/// The data of one GraphQL response, or its errors' messages.
pub(crate) fn decode<Q: GraphQLQuery>(value: Value) -> Result<Q::ResponseData, String> {
    let response: Response<Q::ResponseData> =
        serde_json::from_value(value).map_err(|e| format!("unexpected answer: {e}"))?;
    // A datacenter that is away makes the answer partial, not a failure: its objects are in the
    // data as last seen, and the other datacenters' are current.
    let partial = |e: &graphql_client::Error| {
        e.extensions
            .as_ref()
            .and_then(|x| x.get("code"))
            .and_then(Value::as_str)
            == Some("DATACENTER_UNAVAILABLE")
    };
    let partial_only = response.data.is_some()
        && response
            .errors
            .as_ref()
            .is_some_and(|e| e.iter().all(partial));
    if let Some(errors) = response.errors.filter(|e| !e.is_empty() && !partial_only) {
        return Err(errors
            .iter()
            .map(|e| e.message.as_str())
            .collect::<Vec<_>>()
            .join("; "));
    }
    response.data.ok_or_else(|| "the answer has no data".into())
}
