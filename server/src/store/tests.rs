use super::members::Members;
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
    assert_eq!(
        snap.lookup(&Default::default(), Idx::MachineByCluster, "t/a")
            .count(),
        2
    );
    // Relabel m2 into cluster b: the old snapshot is untouched, the new one moved it.
    let c = store.apply(vec![Op::Upsert(machine("t", "m2", "b", "large"))]);
    assert_eq!(c[0].change, ChangeType::Modified);
    assert_eq!(
        snap.lookup(&Default::default(), Idx::MachineByCluster, "t/a")
            .count(),
        2,
        "old snapshot must not change"
    );
    let now = store.snapshot();
    assert_eq!(
        now.lookup(&Default::default(), Idx::MachineByCluster, "t/a")
            .map(|m| m.name())
            .collect::<Vec<_>>(),
        vec!["m1"]
    );
    assert_eq!(
        now.lookup(&Default::default(), Idx::MachineByCluster, "t/b")
            .count(),
        1
    );
    let d = store.apply(vec![Op::Delete(ObjectKey::new(
        &Default::default(),
        Kind::Machine,
        "t",
        "m1",
    ))]);
    assert_eq!(d[0].change, ChangeType::Deleted);
    assert_eq!(
        store
            .snapshot()
            .lookup(&Default::default(), Idx::MachineByCluster, "t/a")
            .count(),
        0
    );
    assert_eq!(
        store
            .snapshot()
            .lookup(&Default::default(), Idx::MachineByClass, "small")
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
        b[0].object.meta().generation.get(),
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
    let got = snap
        .get(&Default::default(), Kind::Machine, "default", "m1")
        .unwrap();
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

#[test]
fn a_keyed_memo_is_computed_once_per_key_and_snapshot() {
    let store = Store::new();
    store.apply(vec![Op::Upsert(machine("t", "m1", "c1", "small"))]);
    let calls = std::sync::atomic::AtomicUsize::new(0);
    let of = |key: &'static str| {
        let calls = &calls;
        move |s: &Snapshot| {
            calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            format!("{key}:{}", s.count(Kind::Machine))
        }
    };
    let snap = store.snapshot();
    assert_eq!(snap.memo_keyed("oslo".to_string(), of("oslo")), "oslo:1");
    assert_eq!(
        snap.memo_keyed("bergen".to_string(), of("bergen")),
        "bergen:1"
    );
    assert_eq!(snap.memo_keyed("oslo".to_string(), of("oslo")), "oslo:1");
    assert_eq!(
        calls.load(std::sync::atomic::Ordering::SeqCst),
        2,
        "once per key"
    );
    store.apply(vec![Op::Upsert(machine("t", "m2", "c1", "small"))]);
    assert_eq!(
        store.snapshot().memo_keyed("oslo".to_string(), of("oslo")),
        "oslo:2",
        "a write starts a new memo"
    );
    assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 3);
}

/// Two datacenters may each hold an object with the same kind, namespace and name: they are two
/// objects, each relationship resolves within its own datacenter, and listing a namespace walks
/// every datacenter's part of it.
#[test]
fn datacenters_keep_same_named_objects_apart() {
    use crate::model::Datacenter;
    let (east, west) = (Datacenter::new("east"), Datacenter::new("west"));
    let store = Store::new();
    store.apply(vec![
        Op::Upsert(machine("t", "m", "a", "small").in_datacenter(&east)),
        Op::Upsert(machine("t", "m", "a", "large").in_datacenter(&west)),
        Op::Upsert(machine("t", "n", "a", "small").in_datacenter(&west)),
        Op::Upsert(machine("u", "other-ns", "a", "small").in_datacenter(&west)),
    ]);
    let s = store.snapshot();
    assert_eq!(s.len(), 4);
    assert_eq!(
        s.datacenters().cloned().collect::<Vec<_>>(),
        vec![east.clone(), west.clone()]
    );
    let class_of = |dc: &Datacenter| match s.get(dc, Kind::Machine, "t", "m").map(|r| r.as_ref()) {
        Some(Resource::Machine(m)) => m.spec.machine_class.clone(),
        _ => None,
    };
    assert_eq!(class_of(&east).as_deref(), Some("small"));
    assert_eq!(class_of(&west).as_deref(), Some("large"));
    assert!(
        s.get(&Datacenter::default(), Kind::Machine, "t", "m")
            .is_none()
    );
    // The cluster label `a` resolves per datacenter.
    let names = |dc: &Datacenter| -> Vec<String> {
        s.lookup(dc, Idx::MachineByCluster, &scoped("t", "a"))
            .map(|r| r.name().to_string())
            .collect()
    };
    assert_eq!(names(&east), vec!["m"]);
    assert_eq!(names(&west), vec!["m", "n"]);
    // A look-up without a datacenter is ambiguous where both hold one, plain where one does.
    assert_eq!(
        s.find(None, Kind::Machine, "t", "m").map(|f| f.is_some()),
        Err(vec![east.clone(), west.clone()])
    );
    assert_eq!(
        s.find(None, Kind::Machine, "t", "n")
            .ok()
            .flatten()
            .map(|r| r.datacenter().clone()),
        Some(west.clone())
    );
    assert!(
        s.find(Some(&east), Kind::Machine, "t", "n")
            .expect("named")
            .is_none()
    );
    // A namespace across datacenters, and a cursor walking it from the middle.
    let in_t: Vec<String> = s
        .list_in(Kind::Machine, "t")
        .map(|r| format!("{}:{}", r.datacenter(), r.name()))
        .collect();
    assert_eq!(in_t, vec!["east:m", "west:m", "west:n"]);
    let after = ObjectKey::new(&east, Kind::Machine, "t", "m");
    let rest: Vec<String> = s
        .list_after(Kind::Machine, Some("t"), Some(&after))
        .map(|r| format!("{}:{}", r.datacenter(), r.name()))
        .collect();
    assert_eq!(rest, vec!["west:m", "west:n"]);
    // Deleting one datacenter's object leaves the other's.
    store.apply(vec![Op::Delete(ObjectKey::new(
        &west,
        Kind::Machine,
        "t",
        "m",
    ))]);
    let s = store.snapshot();
    assert!(s.get(&east, Kind::Machine, "t", "m").is_some());
    assert_eq!(
        s.lookup(&west, Idx::MachineByCluster, &scoped("t", "a"))
            .count(),
        1
    );
    // A datacenter that holds nothing is no longer listed.
    store.apply(vec![Op::Delete(ObjectKey::new(
        &east,
        Kind::Machine,
        "t",
        "m",
    ))]);
    assert_eq!(
        store.snapshot().datacenters().cloned().collect::<Vec<_>>(),
        vec![west]
    );
}

/// Two datacenters' API servers may give out the same uid (a test server might): each object
/// keeps its own entry, and removing one leaves the other found.
#[test]
fn a_uid_shared_by_two_datacenters_finds_each() {
    use crate::model::Datacenter;
    let (east, west) = (Datacenter::new("east"), Datacenter::new("west"));
    let with_uid = |dc: &Datacenter, name: &str| {
        let mut r = machine("t", name, "a", "small").in_datacenter(dc);
        r.meta_mut().uid = Some("same-uid".into());
        r
    };
    let store = Store::new();
    store.apply(vec![
        Op::Mirror(with_uid(&east, "e")),
        Op::Mirror(with_uid(&west, "w")),
    ]);
    let s = store.snapshot();
    assert_eq!(s.by_uid_in(&east, "same-uid").map(|r| r.name()), Some("e"));
    assert_eq!(s.by_uid_in(&west, "same-uid").map(|r| r.name()), Some("w"));
    store.apply(vec![Op::Delete(ObjectKey::new(
        &east,
        Kind::Machine,
        "t",
        "e",
    ))]);
    assert_eq!(
        store
            .snapshot()
            .by_uid("same-uid")
            .map(|r| r.name().to_string()),
        Some("w".into())
    );
}

#[test]
fn index_lookups_stay_within_their_datacenter_whatever_the_values_hold() {
    let store = Store::new();
    let east = Datacenter::new("east");
    // A class name holding a NUL in the one datacenter, and the class `small` in east: the
    // entries must not meet, though east's entry is keyed `east` NUL `small`.
    store.apply(vec![
        Op::Upsert(machine("t", "single", "a", "east\u{0}small")),
        Op::Upsert(machine("t", "in-east", "a", "small").in_datacenter(&east)),
    ]);
    let snap = store.snapshot();
    let names = |dc: &Datacenter, class: &str| -> Vec<String> {
        snap.lookup(dc, Idx::MachineByClass, class)
            .map(|r| r.name().to_string())
            .collect()
    };
    assert_eq!(names(&east, "small"), ["in-east"]);
    assert_eq!(names(&Datacenter::default(), "east\u{0}small"), ["single"]);
    assert!(names(&Datacenter::default(), "small").is_empty());
    assert!(names(&east, "east\u{0}small").is_empty());
}

#[test]
fn machines_labelled_with_the_cluster_name_belong_to_it_as_well() {
    let kc = Resource::from_value(
        crate::model::Kind::KubernetesCluster,
        "v1alpha1",
        serde_json::json!({"metadata": {"name": "prod", "namespace": "t"},
            "spec": {"data": {"clusterId": "prod-x1", "provider": "talos"},
                "topology": {"controlplane": {"replicas": 1}, "workers": {"nodePools": []}}}}),
    )
    .expect("cluster");
    // Older talos-operator releases: the cluster's name and their own role label.
    let mut old = machine("t", "prod-control-plane-0", "", "small");
    old.meta_mut().labels = Some(
        [
            (
                crate::model::LABEL_CLUSTER_NAME.to_string(),
                "prod".to_string(),
            ),
            (
                crate::model::LABEL_CLUSTER_ROLE.to_string(),
                "controlplane".to_string(),
            ),
        ]
        .into(),
    );
    let store = Store::new();
    store.apply(vec![
        Op::Upsert(kc.clone()),
        Op::Upsert(machine("t", "prod-x1-wrk0", "prod-x1", "small")),
        Op::Upsert(old),
        // Another namespace's machine with the same name label is not this cluster's.
        Op::Upsert({
            let mut m = machine("u", "prod-cp", "", "small");
            m.meta_mut().labels = Some(
                [(
                    crate::model::LABEL_CLUSTER_NAME.to_string(),
                    "prod".to_string(),
                )]
                .into(),
            );
            m
        }),
    ]);
    let snap = store.snapshot();
    let kc = snap
        .get(&Default::default(), Kind::KubernetesCluster, "t", "prod")
        .expect("cluster");
    let names: Vec<&str> = snap.cluster_machines(kc).iter().map(|m| m.name()).collect();
    assert_eq!(names, vec!["prod-x1-wrk0", "prod-control-plane-0"]);
    let old = snap
        .get(
            &Default::default(),
            Kind::Machine,
            "t",
            "prod-control-plane-0",
        )
        .expect("machine");
    assert_eq!(old.node_role(), Some("control-plane"));
    assert_eq!(
        snap.machine_cluster(old).map(|c| c.name()),
        Some("prod"),
        "found by its name label"
    );
    assert!(old.labelled_for_cluster("prod-x1", "prod"));
    assert!(!old.labelled_for_cluster("prod-x1", "other"));
}

#[test]
fn a_past_graph_built_whole_has_the_indexes_a_store_keeps_one_by_one() {
    use crate::source::demo::{FleetSpec, fleet};
    // Two datacenters: each index value is the datacenter's own.
    let west = Datacenter::new("west");
    let mut objects = fleet(&FleetSpec::demo());
    let elsewhere: Vec<Resource> = objects
        .iter()
        .map(|r| r.clone().in_datacenter(&west))
        .collect();
    objects.extend(elsewhere);
    let store = Store::new();
    store.apply(objects.iter().cloned().map(Op::Upsert).collect());
    let live = store.snapshot();
    // The objects as the store keeps them (with the versions and uids it gave them).
    let past = Store::new().past(
        live.objects
            .values()
            .map(|r| (**r.object()).clone())
            .collect(),
    );
    let keys = |m: &Members| m.iter().cloned().collect::<Vec<_>>();
    assert!(live.index.len() > 100, "the fleet has relationships");
    assert!(past.objects == live.objects, "the same objects");
    assert_eq!(past.by_key.len(), live.by_key.len());
    assert_eq!(past.datacenters, live.datacenters);
    assert_eq!(
        past.seq,
        live.objects
            .values()
            .map(|r| version_seq(r.object()))
            .max()
            .unwrap_or(0)
    );
    assert_eq!(past.index.len(), live.index.len());
    for (entry, members) in live.index.iter() {
        assert_eq!(
            past.index.get(entry).map(keys),
            Some(keys(members)),
            "{entry:?}"
        );
    }
    assert_eq!(past.by_uid.len(), live.by_uid.len());
    for (uid, members) in live.by_uid.iter() {
        assert_eq!(past.by_uid.get(uid).map(keys), Some(keys(members)), "{uid}");
    }
    // A key given twice: the later object wins, with its index entries only.
    let first = machine("t", "m", "a", "small");
    let later = machine("t", "m", "b", "large");
    let twice = Store::new().past(vec![first, later.clone()]);
    assert_eq!(twice.len(), 1);
    assert_eq!(
        twice
            .lookup_untracked(&Datacenter::default(), Idx::MachineByCluster, "t/a")
            .count(),
        0
    );
    assert_eq!(
        twice
            .lookup_untracked(&Datacenter::default(), Idx::MachineByCluster, "t/b")
            .count(),
        1
    );
}

#[test]
fn one_write_that_adds_changes_and_deletes_the_same_objects_leaves_what_one_at_a_time_would() {
    // New objects take their places in the ordered sets when the write settles (in no key
    // order); a change or deletion of one of them within the same write must still find it.
    let name = |i: usize| format!("m-{i:03}");
    let delete = |i: usize| Op::Delete(ObjectKey::of(&machine("t", &name(i), "a", "small")));
    let mut ops: Vec<Op> = (0..60)
        .map(|i| Op::Upsert(machine("t", &name(i), "a", "small")))
        .collect();
    ops.push(Op::Upsert(machine("t", &name(3), "a", "large")));
    ops.push(delete(7));
    ops.push(Op::Upsert(machine("t", &name(60), "a", "small")));
    ops.push(delete(10));
    ops.push(Op::Upsert(machine("t", &name(10), "b", "small")));
    let one_write = Store::new();
    let changes = one_write.apply(ops.clone());
    let one_at_a_time = Store::new();
    for op in ops {
        one_at_a_time.apply(vec![op]);
    }
    assert_eq!(
        changes.iter().map(|c| c.seq).collect::<Vec<_>>(),
        (1..=65).collect::<Vec<u64>>(),
        "every change numbered in the order written"
    );
    assert_eq!(
        changes[60..].iter().map(|c| c.change).collect::<Vec<_>>(),
        [
            ChangeType::Modified,
            ChangeType::Deleted,
            ChangeType::Added,
            ChangeType::Deleted,
            ChangeType::Added
        ]
    );
    let (a, b) = (one_write.snapshot(), one_at_a_time.snapshot());
    let listed = |s: &Snapshot| {
        s.list(Kind::Machine)
            .map(|r| {
                (
                    r.name().to_string(),
                    r.label(crate::model::LABEL_CLUSTER_ID).map(String::from),
                )
            })
            .collect::<Vec<_>>()
    };
    let mut expected: Vec<String> = (0..=60).filter(|i| *i != 7).map(name).collect();
    expected.sort();
    assert_eq!(
        listed(&a)
            .iter()
            .map(|(n, _)| n.clone())
            .collect::<Vec<_>>(),
        expected,
        "listed in key order, the deleted one gone"
    );
    assert_eq!(listed(&a), listed(&b));
    let dc = Datacenter::default();
    let by_class = |s: &Snapshot, class: &str| {
        s.lookup(&dc, Idx::MachineByClass, class)
            .map(|r| r.name().to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(by_class(&a, "large"), vec![name(3)]);
    assert_eq!(by_class(&a, "small").len(), 59);
    for (word, found) in [("m-007", 0), ("m-010", 1), ("m-060", 1), ("m-00", 9)] {
        let hits = a.search(&[word.to_string()], Default::default(), &|_| true);
        assert_eq!(hits.len(), found, "search {word}");
    }
    assert_eq!(a.len(), 60);
}
