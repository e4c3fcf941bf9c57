//! The Vitistack status writer (`WRITE_VITISTACK_STATUS`): keeps `status` of each watched
//! datacenter's `Vitistack` (the one `VITISTACKCRDNAME` names) as the old aggregator kept it —
//! providers, machine classes, clusters and counts, see [`crate::domain::vitistack_status`] —
//! for the tools that read it there. Only the replica that holds the Lease writes.
//!
//! It follows the store's change stream: the datacenters whose objects changed are written
//! again once what has arrived so far is taken in (nothing waits on a timer to batch), each as
//! one JSON merge patch on the `status` subresource, preconditioned on the resourceVersion the
//! graph holds, and only when an owned field would change. A refused write (409: the object
//! moved on, and its change is on the way) or an unreachable API server is tried again after
//! the shared backoff.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use kube::api::{Api, DynamicObject, Patch, PatchParams};
use tokio::sync::broadcast::error::TryRecvError;

use super::{FIELD_MANAGER, KubeClients};
use crate::leader::Leader;
use crate::model::{Datacenter, Kind};
use crate::source::status::SourceStatus;
use crate::store::Store;

/// `vitistack_status_writes_total`, registered in `registry`.
pub fn writes_counter(
    registry: &prometheus::Registry,
) -> prometheus::Result<prometheus::IntCounter> {
    let counter = prometheus::IntCounter::new(
        "vitistack_status_writes_total",
        "Writes of the Vitistack's status since start (WRITE_VITISTACK_STATUS; only the Lease holder writes)",
    )?;
    registry.register(Box::new(counter.clone()))?;
    Ok(counter)
}

/// What the writer needs.
pub struct StatusWriter {
    pub store: Arc<Store>,
    pub clients: Arc<KubeClients>,
    pub leader: Leader,
    pub source: Arc<SourceStatus>,
    /// `VITISTACKCRDNAME`.
    pub name: String,
    /// Counts the status writes made (`vitistack_status_writes_total`).
    pub writes: prometheus::IntCounter,
}

impl StatusWriter {
    /// Write until `stop` turns true.
    pub async fn run(self, mut stop: tokio::sync::watch::Receiver<bool>) {
        let mut changes = self.store.subscribe();
        let mut leading = self.leader.watch();
        let mut backoff =
            crate::retry::Backoff::new(Duration::from_millis(500), Duration::from_secs(30));
        // Everything at first (and after a lag, or on taking the Lease).
        let mut all = true;
        let mut dirty: BTreeSet<Datacenter> = BTreeSet::new();
        loop {
            let mut retry = None;
            if all || !dirty.is_empty() {
                let targets: BTreeSet<Datacenter> = if all {
                    self.store.snapshot().datacenters().cloned().collect()
                } else {
                    std::mem::take(&mut dirty)
                };
                all = false;
                if let Some(_turn) = self.leader.turn().await {
                    let mut failed = BTreeSet::new();
                    for dc in targets {
                        if !self.write(&dc).await {
                            failed.insert(dc);
                        }
                    }
                    if failed.is_empty() {
                        backoff.reset();
                    } else {
                        dirty.extend(failed);
                        retry = Some(backoff.delay());
                    }
                }
            }
            let again = async {
                match retry {
                    Some(d) => tokio::time::sleep(d).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                got = changes.recv() => match got {
                    Ok(c) => { dirty.insert(c.object.datacenter().clone()); }
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => all = true,
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
                },
                _ = leading.changed() => all = true,
                _ = again => {}
                _ = stop.wait_for(|s| *s) => return,
            }
            // Take in what has already arrived before writing once for all of it.
            loop {
                match changes.try_recv() {
                    Ok(c) => {
                        dirty.insert(c.object.datacenter().clone());
                    }
                    Err(TryRecvError::Lagged(_)) => all = true,
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Closed) => return,
                }
            }
        }
    }

    /// Bring one datacenter's Vitistack status in line with the graph; false when it should be
    /// tried again (not synced yet, refused, unreachable).
    async fn write(&self, dc: &Datacenter) -> bool {
        if !self.source.watches(dc) {
            return true;
        }
        if !self.source.datacenter_synced(dc) {
            return false;
        }
        let snap = self.store.snapshot();
        let Some(vitistack) = snap.get(dc, Kind::Vitistack, "", &self.name) else {
            tracing::debug!(datacenter = %dc, name = self.name, "no Vitistack of that name: no status to write");
            return true;
        };
        let now = jiff::Timestamp::now().to_string();
        let Some(mut patch) = crate::domain::vitistack_status::patch(&snap, dc, vitistack, &now)
        else {
            return true;
        };
        // Written over exactly what the graph holds, or not at all.
        if let Some(rv) = vitistack.meta().resource_version.as_deref() {
            patch["metadata"] = serde_json::json!({ "resourceVersion": rv });
        }
        let client = match self.clients.client(dc).await {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(datacenter = %dc, error = %e.message, "no client to write the Vitistack status with");
                return false;
            }
        };
        let ar = crate::source::kube::api_resource(Kind::Vitistack, Kind::Vitistack.versions()[0]);
        let api: Api<DynamicObject> = Api::all_with(client, &ar);
        let params = PatchParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..Default::default()
        };
        match api
            .patch_status(&self.name, &params, &Patch::Merge(&patch))
            .await
        {
            Ok(_) => {
                self.writes.inc();
                tracing::info!(datacenter = %dc, name = self.name, "Vitistack status written");
                true
            }
            // The object moved on since the graph read it; its change is on the way.
            Err(kube::Error::Api(s)) if s.code == 409 => false,
            Err(e) => {
                tracing::warn!(datacenter = %dc, name = self.name, error = %e, "the Vitistack status could not be written");
                false
            }
        }
    }
}
