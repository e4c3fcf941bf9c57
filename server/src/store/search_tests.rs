//! Search through the store's indexes, and the same search reading every object (a restricted
//! view, a past moment): equal answers, following every write.

use serde_json::json;

use super::search::{Field, Hit, Rank, Where};
use super::*;
use crate::model::{Datacenter, Kind, Resource};

fn object(kind: Kind, version: &str, value: serde_json::Value) -> Resource {
    Resource::from_value(kind, version, value).expect("a valid object")
}

fn machine(ns: &str, name: &str, ip: &str, mac: &str) -> Resource {
    object(
        Kind::Machine,
        "v1alpha1",
        json!({
            "metadata": {"name": name, "namespace": ns,
                         "labels": {"vitistack.io/clusterid": "c-0042", "env": "prod"}},
            "spec": {"provider": "kubevirt", "os": {"imageID": "talos-v1.9.2"}},
            "status": {"hostname": format!("{name}.guest"),
                       "networkInterfaces": [{"name": "eth0", "macAddress": mac,
                                              "ipAddresses": [ip]}]}
        }),
    )
}

fn vmi(ns: &str, name: &str, node: &str, ip: &str) -> Resource {
    object(
        Kind::VirtualMachineInstance,
        "v1",
        json!({
            "metadata": {"name": name, "namespace": ns},
            "status": {"phase": "Running", "nodeName": node,
                       "interfaces": [{"name": "default", "ipAddresses": [ip]}]}
        }),
    )
}

fn fleet() -> Store {
    let store = Store::new();
    store.apply(vec![
        Op::Upsert(machine("team-a", "web", "10.0.0.5", "52:54:00:aa:bb:01")),
        Op::Upsert(machine(
            "team-a",
            "web-worker-1",
            "10.0.0.6",
            "52:54:00:aa:bb:02",
        )),
        Op::Upsert(machine(
            "team-b",
            "db-web-proxy",
            "10.0.1.7",
            "52:54:00:aa:bb:03",
        )),
        Op::Upsert(vmi("team-a", "web-worker-1", "host-17", "10.0.0.6")),
        Op::Upsert(object(
            Kind::KubernetesCluster,
            "v1alpha1",
            json!({"metadata": {"name": "payments", "namespace": "team-a"},
                   "spec": {"data": {"clusterId": "c-0042", "provider": "talos"}}}),
        )),
    ]);
    store
}

/// (kind, namespace/name, rank, field, value) of every hit, in a fixed order.
fn found(s: &Snapshot, text: &str) -> Vec<(Kind, String, Rank, Field, String)> {
    let words: Vec<String> = text.split_whitespace().map(str::to_lowercase).collect();
    let mut out: Vec<_> = s
        .search(&words, Default::default(), &|_| true)
        .into_iter()
        .map(|h| {
            (
                h.object.kind(),
                format!("{}/{}", h.object.namespace(), h.object.name()),
                h.rank,
                h.field,
                h.value(&words),
            )
        })
        .collect();
    out.sort();
    out
}

/// The store's snapshot without its indexes: searched by reading every object.
fn unindexed(s: &Snapshot) -> Snapshot {
    let mut plain = Snapshot::default();
    for (k, v) in s.objects.iter() {
        plain.insert(k.clone(), v.object().clone());
    }
    plain.settle();
    assert!(plain.search.is_none() && s.search.is_some());
    plain
}

fn names(hits: &[(Kind, String, Rank, Field, String)]) -> Vec<(Kind, &str, Rank)> {
    hits.iter().map(|h| (h.0, h.1.as_str(), h.2)).collect()
}

#[test]
fn names_rank_whole_then_start_then_a_word() {
    let store = fleet();
    let s = store.snapshot();
    let hits = found(&s, "web");
    assert_eq!(
        names(&hits),
        vec![
            (Kind::Machine, "team-a/web", Rank::ExactName),
            (Kind::Machine, "team-a/web-worker-1", Rank::NamePrefix),
            (Kind::Machine, "team-b/db-web-proxy", Rank::WordPrefix),
            (
                Kind::VirtualMachineInstance,
                "team-a/web-worker-1",
                Rank::NamePrefix
            ),
        ]
    );
    // Case does not matter; a word's start matches, the middle of a word does not.
    assert_eq!(found(&s, "WOR").len(), 2);
    assert!(found(&s, "orker").is_empty());
    // namespace/name: only that namespace.
    assert_eq!(
        names(&found(&s, "team-b/prox")),
        vec![(Kind::Machine, "team-b/db-web-proxy", Rank::WordPrefix)]
    );
    assert_eq!(found(&unindexed(&s), "web"), hits);
}

#[test]
fn every_field_people_look_for_is_found_exactly() {
    let store = fleet();
    let s = store.snapshot();
    let cases = [
        ("10.0.0.5", Field::IpAddress),
        ("52:54:00:AA:BB:03", Field::MacAddress),
        ("host-17", Field::Host),
        ("talos-v1.9.2", Field::Image),
        ("env=prod", Field::Label),
        ("env", Field::Label),
        ("team-b", Field::Namespace),
    ];
    for (text, field) in &cases {
        let hits = found(&s, text);
        assert!(!hits.is_empty(), "{text} found nothing");
        assert!(
            hits.iter().all(|h| h.3 == *field && h.2 == Rank::Field),
            "{text}: {hits:?}"
        );
        assert_eq!(found(&unindexed(&s), text), hits, "{text} without indexes");
    }
    assert_eq!(
        names(&found(&s, "host-17")),
        vec![(
            Kind::VirtualMachineInstance,
            "team-a/web-worker-1",
            Rank::Field
        )]
    );
    assert_eq!(found(&s, "env=prod").len(), 3);
    assert_eq!(found(&s, "10.0.0.6").len(), 2, "the Machine and its VMI");
    // The cluster id finds the cluster and its Machines.
    let by_id = found(&s, "c-0042");
    assert_eq!(by_id.len(), 4);
    assert!(by_id.iter().all(|h| h.3 == Field::ClusterId));
    // A value is matched whole: part of an address is not an address.
    assert!(found(&s, "10.0.0").is_empty());
    assert!(found(&s, "env=pro").is_empty());
}

#[test]
fn every_word_must_match_and_the_best_ranks_the_hit() {
    let store = fleet();
    let s = store.snapshot();
    assert_eq!(
        names(&found(&s, "web 10.0.0.6")),
        vec![
            (Kind::Machine, "team-a/web-worker-1", Rank::NamePrefix),
            (
                Kind::VirtualMachineInstance,
                "team-a/web-worker-1",
                Rank::NamePrefix
            ),
        ]
    );
    assert!(found(&s, "web nothing-like-this").is_empty());
    assert!(found(&s, "").is_empty());
}

#[test]
fn the_indexes_follow_changes_and_deletions() {
    let store = fleet();
    // The address moves to another Machine; a Machine goes away.
    store.apply(vec![
        Op::Upsert(machine("team-a", "web", "10.9.9.9", "52:54:00:aa:bb:01")),
        Op::Upsert(machine(
            "team-a",
            "web-worker-1",
            "10.0.0.5",
            "52:54:00:aa:bb:02",
        )),
        Op::Delete(ObjectKey::new(
            &Datacenter::default(),
            Kind::Machine,
            "team-b",
            "db-web-proxy",
        )),
    ]);
    let s = store.snapshot();
    assert_eq!(
        names(&found(&s, "10.0.0.5")),
        vec![(Kind::Machine, "team-a/web-worker-1", Rank::Field)]
    );
    assert_eq!(
        names(&found(&s, "10.9.9.9")),
        vec![(Kind::Machine, "team-a/web", Rank::Field)]
    );
    assert!(found(&s, "proxy").is_empty());
    assert!(found(&s, "52:54:00:aa:bb:03").is_empty());
    for text in ["web", "10.0.0.5", "c-0042", "env", "team-a/w"] {
        assert_eq!(found(&s, text), found(&unindexed(&s), text), "{text}");
    }
}

#[test]
fn a_restricted_view_finds_only_what_it_sees() {
    let store = fleet();
    let scope = Scope::limited(Grants::namespaces(&["team-b"]));
    let view = store.view(&store.snapshot(), &scope);
    assert_eq!(
        names(&found(&view, "web")),
        vec![(Kind::Machine, "team-b/db-web-proxy", Rank::WordPrefix)]
    );
    assert!(found(&view, "10.0.0.5").is_empty());
}

#[test]
fn a_scope_narrows_a_namespace_to_its_kinds_and_datacenter() {
    let store = fleet();
    let s = store.snapshot();
    let plain = unindexed(&s);
    let words = vec!["team-a".to_string()];
    let machines = [Kind::Machine];
    let scoped = |snap: &Snapshot, scope: Where<'_>| {
        let mut hits: Vec<(Kind, String)> = snap
            .search(&words, scope, &|_| true)
            .into_iter()
            .map(|h| (h.object.kind(), h.object.name().to_string()))
            .collect();
        hits.sort();
        hits
    };
    let only = Where {
        kinds: Some(&machines),
        datacenter: None,
    };
    let hits = scoped(&s, only);
    assert!(!hits.is_empty(), "team-a's Machines are found by namespace");
    assert!(hits.iter().all(|h| h.0 == Kind::Machine), "{hits:?}");
    assert_eq!(
        hits,
        scoped(&plain, only),
        "indexed and read answers differ"
    );
    let all = scoped(&s, Where::default());
    assert!(all.len() > hits.len() && all.iter().any(|h| h.0 == Kind::KubernetesCluster));
    let elsewhere = Where {
        kinds: None,
        datacenter: Some("no-such-datacenter"),
    };
    assert!(scoped(&s, elsewhere).is_empty());
    assert!(scoped(&plain, elsewhere).is_empty());
}

#[test]
fn a_namespace_read_whole_finds_each_object_once_with_its_best_rank() {
    let store = fleet();
    // Named like the namespace, in it and elsewhere: found through the name index and the
    // namespace's range both.
    store.apply(vec![
        Op::Upsert(machine("team-a", "team-a", "10.2.0.1", "52:54:00:aa:cc:01")),
        Op::Upsert(machine(
            "team-a",
            "team-a-db",
            "10.2.0.2",
            "52:54:00:aa:cc:02",
        )),
        Op::Upsert(machine(
            "team-b",
            "team-a-cache",
            "10.2.0.3",
            "52:54:00:aa:cc:03",
        )),
    ]);
    let s = store.snapshot();
    let hits = found(&s, "team-a");
    let listed: Vec<String> = hits.iter().map(|h| format!("{:?} {}", h.0, h.1)).collect();
    let mut once = listed.clone();
    once.dedup();
    assert_eq!(listed, once, "an object comes once");
    let rank = |name: &str| hits.iter().find(|h| h.1 == name).map(|h| (h.2, h.3));
    assert_eq!(rank("team-a/team-a"), Some((Rank::ExactName, Field::Name)));
    assert_eq!(
        rank("team-a/team-a-db"),
        Some((Rank::NamePrefix, Field::Name))
    );
    assert_eq!(
        rank("team-b/team-a-cache"),
        Some((Rank::NamePrefix, Field::Name))
    );
    assert_eq!(rank("team-a/web"), Some((Rank::Field, Field::Namespace)));
    assert_eq!(hits.len(), 7, "{listed:?}");
    for text in [
        "team-a",
        "team-a web",
        "web team-a",
        "team-a 10.2.0.2",
        "team-b team-a",
    ] {
        assert_eq!(found(&s, text), found(&unindexed(&s), text), "{text}");
    }
    assert_eq!(
        names(&found(&s, "team-b team-a")),
        vec![(Kind::Machine, "team-b/team-a-cache", Rank::NamePrefix)]
    );
}

/// Two datacenters whose namespace `team-a` holds Machines and VMIs of the same names, a few
/// named after the namespace, and objects elsewhere that match `team-a` by name or label.
fn paged_fleet() -> Store {
    let store = Store::new();
    let mut ops = Vec::new();
    for dc in ["dc-1", "dc-2"] {
        let dc = Datacenter::new(dc);
        let mut names: Vec<String> = (0..9).map(|i| format!("node-{}", (i * 7) % 9)).collect();
        names.extend(["team-a", "team-a-db", "z-team-a", "a"].map(String::from));
        for (i, name) in names.iter().enumerate() {
            let ip = format!("10.3.{i}.1");
            let m = machine("team-a", name, &ip, &format!("52:54:00:dd:00:{i:02x}"));
            ops.push(Op::Upsert(m.in_datacenter(&dc)));
            if i % 3 != 1 {
                ops.push(Op::Upsert(
                    vmi("team-a", name, "host-1", &ip).in_datacenter(&dc),
                ));
            }
        }
        let labelled = object(
            Kind::Machine,
            "v1alpha1",
            json!({"metadata": {"name": "tagged", "namespace": "team-b",
                                "labels": {"team-a": "yes"}}, "spec": {}}),
        );
        ops.push(Op::Upsert(labelled.in_datacenter(&dc)));
        let cache = machine("team-b", "team-a-cache", "10.4.0.1", "52:54:00:dd:01:01");
        ops.push(Op::Upsert(cache.in_datacenter(&dc)));
    }
    store.apply(ops);
    store
}

fn seen(page: &super::search_page::Page) -> Vec<(String, Rank, Field)> {
    page.hits
        .iter()
        .map(|h| (format!("{:?}", h.place()), h.rank, h.field))
        .collect()
}

#[test]
fn a_namespace_paged_from_its_ranges_equals_every_hit_sorted() {
    let store = paged_fleet();
    let s = store.snapshot();
    let words = vec!["team-a".to_string()];
    let (machines, twice, vmis) = (
        [Kind::Machine],
        [Kind::Machine, Kind::Machine],
        [Kind::VirtualMachineInstance],
    );
    let scopes = [
        Where::default(),
        Where {
            kinds: Some(&machines),
            datacenter: None,
        },
        Where {
            kinds: Some(&twice),
            datacenter: Some("dc-2"),
        },
        Where {
            kinds: Some(&vmis),
            datacenter: Some("dc-1"),
        },
    ];
    let every = |_: &Resource| true;
    for scope in scopes {
        // Read one by one and sorted whole: what the pages must add up to.
        let all = s.search_page(&words, scope, Some(&every), None, 10_000);
        assert!(!all.more && !all.earlier && all.total == all.hits.len());
        let labelled = all.hits.iter().any(|h| h.field == Field::Label);
        assert_eq!(
            labelled,
            scope.kinds.is_none_or(|k| k.contains(&Kind::Machine))
        );
        assert!(all.hits.iter().any(|h| h.rank == Rank::ExactName));
        for first in [1, 2, 5, 10_000] {
            let mut after: Option<Hit> = None;
            let mut walked = Vec::new();
            loop {
                let at = after.as_ref().map(Hit::place);
                let page = s.search_page(&words, scope, None, at, first);
                let read = s.search_page(&words, scope, Some(&every), at, first);
                assert_eq!(
                    seen(&page),
                    seen(&read),
                    "{scope:?} first {first} after {at:?}"
                );
                assert_eq!(
                    (page.total, page.earlier, page.more),
                    (read.total, read.earlier, read.more),
                    "{scope:?} first {first} after {at:?}"
                );
                assert_eq!(page.total, all.total);
                walked.extend(seen(&page));
                if !page.more {
                    break;
                }
                after = page.hits.last().cloned();
            }
            assert_eq!(walked, seen(&all), "{scope:?} in pages of {first}");
        }
        // Cursors that name no hit: before, between and after them all.
        let cursors = [
            place(0, "", "", "", ""),
            place(3, "node-4", "Machine", "team-a", "dc-1"),
            place(3, "node-45", "A", "team-a", "dc-1"),
            place(3, "tagged", "Machine", "team-b", "dc-9"),
            place(9, "", "", "", ""),
        ];
        for at in cursors {
            let page = s.search_page(&words, scope, None, Some(at), 3);
            let read = s.search_page(&words, scope, Some(&every), Some(at), 3);
            assert_eq!(seen(&page), seen(&read), "{scope:?} after {at:?}");
            assert_eq!(
                (page.earlier, page.more),
                (read.earlier, read.more),
                "{at:?}"
            );
        }
    }
}

fn place(
    rank: u8,
    name: &'static str,
    kind: &'static str,
    namespace: &'static str,
    datacenter: &'static str,
) -> super::search_page::Place<'static> {
    super::search_page::Place {
        rank,
        name,
        kind,
        namespace,
        datacenter,
    }
}
