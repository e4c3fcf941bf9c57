use super::*;
use crate::model::{Machine, MachineSpec};

fn machine(name: &str, class: &str) -> Resource {
    let mut m = Machine::default();
    m.metadata.name = Some(name.into());
    m.metadata.namespace = Some("team-a".into());
    m.metadata.resource_version = Some(format!("{name}-{class}").into());
    m.spec = MachineSpec {
        provider: "kubevirt".into(),
        machine_class: Some(class.into()),
        ..Default::default()
    };
    Resource::Machine(Box::new(m))
}

fn held(store: &Store, name: &str) -> Option<Arc<Resource>> {
    store
        .snapshot()
        .get(&Datacenter::default(), Kind::Machine, "team-a", name)
        .cloned()
}

/// `listed` applied as a relist of every Machine (not the first list).
async fn relist(store: &Store, listed: Listed) -> usize {
    replace_kind(
        store,
        &Datacenter::default(),
        Kind::Machine,
        None,
        listed,
        false,
    )
    .await
}

/// A relist holds a second copy only of what changed: an object listed as the store holds it
/// is dropped as it arrives and the store's copy stays; the rest is applied as news.
#[tokio::test]
async fn a_relist_keeps_the_stored_copy_of_what_did_not_change() {
    let store = Store::new();
    store.apply(
        ["m0", "m1", "m2"]
            .map(|n| Op::Mirror(machine(n, "small")))
            .into(),
    );
    let m0 = held(&store, "m0").expect("m0");

    let mut listed = Listed::default();
    for r in [
        machine("m0", "small"),
        machine("m1", "large"),
        machine("m3", "small"),
    ] {
        listed.add(Some(&store.snapshot()), r);
    }
    assert_eq!(
        (listed.changed.len(), listed.unchanged.len()),
        (2, 1),
        "m1 (changed) and m3 (new) are held; m0 is the store's"
    );
    assert!(Arc::ptr_eq(&listed.unchanged[0], &m0));

    let changed = relist(&store, listed).await;
    assert_eq!(changed, 3, "m1 modified, m2 deleted, m3 added");
    assert!(Arc::ptr_eq(&held(&store, "m0").expect("m0"), &m0));
    assert_eq!(
        held(&store, "m1").and_then(|r| r.meta().resource_version.clone()),
        Some("m1-large".into())
    );
    assert!(held(&store, "m2").is_none(), "not listed: deleted");
    assert!(held(&store, "m3").is_some());
}

/// An object found unchanged but replaced in the store before the relist is applied is put
/// back as listed: the store ends as the list says.
#[tokio::test]
async fn a_relist_restores_an_unchanged_object_replaced_meanwhile() {
    let store = Store::new();
    store.apply(vec![Op::Mirror(machine("m0", "small"))]);
    let mut listed = Listed::default();
    listed.add(Some(&store.snapshot()), machine("m0", "small"));
    store.apply(vec![Op::Mirror(machine("m0", "large"))]);
    relist(&store, listed).await;
    assert_eq!(
        held(&store, "m0").and_then(|r| r.meta().resource_version.clone()),
        Some("m0-small".into())
    );
}
