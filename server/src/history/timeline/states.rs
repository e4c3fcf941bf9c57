//! The timeline writer's record of each datacenter's state (synced, stale, unreachable) over
//! time, beside its objects.

use super::Writer;
use crate::db::{DbError, with_pool};
use crate::history::now_ms;

impl Writer {
    /// Record each datacenter's state where it changed since it was last recorded.
    pub(super) async fn record_states(&mut self) {
        let Some(now) = self.history.datacenters.get().map(|f| f()) else {
            return;
        };
        let changed: Vec<(String, String, Option<String>)> = now
            .into_iter()
            .filter(|(k, state, error)| self.states.get(k) != Some(&(state.clone(), error.clone())))
            .collect();
        if changed.is_empty() || !self.history.leader.leading() {
            return;
        }
        let Some(db) = self.history.db() else { return };
        let at = now_ms();
        let written: Result<(), DbError> = async {
            let _turn = db.write_turn().await;
            with_pool!(db, p => {
                let mut b = sqlx::QueryBuilder::new(
                    "INSERT INTO datacenter_states (at_ms, datacenter, state, error) ",
                );
                b.push_values(&changed, |mut b, (k, state, error)| {
                    b.push_bind(at)
                        .push_bind(k.clone())
                        .push_bind(state.clone())
                        .push_bind(error.clone());
                });
                b.build().execute(p).await?;
            });
            Ok(())
        }
        .await;
        match written {
            Ok(()) => {
                for (k, state, error) in changed {
                    self.states.insert(k, (state, error));
                }
            }
            Err(e) => tracing::warn!(error = %e, "recording the datacenters' states failed"),
        }
    }
}
