//! Which replica does the work that must happen once (webhook deliveries, history retention):
//! the holder of a `coordination.k8s.io` Lease when leader election is on, else this process.
//!
//! The Lease is held with `kube-lease-manager` (server-side apply, so two replicas can never both
//! take it). A replica that cannot renew it steps down at once, before its lease has run out,
//! rather than going on as a leader that may already have been replaced.

use std::sync::Arc;
use std::time::Duration;

use kube_lease_manager::{LeaseCreateMode, LeaseManager, LeaseManagerBuilder, LeaseParams};
use tokio::sync::watch;

/// How the Lease is taken.
#[derive(Clone, Debug)]
pub struct LeaseSettings {
    /// The Lease's name (`LEASE_NAME`).
    pub name: String,
    /// Its namespace (`LEASE_NAMESPACE`, else the pod's, else the client's default).
    pub namespace: String,
    /// This replica's identity (`POD_NAME` from the downward API, else the host name).
    pub identity: String,
    /// How long a holder that stopped renewing keeps it (`LEASE_DURATION_SECONDS`).
    pub duration: Duration,
}

impl LeaseSettings {
    /// Renew when this much of the lease is left (a third of it, at least a second).
    fn grace(&self) -> u64 {
        (self.duration.as_secs() / 3).max(1)
    }

    /// The longest a request about the Lease may take: a renewal that hangs fails (and the
    /// holder steps down) before the lease can have run out.
    pub fn request_timeout(&self) -> Duration {
        Duration::from_secs(self.grace()).mul_f64(0.8)
    }
}

/// `vitistack_leader`: 1 while this replica does the once-only work (always 1 without election),
/// registered in `registry`.
pub fn leading_gauge(registry: &prometheus::Registry) -> prometheus::Result<prometheus::IntGauge> {
    let gauge = prometheus::IntGauge::new(
        "vitistack_leader",
        "1 while this replica delivers webhooks and trims the history (always 1 without LEADER_ELECTION)",
    )?;
    gauge.set(1);
    registry.register(Box::new(gauge.clone()))?;
    Ok(gauge)
}

/// What `/health` says about leadership.
#[derive(Clone, Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LeaderReport {
    /// Leader election is on (false: this process is the only one doing the once-only work).
    pub election: bool,
    /// This replica does the once-only work now.
    pub leading: bool,
    /// This replica's identity in the Lease.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub identity: Option<String>,
    /// The Lease, `namespace/name`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lease: Option<String>,
}

/// Whether this replica leads, as it changes.
#[derive(Clone)]
pub struct Leader {
    /// Held (shared) by each piece of once-only work while it runs; a replica that stops waits
    /// for it (exclusively) before it gives the Lease up, so its successor never repeats work
    /// that was in flight.
    work: Arc<tokio::sync::RwLock<()>>,
    /// The election task (None without election), awaited when the server stops.
    campaign: Arc<parking_lot::Mutex<Option<tokio::task::JoinHandle<()>>>>,
    leading: watch::Receiver<bool>,
    /// Without election, the sender of `leading`, kept so that waiting for a change waits: with
    /// the sender gone, `changed()` returns at once, and the loops that wait on it (the timeline
    /// writer's) turned at full speed, a core of an idle server.
    _sole: Option<Arc<watch::Sender<bool>>>,
    lease: Option<Arc<LeaseSettings>>,
}

impl std::fmt::Debug for Leader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Leader")
            .field("leading", &*self.leading.borrow())
            .field("lease", &self.lease)
            .finish()
    }
}

impl Leader {
    /// No election: this process leads for as long as it runs.
    pub fn sole() -> Leader {
        let (tx, leading) = watch::channel(true);
        Leader {
            work: Arc::default(),
            campaign: Arc::default(),
            leading,
            _sole: Some(Arc::new(tx)),
            lease: None,
        }
    }

    /// Take part in the election on `client`'s cluster until `stop` turns true, then give the
    /// Lease up (so another replica takes over at once rather than after it runs out).
    /// `gauge` is 1 while this replica leads.
    pub fn elect(
        client: kube::Client,
        settings: LeaseSettings,
        stop: watch::Receiver<bool>,
        gauge: prometheus::IntGauge,
    ) -> Leader {
        let (tx, leading) = watch::channel(false);
        let settings = Arc::new(settings);
        let work: Arc<tokio::sync::RwLock<()>> = Arc::default();
        let task = tokio::spawn(campaign(
            client,
            settings.clone(),
            tx,
            stop,
            gauge,
            work.clone(),
        ));
        Leader {
            work,
            campaign: Arc::new(parking_lot::Mutex::new(Some(task))),
            leading,
            _sole: None,
            lease: Some(settings),
        }
    }

    /// Replicas take turns by a Lease (else this process alone does the once-only work).
    pub fn elected(&self) -> bool {
        self.lease.is_some()
    }

    /// This replica does the once-only work now.
    pub fn leading(&self) -> bool {
        *self.leading.borrow()
    }

    /// A turn at the once-only work, while this replica leads (None when it does not). The
    /// replica gives the Lease up only once every turn taken has ended.
    pub async fn turn(&self) -> Option<tokio::sync::OwnedRwLockReadGuard<()>> {
        let turn = self.work.clone().read_owned().await;
        self.leading().then_some(turn)
    }

    /// Once the stop channel has turned true: until the Lease has been given up, or without
    /// election until the work in flight has ended (at most a few seconds).
    pub async fn resigned(&self) {
        let task = self.campaign.lock().take();
        match task {
            Some(task) => {
                let _ = tokio::time::timeout(Duration::from_secs(10), task).await;
            }
            // No election: the work in flight ends (and is recorded) before the database
            // closes.
            None => {
                let _ = tokio::time::timeout(Duration::from_secs(10), self.work.write()).await;
            }
        }
    }

    /// Who does the work while this replica leads, as recorded with it (the Lease identity;
    /// `sole` without election).
    pub fn identity(&self) -> &str {
        self.lease.as_ref().map_or("sole", |l| l.identity.as_str())
    }

    /// Leadership as it changes (the current value first).
    pub fn watch(&self) -> watch::Receiver<bool> {
        self.leading.clone()
    }

    /// What `/health` shows.
    pub fn report(&self) -> LeaderReport {
        LeaderReport {
            election: self.elected(),
            leading: self.leading(),
            identity: self.lease.as_ref().map(|l| l.identity.clone()),
            lease: self
                .lease
                .as_ref()
                .map(|l| format!("{}/{}", l.namespace, l.name)),
        }
    }
}

/// The waits between two attempts when the API server does not answer.
const FIRST_RETRY: Duration = Duration::from_millis(500);
const MAX_RETRY: Duration = Duration::from_secs(10);

async fn manager(
    client: &kube::Client,
    s: &LeaseSettings,
) -> kube_lease_manager::Result<LeaseManager> {
    let duration = s.duration.as_secs().max(2);
    LeaseManagerBuilder::new(client.clone(), &s.name)
        .with_namespace(&s.namespace)
        .with_create_mode(LeaseCreateMode::AutoCreate)
        .with_parameters(
            LeaseParams::new(s.identity.clone(), duration, s.grace().min(duration - 1))
                .with_field_manager(format!("vitistack-graphql-{}", s.identity)),
        )
        .build()
        .await
}

/// Until `stop` turns true (or its sender is gone).
async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await.map(|_| ());
}

async fn campaign(
    client: kube::Client,
    settings: Arc<LeaseSettings>,
    tx: watch::Sender<bool>,
    mut stop: watch::Receiver<bool>,
    gauge: prometheus::IntGauge,
    work: Arc<tokio::sync::RwLock<()>>,
) {
    let set = |leading: bool| {
        gauge.set(i64::from(leading));
        let was = tx.send_replace(leading);
        if was != leading {
            if leading {
                tracing::info!(lease = %settings.name, identity = %settings.identity, "leading: this replica delivers webhooks and trims the history");
            } else {
                tracing::info!(lease = %settings.name, identity = %settings.identity, "not leading: another replica delivers webhooks and trims the history");
            }
        }
    };
    let mut retry = crate::retry::Backoff::new(FIRST_RETRY, MAX_RETRY);
    loop {
        if *stop.borrow() {
            break;
        }
        // A fresh manager after every error: it starts from what the Lease says now.
        let lease = tokio::select! {
            m = manager(&client, &settings) => m,
            _ = stopped(&mut stop) => break,
        };
        match lease {
            Err(e) => {
                set(false);
                tracing::warn!(lease = %settings.name, error = %e, "cannot reach the Lease; not leading, trying again");
            }
            Ok(lease) => {
                loop {
                    let changed = tokio::select! {
                        c = lease.changed() => c,
                        _ = stopped(&mut stop) => {
                            set(false);
                            // Work begun while leading ends first (its turn is waited for, no
                            // longer than the Lease is sure to be ours), then the Lease goes.
                            let sure = Duration::from_secs(settings.grace());
                            let _ = tokio::time::timeout(sure, work.write()).await;
                            // Best effort: the Lease runs out by itself otherwise.
                            let _ = tokio::time::timeout(Duration::from_secs(2), lease.release()).await;
                            return;
                        }
                    };
                    match changed {
                        Ok(leading) => {
                            retry.reset();
                            set(leading);
                        }
                        Err(e) => {
                            // Unsure whether it still holds the Lease: it steps down now, before
                            // another replica can have taken over.
                            set(false);
                            tracing::warn!(lease = %settings.name, error = %e, "cannot renew or watch the Lease; not leading, trying again");
                            break;
                        }
                    }
                }
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(retry.delay()) => {}
            _ = stopped(&mut stop) => break,
        }
    }
    set(false);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_without_election_leads_and_says_so() {
        let l = Leader::sole();
        assert!(l.leading());
        let r = l.report();
        assert!(!r.election && r.leading && r.identity.is_none());
    }

    #[test]
    fn waiting_for_a_sole_leaders_change_waits() {
        // A wait that returned at once (its sender gone) turned the timeline writer's loop at
        // full speed.
        let l = Leader::sole();
        let mut watch = l.watch();
        assert!(futures::FutureExt::now_or_never(watch.changed()).is_none());
        assert!(*watch.borrow());
    }

    #[test]
    fn renewal_starts_a_third_before_the_end() {
        let s = |secs| LeaseSettings {
            name: "l".into(),
            namespace: "n".into(),
            identity: "i".into(),
            duration: Duration::from_secs(secs),
        };
        assert_eq!(s(15).grace(), 5);
        assert_eq!(s(2).grace(), 1);
    }
}
