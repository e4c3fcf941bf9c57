use super::*;
use crate::graphql::page_cut::paginate;
use crate::graphql::paging::CompiledFilter;
use crate::model::Datacenter;
use crate::source::demo::{FleetSpec, fleet};
use crate::store::{Op, Store};

/// What a page shows: each item's datacenter, namespace and name, the page info and the count.
type Shown = (Vec<String>, bool, bool, usize);

fn shown(conn: &Connection<Cursor, String, ConnectionFields>) -> Shown {
    (
        conn.edges.iter().map(|e| e.node.clone()).collect(),
        conn.has_previous_page,
        conn.has_next_page,
        conn.additional_fields.total_count,
    )
}

fn label(r: Arc<Resource>) -> Option<String> {
    Some(format!("{}:{}/{}", r.datacenter(), r.namespace(), r.name()))
}

/// A cursor for this sort, made by hand (as a client could keep one of an object since deleted).
fn cursor(field: SortField, dc: &str, ns: &str, name: &str) -> String {
    let value = match field {
        SortField::Namespace => ns,
        _ => name,
    };
    Cursor::Decoded {
        field: field_name(field).to_string(),
        key: (value.into(), ns.into(), name.into(), dc.into()),
    }
    .encode_cursor()
}

/// Three datacenters, two of them holding the same names (ties broken by the datacenter), and
/// namespaces where one is the start of another.
fn store() -> Store {
    let mut objects = Vec::new();
    for (dc, seed) in [("a", 7), ("b", 7), ("c", 8)] {
        objects.extend(fleet(&FleetSpec {
            seed,
            datacenter: Datacenter::new(dc),
            ..FleetSpec::demo()
        }));
    }
    for (ns, name) in [
        ("team", "m-1"),
        ("team-x", "m-0"),
        ("team", "zz"),
        ("t", "m-1"),
    ] {
        let m: crate::model::Machine = serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "namespace": ns}
        }))
        .expect("a Machine");
        objects.push(Resource::Machine(Box::new(m)).in_datacenter(&Datacenter::new("b")));
    }
    let store = Store::new();
    store.apply(objects.into_iter().map(Op::Upsert).collect());
    store
}

/// For every kind, both orders and directions, filters by datacenter and namespace, page sizes
/// and cursors (of objects listed and of none), the page read from the store's ranges is the
/// one every object sorted and cut gives: the same items, page info and count.
#[test]
fn a_page_in_key_order_is_the_page_of_a_full_reading() {
    let store = store();
    let snap = store.snapshot();
    let mut compared = 0;
    for &kind in crate::model::Kind::ALL {
        let all: Vec<&Arc<Resource>> = snap.list(kind).collect();
        let some = |i: usize| all.get(i * 7 % all.len().max(1)).copied();
        let mut filters = vec![
            None,
            Some(Filter {
                datacenter: Some("b".into()),
                ..Default::default()
            }),
            Some(Filter {
                datacenter: Some("nowhere".into()),
                ..Default::default()
            }),
            // Tested on each entry: a phase (cased otherwise, and one no object has), a label
            // selector, both with a datacenter.
            Some(Filter {
                phase: Some(vec!["running".into(), "Failed".into()]),
                ..Default::default()
            }),
            Some(Filter {
                phase: Some(vec!["Hibernating".into()]),
                datacenter: Some("b".into()),
                ..Default::default()
            }),
            Some(Filter {
                label_selector: Some("vitistack.io/node-role!=worker".into()),
                ..Default::default()
            }),
            Some(Filter {
                label_selector: Some("vitistack.io/node-role".into()),
                phase: Some(vec!["Running".into()]),
                datacenter: Some("a".into()),
                ..Default::default()
            }),
        ];
        for r in [some(1), some(5)].into_iter().flatten() {
            filters.push(Some(Filter {
                namespace: Some(r.namespace().to_string()),
                ..Default::default()
            }));
            filters.push(Some(Filter {
                namespace: Some(r.namespace().to_string()),
                datacenter: Some(r.datacenter().key().to_string()),
                ..Default::default()
            }));
        }
        for field in [SortField::Name, SortField::Namespace] {
            let mut cursors: Vec<Option<String>> = vec![
                None,
                Some(cursor(field, "", "", "")),
                Some(cursor(field, "b", "team", "m-1")),
                Some(cursor(field, "a", "team", "m-1")),
                Some(cursor(field, "zz", "zz", "zz")),
            ];
            for r in [some(0), some(2), some(3), all.last().copied()]
                .into_iter()
                .flatten()
            {
                let (dc, ns, name) = (r.datacenter().key(), r.namespace(), r.name());
                cursors.push(Some(cursor(field, dc, ns, name)));
                // Just past it and just before it, in another datacenter.
                cursors.push(Some(cursor(field, "b\0", ns, name)));
                cursors.push(Some(cursor(field, "a", ns, &format!("{name}\0"))));
            }
            for direction in [SortDirection::Asc, SortDirection::Desc] {
                let sort = Sort { field, direction };
                for filter in &filters {
                    let compiled = filter
                        .as_ref()
                        .map(|f| CompiledFilter::new(f).expect("a filter"));
                    for after in &cursors {
                        for first in [None, Some(0), Some(1), Some(4), Some(500)] {
                            let args = PageArgs {
                                after: after.clone(),
                                first,
                                ..Default::default()
                            };
                            let read = page(
                                &snap,
                                kind,
                                filter.as_ref(),
                                None,
                                Some(sort),
                                &args,
                                500,
                                label,
                            )
                            .expect("a page in key order");
                            let items = all
                                .iter()
                                .copied()
                                .filter(|r| compiled.as_ref().is_none_or(|f| f.matches(r)));
                            let cut = paginate(items, Some(sort), args.clone(), 500, label)
                                .expect("a page");
                            assert_eq!(
                                shown(&read),
                                shown(&cut),
                                "{kind:?} {sort:?} {filter:?} after {after:?} first {first:?}"
                            );
                            compared += 1;
                        }
                    }
                }
            }
        }
    }
    assert!(compared > 10_000, "{compared} pages compared");
}

/// What the key order does not give is left to the general path: other sorts, a name search or
/// an unreadable label selector, paging backwards, a page size refused, a cursor of another sort
/// or a bad one.
#[test]
fn other_pages_are_left_to_the_general_path() {
    let store = store();
    let snap = store.snapshot();
    let by = |field| {
        Some(Sort {
            field,
            direction: SortDirection::Asc,
        })
    };
    let ask = |filter: Option<Filter>, sort: Option<Sort>, args: PageArgs| {
        page(
            &snap,
            Kind::Machine,
            filter.as_ref(),
            None,
            sort,
            &args,
            500,
            label,
        )
        .is_some()
    };
    assert!(
        ask(None, None, PageArgs::default()),
        "the default page is read in key order"
    );
    assert!(!ask(None, by(SortField::Created), PageArgs::default()));
    assert!(!ask(None, by(SortField::Phase), PageArgs::default()));
    for filter in [
        Filter {
            search: Some("wrk".into()),
            ..Default::default()
        },
        Filter {
            label_selector: Some("a in (".into()),
            ..Default::default()
        },
    ] {
        assert!(!ask(Some(filter), None, PageArgs::default()));
    }
    for filter in [
        Filter {
            phase: Some(vec!["Running".into()]),
            ..Default::default()
        },
        Filter {
            label_selector: Some("a=b".into()),
            ..Default::default()
        },
    ] {
        assert!(
            ask(Some(filter), None, PageArgs::default()),
            "tested on each"
        );
    }
    let named = cursor(SortField::Name, "a", "team", "m-1");
    for args in [
        PageArgs {
            last: Some(3),
            ..Default::default()
        },
        PageArgs {
            before: Some(named.clone()),
            first: Some(3),
            ..Default::default()
        },
        PageArgs {
            first: Some(501),
            ..Default::default()
        },
        PageArgs {
            first: Some(-1),
            ..Default::default()
        },
        PageArgs {
            after: Some("not a cursor".into()),
            ..Default::default()
        },
        PageArgs {
            after: Some(cursor(SortField::Namespace, "a", "team", "m-1")),
            ..Default::default()
        },
    ] {
        assert!(!ask(None, None, args));
    }
    // A cursor whose value is not its name (made by hand) is judged as the general path does.
    let forged = Cursor::Decoded {
        field: "name".into(),
        key: ("zz".into(), "team".into(), "m-1".into(), "a".into()),
    }
    .encode_cursor();
    assert!(!ask(
        None,
        None,
        PageArgs {
            after: Some(forged),
            ..Default::default()
        }
    ));
    assert!(ask(
        None,
        None,
        PageArgs {
            after: Some(named),
            first: Some(3),
            ..Default::default()
        }
    ));
}

/// A list's own filter that the briefs answer (a Machine's role) gives, read in key order, the
/// page of the Machines its labels keep, with a phase and cursors, both ways.
#[test]
fn a_role_read_in_key_order_is_that_of_the_labels() {
    use crate::graphql::types::NodeRole;
    let store = store();
    let snap = store.snapshot();
    let all: Vec<&Arc<Resource>> = snap.list(Kind::Machine).collect();
    let mut compared = 0;
    for role in [NodeRole::Worker, NodeRole::ControlPlane] {
        let narrow = crate::graphql::narrow::machines(&snap, Some(role), None, None)
            .expect("a role narrows");
        let by_brief = narrow.by_brief.as_ref().expect("in the briefs");
        for phase in [None, Some(vec!["Running".to_string()])] {
            let filter = Filter {
                phase,
                ..Default::default()
            };
            let compiled = CompiledFilter::new(&filter).expect("a filter");
            for field in [SortField::Name, SortField::Namespace] {
                for direction in [SortDirection::Asc, SortDirection::Desc] {
                    let sort = Some(Sort { field, direction });
                    let mut after = None;
                    // Every page of 3, each from the last one's end.
                    loop {
                        let args = PageArgs {
                            after: after.clone(),
                            first: Some(3),
                            ..Default::default()
                        };
                        let read = page(
                            &snap,
                            Kind::Machine,
                            Some(&filter),
                            Some(by_brief),
                            sort,
                            &args,
                            500,
                            label,
                        )
                        .expect("a page in key order");
                        let items = all
                            .iter()
                            .copied()
                            .filter(|r| compiled.matches(r) && (narrow.keep)(r));
                        let cut = paginate(items, sort, args, 500, label).expect("a page");
                        assert_eq!(shown(&read), shown(&cut), "{role:?} {sort:?} {filter:?}");
                        compared += 1;
                        if !read.has_next_page {
                            break;
                        }
                        after = read.edges.last().map(|e| e.cursor.encode_cursor());
                    }
                }
            }
        }
    }
    assert!(compared > 40, "{compared} pages compared");
}
