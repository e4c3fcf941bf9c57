//! The inventory's metrics: applications by health, kept current with the inventory, and the
//! pushes to the inventory API by outcome.

use std::sync::Arc;

use prometheus::{IntCounterVec, IntGaugeVec, Opts, Registry};
use tokio::sync::watch;

use super::Inventory;
use crate::domain::applications::Health;

/// `vitistack_applications{health}` and `vitistack_inventory_pushes_total{outcome}`.
#[derive(Clone)]
pub struct InventoryMetrics {
    /// Applications by health.
    pub applications: IntGaugeVec,
    /// Pushes by outcome (`delivered`, `retried`, `failed`).
    pub pushes: IntCounterVec,
}

impl InventoryMetrics {
    /// Make both and register them in `registry` (every label value from the start: panels and
    /// alerts read 0, not "no data", also where the inventory is off).
    pub fn register(registry: &Registry) -> prometheus::Result<Self> {
        let applications = IntGaugeVec::new(
            Opts::new(
                "vitistack_applications",
                "Applications (Helm releases) by health",
            ),
            &["health"],
        )?;
        registry.register(Box::new(applications.clone()))?;
        let pushes = IntCounterVec::new(
            Opts::new(
                "vitistack_inventory_pushes_total",
                "Pushes to the inventory API (HOSSTED_API_URL) by outcome",
            ),
            &["outcome"],
        )?;
        for outcome in ["delivered", "retried", "failed"] {
            pushes.with_label_values(&[outcome]);
        }
        registry.register(Box::new(pushes.clone()))?;
        Ok(InventoryMetrics {
            applications,
            pushes,
        })
    }

    /// Keep `vitistack_applications` current with `inventory` until `stop`.
    pub async fn follow(self, inventory: Arc<Inventory>, mut stop: watch::Receiver<bool>) {
        let mut changed = inventory.watch();
        loop {
            let counts = changed.borrow_and_update().counts();
            for h in Health::ALL {
                self.applications
                    .with_label_values(&[h.label()])
                    .set(counts.get(h).copied().unwrap_or(0) as i64);
            }
            tokio::select! {
                r = changed.changed() => if r.is_err() { return },
                _ = stop.wait_for(|s| *s) => return,
            }
        }
    }
}
