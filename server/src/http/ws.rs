//! GraphQL over WebSocket: our own protocol layer over async-graphql's executor.
//!
//! Speaks `graphql-transport-ws` (the graphql-ws library's protocol) and the legacy `graphql-ws`
//! subprotocol (subscriptions-transport-ws). async-graphql's built-in layer differs from the
//! transport-ws spec where it matters to clients: invalid messages close with 1002 (spec: 4400),
//! a subscribe before the acknowledgement closes with 1011 (spec: 4401), a reused operation id
//! silently replaces the running one (spec: 4409), and there is no initialisation timeout (spec:
//! 4408) and no server ping. This layer enforces the spec's codes, pings, and our caps:
//! operations per socket, sockets per client and sockets in total (shared with SSE streams).

use crate::error::ErrorCode;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::future::BoxFuture;
use futures::stream::{AbortHandle, Abortable, BoxStream, SelectAll, SplitSink, SplitStream};
use futures::{FutureExt, SinkExt, Stream, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::{Error as WsError, Message};

use super::AppState;
use super::streams::{CHANGED, CHANGED_CODE, GOING_AWAY, REVOKED, gone};
use super::upgrade::Socket as WebSocket;
use crate::auth::Principal;
use crate::auth::Standing;
use crate::graphql::subscription::executor::Payload;

/// Most messages written to a socket in one go.
const MAX_BATCH: usize = 64;

/// Bytes a socket buffers before writing (a batch is written in pieces of about this size).
pub const WRITE_BUFFER_BYTES: usize = 8 * 1024;

use super::ws_message::{ClientMessage, decode, init_token};
pub use super::ws_message::{Close, Protocol};

/// An operation's id with its next result, or with None once it has ended.
type Item = (Arc<str>, Option<Payload>);

struct Operation {
    id: Arc<str>,
    abort: AbortHandle,
    /// Something was sent for it already (so errors are data, not a refusal).
    started: bool,
}

/// An operation's results, each with its id (shared: a result costs no copy of it), then the id
/// with None once they end. (A map and a chain with a last `once` did this with three copies of
/// the id and more state held for each idle subscription.)
struct Tagged {
    id: Arc<str>,
    /// Taken out (and freed) once it has ended.
    results: Option<BoxStream<'static, Payload>>,
}

impl Stream for Tagged {
    type Item = Item;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Item>> {
        let this = &mut *self;
        let Some(results) = this.results.as_mut() else {
            return Poll::Ready(None);
        };
        match results.poll_next_unpin(cx) {
            Poll::Ready(Some(payload)) => Poll::Ready(Some((this.id.clone(), Some(payload)))),
            Poll::Ready(None) => {
                this.results = None;
                Poll::Ready(Some((this.id.clone(), None)))
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

struct Conn {
    app: AppState,
    protocol: Protocol,
    acked: bool,
    /// Who opened it (known once `connection_init` is accepted).
    principal: Option<Principal>,
    /// The client's address.
    client: IpAddr,
    /// `Authorization` of the upgrade request, used when `connection_init` carries none.
    authorization: Option<String>,
    /// The sign-in session's cookie of a page of this server, used when neither carries one.
    session: Option<String>,
    /// The running operations, in the order they started: a list, as they are few (at most
    /// `max_operations_per_socket`), where a map took about 200 bytes for the first.
    operations: Vec<Operation>,
    streams: SelectAll<Abortable<Tagged>>,
    /// Messages to send before reading on.
    out: Vec<String>,
}

/// Serve one upgraded socket until either side closes it: the one future the socket's task
/// holds for its whole life.
///
/// Not an `async fn`: one would keep a slot for the socket it was given (about 450 bytes, moved
/// out at once by the split) and for each argument in its state for as long as the socket is
/// open. Here they are checked and moved into what the socket needs before the future is made.
pub fn serve(
    socket: WebSocket,
    protocol: Option<&str>,
    app: AppState,
    client: IpAddr,
    authorization: Option<String>,
    session: Option<String>,
) -> BoxFuture<'static, ()> {
    let protocol = match protocol {
        Some("graphql-transport-ws") => Protocol::Transport,
        Some("graphql-ws") => Protocol::Legacy,
        _ => {
            let reason = "Subprotocol not acceptable: offer graphql-transport-ws or graphql-ws";
            return close(socket, app, Close::new(4406, reason)).boxed();
        }
    };
    if *app.going_away.borrow() {
        return close(socket, app, Close::new(1001, GOING_AWAY)).boxed();
    }
    let admission = match app.gate.admit(client) {
        Ok(a) => a,
        Err(reason) => {
            // 1013 "try again later": the standard code for a server at capacity.
            return close(socket, app, Close::new(1013, reason.to_string())).boxed();
        }
    };
    let open = super::Held::new(&app.metrics.ws_open);
    let (sink, incoming) = socket.split();
    let mut conn = Conn {
        app,
        protocol,
        acked: false,
        principal: None,
        client,
        authorization,
        session,
        operations: Vec::new(),
        streams: SelectAll::new(),
        out: Vec::new(),
    };
    async move {
        let ended = conn.run(sink, incoming).await;
        tracing::debug!(code = ?ended, "WebSocket closed (None: by the client)");
        conn.app.metrics.ws_closed(ended);
        drop((admission, open));
    }
    .boxed()
}

async fn close(mut socket: WebSocket, app: AppState, c: Close) {
    app.metrics.ws_closed(Some(c.code));
    let _ = socket.send(close_message(&c)).await;
}

fn close_message(c: &Close) -> Message {
    // A close reason is at most 123 bytes.
    let mut reason = c.reason.clone();
    while reason.len() > 123 {
        reason.pop();
    }
    Message::Close(Some(CloseFrame {
        code: c.code.into(),
        reason: reason.into(),
    }))
}

impl Conn {
    /// Returns the close code the server sent, or None when the client went away.
    async fn run(
        &mut self,
        mut sink: SplitSink<WebSocket, Message>,
        mut incoming: SplitStream<WebSocket>,
    ) -> Option<u16> {
        let settings = &self.app.gate.settings;
        // Boxed and dropped once acknowledged: not held by every idle socket.
        let mut init_deadline = Some(Box::pin(tokio::time::sleep(settings.init_timeout)));
        let mut keepalive = tokio::time::interval_at(
            tokio::time::Instant::now() + settings.keepalive,
            settings.keepalive,
        );
        keepalive.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut changes = self.app.access.auth.changes();
        // False once the watch's sender is gone: no standing can change after that (as in
        // `streams::ended`), and a closed watch would otherwise answer at once on every turn.
        let mut watching = true;
        let mut going_away = self.app.going_away.clone();
        loop {
            let step: Result<(), Close> = tokio::select! {
                msg = incoming.next() => match msg {
                    Some(Ok(Message::Text(text))) => match self.receive(text.as_str()) {
                        // Boxed, as the re-check below: a future awaited here is held inline
                        // in the socket's task for its whole life (an idle socket's memory), and
                        // authentication's (key, session, or RBAC reviews over HTTP) is large.
                        Ok(Some(init)) => Box::pin(self.init(&init)).await,
                        Ok(None) => Ok(()),
                        Err(c) => Err(c),
                    },
                    Some(Ok(Message::Binary(_))) => Err(Close::new(4400, "Binary messages are not part of the protocol")),
                    Some(Ok(Message::Ping(_) | Message::Pong(_) | Message::Frame(_))) => Ok(()),
                    // tungstenite refuses a frame or message above the limit with a capacity
                    // error ("Space limit exceeded: Message too long: N > M").
                    Some(Err(WsError::Capacity(_))) => Err(Close::new(
                        1009,
                        format!(
                            "Message too big: the limit (MAX_BODY_BYTES) is {} bytes",
                            super::MAX_BODY_BYTES
                        ),
                    )),
                    Some(Ok(Message::Close(_))) | Some(Err(_)) | None => return None,
                },
                Some((id, item)) = self.streams.next(), if !self.streams.is_empty() => {
                    self.deliver(id, item);
                    Ok(())
                }
                _ = gone(&mut going_away) => Err(Close::new(1001, GOING_AWAY)),
                _ = async {
                    match init_deadline.as_mut() {
                        Some(deadline) => deadline.await,
                        None => std::future::pending().await,
                    }
                }, if !self.acked => {
                    Err(Close::new(4408, "Connection initialisation timeout"))
                }
                changed = changes.changed(), if watching && self.principal.is_some() => {
                    watching = changed.is_ok();
                    match (changed, &self.principal) {
                        (Ok(()), Some(p)) => match Box::pin(self.app.access.auth.standing(p)).await {
                            Standing::Kept => Ok(()),
                            Standing::Changed => Err(Close::new(CHANGED_CODE, CHANGED)),
                            Standing::Ended => Err(Close::new(4403, REVOKED)),
                        },
                        _ => Ok(()),
                    }
                }
                _ = keepalive.tick() => {
                    match self.protocol {
                        Protocol::Transport => self.out.push(r#"{"type":"ping"}"#.into()),
                        Protocol::Legacy if self.acked => self.out.push(r#"{"type":"ka"}"#.into()),
                        Protocol::Legacy => {}
                    }
                    Ok(())
                }
            };
            if self.acked {
                init_deadline = None;
            }
            // Everything the operations have ready now goes out together, in as few writes as
            // the write buffer allows: a socket that fell behind catches up with few system
            // calls. (Polled with this task's context, so whatever is not ready wakes it later.)
            while step.is_ok() && !self.streams.is_empty() && self.out.len() < MAX_BATCH {
                let ready = std::future::poll_fn(|cx| {
                    std::task::Poll::Ready(match self.streams.poll_next_unpin(cx) {
                        std::task::Poll::Ready(Some(item)) => Some(item),
                        _ => None,
                    })
                })
                .await;
                let Some((id, item)) = ready else { break };
                self.deliver(id, item);
            }
            if !self.out.is_empty() {
                for text in self.out.drain(..) {
                    if sink.feed(Message::Text(text.into())).await.is_err() {
                        return None;
                    }
                }
                if sink.flush().await.is_err() {
                    return None;
                }
                // A catch-up batch grew the list to MAX_BATCH places: an idle socket keeps a few.
                self.out.shrink_to(4);
            }
            if let Err(c) = step {
                let _ = sink.send(close_message(&c)).await;
                let _ = sink.close().await;
                return Some(c.code);
            }
        }
    }

    /// Handle one message; a `connection_init` is returned (its payload) to be authenticated.
    fn receive(&mut self, text: &str) -> Result<Option<Value>, Close> {
        match decode(self.protocol, text)? {
            ClientMessage::Init(payload) => {
                if self.acked {
                    return Err(Close::new(4429, "Too many initialisation requests"));
                }
                Ok(Some(payload))
            }
            ClientMessage::Ping => {
                self.out.push(r#"{"type":"pong"}"#.into());
                Ok(None)
            }
            ClientMessage::Pong => Ok(None),
            ClientMessage::Subscribe { id, payload } => self.start(id, payload).map(|()| None),
            ClientMessage::Complete { id } => {
                if let Some(op) = self.take(&id) {
                    op.abort.abort();
                    if self.protocol == Protocol::Legacy {
                        self.out
                            .push(json!({"type": "complete", "id": id}).to_string());
                    }
                }
                Ok(None)
            }
            ClientMessage::Terminate => {
                Err(Close::new(1000, "Connection terminated by the client"))
            }
        }
    }

    /// Authenticate `connection_init`: acknowledged, or closed with 4403 (refused) or 1013 (the
    /// credential could not be checked now).
    async fn init(&mut self, payload: &Value) -> Result<(), Close> {
        let token = init_token(payload).or_else(|| {
            self.authorization
                .as_deref()
                .map(|h| crate::auth::bearer(h).unwrap_or(h).to_string())
        });
        let auth = &self.app.access.auth;
        let limit = self.app.access.timeout;
        let principal = match (&token, &self.session) {
            (None, Some(session)) => {
                tokio::time::timeout(limit, auth.authenticate_session(session, self.client))
                    .await
                    .unwrap_or(Err(crate::auth::Refusal::TimedOut(limit)))
            }
            _ => {
                auth.authenticate_within(token.as_deref(), self.client, limit)
                    .await
            }
        }
        .map_err(|r| {
            // 1013 (Try Again Later) lets clients reconnect, where 4403 tells them trying again
            // will not help.
            if r.is_temporary() {
                Close::new(1013, format!("Try again later: {}", r.message()))
            } else {
                Close::new(4403, format!("Forbidden: {}", r.message()))
            }
        })?;
        self.principal = Some(principal);
        self.acked = true;
        self.out.push(r#"{"type":"connection_ack"}"#.into());
        if self.protocol == Protocol::Legacy {
            self.out.push(r#"{"type":"ka"}"#.into());
        }
        Ok(())
    }

    fn start(&mut self, id: String, payload: Value) -> Result<(), Close> {
        let Some(principal) = self.principal.clone().filter(|_| self.acked) else {
            return Err(Close::new(4401, "Unauthorized"));
        };
        if self.operations.iter().any(|op| *op.id == *id) {
            return Err(Close::new(
                4409,
                format!("Subscriber for {id} already exists"),
            ));
        }
        let request = super::ws_message::request(&id, payload)?;
        let max = self.app.gate.settings.max_operations_per_socket;
        if self.operations.len() >= max {
            let message = format!(
                "this socket already runs {} operations, the limit (STREAM_MAX_OPERATIONS_PER_SOCKET) is {max}; complete one first or open another socket",
                self.operations.len()
            );
            self.refuse(&id, &message, ErrorCode::OperationLimit);
            return Ok(());
        }
        if let Err(limited) = self.app.access.rate.check(&principal, 1) {
            self.refuse(&id, &limited.message, ErrorCode::RateLimited);
            return Ok(());
        }
        let stream = super::pipeline::execute_stream(&self.app, request, principal);
        let (abort, registration) = AbortHandle::new_pair();
        let id: Arc<str> = id.into();
        let tagged = Tagged {
            id: id.clone(),
            results: Some(stream),
        };
        self.streams.push(Abortable::new(tagged, registration));
        // Most sockets run one operation: a place for it, not the four a first push makes (later
        // pushes grow the list as usual, not one place at a time).
        if self.operations.capacity() == 0 {
            self.operations.reserve_exact(1);
        }
        self.operations.push(Operation {
            id,
            abort,
            started: false,
        });
        Ok(())
    }

    /// Take the operation `id` out of the running ones.
    fn take(&mut self, id: &str) -> Option<Operation> {
        let at = self.operations.iter().position(|op| *op.id == *id)?;
        Some(self.operations.remove(at))
    }

    /// Refuse one operation with an `error` message; the socket stays open.
    fn refuse(&mut self, id: &str, message: &str, code: ErrorCode) {
        let errors = json!([{"message": message, "extensions": {"code": code}}]);
        let payload = match self.protocol {
            Protocol::Transport => errors,
            Protocol::Legacy => json!({"message": message, "errors": errors}),
        };
        self.out
            .push(json!({"type": "error", "id": id, "payload": payload}).to_string());
    }

    fn deliver(&mut self, id: Arc<str>, item: Option<Payload>) {
        let Some(payload) = item else {
            if self.take(&id).is_some() {
                self.out
                    .push(json!({"type": "complete", "id": id}).to_string());
            }
            return;
        };
        // (`Arc`'s equality compares the addresses first: the item carries the operation's own.)
        let Some(op) = self.operations.iter_mut().find(|op| op.id == id) else {
            return; // completed by the client meanwhile
        };
        // A document refused before it ran (parse or validation errors, which carry no field
        // path): transport-ws says `error`, and the operation is over. Errors of a resolver
        // (with a path, e.g. bad arguments of a subscription field) are a result: `next`, as
        // the graphql-ws reference server does.
        if let Payload::Response(response) = &payload {
            let refused = !op.started && crate::graphql::rejected(response);
            if refused && self.protocol == Protocol::Transport {
                if let Some(op) = self.take(&id) {
                    op.abort.abort();
                }
                let errors = serde_json::to_value(&response.errors).unwrap_or(Value::Null);
                self.out
                    .push(json!({"type": "error", "id": id, "payload": errors}).to_string());
                return;
            }
        }
        op.started = true;
        let ty = match self.protocol {
            Protocol::Transport => "next",
            Protocol::Legacy => "data",
        };
        // A shared event's JSON is rendered once; each socket only adds its frame around it.
        let frame = frame(ty, &id, &payload.json());
        self.out.push(frame);
    }
}

/// `{"type":ty,"id":id,"payload":json}`, `json` as it is.
fn frame(ty: &str, id: &str, json: &str) -> String {
    let mut frame = String::with_capacity(json.len() + id.len() + 34);
    frame.push_str(r#"{"type":""#);
    frame.push_str(ty);
    frame.push_str(r#"","id":"#);
    // As serde_json writes a string, without a string of its own for each result: it escapes
    // only quotes, backslashes and control characters.
    if id.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
        frame.push('"');
        frame.push_str(id);
        frame.push('"');
    } else {
        frame.push_str(&serde_json::to_string(id).unwrap_or_default());
    }
    frame.push_str(r#","payload":"#);
    frame.push_str(json);
    frame.push('}');
    frame
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_results_frame_is_the_json_serde_writes_whatever_its_id() {
        let payload = r#"{"data":{"n":1}}"#;
        for id in [
            "1",
            "a-b_c",
            "é ü",
            "quo\"te",
            "back\\slash",
            "tab\tnl\n",
            "\u{1}",
            "del\u{7f}",
        ] {
            let expected =
                serde_json::json!({"type": "next", "id": id, "payload": {"data": {"n": 1}}});
            let got: serde_json::Value =
                serde_json::from_str(&super::frame("next", id, payload)).expect("JSON");
            assert_eq!(got, expected, "{id:?}");
            let text = serde_json::to_string(id).expect("a string");
            let written = format!(r#"{{"type":"next","id":{text},"payload":{payload}}}"#);
            assert_eq!(super::frame("next", id, payload), written, "{id:?}");
        }
    }
}
