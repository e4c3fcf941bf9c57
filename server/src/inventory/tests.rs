use super::*;
use crate::domain::applications::Meta;

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
