//! Accepting client connections and serving the router on them (HTTP/1.1, upgrades for
//! WebSockets, the client's address as `ConnectInfo`, graceful shutdown) within the limits the
//! old aggregator's server settings named: `SERVER_READ_TIMEOUT`, `SERVER_WRITE_TIMEOUT`,
//! `SERVER_IDLE_TIMEOUT` and `SERVER_MAX_HEADER_BYTES`.
//!
//! Written in place of `axum::serve`, which offers none of these limits. hyper does the
//! protocol: its header-size limit answers 431. The read and idle limits are watched here
//! rather than with hyper's header timeout, because that one also runs while a kept-alive
//! connection waits for its next request, so it cannot tell a slow client from an idle one. A
//! write that waits longer than its limit fails through tokio-io-timeout; unlike Go's
//! `WriteTimeout` (the whole answer), it bounds each wait, so a stream or a WebSocket lives as
//! long as its client reads.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_io_timeout::TimeoutStream;

/// What a client connection may take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// `SERVER_READ_TIMEOUT`: from waiting for a request to having its headers.
    pub read: Duration,
    /// `SERVER_WRITE_TIMEOUT`: the longest one write to the client may wait.
    pub write: Duration,
    /// `SERVER_IDLE_TIMEOUT`: a connection with no request in flight and none begun.
    pub idle: Duration,
    /// `SERVER_MAX_HEADER_BYTES`: the request line and headers.
    pub max_header_bytes: usize,
}

/// What the connections report.
#[derive(Clone)]
pub struct ConnectionMetrics {
    /// Connections open now.
    pub open: prometheus::IntGauge,
    /// Connections closed for a limit, by `reason`.
    pub closed: prometheus::IntCounterVec,
}

/// Serve `router` on the connections `listener` accepts until `shutdown` completes; then stop
/// accepting, let every connection finish what it has in flight (kept-alive ones close at once)
/// and return once all have.
pub async fn serve<L>(
    mut listener: L,
    router: Router,
    limits: Limits,
    metrics: ConnectionMetrics,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()>
where
    L: axum::serve::Listener<Addr = SocketAddr>,
    L::Io: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (stop_tx, stop) = watch::channel(false);
    // Every connection task holds a receiver; all have ended once the sender sees none.
    let (alive_tx, alive) = watch::channel(());
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let (io, peer) = tokio::select! {
            accepted = listener.accept() => accepted,
            () = &mut shutdown => break,
        };
        let connection = Connection {
            router: router.clone(),
            limits,
            metrics: metrics.clone(),
        };
        tokio::spawn(connection.run(io, peer, stop.clone(), alive.clone()));
    }
    drop(listener);
    stop_tx.send_replace(true);
    drop(alive);
    alive_tx.closed().await;
    Ok(())
}

/// One client connection.
struct Connection {
    router: Router,
    limits: Limits,
    metrics: ConnectionMetrics,
}

impl Connection {
    async fn run<I>(
        self,
        io: I,
        peer: SocketAddr,
        mut stop: watch::Receiver<bool>,
        _alive: watch::Receiver<()>,
    ) where
        I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        self.metrics.open.inc();
        let activity = Arc::new(Activity::new());
        let mut timed = TimeoutStream::new(io);
        timed.set_write_timeout(Some(self.limits.write));
        let io = Watched {
            inner: Box::pin(timed),
            activity: activity.clone(),
        };
        let (router, requests) = (self.router.clone(), activity.clone());
        let service = hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
            let in_flight = requests.started();
            let mut request = request.map(Body::new);
            request.extensions_mut().insert(ConnectInfo(peer));
            let mut router = router.clone();
            async move {
                let response = tower::Service::call(&mut router, request).await?;
                // In flight until its body has been written (or dropped): a stream is not idle.
                Ok::<_, Infallible>(response.map(move |body| {
                    Body::new(body.map_frame(move |frame| {
                        let _ = &in_flight;
                        frame
                    }))
                }))
            }
        });
        let mut http = hyper::server::conn::http1::Builder::new();
        http.header_read_timeout(None)
            .max_header_size(self.limits.max_header_bytes)
            .max_buf_size((self.limits.max_header_bytes + 8192).max(16 * 1024));
        let mut conn = std::pin::pin!(
            http.serve_connection(TokioIo::new(io), service)
                .with_upgrades()
        );
        let mut sleep = std::pin::pin!(tokio::time::sleep(self.limits.read.min(self.limits.idle)));
        let mut stopping = *stop.borrow();
        if stopping {
            conn.as_mut().graceful_shutdown();
        }
        let reason = loop {
            let check = match activity.due(&self.limits) {
                Due::Expired(reason) => {
                    if reason == "idle_timeout" {
                        // Nothing in flight: hyper closes it at once.
                        conn.as_mut().graceful_shutdown();
                        stopping = true;
                        // Said once: the next turn finds it closed.
                        activity.forget_idle();
                        self.metrics.closed.with_label_values(&[reason]).inc();
                        continue;
                    }
                    // A request begun and not finished: dropped, as hyper drops a slow head.
                    break Some(reason);
                }
                Due::At(at) => at,
            };
            if sleep.deadline() != check {
                sleep.as_mut().reset(check);
            }
            tokio::select! {
                done = conn.as_mut() => {
                    break match done {
                        Err(e) if timed_out(&e) => Some("write_timeout"),
                        Err(e) => {
                            tracing::debug!(%peer, error = %e, "connection ended with an error");
                            None
                        }
                        Ok(()) => None,
                    };
                }
                _ = stop.wait_for(|s| *s), if !stopping => {
                    stopping = true;
                    conn.as_mut().graceful_shutdown();
                }
                () = &mut sleep => {}
            }
        };
        if let Some(reason) = reason {
            tracing::debug!(%peer, reason, "connection closed");
            self.metrics.closed.with_label_values(&[reason]).inc();
        }
        self.metrics.open.dec();
    }
}

/// True when a connection's error is a write that waited too long.
fn timed_out(e: &hyper::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(s) = source {
        if let Some(io) = s.downcast_ref::<std::io::Error>() {
            return io.kind() == std::io::ErrorKind::TimedOut;
        }
        source = s.source();
    }
    false
}

/// When a connection's limits fall due.
enum Due {
    /// Look again then.
    At(Instant),
    /// Closed for this reason now.
    Expired(&'static str),
}

/// Where a connection is: requests in flight, idle since, or a request's head begun since.
///
/// Atomics, and nothing wakes the watcher per request: it looks every `min(read, idle)` at the
/// latest (a limit that starts after one look cannot fall due before the next), then sleeps until
/// the exact deadline. A request costs three atomic writes and two clock reads; a lock and a
/// wake-up per request cost the cheapest cached query 7 % of its throughput.
struct Activity {
    base: Instant,
    in_flight: AtomicUsize,
    /// Nanoseconds after `base`, plus one (0: not waiting for a head). A new connection owes
    /// its first request's head; bytes read while nothing is in flight begin the next one.
    waiting_since: AtomicU64,
    /// Nanoseconds after `base`, plus one (0: not idle).
    idle_since: AtomicU64,
}

impl Activity {
    fn new() -> Self {
        Activity {
            base: Instant::now(),
            in_flight: AtomicUsize::new(0),
            waiting_since: AtomicU64::new(1),
            idle_since: AtomicU64::new(0),
        }
    }

    /// Now, as kept here.
    fn stamp(&self) -> u64 {
        u64::try_from(self.base.elapsed().as_nanos())
            .unwrap_or(u64::MAX - 1)
            .saturating_add(1)
    }

    /// Bytes were read.
    fn read(&self) {
        if self.in_flight.load(Ordering::Acquire) == 0
            && self.waiting_since.load(Ordering::Acquire) == 0
        {
            self.waiting_since.store(self.stamp(), Ordering::Release);
            self.idle_since.store(0, Ordering::Release);
        }
    }

    /// A request's head was read: in flight until the guard is dropped.
    fn started(self: &Arc<Self>) -> InFlight {
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        self.waiting_since.store(0, Ordering::Release);
        self.idle_since.store(0, Ordering::Release);
        InFlight(self.clone())
    }

    /// The idle close was asked for.
    fn forget_idle(&self) {
        self.idle_since.store(0, Ordering::Release);
    }

    fn due(&self, limits: &Limits) -> Due {
        let now = Instant::now();
        let look_again = Due::At(now + limits.read.min(limits.idle));
        let at = |stamp: u64, limit: Duration| self.base + Duration::from_nanos(stamp - 1) + limit;
        let (deadline, reason) = match (
            self.waiting_since.load(Ordering::Acquire),
            self.idle_since.load(Ordering::Acquire),
        ) {
            (0, 0) => return look_again,
            (0, idle) if self.in_flight.load(Ordering::Acquire) == 0 => {
                (at(idle, limits.idle), "idle_timeout")
            }
            (0, _) => return look_again,
            (waiting, _) => (at(waiting, limits.read), "read_timeout"),
        };
        if deadline <= now {
            Due::Expired(reason)
        } else {
            // The state may change before then (a request ends, a head begins): look no later
            // than one shorter limit from now.
            Due::At(deadline.min(now + limits.read.min(limits.idle)))
        }
    }
}

/// A request in flight.
struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        let a = &self.0;
        if a.in_flight.fetch_sub(1, Ordering::AcqRel) == 1
            && a.waiting_since.load(Ordering::Acquire) == 0
        {
            a.idle_since.store(a.stamp(), Ordering::Release);
        }
    }
}

/// The client's stream, noting each read.
struct Watched<I> {
    inner: Pin<Box<TimeoutStream<I>>>,
    activity: Arc<Activity>,
}

impl<I: AsyncRead + AsyncWrite> AsyncRead for Watched<I> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = self.inner.as_mut().poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.activity.read();
        }
        polled
    }
}

impl<I: AsyncRead + AsyncWrite> AsyncWrite for Watched<I> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        self.inner.as_mut().poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        self.inner.as_mut().poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        self.inner.as_mut().poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        self.inner.as_mut().poll_shutdown(cx)
    }
}
