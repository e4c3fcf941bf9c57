//! What every stream (a WebSocket or an SSE response) shares: the caps on open streams and the
//! place each holds, and what ends one (a credential that stops working, the server going away).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use parking_lot::Mutex;

use crate::auth::{Auth, Principal, Standing};

/// The close reason (4403) and error of a socket or stream whose credential stopped working.
pub const REVOKED: &str = "Forbidden: the key was revoked or has expired";

/// The close code of a socket whose caller's access changed (4205, after HTTP's 205 Reset
/// Content: connect again and draw what you may see now). Not one of graphql-transport-ws's
/// codes, so its clients connect again as after a lost connection.
pub const CHANGED_CODE: u16 = 4205;

/// The close reason (4205) and error of a socket or stream whose caller's access changed.
pub const CHANGED: &str = "Access changed: connect again to see what you may see now";

/// Resolves when `principal`'s standing moves from [`Standing::Kept`] (never for a credential
/// that cannot change), with where it stands then.
pub async fn ended(auth: Arc<Auth>, principal: Principal) -> Standing {
    let mut changes = auth.changes();
    loop {
        if changes.changed().await.is_err() {
            return std::future::pending().await;
        }
        // Boxed: a future awaited here is held inline for the stream's whole life.
        match Box::pin(auth.standing(&principal)).await {
            Standing::Kept => {}
            other => return other,
        }
    }
}

/// Limits and timers of streaming connections (WebSocket and SSE).
#[derive(Clone, Debug)]
pub struct StreamSettings {
    /// Time a WebSocket client has to send `connection_init` (close 4408 after).
    pub init_timeout: Duration,
    /// Interval of server keep-alives (`ping`, `ka`, SSE comments).
    pub keepalive: Duration,
    /// Operations running at once on one socket.
    pub max_operations_per_socket: usize,
    /// Open sockets and SSE streams per client address.
    pub max_per_client: usize,
    /// Open sockets and SSE streams in total.
    pub max_total: usize,
}

impl Default for StreamSettings {
    fn default() -> Self {
        StreamSettings {
            init_timeout: Duration::from_secs(3),
            keepalive: Duration::from_secs(12),
            max_operations_per_socket: 100,
            max_per_client: 1_000,
            max_total: 20_000,
        }
    }
}

/// Admits streaming connections under the caps. Until authentication exists, a client (the
/// principal the per-client cap counts) is the peer's IP address.
pub struct Gate {
    /// The limits.
    pub settings: StreamSettings,
    total: AtomicUsize,
    per_client: Mutex<HashMap<IpAddr, usize>>,
}

/// One admitted connection; releases its place when dropped.
pub struct Admission {
    gate: Arc<Gate>,
    client: IpAddr,
}

/// Which streaming limit refuses a connection, with its value.
#[derive(Debug, thiserror::Error)]
pub enum GateFull {
    #[error(
        "server has {open} streaming connections open, the limit (STREAM_MAX_CONNECTIONS) is {limit}"
    )]
    Total { open: usize, limit: usize },
    #[error(
        "{client} has {open} streaming connections open, the limit per client (STREAM_MAX_CONNECTIONS_PER_CLIENT) is {limit}"
    )]
    PerClient {
        client: IpAddr,
        open: usize,
        limit: usize,
    },
}

impl Gate {
    /// A gate with these limits.
    pub fn new(settings: StreamSettings) -> Self {
        Gate {
            settings,
            total: AtomicUsize::new(0),
            per_client: Mutex::new(HashMap::new()),
        }
    }

    /// Take a place for `client`, or say which limit refuses it.
    pub fn admit(self: &Arc<Self>, client: IpAddr) -> Result<Admission, GateFull> {
        let mut per = self.per_client.lock();
        let total = self.total.load(Ordering::Acquire);
        if total >= self.settings.max_total {
            return Err(GateFull::Total {
                open: total,
                limit: self.settings.max_total,
            });
        }
        let mine = per.entry(client).or_insert(0);
        if *mine >= self.settings.max_per_client {
            return Err(GateFull::PerClient {
                client,
                open: *mine,
                limit: self.settings.max_per_client,
            });
        }
        *mine += 1;
        self.total.fetch_add(1, Ordering::AcqRel);
        Ok(Admission {
            gate: self.clone(),
            client,
        })
    }

    /// Connections open now.
    pub fn open(&self) -> usize {
        self.total.load(Ordering::Acquire)
    }
}

impl Drop for Admission {
    fn drop(&mut self) {
        let mut per = self.gate.per_client.lock();
        if let Some(n) = per.get_mut(&self.client) {
            *n -= 1;
            if *n == 0 {
                per.remove(&self.client);
            }
        }
        self.gate.total.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The close reason (1001) of sockets open when the server shuts down.
pub const GOING_AWAY: &str = "Server is shutting down";

/// Resolves once the server shuts down.
pub async fn gone(going_away: &mut tokio::sync::watch::Receiver<bool>) {
    let _ = going_away.wait_for(|g| *g).await;
}
