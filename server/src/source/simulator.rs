//! The demo's simulator: plays the operators' pipeline on the demo fleet so subscriptions and the
//! dashboard are visibly live without a cluster, and load tests get realistic churn.
//!
//! Each step moves one cluster one stage on (NetworkNamespace Ready, Machines created,
//! NetworkConfigurations get IPs, Machines Pending → Running or one Failed and replaced, the VIP
//! gets its IP, talos bootstraps, Ready), or now and then scales a Ready cluster's second pool
//! or deletes a Ready cluster and starts a new one at the beginning of the pipeline. A step is
//! the difference between the cluster's objects at its old and new state, applied to the store
//! as one batch. It manages the clusters of the demo fleet it was started with (and those it
//! creates); objects from other sources are never touched.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::demo::{self, DemoStage, FleetSpec};
use crate::store::{Key, Op, Store};

/// How the simulator runs.
#[derive(Clone, Debug)]
pub struct SimulatorSettings {
    /// Pipeline steps per second (each changes one or more objects).
    pub steps_per_second: f64,
    /// Seed of its choices.
    pub seed: u64,
}

struct Tenant {
    index: usize,
    stage: DemoStage,
    workers: usize,
    /// The objects as last generated (what the store holds for this cluster).
    objects: Vec<(Key, Value)>,
}

/// The simulator's state; `step` is one move.
pub struct Simulator {
    spec: FleetSpec,
    tenants: Vec<Tenant>,
    next_index: usize,
    rng: demo::Rng,
}

fn next_stage(stage: DemoStage, roll: u64) -> DemoStage {
    use DemoStage::*;
    match stage {
        NetworkPending if roll < 10 => NetworkError,
        NetworkPending | NetworkError => MachinesMissing,
        MachinesMissing => IpsPending,
        IpsPending => MachinesProvisioning,
        MachinesProvisioning if roll < 15 => MachineFailed,
        MachinesProvisioning | MachineFailed => VipPending,
        VipPending => Bootstrapping,
        Bootstrapping => WaitingForNodes,
        WaitingForNodes | Ready => Ready,
    }
}

/// The ops turning `old` objects into `new` ones: changed or new objects upserted, vanished
/// ones deleted.
fn diff(old: &[(Key, Value)], new: &[(Key, Value)]) -> Vec<Op> {
    let mut ops = Vec::new();
    for (k, v) in new {
        if old.iter().any(|(ok, ov)| ok == k && ov == v) {
            continue;
        }
        if let Some(r) = demo::decode(v.clone()) {
            ops.push(Op::Upsert(r));
        }
    }
    for (k, _) in old {
        if !new.iter().any(|(nk, _)| nk == k) {
            ops.push(Op::Delete(k.clone()));
        }
    }
    ops
}

impl Simulator {
    /// The simulator for the fleet `spec` generates (its clusters at their generated stages).
    pub fn new(spec: &FleetSpec, seed: u64) -> Self {
        let tenants = demo::stages(spec)
            .into_iter()
            .enumerate()
            .map(|(index, stage)| Tenant {
                index,
                stage,
                workers: spec.workers_per_pool,
                objects: demo::tenant_objects(spec, index, stage, spec.workers_per_pool),
            })
            .collect();
        Simulator {
            spec: spec.clone(),
            tenants,
            next_index: spec.clusters,
            rng: demo::Rng(seed),
        }
    }

    /// The ops of one step (empty when there is no cluster to move).
    pub fn step(&mut self) -> Vec<Op> {
        if self.tenants.is_empty() {
            return Vec::new();
        }
        let moving: Vec<usize> = (0..self.tenants.len())
            .filter(|&t| self.tenants[t].stage != DemoStage::Ready)
            .collect();
        // Mostly move a cluster along the pipeline; otherwise change a Ready one.
        if !moving.is_empty() && self.rng.below(100) < 85 {
            let t = moving[self.rng.below(moving.len() as u64) as usize];
            let roll = self.rng.below(100);
            let stage = next_stage(self.tenants[t].stage, roll);
            return self.regenerate(t, stage, self.tenants[t].workers);
        }
        let t = self.rng.below(self.tenants.len() as u64) as usize;
        let roll = self.rng.below(100);
        if roll < 20 {
            // Delete the cluster; a new one starts at the beginning of the pipeline.
            let old = std::mem::take(&mut self.tenants[t].objects);
            let index = self.next_index;
            self.next_index += 1;
            let objects = demo::tenant_objects(
                &self.spec,
                index,
                DemoStage::NetworkPending,
                self.spec.workers_per_pool,
            );
            let mut ops = diff(&old, &[]);
            ops.extend(diff(&[], &objects));
            self.tenants[t] = Tenant {
                index,
                stage: DemoStage::NetworkPending,
                workers: self.spec.workers_per_pool,
                objects,
            };
            ops
        } else {
            // Scale the second pool by one up or down (between 1 and its size + 3).
            let w = self.tenants[t].workers;
            let workers =
                if (roll.is_multiple_of(2) && w < self.spec.workers_per_pool + 3) || w <= 1 {
                    w + 1
                } else {
                    w - 1
                };
            let stage = self.tenants[t].stage;
            self.regenerate(t, stage, workers)
        }
    }

    fn regenerate(&mut self, t: usize, stage: DemoStage, workers: usize) -> Vec<Op> {
        let tenant = &mut self.tenants[t];
        let objects = demo::tenant_objects(&self.spec, tenant.index, stage, workers);
        let ops = diff(&tenant.objects, &objects);
        tenant.stage = stage;
        tenant.workers = workers;
        tenant.objects = objects;
        ops
    }
}

/// Run the simulator against `store` until the task is aborted.
pub fn start(
    store: Arc<Store>,
    spec: &FleetSpec,
    settings: &SimulatorSettings,
    reset: bool,
) -> tokio::task::JoinHandle<()> {
    let mut sim = Simulator::new(spec, settings.seed);
    if reset {
        // Objects restored from an earlier run may be at other stages: start from the plan.
        let ops: Vec<Op> = sim
            .tenants
            .iter()
            .flat_map(|t| diff(&[], &t.objects))
            .collect();
        store.apply(ops);
    }
    let period = Duration::from_secs_f64(1.0 / settings.steps_per_second.max(0.001));
    tracing::info!(
        steps_per_second = settings.steps_per_second,
        clusters = spec.clusters,
        "simulator: playing the operators' pipeline on the demo fleet"
    );
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(period);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        loop {
            tick.tick().await;
            let ops = sim.step();
            if !ops.is_empty() {
                store.apply(ops);
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Kind;

    #[test]
    fn steps_walk_clusters_to_ready_and_keep_the_store_equal_to_the_simulation() {
        let spec = FleetSpec::demo();
        let store = Store::new();
        store.apply(demo::fleet(&spec).into_iter().map(Op::Upsert).collect());
        let mut sim = Simulator::new(&spec, 3);
        let ready_before = sim
            .tenants
            .iter()
            .filter(|t| t.stage == DemoStage::Ready)
            .count();
        let mut changed = 0;
        for _ in 0..400 {
            let ops = sim.step();
            changed += ops.len();
            store.apply(ops);
        }
        assert!(changed > 400, "steps change objects ({changed})");
        let ready_after = sim
            .tenants
            .iter()
            .filter(|t| t.stage == DemoStage::Ready)
            .count();
        assert!(
            ready_after > ready_before,
            "{ready_before} → {ready_after} Ready"
        );
        // The store holds exactly the simulated clusters' objects (nothing left behind by
        // deletions or scale-downs).
        let snap = store.snapshot();
        let simulated: std::collections::BTreeSet<String> = sim
            .tenants
            .iter()
            .flat_map(|t| t.objects.iter().map(|(k, _)| k.to_string()))
            .collect();
        for kind in [
            Kind::KubernetesCluster,
            Kind::Machine,
            Kind::NetworkConfiguration,
        ] {
            let stored: std::collections::BTreeSet<String> = snap
                .list(kind)
                .map(|r| Key::new(kind, r.namespace(), r.name()).to_string())
                .collect();
            let expected: std::collections::BTreeSet<String> = simulated
                .iter()
                .filter(|k| k.starts_with(&format!("{kind} ")))
                .cloned()
                .collect();
            assert_eq!(stored, expected, "{kind}");
        }
        assert_eq!(snap.list(Kind::KubernetesCluster).count(), spec.clusters);
    }

    #[test]
    fn the_pipeline_order_is_the_operators() {
        let mut s = DemoStage::NetworkPending;
        let mut seen = vec![s];
        while s != DemoStage::Ready {
            s = next_stage(s, 99);
            seen.push(s);
        }
        assert_eq!(
            seen,
            [
                DemoStage::NetworkPending,
                DemoStage::MachinesMissing,
                DemoStage::IpsPending,
                DemoStage::MachinesProvisioning,
                DemoStage::VipPending,
                DemoStage::Bootstrapping,
                DemoStage::WaitingForNodes,
                DemoStage::Ready
            ]
        );
        assert_eq!(
            next_stage(DemoStage::NetworkPending, 0),
            DemoStage::NetworkError
        );
        assert_eq!(
            next_stage(DemoStage::MachinesProvisioning, 0),
            DemoStage::MachineFailed
        );
    }
}
