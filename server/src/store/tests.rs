use super::*;
use crate::model::{Machine, MachineSpec};

fn machine(ns: &str, name: &str, cluster: &str, class: &str) -> Resource {
    let mut m = Machine::default();
    m.metadata.name = Some(name.into());
    m.metadata.namespace = Some(ns.into());
    m.metadata.labels = Some(
        [(
            crate::model::LABEL_CLUSTER_ID.to_string(),
            cluster.to_string(),
        )]
        .into(),
    );
    m.spec = MachineSpec {
        provider: "kubevirt".into(),
        machine_class: Some(class.into()),
        ..Default::default()
    };
    Resource::Machine(Box::new(m))
}

#[test]
fn writes_get_sequence_numbers_and_reach_the_change_stream_in_order() {
    let store = Store::new();
    let mut rx = store.subscribe();
    let changes = store.apply(vec![
        Op::Upsert(machine("t", "a-ctp0", "a", "small")),
        Op::Upsert(machine("t", "a-wrk0", "a", "small")),
    ]);
    assert_eq!(
        changes.iter().map(|c| c.seq).collect::<Vec<_>>(),
        vec![1, 2]
    );
    let first = rx.try_recv().expect("first change");
    assert_eq!(
        (first.seq, first.change, first.object.name()),
        (1, ChangeType::Added, "a-ctp0")
    );
    assert_eq!(rx.try_recv().expect("second").seq, 2);
    assert_eq!(store.snapshot().seq(), 2);
}

#[test]
fn unchanged_upserts_produce_no_change() {
    let store = Store::new();
    store.apply(vec![Op::Upsert(machine("t", "m", "a", "small"))]);
    assert!(
        store
            .apply(vec![Op::Upsert(machine("t", "m", "a", "small"))])
            .is_empty()
    );
    assert_eq!(store.snapshot().seq(), 1);
}

#[test]
fn indexes_follow_label_changes_and_deletions() {
    let store = Store::new();
    store.apply(vec![
        Op::Upsert(machine("t", "m1", "a", "small")),
        Op::Upsert(machine("t", "m2", "a", "large")),
    ]);
    let snap = store.snapshot();
    assert_eq!(snap.lookup(Idx::MachineByCluster, "t/a").count(), 2);
    // Relabel m2 into cluster b: the old snapshot is untouched, the new one moved it.
    let c = store.apply(vec![Op::Upsert(machine("t", "m2", "b", "large"))]);
    assert_eq!(c[0].change, ChangeType::Modified);
    assert_eq!(
        snap.lookup(Idx::MachineByCluster, "t/a").count(),
        2,
        "old snapshot must not change"
    );
    let now = store.snapshot();
    assert_eq!(
        now.lookup(Idx::MachineByCluster, "t/a")
            .map(|m| m.name())
            .collect::<Vec<_>>(),
        vec!["m1"]
    );
    assert_eq!(now.lookup(Idx::MachineByCluster, "t/b").count(), 1);
    let d = store.apply(vec![Op::Delete(ObjectKey::new(Kind::Machine, "t", "m1"))]);
    assert_eq!(d[0].change, ChangeType::Deleted);
    assert_eq!(
        store
            .snapshot()
            .lookup(Idx::MachineByCluster, "t/a")
            .count(),
        0
    );
    assert_eq!(
        store
            .snapshot()
            .lookup(Idx::MachineByClass, "small")
            .count(),
        0
    );
}

#[test]
fn server_fields_are_stamped_and_uid_survives_updates() {
    let store = Store::new();
    let a = store.apply(vec![Op::Upsert(machine("t", "m", "a", "small"))]);
    let uid = a[0].object.uid().to_string();
    assert!(!uid.is_empty());
    assert_eq!(a[0].object.meta().resource_version.as_deref(), Some("1"));
    let b = store.apply(vec![Op::Upsert(machine("t", "m", "a", "large"))]);
    assert_eq!(b[0].object.uid(), uid);
    assert_eq!(
        b[0].object.meta().generation,
        Some(2),
        "a spec change bumps generation"
    );
    assert!(store.snapshot().by_uid(&uid).is_some());
}

#[test]
fn restore_keeps_identity_and_continues_the_sequence() {
    let store = Store::new();
    let mut m = machine("default", "m1", "c1", "small");
    m.meta_mut().uid = Some("uid-1".into());
    m.meta_mut().resource_version = Some("41".into());
    let mut rx = store.subscribe();
    assert_eq!(store.restore(vec![m]), 1);
    assert!(rx.try_recv().is_err(), "restoring publishes no change");
    let snap = store.snapshot();
    assert_eq!(snap.seq(), 41);
    let got = snap.get(Kind::Machine, "default", "m1").unwrap();
    assert_eq!(got.uid(), "uid-1");
    // The next write continues after the restored sequence.
    let changes = store.apply(vec![Op::Upsert(machine("default", "m2", "c1", "small"))]);
    assert_eq!(changes[0].seq, 42);
}

#[test]
fn a_memo_is_computed_once_per_snapshot_and_afresh_after_a_write() {
    let store = Store::new();
    store.apply(vec![Op::Upsert(machine("t", "m1", "c1", "small"))]);
    let calls = std::sync::atomic::AtomicUsize::new(0);
    let count = |s: &Snapshot| {
        calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        s.count(Kind::Machine)
    };
    let snap = store.snapshot();
    assert_eq!(*snap.memo(count), 1);
    assert_eq!(*snap.memo(count), 1);
    assert_eq!(
        *store.snapshot().memo(count),
        1,
        "the same snapshot shares it"
    );
    assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 1);
    store.apply(vec![Op::Upsert(machine("t", "m2", "c1", "small"))]);
    assert_eq!(
        *store.snapshot().memo(count),
        2,
        "a write starts a new memo"
    );
    assert_eq!(*snap.memo(count), 1, "the old snapshot keeps its own");
    assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 2);
}
