//! The WebSocket upgrade of an HTTP/1.1 request (RFC 6455 section 4.2), answered here and served
//! on a task of ours.
//!
//! Written here rather than with axum's `WebSocketUpgrade`: axum serves the socket on a task
//! whose future keeps its whole upgrade (the socket being built, its settings, the callback and
//! what it captured) laid out beside the served future for the socket's life; massif measured
//! that task at 1,786 bytes per idle socket. Here the socket is built without an await point,
//! so the task holds little more than the one boxed future that serves it. The checks and the
//! refusals' statuses and texts are axum's.

use axum::extract::Request;
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures::FutureExt;
use futures::future::BoxFuture;
use hyper::upgrade::{OnUpgrade, Upgraded};
use hyper_util::rt::TokioIo;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::{Role, WebSocketConfig};

/// An upgraded connection speaking WebSocket.
pub type Socket = WebSocketStream<TokioIo<Upgraded>>;

/// A request that asked to become a WebSocket, checked.
pub struct Upgrade {
    on: OnUpgrade,
    key: HeaderValue,
    /// The first of the server's subprotocols that the client offered.
    protocol: Option<&'static str>,
}

impl Upgrade {
    /// Check `request` (GET, `Connection: upgrade`, `Upgrade: websocket`, version 13, a key) and
    /// choose the first of `protocols` the client offered; or the refusal to send.
    // The refusal is a whole response, as axum's rejections are: it is sent as it is.
    #[allow(clippy::result_large_err)]
    pub fn of(request: &mut Request, protocols: &[&'static str]) -> Result<Self, Response> {
        let refuse = |status: StatusCode, text: &'static str| Err((status, text).into_response());
        let headers = request.headers();
        if request.method() != axum::http::Method::GET {
            return refuse(
                StatusCode::METHOD_NOT_ALLOWED,
                "Request method must be `GET`",
            );
        }
        if !contains(headers, header::CONNECTION, "upgrade") {
            return refuse(
                StatusCode::BAD_REQUEST,
                "Connection header did not include 'upgrade'",
            );
        }
        if !equals(headers, header::UPGRADE, "websocket") {
            return refuse(
                StatusCode::BAD_REQUEST,
                "`Upgrade` header did not include 'websocket'",
            );
        }
        let Some(key) = headers.get(header::SEC_WEBSOCKET_KEY).cloned() else {
            return refuse(
                StatusCode::BAD_REQUEST,
                "`Sec-WebSocket-Key` header missing",
            );
        };
        if !equals(headers, header::SEC_WEBSOCKET_VERSION, "13") {
            return refuse(
                StatusCode::BAD_REQUEST,
                "`Sec-WebSocket-Version` header did not include '13'",
            );
        }
        let offered: Vec<&[u8]> = headers
            .get_all(header::SEC_WEBSOCKET_PROTOCOL)
            .iter()
            .flat_map(|v| v.as_bytes().split(|&b| b == b','))
            .map(<[u8]>::trim_ascii)
            .collect();
        let protocol = protocols
            .iter()
            .copied()
            .find(|p| offered.contains(&p.as_bytes()));
        let Some(on) = request.extensions_mut().remove::<OnUpgrade>() else {
            return refuse(
                StatusCode::UPGRADE_REQUIRED,
                "WebSocket request couldn't be upgraded since no upgrade state was present",
            );
        };
        Ok(Upgrade { on, key, protocol })
    }

    /// The subprotocol chosen, if the client offered one of the server's.
    pub fn protocol(&self) -> Option<&'static str> {
        self.protocol
    }

    /// Answer `101 Switching Protocols` and, once the connection is handed over, serve the
    /// socket (built with `config`) with the future `serve` makes of it.
    pub fn serve<F>(self, config: WebSocketConfig, serve: F) -> Response
    where
        F: FnOnce(Socket) -> BoxFuture<'static, ()> + Send + 'static,
    {
        let Upgrade { on, key, protocol } = self;
        // Boxed, with the settings: the task's future keeps a slot for what it captured for the
        // socket's whole life, so it captures two pointers. The socket is built without an
        // await (it is ready at once: hyper answered the handshake), so no state of building
        // it is laid out in the task either; it registers the waker of whoever polls it next,
        // as on every poll.
        let start: Box<dyn FnOnce(Upgraded) -> Option<BoxFuture<'static, ()>> + Send> =
            Box::new(move |upgraded| {
                let socket = WebSocketStream::from_raw_socket(
                    TokioIo::new(upgraded),
                    Role::Server,
                    Some(config),
                )
                .now_or_never()?;
                Some(serve(socket))
            });
        tokio::spawn(async move {
            let upgraded = match on.await {
                Ok(upgraded) => upgraded,
                Err(e) => {
                    tracing::debug!(error = %e, "WebSocket upgrade failed");
                    return;
                }
            };
            let Some(served) = start(upgraded) else {
                tracing::warn!("WebSocket not ready after its upgrade: closed");
                return;
            };
            served.await;
        });
        let mut response = (
            StatusCode::SWITCHING_PROTOCOLS,
            [
                (header::CONNECTION, HeaderValue::from_static("upgrade")),
                (header::UPGRADE, HeaderValue::from_static("websocket")),
            ],
        )
            .into_response();
        let headers = response.headers_mut();
        if let Ok(accept) = HeaderValue::from_str(&derive_accept_key(key.as_bytes())) {
            headers.insert(header::SEC_WEBSOCKET_ACCEPT, accept);
        }
        if let Some(p) = protocol {
            headers.insert(header::SEC_WEBSOCKET_PROTOCOL, HeaderValue::from_static(p));
        }
        response
    }
}

/// The header's value is `value`, in any case.
fn equals(headers: &HeaderMap, name: HeaderName, value: &str) -> bool {
    headers
        .get(name)
        .is_some_and(|h| h.as_bytes().eq_ignore_ascii_case(value.as_bytes()))
}

/// The header's value holds `value` (lowercase), in any case.
fn contains(headers: &HeaderMap, name: HeaderName, value: &str) -> bool {
    headers
        .get(name)
        .and_then(|h| h.to_str().ok())
        .is_some_and(|h| h.to_ascii_lowercase().contains(value))
}
