//! The one graphql-transport-ws connection every subscription shares: connect, acknowledge,
//! resubscribe after a reconnection (with a growing wait), and the badge's state.
//!
//! The client is our own, about 200 lines: the maintained crate (graphql-ws-client) needs an
//! async WebSocket stream on wasm (ws_stream_wasm, a second executor bridge) and would roughly
//! double the compressed size this dashboard ships, for the five messages we use.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

use graphql_client::GraphQLQuery;
use leptos::prelude::*;
use serde_json::{Value, json};
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;
use web_sys::{CloseEvent, MessageEvent, WebSocket};

use super::{decode, key, now_ms};

/// The connection badge's states (the old status page's, same meaning).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Link {
    /// Opening the first connection.
    Connecting,
    /// Acknowledged: subscriptions flow.
    Live,
    /// Lost; trying again (the first three attempts).
    Reconnecting,
    /// Lost for four attempts or more; still trying, with a longer wait.
    Disconnected,
}

impl Link {
    pub fn label(self) -> &'static str {
        match self {
            Link::Connecting => "Connecting",
            Link::Live => "Live",
            Link::Reconnecting => "Reconnecting",
            Link::Disconnected => "Disconnected",
        }
    }
}

/// What every view reads about the connection.
#[derive(Clone, Copy)]
pub struct LinkState {
    pub link: RwSignal<Link>,
    /// When the last subscription event arrived (ms since the epoch).
    pub last_change: RwSignal<Option<f64>>,
    /// Bumped at every acknowledged (re)connection: views refetch what they hold.
    pub connections: RwSignal<u32>,
    /// The server wants a key (none, or this tab's was refused): the sign-in form shows.
    pub signin: RwSignal<bool>,
}

type Handler = Rc<dyn Fn(Result<Value, String>)>;

struct Subscription {
    payload: Value,
    handler: Handler,
}

struct Client {
    url: String,
    socket: Option<WebSocket>,
    acked: bool,
    failures: u32,
    next_id: u64,
    subscriptions: BTreeMap<u64, Subscription>,
    state: LinkState,
    // The socket's event handlers live as long as it does.
    callbacks: Vec<Closure<dyn FnMut(JsValue)>>,
}

thread_local! {
    static CLIENT: RefCell<Option<Rc<RefCell<Client>>>> = const { RefCell::new(None) };
}

fn client() -> Option<Rc<RefCell<Client>>> {
    CLIENT.with(|c| c.borrow().clone())
}

/// Opens the connection (once, at start) and returns the state the badge shows.
pub fn connect() -> LinkState {
    let state = LinkState {
        link: RwSignal::new(Link::Connecting),
        last_change: RwSignal::new(None),
        connections: RwSignal::new(0),
        signin: RwSignal::new(false),
    };
    let url = web_sys::window()
        .and_then(|w| {
            let location = w.location();
            let scheme = if location.protocol().ok()? == "https:" {
                "wss"
            } else {
                "ws"
            };
            Some(format!("{scheme}://{}/graphql/ws", location.host().ok()?))
        })
        .unwrap_or_else(|| "ws://localhost:9991/graphql/ws".into());
    let client = Rc::new(RefCell::new(Client {
        url,
        socket: None,
        acked: false,
        failures: 0,
        next_id: 1,
        subscriptions: BTreeMap::new(),
        state,
        callbacks: Vec::new(),
    }));
    CLIENT.with(|c| *c.borrow_mut() = Some(client.clone()));
    open(&client);
    state
}

fn send(socket: &WebSocket, message: &Value) {
    // A send on a closing socket fails; the close handler reconnects and resubscribes.
    let _ = socket.send_with_str(&message.to_string());
}

fn open(client: &Rc<RefCell<Client>>) {
    let url = client.borrow().url.clone();
    let socket = match WebSocket::new_with_str(&url, "graphql-transport-ws") {
        Ok(socket) => socket,
        Err(_) => {
            closed(client);
            return;
        }
    };
    let on_open = {
        let socket = socket.clone();
        Closure::<dyn FnMut(JsValue)>::new(move |_| {
            let payload = match key() {
                Some(k) => json!({"Authorization": format!("Bearer {k}")}),
                None => json!({}),
            };
            send(
                &socket,
                &json!({"type": "connection_init", "payload": payload}),
            );
        })
    };
    let on_message = {
        let client = client.clone();
        Closure::<dyn FnMut(JsValue)>::new(move |event: JsValue| {
            if let Some(text) = event
                .dyn_into::<MessageEvent>()
                .ok()
                .and_then(|m| m.data().as_string())
            {
                received(&client, &text);
            }
        })
    };
    let on_close = {
        let client = client.clone();
        let socket = socket.clone();
        Closure::<dyn FnMut(JsValue)>::new(move |event: JsValue| {
            let code = event
                .dyn_into::<CloseEvent>()
                .map(|e| e.code())
                .unwrap_or(0);
            // Only the current socket's close counts (an old one may close late).
            let current = client
                .borrow()
                .socket
                .as_ref()
                .is_some_and(|s| *s == socket);
            if current && code == 4403 {
                // Refused (no key, a wrong one, or revoked): trying again will not help; the
                // sign-in form connects again.
                {
                    let mut c = client.borrow_mut();
                    c.socket = None;
                    c.acked = false;
                }
                let state = client.borrow().state;
                state.link.set(Link::Disconnected);
                refused();
            } else if current {
                closed(&client);
            }
        })
    };
    socket.set_onopen(Some(on_open.as_ref().unchecked_ref()));
    socket.set_onmessage(Some(on_message.as_ref().unchecked_ref()));
    socket.set_onclose(Some(on_close.as_ref().unchecked_ref()));
    let mut c = client.borrow_mut();
    c.socket = Some(socket);
    c.callbacks = vec![on_open, on_message, on_close];
}

fn closed(client: &Rc<RefCell<Client>>) {
    let (delay, state, failures) = {
        let mut c = client.borrow_mut();
        c.socket = None;
        c.acked = false;
        c.failures += 1;
        // 0.5 s, 1 s, 2 s, 4 s, then every 5 s.
        let delay = (500u32 << (c.failures - 1).min(4)).min(5_000);
        (delay, c.state, c.failures)
    };
    state.link.set(if failures >= 4 {
        Link::Disconnected
    } else {
        Link::Reconnecting
    });
    let client = client.clone();
    let retry = Closure::once_into_js(move || open(&client));
    if let Some(window) = web_sys::window() {
        let _ = window.set_timeout_with_callback_and_timeout_and_arguments_0(
            retry.unchecked_ref(),
            delay as i32,
        );
    }
}

fn received(client: &Rc<RefCell<Client>>, text: &str) {
    let Ok(message) = serde_json::from_str::<Value>(text) else {
        return;
    };
    let kind = message
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let id = message
        .get("id")
        .and_then(Value::as_str)
        .and_then(|id| id.parse::<u64>().ok());
    match kind {
        "connection_ack" => {
            let state = {
                let mut c = client.borrow_mut();
                c.acked = true;
                c.failures = 0;
                if let Some(socket) = &c.socket {
                    for (id, subscription) in &c.subscriptions {
                        send(
                            socket,
                            &json!({"type": "subscribe", "id": id.to_string(), "payload": subscription.payload}),
                        );
                    }
                }
                c.state
            };
            state.link.set(Link::Live);
            state.connections.update(|n| *n += 1);
        }
        "ping" => {
            if let Some(socket) = &client.borrow().socket {
                send(socket, &json!({"type": "pong"}));
            }
        }
        "next" | "error" => {
            // The handler may subscribe or unsubscribe: call it with the client released.
            let found = id.and_then(|id| {
                let c = client.borrow();
                c.subscriptions
                    .get(&id)
                    .map(|s| (s.handler.clone(), c.state))
            });
            if let Some((handler, state)) = found {
                let payload = message.get("payload").cloned().unwrap_or(Value::Null);
                if kind == "next" {
                    // A `SYNCED` says the subscription started, not that anything changed.
                    let started =
                        payload["data"]["resourceChanged"]["type"].as_str() == Some("SYNCED");
                    if !started {
                        state.last_change.set(Some(now_ms()));
                    }
                    handler(Ok(payload));
                } else {
                    let text = payload
                        .as_array()
                        .map(|errors| {
                            errors
                                .iter()
                                .filter_map(|e| e.get("message").and_then(Value::as_str))
                                .collect::<Vec<_>>()
                                .join("; ")
                        })
                        .unwrap_or_else(|| "subscription refused".into());
                    handler(Err(text));
                }
            }
        }
        _ => {}
    }
}

/// A subscription that ends when the view that made it goes away.
fn subscribe_raw(payload: Value, handler: Handler) {
    let Some(client) = client() else { return };
    let id = {
        let mut c = client.borrow_mut();
        let id = c.next_id;
        c.next_id += 1;
        if c.acked
            && let Some(socket) = &c.socket
        {
            send(
                socket,
                &json!({"type": "subscribe", "id": id.to_string(), "payload": payload}),
            );
        }
        c.subscriptions
            .insert(id, Subscription { payload, handler });
        id
    };
    on_cleanup(move || unsubscribe(id));
}

fn unsubscribe(id: u64) {
    let Some(client) = client() else { return };
    let mut c = client.borrow_mut();
    if c.subscriptions.remove(&id).is_some()
        && c.acked
        && let Some(socket) = &c.socket
    {
        send(socket, &json!({"type": "complete", "id": id.to_string()}));
    }
}

/// Subscribes with a typed operation; `on_event` gets each event's data (or the error text).
/// Every (re)connection resubscribes, and the server answers with the current state first.
pub fn subscribe<Q: GraphQLQuery + 'static>(
    variables: Q::Variables,
    on_event: impl Fn(Result<Q::ResponseData, String>) + 'static,
) {
    let body = Q::build_query(variables);
    if let Some(at) = super::past::at() {
        // At a past moment nothing changes: the stream's first answer, asked once.
        let text = super::past::wrap(body.query, &at);
        if text.is_some() || body.operation_name != "Changes" {
            at_moment::<Q>(text, body.variables, Rc::new(on_event));
        }
        return;
    }
    let Ok(payload) = serde_json::to_value(body) else {
        return;
    };
    subscribe_raw(
        payload,
        Rc::new(move |event: Result<Value, String>| on_event(event.and_then(decode::<Q>))),
    );
}

/// What stream `Q` would send first at the page's moment (its query `text`), once; a stream the
/// past has no answer for says so.
fn at_moment<Q: GraphQLQuery + 'static>(
    text: Option<String>,
    variables: Q::Variables,
    on_event: Rc<dyn Fn(Result<Q::ResponseData, String>)>,
) {
    let Some(text) = text else {
        on_event(Err(
            "This view is live only: the history cannot show it at a past moment.".into(),
        ));
        return;
    };
    leptos::task::spawn_local(async move {
        let answer = async {
            let body = json!({"query": text, "variables": variables});
            decode::<Q>(super::post_at(&body).await?)
        };
        on_event(answer.await);
    });
}

/// The server refused this tab's credential (or lack of one): the sign-in form shows.
pub(super) fn refused() {
    if let Some(c) = client() {
        let signin = c.borrow().state.signin;
        signin.set(true);
    }
}

/// Connects again (with the key now kept): every view refetches and resubscribes.
pub(super) fn reconnect() {
    let Some(client) = client() else { return };
    let old = {
        let mut c = client.borrow_mut();
        c.acked = false;
        c.failures = 0;
        c.state.signin.set(false);
        c.socket.take()
    };
    // The old socket says nothing more: its handlers go before its closures are dropped (by
    // `open`), or a late event would call a dropped closure.
    if let Some(socket) = old {
        socket.set_onopen(None);
        socket.set_onmessage(None);
        socket.set_onclose(None);
        let _ = socket.close();
    }
    open(&client);
}
