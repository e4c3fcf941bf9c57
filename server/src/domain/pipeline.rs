//! Where a KubernetesCluster is in the operators' pipeline and, when it is not Ready, what blocks it:
//! network Ready → machines created → IPs → machines Running → VIP Ready → talos phases → Ready.

use std::sync::Arc;

use crate::domain::operators;
use crate::model::{ClusterPhase, ConditionStatus, KubernetesCluster, MachinePhase, Resource};
use crate::store::{ObjectKey, Snapshot};

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
    /// Blocked by a failure; the operators will not move on without a change.
    Failed,
    /// Not reached yet.
    NotStarted,
    /// The cluster is Ready, but something this stage stands for is not healthy now (see the
    /// diagnosis' warnings).
    Degraded,
}

/// An object holding the cluster up, and why.
#[derive(Clone, Debug)]
pub struct Blocker {
    /// The stage it blocks.
    pub stage: Stage,
    /// Identity of the blocking object (it may not exist: then `object` is `None`).
    pub key: ObjectKey,
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
    /// The first stage not done (Ready when everything is, or when the cluster's own status
    /// says Ready).
    pub stage: Stage,
    /// Every stage.
    pub steps: Vec<Step>,
    /// What keeps the cluster from Ready: every blocking object, terminal ones first, then in
    /// pipeline order. Empty when Ready.
    pub blockers: Vec<Blocker>,
    /// A Ready cluster's objects that are not healthy now (it is degraded, not down).
    pub warnings: Vec<Blocker>,
}

impl Pipeline {
    /// True when the cluster is Ready (its own status says so, degraded or not).
    pub fn ready(&self) -> bool {
        self.stage == Stage::Ready
    }

    /// True when Ready but something it depends on is not healthy.
    pub fn degraded(&self) -> bool {
        self.ready() && !self.warnings.is_empty()
    }

    /// True when some blocker is terminal.
    pub fn failed(&self) -> bool {
        self.blockers.iter().any(|b| b.terminal)
    }

    /// One sentence: what holds the cluster up.
    pub fn summary(&self, cluster: &str) -> String {
        let more = |n: usize| {
            if n > 1 {
                format!(" (and {} more)", n - 1)
            } else {
                String::new()
            }
        };
        match (self.blockers.first(), self.warnings.first()) {
            (None, None) => format!("{cluster} is Ready"),
            (None, Some(w)) => format!(
                "{cluster} is Ready but degraded: {}{}",
                w.reason,
                more(self.warnings.len())
            ),
            (Some(b), _) => format!(
                "{cluster} is blocked: {}{}",
                b.reason,
                more(self.blockers.len())
            ),
        }
    }
}

/// Describe an object for a reason: `Kind ns/name`.
fn who(key: &ObjectKey) -> String {
    key.to_string()
}

/// Readiness as (ready, what to say, terminal).
fn ready_state(r: &Resource) -> (bool, Option<String>, bool) {
    let r = r.readiness();
    (r.ready, r.detail, r.failed)
}

/// What a NetworkConfiguration's status says, for a reason ("phase Ready; vlan10
/// ipAllocated=false, no address; message …"), or that it has none.
fn nc_status_text(nc: &Resource) -> String {
    let Resource::NetworkConfiguration(c) = nc else {
        return String::new();
    };
    let Some(st) = c.status.as_ref() else {
        return "no status yet".into();
    };
    let mut parts = Vec::new();
    match st.phase.as_ref().map(|p| p.as_str()) {
        Some(p) if !p.is_empty() => parts.push(format!("phase {p}")),
        _ => parts.push("no phase".into()),
    }
    if let Some(detail) = nc
        .readiness()
        .detail
        .filter(|d| d.starts_with("has Ready="))
    {
        parts.push(detail.trim_start_matches("has ").to_string());
    }
    match st.network_interfaces.as_deref() {
        None | Some([]) => parts.push("no interfaces".into()),
        Some(ifs) => {
            for i in ifs {
                let name = i
                    .name
                    .as_deref()
                    .filter(|n| !n.is_empty())
                    .unwrap_or("interface");
                let allocated = match i.ip_allocated {
                    Some(true) => "ipAllocated=true",
                    Some(false) => "ipAllocated=false",
                    None => "ipAllocated unset",
                };
                parts.push(format!("{name} {allocated}, no address"));
            }
        }
    }
    if let Some(m) = st
        .message
        .as_deref()
        .filter(|m| !m.is_empty() && !parts.iter().any(|p| p.contains(m)))
    {
        parts.push(format!("message \"{m}\""));
    }
    format!("status: {}", parts.join("; "))
}

/// The blockers of each stage, as found (all stages are looked at).
struct Found {
    blockers: Vec<Blocker>,
    details: Vec<(Stage, String)>,
}

impl Found {
    fn block(
        &mut self,
        stage: Stage,
        key: &ObjectKey,
        object: Option<Arc<Resource>>,
        reason: String,
        terminal: bool,
    ) {
        self.blockers.push(Blocker {
            stage,
            key: key.clone(),
            object,
            reason,
            terminal,
        });
    }

    fn detail(&mut self, stage: Stage, text: String) {
        self.details.push((stage, text));
    }
}

/// Evaluate the pipeline of a cluster against a snapshot: every stage is looked at, so every
/// blocking object is found (a failed Machine behind a NetworkConfiguration still waiting for its
/// address is named too).
pub fn evaluate(snap: &Snapshot, kc: &KubernetesCluster) -> Pipeline {
    let ns = kc.metadata.namespace.as_deref().unwrap_or_default();
    let dc = &kc.datacenter;
    let cluster_id = &kc.spec.data.cluster_id;
    let kc_key = ObjectKey::new(
        dc,
        crate::model::Kind::KubernetesCluster,
        ns,
        kc.metadata.name.as_deref().unwrap_or_default(),
    );
    let kc_object = snap.get_key(&kc_key).cloned();
    let mut f = Found {
        blockers: Vec::new(),
        details: Vec::new(),
    };

    // 1. Network
    let nn_key = ObjectKey::new(
        dc,
        crate::model::Kind::NetworkNamespace,
        ns,
        &kc.spec.data.network_namespace_name,
    );
    match snap.get_key(&nn_key).cloned() {
        None => f.block(
            Stage::Network,
            &nn_key,
            None,
            format!("{} does not exist", who(&nn_key)),
            false,
        ),
        Some(r) => {
            let (ok, text, terminal) = ready_state(&r);
            if !ok {
                let by = operators::network_provisioner(&r)
                    .map(|o| format!(" ({} provisions it)", o.program()))
                    .unwrap_or_default();
                f.block(
                    Stage::Network,
                    &nn_key,
                    Some(r),
                    format!("{} {}{by}", who(&nn_key), text.unwrap_or_default()),
                    terminal,
                );
            }
        }
    }
    f.detail(Stage::Network, "NetworkNamespace Ready".into());

    // 2. Machines created
    let machines: Vec<Arc<Resource>> = snap.machines_of(kc).into_iter().cloned().collect();
    let cp_expected = kc.spec.topology.controlplane.replicas.max(0) as usize;
    let workers_expected: usize = kc
        .spec
        .topology
        .workers
        .node_pools
        .iter()
        .map(|p| p.replicas.max(0) as usize)
        .fold(0usize, usize::saturating_add);
    let cp_have = machines
        .iter()
        .filter(|m| m.node_role() == Some("control-plane"))
        .count();
    let workers_have = machines.len() - cp_have;
    let expected = cp_expected.saturating_add(workers_expected);
    if cp_have < cp_expected || workers_have < workers_expected {
        let missing = expected.saturating_sub(machines.len()).max(1);
        f.block(
            Stage::MachinesCreated,
            &kc_key,
            kc_object.clone(),
            format!(
                "{} of {expected} Machines exist ({cp_have}/{cp_expected} control planes, {workers_have}/{workers_expected} workers); talos-operator has not created {missing} yet",
                machines.len()
            ),
            false,
        );
    }
    f.detail(
        Stage::MachinesCreated,
        format!("{}/{expected} Machines", machines.len()),
    );

    // 3. IPs allocated (NetworkConfiguration with the Machine's name)
    let mut with_ip = 0;
    for m in &machines {
        let nc_key = ObjectKey::new(dc, crate::model::Kind::NetworkConfiguration, ns, m.name());
        match snap.get_key(&nc_key) {
            None => f.block(
                Stage::IpsAllocated,
                &nc_key,
                None,
                format!(
                    "{} does not exist (the machine operator creates it)",
                    who(&nc_key)
                ),
                false,
            ),
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
                    let (_, _, failed) = ready_state(nc);
                    // Who should fill it in; a configuration neither allocator takes will
                    // not get an address without a change.
                    let (by, unclaimed) = match operators::ip_allocator(snap, nc) {
                        Ok(o) => (format!("; {} allocates it", o.program()), false),
                        Err(why) => (format!("; {why}"), true),
                    };
                    f.block(
                        Stage::IpsAllocated,
                        &nc_key,
                        Some(nc.clone()),
                        format!(
                            "{} has no IPv4 address yet ({}{by})",
                            who(&nc_key),
                            nc_status_text(nc)
                        ),
                        failed || unclaimed,
                    );
                }
            }
        }
    }
    f.detail(
        Stage::IpsAllocated,
        format!(
            "{with_ip}/{} NetworkConfigurations with IPs",
            machines.len()
        ),
    );

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
                let key = ObjectKey::of(m);
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
                f.block(
                    Stage::MachinesRunning,
                    &key,
                    Some(m.clone()),
                    format!("{} is {phase_text}{detail}", who(&key)),
                    failed,
                );
            }
        }
    }
    f.detail(
        Stage::MachinesRunning,
        format!("{running}/{} Machines Running", machines.len()),
    );

    // 5. VIP: the CPVIP named after the clusterId
    let vip_key = ObjectKey::new(
        dc,
        crate::model::Kind::ControlPlaneVirtualSharedIp,
        ns,
        cluster_id,
    );
    match snap.get_key(&vip_key) {
        None => f.block(
            Stage::VipReady,
            &vip_key,
            None,
            format!(
                "{} does not exist (talos-operator creates it)",
                who(&vip_key)
            ),
            false,
        ),
        Some(vip) => {
            let (ok, text, terminal) = ready_state(vip);
            let ips = match vip.as_ref() {
                Resource::ControlPlaneVirtualSharedIp(v) => v
                    .status
                    .as_ref()
                    .and_then(|s| s.load_balancer_ips.as_deref())
                    .unwrap_or_default(),
                _ => &[],
            };
            if !ok || ips.is_empty() {
                let why = if ok {
                    "is Ready but has no loadBalancerIps".to_string()
                } else {
                    text.unwrap_or_default()
                };
                let by = operators::vip_provider(snap, vip)
                    .map(|o| format!(" ({} gives its address)", o.program()))
                    .unwrap_or_default();
                f.block(
                    Stage::VipReady,
                    &vip_key,
                    Some(vip.clone()),
                    format!("{} {why}{by}", who(&vip_key)),
                    terminal,
                );
            }
        }
    }
    f.detail(Stage::VipReady, "control-plane VIP Ready".into());

    // 6. Talos phases → 7. Ready
    let status = kc.status.as_ref();
    let phase = status.map(|s| s.phase.clone()).unwrap_or_default();
    let kc_ready = phase == ClusterPhase::Ready;
    if !kc_ready {
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
        f.block(
            Stage::Talos,
            &kc_key,
            kc_object.clone(),
            format!("{} is at {phase_text}{}", who(&kc_key), failing.trim_end()),
            terminal,
        );
    }
    f.detail(Stage::Talos, format!("talos phase {phase}"));
    assemble(f, kc_ready)
}

/// Turn what was found into the pipeline: the current stage, the states, blockers or warnings.
fn assemble(f: Found, kc_ready: bool) -> Pipeline {
    let first_blocked = f.blockers.iter().map(|b| b.stage).min();
    let current = match (kc_ready, first_blocked) {
        (true, _) | (false, None) => Stage::Ready,
        (false, Some(s)) => s,
    };
    // Past the current stage only failures count: the rest (objects not created yet, Machines
    // still starting, a phase still progressing) is what waiting for the current stage looks like.
    let mut kept: Vec<Blocker> = f
        .blockers
        .into_iter()
        .filter(|b| kc_ready || b.stage <= current || b.terminal)
        .collect();
    // Terminal first, then in pipeline order (the sort is stable: found order within a stage).
    kept.sort_by_key(|b| (!b.terminal, b.stage));
    let of = |stage: Stage, kept: &[Blocker]| -> (bool, bool) {
        let mine: Vec<&Blocker> = kept.iter().filter(|b| b.stage == stage).collect();
        (!mine.is_empty(), mine.iter().any(|b| b.terminal))
    };
    let mut steps: Vec<Step> = f
        .details
        .into_iter()
        .map(|(stage, detail)| {
            let (blocked, terminal) = of(stage, &kept);
            let state = match (kc_ready, blocked, terminal) {
                (true, true, _) => StepState::Degraded,
                (true, false, _) => StepState::Done,
                (false, true, true) => StepState::Failed,
                (false, true, false) => StepState::InProgress,
                (false, false, _) if stage < current => StepState::Done,
                (false, false, _) => StepState::NotStarted,
            };
            let detail = if state == StepState::NotStarted {
                String::new()
            } else {
                detail
            };
            Step {
                stage,
                state,
                detail,
            }
        })
        .collect();
    steps.push(Step {
        stage: Stage::Ready,
        state: if current == Stage::Ready {
            StepState::Done
        } else {
            StepState::NotStarted
        },
        detail: if current == Stage::Ready {
            "Ready".into()
        } else {
            String::new()
        },
    });
    let (blockers, warnings) = if kc_ready {
        (Vec::new(), kept)
    } else {
        (kept, Vec::new())
    };
    Pipeline {
        stage: current,
        steps,
        blockers,
        warnings,
    }
}

#[cfg(test)]
mod tests;
