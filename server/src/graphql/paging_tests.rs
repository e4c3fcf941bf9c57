use super::*;
use crate::graphql::least::Least;
use crate::graphql::page_cut::{Parts, paginate, paginate_split};
use crate::model::{Machine, MachinePhase, MachineStatus};

/// Machines whose names, namespaces, creation times and phases repeat in different orders, so
/// that every sort has ties broken by namespace and name; some have no creation time or phase.
fn machines() -> Vec<Arc<Resource>> {
    (0..40)
        .map(|i| {
            let mut m = Machine::default();
            m.metadata.name = Some(format!("m{:02}", (i * 7) % 40).into());
            m.metadata.namespace = Some(format!("team-{}", i % 3).into());
            if i % 5 != 0 {
                // Whole seconds and fractions mixed: they compare as times.
                let t: jiff::Timestamp = format!("2026-11-{:02}T10:00:0{}Z", 1 + i % 4, i % 2)
                    .parse()
                    .expect("time");
                let t = if i % 3 == 0 {
                    t + jiff::SignedDuration::from_millis(500)
                } else {
                    t
                };
                m.metadata.creation_timestamp = t.into();
            }
            if i % 4 != 0 {
                m.status = Some(Box::new(MachineStatus {
                    phase: Some(MachinePhase::parse(["Running", "Pending", "Failed"][i % 3])),
                    ..Default::default()
                }));
            }
            Arc::new(Resource::Machine(Box::new(m)))
        })
        .collect()
}

/// The page as a full sort cuts it: the order, then the cursors' places, then first/last.
fn by_full_sort(
    items: &[Arc<Resource>],
    sort: Sort,
    after: Option<&Arc<Resource>>,
    before: Option<&Arc<Resource>>,
    first: Option<usize>,
    last: Option<usize>,
) -> (Vec<String>, bool, bool) {
    fn key(r: &Resource, field: SortField) -> (SortValue<'_>, (&str, &str, &str)) {
        (sort_of(r, field), tie(r))
    }
    let mut sorted: Vec<&Arc<Resource>> = items.iter().collect();
    sorted.sort_by(|a, b| key(a, sort.field).cmp(&key(b, sort.field)));
    if sort.direction == SortDirection::Desc {
        sorted.reverse();
    }
    let at = |r: &Arc<Resource>| sorted.iter().position(|x| Arc::ptr_eq(x, r)).expect("in");
    let mut start = after.map_or(0, |a| at(a) + 1);
    let mut end = before.map_or(sorted.len(), at).max(start);
    match (first, last) {
        (Some(n), _) => end = end.min(start + n),
        (None, Some(n)) => start = end.saturating_sub(n).max(start),
        (None, None) => end = end.min(start + DEFAULT_PAGE_SIZE),
    }
    if let (Some(_), Some(n)) = (first, last) {
        start = end.saturating_sub(n).max(start);
    }
    let names = sorted[start..end]
        .iter()
        .map(|r| format!("{}/{}", r.namespace(), r.name()))
        .collect();
    (names, start > 0, end < sorted.len())
}

/// The page is selected, not sorted whole: for every sort, direction, pair of cursors and
/// page size, it is the page a full sort gives, with the same page info and count.
#[test]
fn a_selected_page_is_the_page_of_a_full_sort() {
    let items = machines();
    let cursor = |f: SortField, r: &Arc<Resource>| Cursor::Item(f, r.clone()).encode_cursor();
    let mut checked = 0;
    for field in [
        SortField::Name,
        SortField::Namespace,
        SortField::Created,
        SortField::Phase,
    ] {
        for direction in [SortDirection::Asc, SortDirection::Desc] {
            let sort = Sort { field, direction };
            let picks = [None, Some(&items[3]), Some(&items[17]), Some(&items[38])];
            for after in picks {
                for before in picks {
                    for (first, last) in [
                        (None, None),
                        (Some(5), None),
                        (None, Some(4)),
                        (Some(6), Some(2)),
                        (Some(0), None),
                        (Some(100), None),
                        (None, Some(100)),
                    ] {
                        let page = PageArgs {
                            after: after.map(|r| cursor(field, r)),
                            before: before.map(|r| cursor(field, r)),
                            first: first.map(|n: usize| n as i32),
                            last: last.map(|n: usize| n as i32),
                        };
                        let conn = paginate(items.iter(), Some(sort), page.clone(), 500, |r| {
                            Some(format!("{}/{}", r.namespace(), r.name()))
                        })
                        .expect("page");
                        let got: Vec<String> = conn.edges.iter().map(|e| e.node.clone()).collect();
                        let want = by_full_sort(&items, sort, after, before, first, last);
                        assert_eq!(
                            (got, conn.has_previous_page, conn.has_next_page),
                            want,
                            "{sort:?} after {:?} before {:?} first {first:?} last {last:?}",
                            after.map(|r| r.name()),
                            before.map(|r| r.name()),
                        );
                        assert_eq!(conn.additional_fields.total_count, items.len());
                        // Read in parts, on this thread and on others, the page is the same.
                        for (parts, threads) in [(2, 1), (3, 2), (7, 3)] {
                            let split = paginate_split(
                                Parts::exactly(parts, threads),
                                |part, parts| items.iter().skip(part).step_by(parts),
                                Some(sort),
                                page.clone(),
                                500,
                                |r| Some(format!("{}/{}", r.namespace(), r.name())),
                            )
                            .expect("page");
                            let names: Vec<String> =
                                split.edges.iter().map(|e| e.node.clone()).collect();
                            assert_eq!(
                                (names, split.has_previous_page, split.has_next_page),
                                (
                                    conn.edges.iter().map(|e| e.node.clone()).collect(),
                                    conn.has_previous_page,
                                    conn.has_next_page
                                ),
                                "{sort:?} in {parts} parts on {threads} threads"
                            );
                            assert_eq!(split.additional_fields.total_count, items.len());
                        }
                        checked += 1;
                    }
                }
            }
        }
    }
    assert_eq!(checked, 4 * 2 * 4 * 4 * 7);
}

/// Creation times sort as times: a fraction of a second after a whole second comes after it
/// (as text, `…:00.5Z` sorted before `…:00Z`), and a cursor made from one finds its place.
#[test]
fn creation_times_sort_as_times() {
    let at = |text: &str, name: &str| {
        let mut m = Machine::default();
        m.metadata.name = Some(name.into());
        m.metadata.creation_timestamp = text.parse::<jiff::Timestamp>().expect("time").into();
        Arc::new(Resource::Machine(Box::new(m)))
    };
    let items = [
        at("2026-11-01T10:00:00.500Z", "half"),
        at("2026-11-01T10:00:00Z", "whole"),
        at("2026-11-01T09:59:59Z", "before"),
    ];
    let sort = Sort {
        field: SortField::Created,
        direction: SortDirection::Asc,
    };
    let page = |after: Option<String>| {
        let args = PageArgs {
            after,
            ..Default::default()
        };
        paginate(items.iter(), Some(sort), args, 500, |r| {
            Some(r.name().to_string())
        })
        .expect("page")
    };
    let all = page(None);
    let names: Vec<&str> = all.edges.iter().map(|e| e.node.as_str()).collect();
    assert_eq!(names, ["before", "whole", "half"]);
    let next = page(Some(all.edges[1].cursor.encode_cursor()));
    let names: Vec<&str> = next.edges.iter().map(|e| e.node.as_str()).collect();
    assert_eq!(names, ["half"]);
}

/// A cursor for sorting by creation time whose value is not a time is refused as a bad cursor.
#[test]
fn a_creation_cursor_without_a_time_is_refused() {
    let forged = URL_SAFE_NO_PAD
        .encode(serde_json::to_vec(&["c1", "created", "yesterday", "team-a", "m0"]).expect("json"));
    let args = PageArgs {
        after: Some(forged),
        ..Default::default()
    };
    let sort = Sort {
        field: SortField::Created,
        direction: SortDirection::Asc,
    };
    let e = paginate(machines().iter(), Some(sort), args, 500, |r| {
        Some(r.name().to_string())
    })
    .err()
    .expect("refused");
    assert!(
        e.message.contains("`after` cursor") && e.message.contains("yesterday"),
        "{}",
        e.message
    );
}

/// The name filter reads ASCII names in place and any other lowercased, as before.
#[test]
fn the_name_filter_folds_case() {
    assert!(contains_folded("Team-A/Wrk-01", "wrk-0"));
    assert!(contains_folded("ÅSE-wrk", "åse"));
    assert!(!contains_folded("wrk", "wrk-0"));
    assert!(contains_folded("anything", ""));
}

/// `Least` keeps the k least of any sequence, in order, whatever k is against the length (so
/// through none, one and many selections of its buffer).
#[test]
fn least_keeps_the_k_least_in_order() {
    // A fixed permutation with repeats of no value: 0..200 shuffled by a multiplier.
    let values: Vec<u32> = (0..200u32).map(|i| (i * 73 + 11) % 200).collect();
    for n in [0, 1, 7, 150, 200] {
        for k in [0, 1, 2, 5, 64, 199, 200, 300] {
            let mut least = Least::new(k, |a: &u32, b: &u32| a.cmp(b));
            for &v in &values[..n] {
                least.push(v);
            }
            let mut want: Vec<u32> = values[..n].to_vec();
            want.sort_unstable();
            want.truncate(k);
            assert_eq!(least.into_sorted(), want, "{k} least of {n}");
        }
    }
    // Reversed, it keeps the greatest: how `last` is cut.
    let mut greatest = Least::new(3, |a: &u32, b: &u32| b.cmp(a));
    for &v in &values {
        greatest.push(v);
    }
    assert_eq!(greatest.into_sorted(), [199, 198, 197]);
}
