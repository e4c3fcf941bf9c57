//! The inventory's own state in the API (`applicationInventory`: the pause, the cluster UUIDs,
//! the namespaces read and denied, counts by health) and the applications' counts in the
//! infrastructure summaries.

use std::sync::Arc;

use async_graphql::{Context, Object, SimpleObject};

use super::HealthValue;
use crate::domain::applications::Health;
use crate::graphql::mark_volatile;
use crate::inventory::{Inventory, Snapshot};

/// Applications of one health.
#[derive(SimpleObject)]
pub struct HealthCount {
    pub health: HealthValue,
    pub count: usize,
}

/// A release the inventory has reconciled, at its live revision.
#[derive(SimpleObject)]
pub struct ReconciledRelease {
    pub datacenter: String,
    pub namespace: String,
    pub name: String,
    pub revision: u64,
}

/// A datacenter's cluster UUID (what the inventory API knows the cluster by).
#[derive(SimpleObject)]
pub struct ClusterUuid {
    pub datacenter: String,
    pub uuid: String,
}

/// The inventory's state and controls (the hossted design's).
pub struct InventoryObj {
    pub(super) inventory: Arc<Inventory>,
    pub(super) snapshot: Arc<Snapshot>,
}

#[Object(name = "ApplicationInventory")]
impl InventoryObj {
    /// Pushes to the inventory API are stopped (`APPLICATIONS_PAUSED`, `setApplicationsPaused`).
    async fn paused(&self) -> bool {
        self.inventory.paused()
    }
    /// Who last paused or resumed the pushes with `setApplicationsPaused` (kept across restarts
    /// and shared by every replica); null while `APPLICATIONS_PAUSED` holds.
    async fn paused_changed_by(&self) -> Option<String> {
        self.inventory.pause().set.map(|(by, _)| by)
    }
    /// When that was (RFC 3339).
    async fn paused_changed_at(&self) -> Option<String> {
        self.inventory
            .pause()
            .set
            .map(|(_, at)| crate::history::rfc3339(at))
    }
    /// Each datacenter's cluster UUID, generated once and kept.
    async fn cluster_uuids(&self) -> Vec<ClusterUuid> {
        self.inventory
            .cluster_uuids()
            .into_iter()
            .map(|(dc, uuid)| ClusterUuid {
                datacenter: dc.key().to_string(),
                uuid,
            })
            .collect()
    }
    /// When the applications were last joined again (RFC 3339).
    async fn last_reconciled_at(&self) -> Option<String> {
        self.snapshot.reconciled_ms.map(crate::history::rfc3339)
    }
    /// Namespaces never read.
    async fn denied_namespaces(&self) -> Vec<String> {
        self.inventory.settings().deny.iter().cloned().collect()
    }
    /// Namespaces seen (denied ones excluded), over every datacenter.
    async fn namespaces(&self) -> usize {
        self.snapshot.namespaces.values().map(|n| n.len()).sum()
    }
    /// Applications in all.
    async fn total(&self) -> usize {
        self.snapshot.apps.len()
    }
    /// Applications by health (healths with none left out).
    async fn by_health(&self) -> Vec<HealthCount> {
        self.snapshot
            .counts()
            .into_iter()
            .map(|(h, count)| HealthCount {
                health: h.into(),
                count,
            })
            .collect()
    }
    /// Every release reconciled, with its live revision.
    async fn reconciled(&self) -> Vec<ReconciledRelease> {
        self.snapshot
            .apps
            .values()
            .map(|a| ReconciledRelease {
                datacenter: a.datacenter.key().to_string(),
                namespace: a.app.release.namespace.clone(),
                name: a.app.release.name.clone(),
                revision: a.app.release.revision,
            })
            .collect()
    }
}

/// The applications in numbers.
#[derive(SimpleObject)]
pub struct ApplicationCounts {
    pub total: usize,
    pub healthy: usize,
    pub degraded: usize,
    pub failed: usize,
    /// Pending install, upgrade or rollback.
    pub pending: usize,
    /// Uninstalling, or unknown.
    pub other: usize,
}

#[async_graphql::ComplexObject]
impl crate::domain::summary::InfrastructureSummary {
    /// The application inventory's counts (null when it is off); of its datacenter when it is
    /// one datacenter's. `infrastructureSummary` sends the summary again when they change.
    async fn applications(&self, ctx: &Context<'_>) -> Option<ApplicationCounts> {
        mark_volatile(ctx);
        let inv = ctx.data_opt::<Arc<Inventory>>()?;
        let counts = match (&self.application_counts, ctx.data_opt()) {
            (Some(c), _) => c.clone(),
            (None, Some(crate::graphql::past::PastApplications(past))) => {
                past.counts_in(self.scope.as_ref())
            }
            (None, None) => inv.snapshot().counts_in(self.scope.as_ref()),
        };
        let n = |h: Health| counts.get(&h).copied().unwrap_or(0);
        Some(ApplicationCounts {
            total: counts.values().sum(),
            healthy: n(Health::Healthy),
            degraded: n(Health::Degraded),
            failed: n(Health::Failed),
            pending: n(Health::PendingInstall)
                + n(Health::PendingUpgrade)
                + n(Health::PendingRollback),
            other: n(Health::Uninstalling) + n(Health::Unknown),
        })
    }
}
