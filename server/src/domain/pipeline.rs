//! Where a KubernetesCluster is in the operators' pipeline and, when it is not Ready, what blocks it:
//! network Ready → machines created → IPs → machines Running → VIP Ready → talos phases → Ready.

use std::sync::Arc;

use crate::model::{
    ClusterPhase, ConditionStatus, KubernetesCluster, LABEL_NODE_ROLE, MachinePhase, Resource,
};
use crate::store::{Idx, Key, Snapshot, scoped};

/// The pipeline stages, in order (exposed in GraphQL as `PipelineStage`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, async_graphql::Enum)]
#[graphql(name = "PipelineStage")]
pub enum Stage {
    /// The NetworkNamespace must exist and be Ready.
    Network,
    /// Every Machine of the topology must exist.
    MachinesCreated,
    /// Every Machine's NetworkConfiguration must have an IPv4 address.
    IpsAllocated,
    /// Every Machine must be Running.
    MachinesRunning,
    /// The control-plane VIP must be Ready with an address.
    VipReady,
    /// talos-operator configures and bootstraps the cluster.
    Talos,
    /// The cluster is Ready.
    Ready,
}

impl Stage {
    /// All stages in pipeline order.
    pub const ALL: [Stage; 7] = [
        Stage::Network,
        Stage::MachinesCreated,
        Stage::IpsAllocated,
        Stage::MachinesRunning,
        Stage::VipReady,
        Stage::Talos,
        Stage::Ready,
    ];
}

/// State of one stage (exposed in GraphQL as `PipelineStepState`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, async_graphql::Enum)]
#[graphql(name = "PipelineStepState")]
pub enum StepState {
    /// Finished.
    Done,
    /// The current stage, progressing normally.
    InProgress,
    /// The current stage, failed; the operators will not move on without a change.
    Failed,
    /// Not reached yet.
    NotStarted,
}

/// An object holding the cluster up, and why.
#[derive(Clone, Debug)]
pub struct Blocker {
    /// Identity of the blocking object (it may not exist: then `object` is `None`).
    pub key: Key,
    /// The object, when it exists.
    pub object: Option<Arc<Resource>>,
    /// Plain-words reason.
    pub reason: String,
    /// True when the operators treat it as terminal (Ready=False/Error, Failed).
    pub terminal: bool,
}

/// One stage with its state and a short detail.
#[derive(Clone, Debug)]
pub struct Step {
    /// Which stage.
    pub stage: Stage,
    /// Its state.
    pub state: StepState,
    /// What was seen ("3/3 machines Running").
    pub detail: String,
}

/// The evaluated pipeline of one cluster.
#[derive(Clone, Debug)]
pub struct Pipeline {
    /// The first stage not done (Ready when everything is).
    pub stage: Stage,
    /// Every stage.
    pub steps: Vec<Step>,
    /// What blocks the current stage; empty when Ready.
    pub blockers: Vec<Blocker>,
}

impl Pipeline {
    /// True when the cluster is Ready.
    pub fn ready(&self) -> bool {
        self.stage == Stage::Ready
    }

    /// True when some blocker is terminal.
    pub fn failed(&self) -> bool {
        self.blockers.iter().any(|b| b.terminal)
    }

    /// One sentence: what holds the cluster up.
    pub fn summary(&self, cluster: &str) -> String {
        match self.blockers.first() {
            None => format!("{cluster} is Ready"),
            Some(b) if self.blockers.len() == 1 => format!("{cluster} is blocked: {}", b.reason),
            Some(b) => format!(
                "{cluster} is blocked: {} (and {} more)",
                b.reason,
                self.blockers.len() - 1
            ),
        }
    }
}

/// Describe an object for a reason: `Kind ns/name`.
fn who(key: &Key) -> String {
    key.to_string()
}

/// Readiness as (ready, what to say, terminal).
fn ready_state(r: &Resource) -> (bool, Option<String>, bool) {
    let r = r.readiness();
    (r.ready, r.detail, r.failed)
}

/// Evaluate the pipeline of a cluster against a snapshot.
pub fn evaluate(snap: &Snapshot, kc: &KubernetesCluster) -> Pipeline {
    let ns = kc.metadata.namespace.as_deref().unwrap_or_default();
    let cluster_id = &kc.spec.data.cluster_id;
    let kc_key = Key::new(
        crate::model::Kind::KubernetesCluster,
        ns,
        kc.metadata.name.as_deref().unwrap_or_default(),
    );
    let mut steps: Vec<Step> = Vec::new();
    let mut blockers: Vec<Blocker> = Vec::new();

    // 1. Network
    let nn_key = Key::new(
        crate::model::Kind::NetworkNamespace,
        ns,
        &kc.spec.data.network_namespace_name,
    );
    let nn = snap.get_key(&nn_key).cloned();
    match &nn {
        None => blockers.push(Blocker {
            key: nn_key.clone(),
            object: None,
            reason: format!("{} does not exist", who(&nn_key)),
            terminal: false,
        }),
        Some(r) => {
            let (ok, text, terminal) = ready_state(r);
            if !ok {
                blockers.push(Blocker {
                    key: nn_key.clone(),
                    object: Some(r.clone()),
                    reason: format!("{} {}", who(&nn_key), text.unwrap_or_default()),
                    terminal,
                });
            }
        }
    }
    if finish(
        &mut steps,
        Stage::Network,
        &blockers,
        "NetworkNamespace Ready".into(),
    ) {
        return done(steps, blockers);
    }

    // 2. Machines created
    let machines: Vec<Arc<Resource>> = snap
        .lookup(Idx::MachineByCluster, &scoped(ns, cluster_id))
        .cloned()
        .collect();
    let cp_expected = kc.spec.topology.controlplane.replicas.max(0) as usize;
    let workers_expected: usize = kc
        .spec
        .topology
        .workers
        .node_pools
        .iter()
        .map(|p| p.replicas.max(0) as usize)
        .sum();
    let cp_have = machines
        .iter()
        .filter(|m| m.label(LABEL_NODE_ROLE) == Some("control-plane"))
        .count();
    let workers_have = machines.len() - cp_have;
    let expected = cp_expected + workers_expected;
    if cp_have < cp_expected || workers_have < workers_expected {
        let missing = expected.saturating_sub(machines.len()).max(1);
        blockers.push(Blocker {
            key: kc_key.clone(),
            object: snap.get_key(&kc_key).cloned(),
            reason: format!(
                "{} of {expected} Machines exist ({cp_have}/{cp_expected} control planes, {workers_have}/{workers_expected} workers); talos-operator has not created {missing} yet",
                machines.len()
            ),
            terminal: false,
        });
    }
    if finish(
        &mut steps,
        Stage::MachinesCreated,
        &blockers,
        format!("{}/{expected} Machines", machines.len()),
    ) {
        return done(steps, blockers);
    }

    // 3. IPs allocated (NetworkConfiguration with the Machine's name)
    let mut with_ip = 0;
    for m in &machines {
        let nc_key = Key::new(crate::model::Kind::NetworkConfiguration, ns, m.name());
        match snap.get_key(&nc_key) {
            None => blockers.push(Blocker {
                key: nc_key.clone(),
                object: None,
                reason: format!(
                    "{} does not exist (the machine operator creates it)",
                    who(&nc_key)
                ),
                terminal: false,
            }),
            Some(nc) => {
                let has_ip = match nc.as_ref() {
                    Resource::NetworkConfiguration(c) => c
                        .status
                        .as_ref()
                        .and_then(|s| s.network_interfaces.as_ref())
                        .is_some_and(|ifs| {
                            ifs.iter()
                                .any(|i| i.ipv4_addresses.as_ref().is_some_and(|a| !a.is_empty()))
                        }),
                    _ => false,
                };
                if has_ip {
                    with_ip += 1;
                } else {
                    let (_, text, terminal) = ready_state(nc);
                    blockers.push(Blocker {
                        key: nc_key.clone(),
                        object: Some(nc.clone()),
                        reason: format!(
                            "{} has no IPv4 address yet ({})",
                            who(&nc_key),
                            text.unwrap_or_else(|| "no status".into())
                        ),
                        terminal,
                    });
                }
            }
        }
    }
    if finish(
        &mut steps,
        Stage::IpsAllocated,
        &blockers,
        format!(
            "{with_ip}/{} NetworkConfigurations with IPs",
            machines.len()
        ),
    ) {
        return done(steps, blockers);
    }

    // 4. Machines running
    let mut running = 0;
    for m in &machines {
        let Resource::Machine(machine) = m.as_ref() else {
            continue;
        };
        let status = machine.status.as_ref();
        match status.and_then(|s| s.phase.as_ref()) {
            Some(MachinePhase::Running) => running += 1,
            phase => {
                let key = Key::of(m);
                let failed = matches!(phase, Some(MachinePhase::Failed));
                let detail = status
                    .and_then(|s| {
                        s.failure_message
                            .clone()
                            .or_else(|| s.message.clone())
                            .or_else(|| s.state.clone())
                    })
                    .map(|t| format!(": {t}"))
                    .unwrap_or_default();
                let phase_text = phase
                    .map(|p| p.to_string())
                    .unwrap_or_else(|| "no phase".into());
                blockers.push(Blocker {
                    key: key.clone(),
                    object: Some(m.clone()),
                    reason: format!("{} is {phase_text}{detail}", who(&key)),
                    terminal: failed,
                });
            }
        }
    }
    if finish(
        &mut steps,
        Stage::MachinesRunning,
        &blockers,
        format!("{running}/{} Machines Running", machines.len()),
    ) {
        return done(steps, blockers);
    }

    // 5. VIP: the CPVIP named after the clusterId
    let vip_key = Key::new(
        crate::model::Kind::ControlPlaneVirtualSharedIp,
        ns,
        cluster_id,
    );
    match snap.get_key(&vip_key) {
        None => blockers.push(Blocker {
            key: vip_key.clone(),
            object: None,
            reason: format!(
                "{} does not exist (talos-operator creates it)",
                who(&vip_key)
            ),
            terminal: false,
        }),
        Some(vip) => {
            let (ok, text, terminal) = ready_state(vip);
            let ips = match vip.as_ref() {
                Resource::ControlPlaneVirtualSharedIp(v) => v
                    .status
                    .as_ref()
                    .and_then(|s| s.load_balancer_ips.clone())
                    .unwrap_or_default(),
                _ => Vec::new(),
            };
            if !ok || ips.is_empty() {
                let why = if ok {
                    "is Ready but has no loadBalancerIps".to_string()
                } else {
                    text.unwrap_or_default()
                };
                blockers.push(Blocker {
                    key: vip_key.clone(),
                    object: Some(vip.clone()),
                    reason: format!("{} {why}", who(&vip_key)),
                    terminal,
                });
            }
        }
    }
    if finish(
        &mut steps,
        Stage::VipReady,
        &blockers,
        "control-plane VIP Ready".into(),
    ) {
        return done(steps, blockers);
    }

    // 6. Talos phases → 7. Ready
    let status = kc.status.as_ref();
    let phase = status.map(|s| s.phase.clone()).unwrap_or_default();
    if phase != ClusterPhase::Ready {
        let terminal = matches!(
            phase,
            ClusterPhase::Failed | ClusterPhase::ValidationError | ClusterPhase::UpgradeFailed
        );
        let failing = status
            .and_then(|s| {
                s.conditions
                    .iter()
                    .find(|c| c.status == ConditionStatus::False)
            })
            .map(|c| {
                format!(
                    "; condition {}=False: {} {}",
                    c.type_,
                    c.reason.clone().unwrap_or_default(),
                    c.message.clone().unwrap_or_default()
                )
            })
            .unwrap_or_default();
        let phase_text = if phase.as_str().is_empty() {
            "no phase yet".to_string()
        } else {
            format!("phase {phase}")
        };
        blockers.push(Blocker {
            key: kc_key.clone(),
            object: snap.get_key(&kc_key).cloned(),
            reason: format!("{} is at {phase_text}{}", who(&kc_key), failing.trim_end()),
            terminal,
        });
    }
    if finish(
        &mut steps,
        Stage::Talos,
        &blockers,
        format!("talos phase {phase}"),
    ) {
        return done(steps, blockers);
    }
    steps.push(Step {
        stage: Stage::Ready,
        state: StepState::Done,
        detail: "Ready".into(),
    });
    Pipeline {
        stage: Stage::Ready,
        steps,
        blockers,
    }
}

/// Record a stage; returns true when it blocks (the remaining stages are then not started).
fn finish(steps: &mut Vec<Step>, stage: Stage, blockers: &[Blocker], detail: String) -> bool {
    if blockers.is_empty() {
        steps.push(Step {
            stage,
            state: StepState::Done,
            detail,
        });
        return false;
    }
    let state = if blockers.iter().any(|b| b.terminal) {
        StepState::Failed
    } else {
        StepState::InProgress
    };
    steps.push(Step {
        stage,
        state,
        detail,
    });
    true
}

fn done(mut steps: Vec<Step>, blockers: Vec<Blocker>) -> Pipeline {
    let stage = steps.last().map(|s| s.stage).unwrap_or(Stage::Network);
    for s in Stage::ALL.iter().filter(|s| **s > stage) {
        steps.push(Step {
            stage: *s,
            state: StepState::NotStarted,
            detail: String::new(),
        });
    }
    Pipeline {
        stage,
        steps,
        blockers,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Kind, Resource};
    use crate::source::demo::{FleetSpec, fleet};
    use crate::store::{Op, Store};

    /// A store with the demo fleet and one Ready cluster to break.
    fn ready_cluster() -> (Store, Arc<Resource>) {
        let store = Store::new();
        store.apply_loaded(
            fleet(&FleetSpec::demo())
                .into_iter()
                .map(Op::Upsert)
                .collect(),
        );
        let kc = store
            .snapshot()
            .list(Kind::KubernetesCluster)
            .find(|c| c.phase() == Some("Ready"))
            .cloned()
            .expect("a Ready cluster");
        (store, kc)
    }

    fn eval(store: &Store, kc: &Resource) -> Pipeline {
        let snap = store.snapshot();
        let Some(Resource::KubernetesCluster(k)) = snap.get_key(&Key::of(kc)).map(|r| r.as_ref())
        else {
            panic!("cluster gone")
        };
        evaluate(&snap, k)
    }

    fn edit(store: &Store, key: &Key, f: impl FnOnce(&mut Resource)) {
        let mut r = store
            .snapshot()
            .get_key(key)
            .map(|r| (**r).clone())
            .expect("object");
        f(&mut r);
        store.apply(vec![Op::Upsert(r)]);
    }

    #[test]
    fn a_ready_cluster_has_every_step_done() {
        let (store, kc) = ready_cluster();
        let p = eval(&store, &kc);
        assert!(p.ready());
        assert!(p.steps.iter().all(|s| s.state == StepState::Done));
        assert_eq!(p.steps.len(), Stage::ALL.len());
    }

    #[test]
    fn a_vip_that_is_ready_without_an_address_still_blocks() {
        let (store, kc) = ready_cluster();
        let Resource::KubernetesCluster(k) = kc.as_ref() else {
            unreachable!()
        };
        let vip = Key::new(
            Kind::ControlPlaneVirtualSharedIp,
            kc.namespace(),
            &k.spec.data.cluster_id,
        );
        edit(&store, &vip, |r| {
            if let Resource::ControlPlaneVirtualSharedIp(v) = r {
                v.status.as_mut().expect("status").load_balancer_ips = Some(vec![]);
            }
        });
        let p = eval(&store, &kc);
        assert_eq!(p.stage, Stage::VipReady);
        assert!(
            p.blockers[0]
                .reason
                .ends_with("is Ready but has no loadBalancerIps"),
            "{}",
            p.blockers[0].reason
        );
    }

    #[test]
    fn a_deleted_network_configuration_is_named() {
        let (store, kc) = ready_cluster();
        let Resource::KubernetesCluster(k) = kc.as_ref() else {
            unreachable!()
        };
        let machine = store
            .snapshot()
            .lookup(
                Idx::MachineByCluster,
                &scoped(kc.namespace(), &k.spec.data.cluster_id),
            )
            .next()
            .cloned()
            .expect("machine");
        store.apply(vec![Op::Delete(Key::new(
            Kind::NetworkConfiguration,
            machine.namespace(),
            machine.name(),
        ))]);
        let p = eval(&store, &kc);
        assert_eq!(p.stage, Stage::IpsAllocated);
        assert!(p.blockers[0].object.is_none());
        assert!(
            p.blockers[0].reason.contains("does not exist"),
            "{}",
            p.blockers[0].reason
        );
    }

    #[test]
    fn a_failed_cluster_phase_is_terminal() {
        let (store, kc) = ready_cluster();
        edit(&store, &Key::of(&kc), |r| {
            if let Resource::KubernetesCluster(k) = r {
                k.status.as_mut().expect("status").phase = crate::model::ClusterPhase::Failed;
            }
        });
        let p = eval(&store, &kc);
        assert_eq!(p.stage, Stage::Talos);
        assert!(p.failed());
        assert_eq!(
            p.steps
                .iter()
                .find(|s| s.stage == Stage::Talos)
                .map(|s| s.state),
            Some(StepState::Failed)
        );
    }

    #[test]
    fn scaling_up_blocks_on_missing_machines() {
        let (store, kc) = ready_cluster();
        edit(&store, &Key::of(&kc), |r| {
            if let Resource::KubernetesCluster(k) = r {
                k.spec.topology.workers.node_pools[0].replicas += 2;
            }
        });
        let p = eval(&store, &kc);
        assert_eq!(p.stage, Stage::MachinesCreated);
        assert!(
            p.blockers[0].reason.contains("has not created 2 yet"),
            "{}",
            p.blockers[0].reason
        );
    }
}
