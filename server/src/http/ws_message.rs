//! The client's messages on a GraphQL WebSocket, decoded from text: what each subprotocol allows,
//! and the close (code and reason) for anything else. Pure functions, so they can be fuzzed
//! (`fuzz/fuzz_targets/ws_message.rs`).

use serde_json::Value;

/// Which subprotocol the socket speaks.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Protocol {
    /// `graphql-transport-ws`.
    Transport,
    /// `graphql-ws` (subscriptions-transport-ws, legacy).
    Legacy,
}

/// The subprotocols offered, in order of preference.
pub const PROTOCOLS: [&str; 2] = ["graphql-transport-ws", "graphql-ws"];

/// A close the server initiates.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Close {
    /// The close code.
    pub code: u16,
    /// Why (cut to 123 bytes when sent).
    pub reason: String,
}

impl Close {
    /// A close with this code and reason.
    pub fn new(code: u16, reason: impl Into<String>) -> Self {
        Close {
            code,
            reason: reason.into(),
        }
    }
}

/// One message a client may send.
#[derive(Clone, Debug, PartialEq)]
pub enum ClientMessage {
    /// `connection_init` with its payload (null when none).
    Init(Value),
    /// `ping` (graphql-transport-ws).
    Ping,
    /// `pong` (graphql-transport-ws).
    Pong,
    /// `subscribe` / `start`: an operation.
    Subscribe {
        /// Its id.
        id: String,
        /// The request (read by [`request`]).
        payload: Value,
    },
    /// `complete` / `stop`.
    Complete {
        /// The operation's id.
        id: String,
    },
    /// `connection_terminate` (legacy).
    Terminate,
}

/// Decode one text message, or the close it calls for (4400 for anything the protocol does not
/// allow).
pub fn decode(protocol: Protocol, text: &str) -> Result<ClientMessage, Close> {
    let msg: Value = serde_json::from_str(text)
        .map_err(|e| Close::new(4400, format!("Invalid message received: not JSON ({e})")))?;
    let Some(ty) = msg.get("type").and_then(Value::as_str) else {
        return Err(Close::new(4400, "Invalid message received: no `type`"));
    };
    let id = || -> Result<String, Close> {
        match msg.get("id").and_then(Value::as_str) {
            Some(id) if !id.is_empty() => Ok(id.to_string()),
            _ => Err(Close::new(
                4400,
                format!("Invalid message received: `{ty}` needs a non-empty string `id`"),
            )),
        }
    };
    let payload = || msg.get("payload").cloned().unwrap_or(Value::Null);
    match (protocol, ty) {
        (_, "connection_init") => Ok(ClientMessage::Init(payload())),
        (Protocol::Transport, "ping") => Ok(ClientMessage::Ping),
        (Protocol::Transport, "pong") => Ok(ClientMessage::Pong),
        (Protocol::Transport, "subscribe") | (Protocol::Legacy, "start") => {
            Ok(ClientMessage::Subscribe {
                id: id()?,
                payload: payload(),
            })
        }
        (Protocol::Transport, "complete") | (Protocol::Legacy, "stop") => {
            Ok(ClientMessage::Complete { id: id()? })
        }
        (Protocol::Legacy, "connection_terminate") => Ok(ClientMessage::Terminate),
        _ => Err(Close::new(
            4400,
            format!("Invalid message received: unknown type `{ty}`"),
        )),
    }
}

/// The GraphQL request of operation `id`'s payload, or the close (4400) for a bad one.
pub fn request(id: &str, payload: Value) -> Result<async_graphql::Request, Close> {
    serde_json::from_value(payload).map_err(|e| {
        Close::new(
            4400,
            format!("Invalid message received: bad payload for {id} ({e})"),
        )
    })
}

/// The token a `connection_init` payload carries: `Authorization` (`Bearer <key>` or the key),
/// `authorization`, `headers.Authorization`, `token` or `apiKey`.
pub fn init_token(payload: &Value) -> Option<String> {
    let field = |v: &Value, names: &[&str]| {
        names
            .iter()
            .find_map(|n| v.get(*n).and_then(Value::as_str).map(str::to_string))
    };
    let header = field(payload, &["Authorization", "authorization"]).or_else(|| {
        payload
            .get("headers")
            .and_then(|h| field(h, &["Authorization", "authorization"]))
    });
    match header {
        Some(h) => Some(crate::auth::bearer(&h).map_or(h.clone(), str::to_string)),
        None => field(payload, &["token", "apiKey", "api_key"]),
    }
}
