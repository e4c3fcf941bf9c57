use super::*;
use crate::graphql::page_cut::paginate;
use crate::graphql::paging::{ConnectionFields, Cursor, SortDirection};
use crate::model::{Datacenter, Kind};
use crate::source::demo::{FleetSpec, fleet};
use crate::store::{Op, Store};
use async_graphql::connection::Connection;

/// What a page shows: its items (datacenter, namespace, name), cursors, page info and count.
type Shown = (Vec<String>, Vec<String>, bool, bool, usize);

fn shown(conn: &Connection<Cursor, String, ConnectionFields>) -> Shown {
    use async_graphql::connection::CursorType;
    (
        conn.edges.iter().map(|e| e.node.clone()).collect(),
        conn.edges
            .iter()
            .map(|e| e.cursor.encode_cursor())
            .collect(),
        conn.has_previous_page,
        conn.has_next_page,
        conn.additional_fields.total_count,
    )
}

fn label(r: Arc<Resource>) -> Option<String> {
    Some(format!("{}:{}/{}", r.datacenter(), r.namespace(), r.name()))
}

fn machine(dc: &str, ns: &str, name: &str, extra: serde_json::Value) -> Resource {
    let mut value = serde_json::json!({"metadata": {"name": name, "namespace": ns}, "spec": {}});
    if let (Some(v), Some(extra)) = (value.as_object_mut(), extra.as_object()) {
        for (k, x) in extra {
            if k == "metadata" {
                if let (Some(m), Some(x)) = (v["metadata"].as_object_mut(), x.as_object()) {
                    m.extend(x.clone());
                }
            } else {
                v.insert(k.clone(), x.clone());
            }
        }
    }
    Resource::from_value(Kind::Machine, "v1alpha1", value)
        .expect("a Machine")
        .in_datacenter(&Datacenter::new(dc))
}

/// Two datacenters of the demo fleet holding the same names, and Machines whose phase the
/// briefs do not know, that have none, whose creation times tie, come before 1970 or have
/// fractions of a second, and whose names hold capitals and non-ASCII text.
fn store() -> Store {
    let mut objects = Vec::new();
    for (dc, seed) in [("a", 7), ("b", 7)] {
        objects.extend(fleet(&FleetSpec {
            seed,
            datacenter: Datacenter::new(dc),
            ..FleetSpec::demo()
        }));
    }
    let odd = [
        (
            "team",
            "hib-1",
            serde_json::json!({"status": {"phase": "Hibernating"}}),
        ),
        (
            "team",
            "hib-2",
            serde_json::json!({"status": {"phase": "hibernating"}}),
        ),
        ("team", "none", serde_json::json!({})),
        (
            "team",
            "RUN-Upper",
            serde_json::json!({"status": {"phase": "Running"},
            "metadata": {"creationTimestamp": "2020-01-01T00:00:00Z"}}),
        ),
        (
            "team-x",
            "same-time",
            serde_json::json!({"status": {"phase": "Running"},
            "metadata": {"creationTimestamp": "2020-01-01T00:00:00Z"}}),
        ),
        (
            "team-x",
            "before-1970",
            serde_json::json!({"status": {"phase": "Failed"},
            "metadata": {"creationTimestamp": "1969-12-31T23:59:59.25Z"}}),
        ),
        (
            "team-x",
            "fraction",
            serde_json::json!({"status": {"phase": "Failed"},
            "metadata": {"creationTimestamp": "2020-01-01T00:00:00.5Z"}}),
        ),
        (
            "ünï",
            "Ünïcode",
            serde_json::json!({"status": {"phase": "Pending"}}),
        ),
    ];
    for dc in ["a", "b"] {
        for (ns, name, extra) in &odd {
            objects.push(machine(dc, ns, name, extra.clone()));
        }
    }
    let store = Store::new();
    store.apply(objects.into_iter().map(Op::Upsert).collect());
    store
}

/// For every kind, sort and direction, and filters by datacenter, namespace, phase (known,
/// unknown, none, in any case), name and label, with page sizes and cursors both ways, a page
/// read with the entries' briefs is the page of the objects read: the same items, cursors,
/// page info and count.
#[test]
fn a_page_read_with_briefs_is_the_page_of_the_objects() {
    let store = store();
    let snap = store.snapshot();
    let mut compared = 0;
    let filter = |f: fn(&mut Filter)| {
        let mut filter = Filter::default();
        f(&mut filter);
        Some(filter)
    };
    let filters = [
        None,
        filter(|f| f.datacenter = Some("b".into())),
        filter(|f| f.datacenter = Some("nowhere".into())),
        filter(|f| f.namespace = Some("team".into())),
        filter(|f| {
            f.namespace = Some("team-x".into());
            f.datacenter = Some("a".into());
        }),
        filter(|f| f.phase = Some(vec!["running".into(), "FAILED".into()])),
        filter(|f| f.phase = Some(vec!["HIBERNATING".into()])),
        filter(|f| f.phase = Some(vec!["".into()])),
        filter(|f| f.search = Some("WRK".into())),
        filter(|f| f.search = Some("ünï".into())),
        filter(|f| f.search = Some("team/r".into())),
        filter(|f| {
            f.search = Some("m".into());
            f.phase = Some(vec!["Running".into()]);
            f.datacenter = Some("a".into());
        }),
        filter(|f| f.label_selector = Some("vitistack.io/node-role!=worker".into())),
    ];
    for &kind in Kind::ALL {
        let objects: Vec<&Arc<Resource>> = snap.list(kind).collect();
        let held: Vec<(&ObjectKey, &Held)> = snap.held(kind, None, None, false).collect();
        assert_eq!(held.len(), objects.len(), "{kind:?}: the same objects");
        let mut backwards: Vec<(&ObjectKey, &Held)> = snap.held(kind, None, None, true).collect();
        backwards.reverse();
        assert!(
            held == backwards,
            "{kind:?}: read backwards, the same in reverse"
        );
        for field in [
            SortField::Name,
            SortField::Namespace,
            SortField::Created,
            SortField::Phase,
        ] {
            for direction in [SortDirection::Asc, SortDirection::Desc] {
                let sort = Some(Sort { field, direction });
                for f in &filters {
                    let compiled = f
                        .as_ref()
                        .map(|f| CompiledFilter::new(f).expect("a filter"));
                    let passes =
                        |r: &&Arc<Resource>| compiled.as_ref().is_none_or(|c| c.matches(r));
                    let read = |args: &PageArgs| {
                        // As the list reads them (backwards for a descending sort).
                        let backwards = read_backwards(sort.as_ref(), args);
                        let entries = held_candidates(&snap, kind, f.as_ref(), backwards);
                        // As `connection` reads them: the ranges give the namespace and
                        // datacenter, the rest of the filter is tested.
                        let rest = compiled.as_ref().map(CompiledFilter::without_place);
                        let entries = entries
                            .filter(|(k, h)| rest.as_ref().is_none_or(|c| c.matches_held(k, h)));
                        paginate(entries, sort, args.clone(), 500, label).expect("a page")
                    };
                    let cut = |args: &PageArgs| {
                        paginate(
                            objects.iter().copied().filter(passes),
                            sort,
                            args.clone(),
                            500,
                            label,
                        )
                        .expect("a page")
                    };
                    let first = cut(&PageArgs {
                        first: Some(7),
                        ..Default::default()
                    });
                    let cursors: Vec<Option<String>> = std::iter::once(None)
                        .chain(first.edges.iter().step_by(3).map(|e| {
                            use async_graphql::connection::CursorType;
                            Some(e.cursor.encode_cursor())
                        }))
                        .collect();
                    for after in &cursors {
                        for (first, last) in [
                            (None, None),
                            (Some(0), None),
                            (Some(3), None),
                            (None, Some(2)),
                        ] {
                            for before in [None, cursors.last().cloned().flatten()] {
                                let args = PageArgs {
                                    after: after.clone(),
                                    before,
                                    first,
                                    last,
                                };
                                assert_eq!(
                                    shown(&read(&args)),
                                    shown(&cut(&args)),
                                    "{kind:?} {sort:?} {f:?} {args:?}"
                                );
                                compared += 1;
                            }
                        }
                    }
                }
            }
        }
    }
    assert!(compared > 5_000, "{compared} pages compared");
}

/// A Machine's role read from the briefs keeps the Machines its labels give it (the role label,
/// else the older cluster role label), for every sort, with and without a filter.
#[test]
fn machines_of_a_role_read_with_briefs_are_those_of_their_labels() {
    use crate::graphql::types::NodeRole;
    let store = store();
    let snap = store.snapshot();
    let objects: Vec<&Arc<Resource>> = snap.list(Kind::Machine).collect();
    for role in [NodeRole::Worker, NodeRole::ControlPlane] {
        let narrow = crate::graphql::narrow::machines(&snap, Some(role), None, None)
            .expect("a role narrows");
        let by_brief = narrow
            .by_brief
            .as_ref()
            .expect("a role alone is in the briefs");
        let mut kept = 0;
        for field in [SortField::Name, SortField::Created, SortField::Phase] {
            for phase in [None, Some(vec!["Running".to_string()])] {
                let f = Filter {
                    phase,
                    ..Default::default()
                };
                let compiled = CompiledFilter::new(&f).expect("a filter");
                let sort = Some(Sort {
                    field,
                    direction: SortDirection::Desc,
                });
                let args = PageArgs {
                    first: Some(20),
                    ..Default::default()
                };
                let entries = snap
                    .held(Kind::Machine, None, None, true)
                    .filter(|(k, h)| compiled.matches_held(k, h) && by_brief(h));
                let read = paginate(entries, sort, args.clone(), 500, label).expect("a page");
                let items = objects
                    .iter()
                    .copied()
                    .filter(|r| compiled.matches(r) && (narrow.keep)(r));
                let cut = paginate(items, sort, args, 500, label).expect("a page");
                assert_eq!(shown(&read), shown(&cut), "{role:?} {sort:?} {f:?}");
                kept += cut.additional_fields.total_count;
            }
        }
        assert!(kept > 0, "{role:?}: some Machines have it");
    }
    let pooled =
        crate::graphql::narrow::machines(&snap, Some(NodeRole::Worker), Some("p".into()), None)
            .expect("narrows");
    assert!(pooled.by_brief.is_none(), "a pool is not in the briefs");
}

/// Reading ahead (a name search's lists) gives every entry, in order.
#[test]
fn reading_ahead_gives_every_entry_in_order() {
    let store = store();
    let snap = store.snapshot();
    for &kind in Kind::ALL {
        let keys = |entries: &mut dyn Iterator<Item = (&ObjectKey, &Held)>| {
            entries.map(|(k, _)| k.clone()).collect::<Vec<_>>()
        };
        let plain = keys(&mut snap.held(kind, None, None, false));
        let names: &[&Touch<'_>] = &[&touch_name];
        let labels: &[&Touch<'_>] = &[&touch_label_set, &touch_labels];
        for stages in [names, labels] {
            let ahead = keys(&mut Ahead::new(snap.held(kind, None, None, false), stages));
            assert_eq!(plain, ahead, "{kind:?}");
        }
    }
}

/// A label selector remembered per shared label set answers, for every object, what the
/// object's own labels answer, also after a write changes some of them; and the demo's Machines
/// do share their sets (the reason to remember them).
#[test]
fn a_selector_remembered_per_label_set_answers_as_each_objects_labels_do() {
    let store = store();
    let relabelled: Vec<Resource> = store
        .snapshot()
        .list(Kind::Machine)
        .step_by(3)
        .map(|r| {
            let mut r = (**r).clone();
            if let Some(labels) = r.meta_mut().labels.as_mut() {
                labels.insert("vitistack.io/node-role", "gpu");
                labels.insert("zone", "north");
            }
            r
        })
        .collect();
    let before = store.snapshot();
    store.apply(relabelled.into_iter().map(Op::Upsert).collect());
    let after = store.snapshot();
    let selectors = [
        "vitistack.io/node-role=worker",
        "vitistack.io/node-role!=worker",
        "vitistack.io/node-role in (gpu,control-plane)",
        "vitistack.io/node-role notin (gpu)",
        "zone",
        "!zone",
        "zone=north,vitistack.io/node-role=gpu",
        "vitistack.io/clusterid,!nothing",
    ];
    for snap in [&before, &after] {
        for selector in selectors {
            let compiled = CompiledFilter::new(&Filter {
                label_selector: Some(selector.into()),
                ..Default::default()
            })
            .expect("a filter");
            for &kind in Kind::ALL {
                let mut memo = SelectorMemo::default();
                let (mut passed, mut sets) = (0, std::collections::HashSet::new());
                for (key, held) in snap.held(kind, None, None, false) {
                    let remembered = compiled.matches_held_remembering(key, held, &mut memo);
                    assert_eq!(
                        remembered,
                        compiled.matches(held.object()),
                        "{selector}: {key}"
                    );
                    assert_eq!(
                        held.labels().map(|l| &**l),
                        held.object().meta().labels.as_deref(),
                        "{key}: the entry's labels are the object's"
                    );
                    passed += usize::from(remembered);
                    sets.extend(held.labels().map(|l| l.address()));
                }
                if kind == Kind::Machine {
                    let relabelled = std::ptr::eq(snap, &after);
                    assert!(!relabelled || passed > 0, "{selector}: some Machines pass");
                    let machines = snap.list(kind).count();
                    assert!(
                        sets.len() * 2 < machines,
                        "{} label sets for {machines} Machines",
                        sets.len()
                    );
                }
            }
        }
    }
}

/// A name search told by an entry's pairs of letters that it cannot find it answers as reading
/// the namespace and name does: for pieces of real names and namespaces, in capitals, across
/// the `/`, and texts that are not ASCII; and most entries are told without reading.
#[test]
fn a_name_search_skips_by_letters_only_entries_it_would_not_find() {
    let store = store();
    let snap = store.snapshot();
    let mut texts: Vec<String> = ["wrk1", "WRK", "team/r", "m", "", "ünï", "\u{212A}8s", "zz"]
        .map(String::from)
        .to_vec();
    for (i, r) in snap.list(Kind::Machine).enumerate().step_by(37).take(12) {
        let name = r.name();
        let at = i % name.len().max(1);
        texts.push(
            name.get(at..(at + 4).min(name.len()))
                .unwrap_or(name)
                .into(),
        );
        texts.push(name.to_uppercase());
        let ns = r.namespace();
        texts.push(format!(
            "{}/{}",
            &ns[ns.len().saturating_sub(2)..],
            &name[..2.min(name.len())]
        ));
    }
    let mut told = 0;
    for text in &texts {
        let compiled = CompiledFilter::new(&Filter {
            search: Some(text.clone()),
            ..Default::default()
        })
        .expect("a filter");
        for &kind in Kind::ALL {
            for (key, held) in snap.held(kind, None, None, false) {
                assert_eq!(
                    compiled.matches_held(key, held),
                    compiled.matches(held.object()),
                    "{text:?}: {key}"
                );
                told += usize::from(!compiled.may_find_name(held));
            }
        }
    }
    let entries = texts.len() * snap.len();
    assert!(
        told * 2 > entries,
        "{told} of {entries} told by their letters"
    );
}
