//! An SSE response's connection taken from hyper once the response's head is written, and its
//! events served on it by a task of ours.
//!
//! Written here because hyper keeps a connection's buffers for as long as a response streams: an
//! 8 KiB read buffer and an 8 KiB buffer for the head, with its dispatcher, the service's and the
//! body's state, and the connection task's timers: 22.9 KiB per idle SSE subscription (the
//! subscription load bench, `LOAD_SSE=1`), four times a WebSocket's, whose connection hyper hands
//! over at its upgrade. hyper has no such hand-over for a response that is not an upgrade, so the
//! stream's body claims the connection ([`Claim`]), the connection's task (`serve.rs`) drops
//! hyper's connection once everything hyper buffered has been written (the head last), keeps the
//! client's stream, and serves the events on it with the chunked framing hyper's head announced.
//! Only an HTTP/1.1 request other than HEAD is claimed (the others are framed otherwise); the
//! response says `Connection: close`, so the client does not send another request on it.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::http::request::Parts;
use axum::http::{Method, Version};
use futures::StreamExt;
use futures::stream::BoxStream;
use parking_lot::Mutex;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// A client's stream, whatever it is beneath (TCP, TLS).
pub trait Io: AsyncRead + AsyncWrite + Send {}
impl<T: AsyncRead + AsyncWrite + Send> Io for T {}

/// A client's stream, boxed.
pub type BoxIo = Pin<Box<dyn Io>>;

/// One event of a stream: its name (`next`, `complete`) and its data (one line).
pub struct Event {
    /// The `event:` field.
    pub name: &'static str,
    /// The `data:` field.
    pub data: String,
}

impl Event {
    /// The event as SSE text, one `data:` line per line of its data.
    fn text(&self) -> String {
        let mut text = String::with_capacity(self.data.len() + self.name.len() + 16);
        text.push_str("event: ");
        text.push_str(self.name);
        text.push('\n');
        for line in self.data.split('\n') {
            text.push_str("data: ");
            text.push_str(line);
            text.push('\n');
        }
        text.push('\n');
        text
    }
}

/// The events a claimed connection is to carry, and how often it is kept alive.
pub struct Stream {
    /// The events.
    pub events: BoxStream<'static, Event>,
    /// Interval of keep-alive comments.
    pub keepalive: Duration,
}

/// One connection's way out of hyper: shared by the connection's task, its stream (which notes
/// writes and flushes) and each request on it (which may claim it). Everything here happens while
/// the connection's task polls hyper's connection (the body claims, the stream is written and
/// flushed), so that task looks at [`Handoff::ready`] after each poll and nothing needs waking.
#[derive(Default)]
pub struct Handoff {
    /// A stream has claimed the connection: writes and flushes are noted from then on.
    claimed: AtomicBool,
    /// Everything written since the claim has been flushed (hyper's buffers are empty).
    flushed: AtomicBool,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    stream: Option<Stream>,
    /// The client's stream, left here when hyper's connection was dropped after the claim.
    io: Option<BoxIo>,
}

impl Handoff {
    /// A stream claims the connection.
    fn claim(&self, stream: Stream) {
        self.state.lock().stream = Some(stream);
        self.flushed.store(false, Ordering::Release);
        self.claimed.store(true, Ordering::Release);
    }

    /// hyper writes to the client's stream.
    pub fn wrote(&self) {
        if self.claimed.load(Ordering::Acquire) {
            self.flushed.store(false, Ordering::Release);
        }
    }

    /// hyper flushed the client's stream: everything it had buffered is written.
    pub fn flushed(&self) {
        if self.claimed.load(Ordering::Acquire) {
            self.flushed.store(true, Ordering::Release);
        }
    }

    /// A stream has claimed the connection and hyper has written everything it buffered since
    /// (the response's head last): hyper's connection may be dropped.
    pub fn ready(&self) -> bool {
        self.claimed.load(Ordering::Acquire) && self.flushed.load(Ordering::Acquire)
    }

    /// The client's stream, as hyper's connection lets go of it: kept when the connection is
    /// claimed, else dropped (closed).
    pub fn released(&self, io: BoxIo) {
        if self.claimed.load(Ordering::Acquire) {
            self.state.lock().io = Some(io);
        }
    }

    /// The claim and the client's stream, once hyper's connection has been dropped.
    pub fn take(&self) -> Option<(Stream, BoxIo)> {
        let mut state = self.state.lock();
        let stream = state.stream.take();
        let io = state.io.take();
        stream.zip(io)
    }
}

/// A request's handle on its connection's [`Handoff`], put in its extensions by `serve.rs`.
#[derive(Clone)]
pub struct Claimant(pub Arc<Handoff>);

/// The connection of a request whose answer can be an SSE stream served by us: an HTTP/1.1
/// request, not HEAD, on a connection `serve.rs` serves.
pub struct Claimable(pub Option<Claimant>);

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for Claimable {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        let framed_by_us = parts.version == Version::HTTP_11 && parts.method != Method::HEAD;
        Ok(Claimable(
            framed_by_us
                .then(|| parts.extensions.get::<Claimant>().cloned())
                .flatten(),
        ))
    }
}

/// The body of a claimed response: claims the connection when hyper first asks it for data
/// (hyper has then buffered the head), and never answers (hyper's connection is dropped).
pub struct Claim {
    handoff: Arc<Handoff>,
    stream: Option<Stream>,
}

impl Claim {
    /// A body that hands `stream` to the connection of `claimant`.
    pub fn new(claimant: Claimant, stream: Stream) -> Self {
        Claim {
            handoff: claimant.0,
            stream: Some(stream),
        }
    }
}

impl hyper::body::Body for Claim {
    type Data = bytes::Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<hyper::body::Frame<Self::Data>, Self::Error>>> {
        if let Some(stream) = self.stream.take() {
            self.handoff.claim(stream);
        }
        Poll::Pending
    }
}

/// Serve `stream` on `io`, whose response head (chunked) hyper has written: each event and
/// keep-alive comment a chunk, the last chunk when the events end; until then, or until the
/// client closes its side or a write fails (the write timeout is `io`'s).
pub async fn serve(mut io: BoxIo, stream: Stream) {
    let Stream {
        mut events,
        keepalive,
    } = stream;
    let keepalive = keepalive.max(Duration::from_millis(1));
    let mut alive = tokio::time::interval_at(tokio::time::Instant::now() + keepalive, keepalive);
    alive.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // What the client sends is not read as requests: it only tells whether it is still there.
    let mut scratch = [0u8; 32];
    loop {
        let text = tokio::select! {
            event = events.next() => match event {
                Some(event) => event.text(),
                None => {
                    let _ = io.write_all(b"0\r\n\r\n").await;
                    break;
                }
            },
            _ = alive.tick() => ":\n\n".to_string(),
            read = io.read(&mut scratch) => match read {
                Ok(0) | Err(_) => break,
                Ok(_) => continue,
            },
        };
        let chunk = format!("{:x}\r\n{text}\r\n", text.len());
        if io.write_all(chunk.as_bytes()).await.is_err() || io.flush().await.is_err() {
            break;
        }
        alive.reset();
    }
    let _ = io.shutdown().await;
}
