use super::*;
use crate::model::{Kind, Resource};
use crate::source::demo::{FleetSpec, fleet};
use crate::store::{Idx, Op, Store, scoped};

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
    let Some(Resource::KubernetesCluster(k)) = snap.get_key(&ObjectKey::of(kc)).map(|r| r.as_ref())
    else {
        panic!("cluster gone")
    };
    evaluate(&snap, k)
}

fn edit(store: &Store, key: &ObjectKey, f: impl FnOnce(&mut Resource)) {
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
    let vip = ObjectKey::new(
        &Default::default(),
        Kind::ControlPlaneVirtualSharedIp,
        kc.namespace(),
        &k.spec.data.cluster_id,
    );
    edit(&store, &vip, |r| {
        if let Resource::ControlPlaneVirtualSharedIp(v) = r {
            v.status.as_mut().expect("status").load_balancer_ips = Some(Box::default());
        }
    });
    // The cluster says Ready: a warning.
    let p = eval(&store, &kc);
    assert_eq!((p.stage, p.degraded()), (Stage::Ready, true));
    assert_eq!(p.warnings[0].stage, Stage::VipReady);
    assert!(
        p.warnings[0]
            .reason
            .contains("is Ready but has no loadBalancerIps ("),
        "{}",
        p.warnings[0].reason
    );
    // A cluster being built: a blocker.
    edit(&store, &ObjectKey::of(&kc), |r| {
        if let Resource::KubernetesCluster(k) = r {
            k.status.as_mut().expect("status").phase = crate::model::ClusterPhase::default();
        }
    });
    let p = eval(&store, &kc);
    assert_eq!(p.stage, Stage::VipReady);
    assert!(
        p.blockers[0]
            .reason
            .contains("is Ready but has no loadBalancerIps ("),
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
            &Default::default(),
            Idx::MachineByCluster,
            &scoped(kc.namespace(), &k.spec.data.cluster_id),
        )
        .next()
        .cloned()
        .expect("machine");
    store.apply(vec![Op::Delete(ObjectKey::new(
        &Default::default(),
        Kind::NetworkConfiguration,
        machine.namespace(),
        machine.name(),
    ))]);
    let p = eval(&store, &kc);
    assert!(p.degraded(), "Ready by its own status");
    assert_eq!(p.warnings[0].stage, Stage::IpsAllocated);
    assert!(p.warnings[0].object.is_none());
    assert!(
        p.warnings[0].reason.contains("does not exist"),
        "{}",
        p.warnings[0].reason
    );
}

#[test]
fn a_failed_cluster_phase_is_terminal() {
    let (store, kc) = ready_cluster();
    edit(&store, &ObjectKey::of(&kc), |r| {
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
    edit(&store, &ObjectKey::of(&kc), |r| {
        if let Resource::KubernetesCluster(k) = r {
            k.spec.topology.workers.node_pools[0].replicas += 2;
        }
    });
    // Still Ready by its own status while it scales: the missing Machines are a warning.
    let p = eval(&store, &kc);
    assert!(p.degraded());
    assert_eq!(p.warnings[0].stage, Stage::MachinesCreated);
    assert!(
        p.warnings[0].reason.contains("has not created 2 yet"),
        "{}",
        p.warnings[0].reason
    );
}

/// The first Machine of a cluster.
fn first_machine(store: &Store, kc: &Resource) -> Arc<Resource> {
    let Resource::KubernetesCluster(k) = kc else {
        unreachable!()
    };
    store
        .snapshot()
        .lookup(
            &Default::default(),
            Idx::MachineByCluster,
            &scoped(kc.namespace(), &k.spec.data.cluster_id),
        )
        .next()
        .cloned()
        .expect("machine")
}

#[test]
fn every_blocker_is_listed_terminal_first_with_its_stage_and_what_the_status_says() {
    let (store, kc) = ready_cluster();
    edit(&store, &ObjectKey::of(&kc), |r| {
        if let Resource::KubernetesCluster(k) = r {
            k.status.as_mut().expect("status").phase = crate::model::ClusterPhase::default();
        }
    });
    let m = first_machine(&store, &kc);
    // Its NetworkConfiguration is Ready by phase but has no address yet…
    edit(
        &store,
        &ObjectKey::new(
            &Default::default(),
            Kind::NetworkConfiguration,
            m.namespace(),
            m.name(),
        ),
        |r| {
            if let Resource::NetworkConfiguration(c) = r {
                let st = c.status.as_mut().expect("status");
                st.phase = Some(crate::model::NetworkPhase::Ready);
                st.conditions = None;
                for i in st.network_interfaces.iter_mut().flatten() {
                    i.ipv4_addresses = None;
                    i.ip_allocated = Some(false);
                }
            }
        },
    );
    // …and another Machine cannot pull its image (terminal).
    let Resource::KubernetesCluster(k) = kc.as_ref() else {
        unreachable!()
    };
    let failed = store
        .snapshot()
        .lookup(
            &Default::default(),
            Idx::MachineByCluster,
            &scoped(kc.namespace(), &k.spec.data.cluster_id),
        )
        .nth(1)
        .cloned()
        .expect("a second machine");
    edit(&store, &ObjectKey::of(&failed), |r| {
        if let Resource::Machine(m) = r {
            let st = m.status.get_or_insert_with(Default::default);
            st.phase = Some(MachinePhase::Failed);
            st.failure_message = Some("ErrImagePull".into());
        }
    });
    let p = eval(&store, &kc);
    assert_eq!(p.stage, Stage::IpsAllocated, "the first stage not done");
    assert!(p.failed());
    let listed: Vec<(Stage, ObjectKey, bool)> = p
        .blockers
        .iter()
        .map(|b| (b.stage, b.key.clone(), b.terminal))
        .collect();
    assert_eq!(
        listed,
        [
            (Stage::MachinesRunning, ObjectKey::of(&failed), true),
            (
                Stage::IpsAllocated,
                ObjectKey::new(
                    &Default::default(),
                    Kind::NetworkConfiguration,
                    m.namespace(),
                    m.name()
                ),
                false
            ),
        ],
        "{:#?}",
        p.blockers
    );
    assert!(p.blockers[0].reason.contains("ErrImagePull"));
    let nc = &p.blockers[1].reason;
    assert!(
        nc.contains("phase Ready") && nc.contains("ipAllocated=false"),
        "{nc}"
    );
    assert!(!nc.contains("no status"), "{nc}");
    let state = |s: Stage| p.steps.iter().find(|x| x.stage == s).map(|x| x.state);
    assert_eq!(state(Stage::IpsAllocated), Some(StepState::InProgress));
    assert_eq!(state(Stage::MachinesRunning), Some(StepState::Failed));
    assert_eq!(state(Stage::VipReady), Some(StepState::NotStarted));
    assert!(p.summary("c").contains("ErrImagePull"), "terminal first");
}

#[test]
fn a_ready_cluster_with_a_broken_network_is_ready_and_degraded() {
    let (store, kc) = ready_cluster();
    let Resource::KubernetesCluster(k) = kc.as_ref() else {
        unreachable!()
    };
    let nn = ObjectKey::new(
        &Default::default(),
        Kind::NetworkNamespace,
        kc.namespace(),
        &k.spec.data.network_namespace_name,
    );
    edit(&store, &nn, |r| {
        if let Resource::NetworkNamespace(n) = r {
            let st = n.status.get_or_insert_with(Default::default);
            st.phase = Some(crate::model::NetworkPhase::Error);
            st.conditions = None;
        }
    });
    let p = eval(&store, &kc);
    assert!(p.ready(), "the cluster's own status says Ready");
    assert!(p.degraded());
    assert!(p.blockers.is_empty());
    assert_eq!(p.warnings.len(), 1, "{:#?}", p.warnings);
    assert_eq!(
        (p.warnings[0].stage, &p.warnings[0].key),
        (Stage::Network, &nn)
    );
    assert_eq!(
        p.steps
            .iter()
            .find(|s| s.stage == Stage::Network)
            .map(|s| s.state),
        Some(StepState::Degraded)
    );
    assert!(p.summary("c").contains("Ready but degraded"));
}

#[test]
fn what_the_operators_have_not_reached_yet_is_not_a_blocker() {
    let (store, kc) = ready_cluster();
    edit(&store, &ObjectKey::of(&kc), |r| {
        if let Resource::KubernetesCluster(k) = r {
            k.status.as_mut().expect("status").phase = crate::model::ClusterPhase::default();
            k.spec.topology.workers.node_pools[0].replicas += 2;
        }
    });
    let Resource::KubernetesCluster(k) = kc.as_ref() else {
        unreachable!()
    };
    let nn = ObjectKey::new(
        &Default::default(),
        Kind::NetworkNamespace,
        kc.namespace(),
        &k.spec.data.network_namespace_name,
    );
    edit(&store, &nn, |r| {
        if let Resource::NetworkNamespace(n) = r {
            n.status = None;
        }
    });
    let p = eval(&store, &kc);
    assert_eq!(p.stage, Stage::Network);
    let keys: Vec<&ObjectKey> = p.blockers.iter().map(|b| &b.key).collect();
    assert_eq!(
        keys,
        [&nn],
        "missing Machines and a progressing phase wait for the network"
    );
}

#[test]
fn the_network_stage_waits_for_the_segment_and_names_who_provisions_and_allocates() {
    let (store, kc) = ready_cluster();
    let Resource::KubernetesCluster(k) = kc.as_ref() else {
        unreachable!()
    };
    // A cluster being built.
    edit(&store, &ObjectKey::of(&kc), |r| {
        if let Resource::KubernetesCluster(k) = r {
            k.status.as_mut().expect("status").phase = crate::model::ClusterPhase::default();
        }
    });
    let nn = ObjectKey::new(
        &Default::default(),
        Kind::NetworkNamespace,
        kc.namespace(),
        &k.spec.data.network_namespace_name,
    );
    let set_phase = |phase: &str| {
        edit(&store, &nn, |r| {
            if let Resource::NetworkNamespace(n) = r {
                n.status.as_mut().expect("status").provisioning_phase =
                    Some(crate::model::vocab::NetworkPhase::parse(phase));
            }
        })
    };
    let provisioner =
        operators::network_provisioner(store.snapshot().get_key(&nn).expect("namespace"))
            .expect("a provisioner")
            .program();
    // Ready=True, but the segment is still Pending: the network stage waits on it.
    set_phase("Pending");
    let p = eval(&store, &kc);
    assert_eq!(p.stage, Stage::Network);
    let b = &p.blockers[0];
    assert_eq!((b.stage, b.terminal), (Stage::Network, false));
    assert!(
        b.reason.contains("has provisioningPhase Pending")
            && b.reason.contains(&format!("({provisioner} provisions it)")),
        "{}",
        b.reason
    );
    // Error: terminal, with the operator's message.
    set_phase("Error");
    let p = eval(&store, &kc);
    assert!(p.failed() && p.blockers[0].terminal, "{:?}", p.blockers);
    assert!(
        p.blockers[0].reason.contains("provisioningPhase Error: "),
        "{}",
        p.blockers[0].reason
    );
    set_phase("Ready");
    assert_ne!(eval(&store, &kc).stage, Stage::Network);

    // A configuration without an address names its allocator; one that neither allocator
    // takes (provider kea in a static namespace, or static-ip in a DHCP one) is terminal.
    let machine = store
        .snapshot()
        .cluster_machines(&kc)
        .first()
        .map(|m| (*m).clone())
        .expect("machine");
    let nc = ObjectKey::new(
        &Default::default(),
        Kind::NetworkConfiguration,
        machine.namespace(),
        machine.name(),
    );
    edit(&store, &nc, |r| {
        if let Resource::NetworkConfiguration(c) = r {
            c.status = None;
        }
    });
    let snap = store.snapshot();
    let allocator = operators::ip_allocator(&snap, snap.get_key(&nc).expect("nc"))
        .expect("an allocator")
        .program();
    let wrong = if allocator == "kea-operator" {
        "static-ip-operator"
    } else {
        "kea"
    };
    let p = eval(&store, &kc);
    let b = blocker_of(&p, &nc);
    assert!(
        !b.terminal && b.reason.contains(&format!("; {allocator} allocates it")),
        "{}",
        b.reason
    );
    edit(&store, &nc, |r| {
        if let Resource::NetworkConfiguration(c) = r {
            c.spec.provider = Some(wrong.into());
        }
    });
    let p = eval(&store, &kc);
    let b = blocker_of(&p, &nc);
    assert!(
        b.terminal && b.reason.contains("neither allocator takes it"),
        "{}",
        b.reason
    );
}

/// The blocker naming `key`.
fn blocker_of<'p>(p: &'p Pipeline, key: &ObjectKey) -> &'p Blocker {
    p.blockers
        .iter()
        .find(|b| &b.key == key)
        .unwrap_or_else(|| panic!("{key} does not block: {:?}", p.blockers))
}
