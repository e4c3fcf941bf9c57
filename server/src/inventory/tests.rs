use std::collections::BTreeMap;

use super::*;
use crate::domain::applications::Meta;
use crate::domain::applications::{Health, PodFacts};
use crate::model::helm::{HelmRelease, ReleaseStatus};

fn release(name: &str, ns: &str, revision: u64, status: &str) -> Fact {
    Fact::Release {
        object: format!("sh.helm.release.v1.{name}.v{revision}"),
        in_configmap: false,
        release: Box::new(HelmRelease {
            name: name.into(),
            namespace: ns.into(),
            revision,
            status: ReleaseStatus::parse(status),
            updated: None,
            chart: "shop".into(),
            chart_version: format!("1.{revision}.0"),
            app_version: "2.0".into(),
            objects: vec![],
            managed_by_helm: true,
        }),
    }
}

fn pod(name: &str, ns: &str, instance: &str, ready: bool, extra: &[(&str, &str)]) -> Fact {
    let mut labels: BTreeMap<String, String> = [("app.kubernetes.io/instance", instance)]
        .iter()
        .chain(extra)
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    labels.insert("app.kubernetes.io/managed-by".into(), "Helm".into());
    Fact::Pod(PodFacts {
        meta: Meta {
            name: name.into(),
            namespace: ns.into(),
            labels,
            annotations: BTreeMap::new(),
        },
        images: vec!["shop:2".into()],
        phase: "Running".into(),
        ready,
        restarts: 0,
        waiting: vec![],
        ready_since: None,
    })
}

fn dc() -> Datacenter {
    Datacenter::default()
}

#[test]
fn releases_are_joined_per_namespace_and_only_the_live_revision_shows() {
    let inv = Inventory::new(InventorySettings::default());
    inv.apply(&dc(), release("shop", "team-a", 1, "superseded"));
    inv.apply(&dc(), release("shop", "team-a", 2, "deployed"));
    inv.apply(&dc(), pod("shop-0", "team-a", "shop", true, &[]));
    // Same release name and labels in another namespace: its own application, never joined.
    inv.apply(&dc(), pod("shop-0", "team-b", "shop", false, &[]));
    inv.apply(&dc(), release("shop", "kube-system", 1, "deployed"));
    let s = inv.snapshot();
    assert_eq!(s.apps.len(), 1, "{:?}", s.apps.keys().collect::<Vec<_>>());
    let a = &s.apps[&(dc(), "team-a".into(), "shop".into())];
    assert_eq!(a.app.release.revision, 2);
    assert_eq!(a.app.pods.len(), 1);
    assert_eq!(a.app.health, Health::Healthy);
    let revisions: Vec<u64> = a.revisions.iter().map(|r| r.revision).collect();
    assert_eq!(revisions, [2, 1]);
}

#[test]
fn a_change_is_told_for_readiness_and_revisions_not_for_a_label() {
    let inv = Inventory::new(InventorySettings::default());
    inv.apply(&dc(), release("shop", "team-a", 1, "deployed"));
    inv.apply(&dc(), pod("shop-0", "team-a", "shop", true, &[]));
    let mut rx = inv.changes();
    inv.apply(
        &dc(),
        pod("shop-0", "team-a", "shop", true, &[("tier", "web")]),
    );
    let c = rx.try_recv().expect("the label is in the application");
    assert!(!c.pushable(), "a label change is not pushed");
    inv.apply(&dc(), pod("shop-0", "team-a", "shop", false, &[]));
    let c = rx.try_recv().expect("readiness");
    assert!(c.pushable());
    assert_eq!(
        c.after.as_ref().map(|a| a.app.health),
        Some(Health::Degraded)
    );
    inv.apply(&dc(), release("shop", "team-a", 2, "deployed"));
    assert!(rx.try_recv().expect("revision").pushable());
    // A relist without the pod: it is gone from the application.
    inv.replace(&dc(), FactKind::Pod, vec![]);
    let s = inv.snapshot();
    assert!(
        s.apps[&(dc(), "team-a".into(), "shop".into())]
            .app
            .pods
            .is_empty()
    );
    inv.delete(
        &dc(),
        FactKind::Release,
        "team-a",
        "sh.helm.release.v1.shop.v2",
    );
    inv.delete(
        &dc(),
        FactKind::Release,
        "team-a",
        "sh.helm.release.v1.shop.v1",
    );
    assert!(inv.snapshot().apps.is_empty());
    let mut last = None;
    while let Ok(c) = rx.try_recv() {
        last = Some(c);
    }
    let last = last.expect("removed");
    assert!(last.after.is_none() && last.before.is_some());
}

fn namespace(name: &str, uid: &str) -> Fact {
    Fact::Namespace {
        name: name.into(),
        uid: uid.into(),
    }
}

#[test]
fn the_kube_system_uid_is_kept_though_its_namespace_is_denied() {
    let inv = Inventory::new(InventorySettings::default());
    inv.replace(
        &dc(),
        FactKind::Namespace,
        vec![namespace("kube-system", "u-1"), namespace("team-a", "u-2")],
    );
    let s = inv.snapshot();
    assert_eq!(
        s.kube_system_uids.get(&dc()).map(String::as_str),
        Some("u-1")
    );
    assert_eq!(
        s.namespaces
            .get(&dc())
            .map(|n| n.iter().cloned().collect::<Vec<_>>()),
        Some(vec!["team-a".to_string()]),
        "kube-system stays denied"
    );
    inv.apply(&dc(), namespace("kube-system", "u-3"));
    assert_eq!(
        inv.snapshot()
            .kube_system_uids
            .get(&dc())
            .map(String::as_str),
        Some("u-3")
    );
    inv.delete(&dc(), FactKind::Namespace, "kube-system", "kube-system");
    assert!(inv.snapshot().kube_system_uids.is_empty());
    inv.apply(&dc(), namespace("kube-system", "u-4"));
    inv.forget(&dc());
    assert!(inv.snapshot().kube_system_uids.is_empty());
}

#[test]
fn changes_of_the_first_lists_are_marked_initial_and_later_ones_not() {
    let inv = Inventory::new(InventorySettings::default());
    let mut rx = inv.changes();
    inv.expect(&dc(), &[FactKind::Release, FactKind::Pod]);
    inv.replace(
        &dc(),
        FactKind::Release,
        vec![release("shop", "team-a", 1, "deployed")],
    );
    // The last first list: its changes are still the cluster's state, not news.
    inv.replace(
        &dc(),
        FactKind::Pod,
        vec![pod("shop-0", "team-a", "shop", true, &[])],
    );
    let first: Vec<bool> = std::iter::from_fn(|| rx.try_recv().ok())
        .map(|c| c.initial)
        .collect();
    assert_eq!(first, [true, true]);
    assert!(inv.synced(&dc()));
    inv.apply(&dc(), pod("shop-0", "team-a", "shop", false, &[]));
    assert!(!rx.try_recv().expect("readiness").initial);
}

#[test]
fn the_same_transition_made_again_is_a_new_history_row() {
    let inv = Inventory::new(InventorySettings::default());
    inv.apply(&dc(), release("shop", "team-a", 1, "deployed"));
    let mut rx = inv.changes();
    let flap = |ready: bool, since: &str| {
        let Fact::Pod(mut p) = pod("shop-0", "team-a", "shop", ready, &[]) else {
            unreachable!()
        };
        p.ready_since = Some(since.into());
        Fact::Pod(p)
    };
    inv.apply(&dc(), flap(true, "2026-11-26T08:00:00Z"));
    inv.apply(&dc(), flap(false, "2026-11-26T08:01:00Z"));
    inv.apply(&dc(), flap(true, "2026-11-26T08:02:00Z"));
    inv.apply(&dc(), flap(false, "2026-11-26T08:03:00Z"));
    inv.apply(&dc(), flap(true, "2026-11-26T08:04:00Z"));
    let rows: Vec<crate::history::EventRow> = std::iter::from_fn(|| rx.try_recv().ok())
        .filter_map(|c| crate::history::applications::row(&c, 0))
        .collect();
    let health: Vec<String> = rows.iter().filter_map(|r| r.phase_after.clone()).collect();
    // (A release without pods is healthy already: the first ready pod changes nothing.)
    assert_eq!(health, ["DEGRADED", "HEALTHY", "DEGRADED", "HEALTHY"]);
    let versions: BTreeSet<&str> = rows.iter().map(|r| r.resource_version.as_str()).collect();
    assert_eq!(
        versions.len(),
        rows.len(),
        "each transition is its own row: {versions:?}"
    );
}
