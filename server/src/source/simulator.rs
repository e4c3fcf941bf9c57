//! The demo's simulator: plays the operators' pipeline on the demo fleet so subscriptions and the
//! dashboard are visibly live without a cluster, and load tests get realistic churn.
//!
//! Each step moves one cluster one stage on (NetworkNamespace Ready, Machines created,
//! NetworkConfigurations get IPs, Machines Pending → Running or one Failed and replaced, the VIP
//! gets its IP, talos bootstraps, Ready), or now and then scales a Ready cluster's second pool
//! or deletes a Ready cluster and starts a new one at the beginning of the pipeline.
//!
//! It keeps the demo worth looking at: at every moment some cluster is held at each part of the
//! pipeline (network, machines, IPs, VIP, bootstrap) and at least one has failed (a move that
//! would empty a part, or leave no failure, is not made), and no more than half are Ready (a
//! Ready one is replaced by a new cluster instead). A step is
//! the difference between the cluster's objects at its old and new state, applied to the store
//! as one batch. It manages the clusters of the demo fleet it was started with (and those it
//! creates); objects from other sources are never touched.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::demo::{self, DemoStage, FleetSpec};
use crate::store::{ObjectKey, Op, Store};

/// How the simulator runs.
#[derive(Clone, Debug)]
pub struct SimulatorSettings {
    /// Pipeline steps per second (each changes one or more objects).
    pub steps_per_second: f64,
    /// Seed of its choices.
    pub seed: u64,
}

/// One simulated cluster. Its objects are generated again when needed (the generator is
/// deterministic): keeping them as JSON for 500 clusters cost 320 MiB of RSS.
struct Tenant {
    index: usize,
    stage: DemoStage,
    workers: usize,
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

/// The part of the pipeline a cluster is held at (None when Ready).
fn part(stage: DemoStage) -> Option<u8> {
    use DemoStage::*;
    match stage {
        NetworkPending | NetworkError => Some(0),
        MachinesMissing | MachinesProvisioning | MachineFailed => Some(1),
        IpsPending => Some(2),
        VipPending => Some(3),
        Bootstrapping | WaitingForNodes => Some(4),
        Ready => None,
    }
}

/// Failed with a terminal blocker (the operators will not retry without a change).
fn failed(stage: DemoStage) -> bool {
    matches!(stage, DemoStage::NetworkError | DemoStage::MachineFailed)
}

/// At most this share of the demo's clusters is Ready (percent).
const READY_CAP: usize = 50;

/// The ops turning `old` objects into `new` ones: changed or new objects upserted, vanished
/// ones deleted.
fn diff(old: &[(ObjectKey, Value)], new: &[(ObjectKey, Value)]) -> Vec<Op> {
    let mut ops = Vec::new();
    for (k, v) in new {
        if old.iter().any(|(ok, ov)| ok == k && ov == v) {
            continue;
        }
        if let Some(r) = demo::decode(v.clone()) {
            ops.push(Op::Upsert(r.in_datacenter(&k.datacenter)));
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
        let ready: Vec<usize> = (0..self.tenants.len())
            .filter(|&t| self.tenants[t].stage == DemoStage::Ready)
            .collect();
        // A fleet planned with more Ready clusters (the benchmark fleets) keeps its own share.
        let cap = READY_CAP.max(self.spec.ready_percent as usize);
        // Over the cap, or at it (then now and then, so clusters keep flowing to Ready): a Ready
        // cluster is replaced by a new one.
        let n = self.tenants.len();
        let at_cap = (ready.len() + 1) * 100 > n * cap;
        // The cluster the demo's applications run on stays (they would lose their cluster).
        let replaceable: Vec<usize> = ready
            .iter()
            .copied()
            .filter(|&t| self.tenants[t].index != demo::APPS_CLUSTER)
            .collect();
        if !replaceable.is_empty()
            && (ready.len() * 100 > n * cap || (at_cap && self.rng.below(100) < 30))
        {
            let t = replaceable[self.rng.below(replaceable.len() as u64) as usize];
            return self.replace(t);
        }
        // Mostly move a cluster along the pipeline; otherwise change a Ready one.
        if self.rng.below(100) < 85
            && let Some((t, stage)) = self.pick_move()
        {
            return self.regenerate(t, stage, self.tenants[t].workers);
        }
        let t = self.rng.below(self.tenants.len() as u64) as usize;
        let roll = self.rng.below(100);
        if roll < 20
            && self.tenants[t].stage == DemoStage::Ready
            && self.tenants[t].index != demo::APPS_CLUSTER
        {
            self.replace(t)
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

    /// A cluster to move one stage on, and its next stage: a random one whose move keeps every
    /// part of the pipeline held, a failure shown and the Ready share under its cap.
    fn pick_move(&mut self) -> Option<(usize, DemoStage)> {
        let n = self.tenants.len();
        let start = self.rng.below(n as u64) as usize;
        let roll = self.rng.below(100);
        let stages: Vec<DemoStage> = self.tenants.iter().map(|t| t.stage).collect();
        let in_part = |p: Option<u8>| stages.iter().filter(|s| part(**s) == p).count();
        let failures = stages.iter().filter(|s| failed(**s)).count();
        let ready = in_part(None);
        let cap = READY_CAP.max(self.spec.ready_percent as usize);
        (0..n).map(|i| (start + i) % n).find_map(|t| {
            let from = stages[t];
            if from == DemoStage::Ready {
                return None;
            }
            let to = next_stage(from, roll);
            let empties_part = part(from) != part(to) && in_part(part(from)) <= 1;
            let ends_last_failure = failed(from) && !failed(to) && failures <= 1;
            let too_many_ready = to == DemoStage::Ready && (ready + 1) * 100 > n * cap;
            (!empties_part && !ends_last_failure && !too_many_ready).then_some((t, to))
        })
    }

    /// Delete cluster `t`; a new one starts at the beginning of the pipeline.
    /// What the store holds for tenant `t` (its objects as last generated).
    fn objects(&self, t: &Tenant) -> Vec<(ObjectKey, Value)> {
        demo::tenant_objects(&self.spec, t.index, t.stage, t.workers)
    }

    fn replace(&mut self, t: usize) -> Vec<Op> {
        let old = self.objects(&self.tenants[t]);
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
        };
        ops
    }

    fn regenerate(&mut self, t: usize, stage: DemoStage, workers: usize) -> Vec<Op> {
        let old = self.objects(&self.tenants[t]);
        let tenant = &mut self.tenants[t];
        let objects = demo::tenant_objects(&self.spec, tenant.index, stage, workers);
        let ops = diff(&old, &objects);
        tenant.stage = stage;
        tenant.workers = workers;
        ops
    }
}

/// Run the simulator against `store` until the task is aborted; it stands still while `away`
/// (its datacenter's simulated outage).
pub fn start(
    store: Arc<Store>,
    spec: &FleetSpec,
    settings: &SimulatorSettings,
    reset: bool,
    away: Arc<std::sync::atomic::AtomicBool>,
) -> tokio::task::JoinHandle<()> {
    let mut sim = Simulator::new(spec, settings.seed);
    if reset {
        // Objects restored from an earlier run may be at other stages: start from the plan.
        let ops: Vec<Op> = sim
            .tenants
            .iter()
            .flat_map(|t| diff(&[], &sim.objects(t)))
            .collect();
        store.apply(ops);
    }
    let period = Duration::from_secs_f64(1.0 / settings.steps_per_second.max(0.001));
    tracing::info!(
        steps_per_second = settings.steps_per_second,
        clusters = spec.clusters,
        datacenter = %spec.datacenter,
        "simulator: playing the operators' pipeline on the demo fleet"
    );
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(period);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        loop {
            tick.tick().await;
            if away.load(std::sync::atomic::Ordering::Relaxed) {
                continue;
            }
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
        let mut changed = 0;
        let mut became_ready = 0;
        for _ in 0..400 {
            let before: Vec<DemoStage> = sim.tenants.iter().map(|t| t.stage).collect();
            let ops = sim.step();
            changed += ops.len();
            store.apply(ops);
            became_ready += sim
                .tenants
                .iter()
                .zip(&before)
                .filter(|(t, b)| t.stage == DemoStage::Ready && **b != DemoStage::Ready)
                .count();
        }
        assert!(changed > 400, "steps change objects ({changed})");
        assert!(
            became_ready > 10,
            "clusters reach Ready ({became_ready} times)"
        );
        // The store holds exactly the simulated clusters' objects (nothing left behind by
        // deletions or scale-downs).
        let snap = store.snapshot();
        let simulated: std::collections::BTreeSet<String> = sim
            .tenants
            .iter()
            .flat_map(|t| sim.objects(t).into_iter().map(|(k, _)| k.to_string()))
            .collect();
        for kind in [
            Kind::KubernetesCluster,
            Kind::Machine,
            Kind::NetworkConfiguration,
        ] {
            let stored: std::collections::BTreeSet<String> = snap
                .list(kind)
                .map(|r| ObjectKey::of(r).to_string())
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

    /// At every step of a long run, read from the store through the real pipeline evaluation:
    /// some cluster is blocked at each part of the pipeline, one has failed with a terminal
    /// blocker, and at most half are Ready.
    #[test]
    fn the_demo_keeps_a_mix_at_every_step() {
        use crate::domain::pipeline::{Stage, evaluate};
        use crate::model::Resource;
        let spec = FleetSpec::demo();
        let store = Store::new();
        store.apply(demo::fleet(&spec).into_iter().map(Op::Upsert).collect());
        let mut sim = Simulator::new(&spec, 11);
        for step in 0..3000 {
            store.apply(sim.step());
            let snap = store.snapshot();
            let pipelines: Vec<_> = snap
                .list(Kind::KubernetesCluster)
                .filter_map(|r| match &**r {
                    Resource::KubernetesCluster(kc) => Some(evaluate(&snap, kc)),
                    _ => None,
                })
                .collect();
            let at = |stages: &[Stage]| {
                pipelines
                    .iter()
                    .filter(|p| stages.contains(&p.stage))
                    .count()
            };
            let held = [
                ("network", at(&[Stage::Network])),
                (
                    "machines",
                    at(&[Stage::MachinesCreated, Stage::MachinesRunning]),
                ),
                ("IPs", at(&[Stage::IpsAllocated])),
                ("VIP", at(&[Stage::VipReady])),
                ("bootstrap", at(&[Stage::Talos])),
            ];
            for (name, count) in held {
                assert!(
                    count > 0,
                    "step {step}: no cluster held at {name}: {held:?}"
                );
            }
            let failed = pipelines.iter().filter(|p| p.failed()).count();
            assert!(failed > 0, "step {step}: no failed cluster");
            let ready = at(&[Stage::Ready]);
            assert!(
                ready * 2 <= pipelines.len(),
                "step {step}: {ready} of {} Ready",
                pipelines.len()
            );
        }
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
