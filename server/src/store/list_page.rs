//! A page of one kind's objects in name or namespace order, read from the ordered map's ranges.
//!
//! The map is ordered by kind, datacenter, namespace, name: each namespace of a datacenter is a
//! range in name order, and each datacenter's objects of a kind are one range in namespace (then
//! name) order. A page sorted by name is then those ranges merged from a cursor on, and one
//! sorted by namespace the datacenters' ranges merged: only the page's objects and one past it
//! are read, where sorting by name read every object of the kind (460,000 Machines: 116 ms p50
//! at one million objects, `cargo bench --bench search_query`). The count is the ranges'
//! lengths.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;
use std::ops::Bound;
use std::sync::Arc;

use super::held::Held;
use super::{ObjectKey, Snapshot};
use crate::model::{Kind, Resource};

/// Most ranges a page merges (a datacenter's namespaces, for the name order): past it the kind is
/// read whole instead, as every object in a namespace of its own would make a range of each.
const MOST_RANGES: usize = 1024;

/// The orders a page can be read in from the map's ranges.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyOrder {
    /// By name, then namespace, then datacenter.
    Name,
    /// By namespace, then name, then datacenter.
    Namespace,
}

/// Where an object stands in a list: its namespace, name and datacenter's key. A cursor names one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Spot<'a> {
    /// The namespace.
    pub namespace: &'a str,
    /// `metadata.name`.
    pub name: &'a str,
    /// The datacenter's key.
    pub datacenter: &'a str,
}

impl<'a> Spot<'a> {
    fn of(key: &'a ObjectKey) -> Self {
        Spot {
            namespace: &key.namespace,
            name: &key.name,
            datacenter: key.datacenter.key(),
        }
    }

    /// Its place in `order`, compared as a tuple.
    fn place(self, order: KeyOrder) -> (&'a str, &'a str, &'a str) {
        match order {
            KeyOrder::Name => (self.name, self.namespace, self.datacenter),
            KeyOrder::Namespace => (self.namespace, self.name, self.datacenter),
        }
    }
}

/// Which of a range's entries a page keeps (its filter's test of an entry's key and brief).
pub type Keep<'a> = &'a (dyn Fn(&ObjectKey, &Held) -> bool + Sync);

/// What a page asks: a kind, the datacenter and namespace it is limited to, the entries it
/// keeps, the order and its direction, the cursor it starts after and its length.
#[derive(Clone, Copy)]
pub struct PageAsk<'a> {
    /// The kind listed.
    pub kind: Kind,
    /// Only this datacenter (its key).
    pub datacenter: Option<&'a str>,
    /// Only this namespace.
    pub namespace: Option<&'a str>,
    /// Only the entries this keeps (all: None). Each of the ranges' entries is tested to count
    /// them, and the ranges are merged through those it keeps, so only the page's keys are read
    /// for the order (a page of 100 by name of 200,000 Machines of a role and phase read each
    /// one's key to sort by, `cargo bench --bench search_query`).
    pub keep: Option<Keep<'a>>,
    /// The order.
    pub order: KeyOrder,
    /// Descending.
    pub desc: bool,
    /// The objects after this one in the order.
    pub after: Option<Spot<'a>>,
    /// How many.
    pub first: usize,
}

/// One page.
#[derive(Debug)]
pub struct KeyPage<'s> {
    /// Its objects, in order.
    pub items: Vec<&'s Arc<Resource>>,
    /// How many objects the list holds in all.
    pub total: usize,
    /// Whether some come at or before the cursor.
    pub earlier: bool,
    /// Whether some come after the page.
    pub more: bool,
}

/// A range's next object, ordered so that the heap's greatest is the list's next.
struct Head<'s> {
    place: (&'s str, &'s str, &'s str),
    desc: bool,
    range: usize,
}

impl PartialEq for Head<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Head<'_> {}

impl PartialOrd for Head<'_> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Head<'_> {
    fn cmp(&self, other: &Self) -> Ordering {
        let by = (self.place, Reverse(self.range)).cmp(&(other.place, Reverse(other.range)));
        if self.desc { by } else { by.reverse() }
    }
}

type Entries<'s> = Box<dyn Iterator<Item = (&'s ObjectKey, &'s Held)> + 's>;

impl Snapshot {
    /// The page `ask` asks for, or None when the kind's ranges are too many to merge
    /// ([`MOST_RANGES`]): read the kind instead.
    pub fn key_page<'s>(&'s self, ask: PageAsk<'s>) -> Option<KeyPage<'s>> {
        super::reads::note_inexact();
        let ranges = self.ranges(&ask)?;
        let cursor = ask.after.map(|c| c.place(ask.order));
        let keep = ask.keep;
        let kept = move |&(k, h): &(&ObjectKey, &Held)| keep.is_none_or(|keep| keep(k, h));
        let mut total = 0;
        let mut earlier = false;
        let mut rests: Vec<std::iter::Peekable<Entries<'s>>> = Vec::with_capacity(ranges.len());
        let mut heads = BinaryHeap::with_capacity(ranges.len());
        for (i, (from, to)) in ranges.iter().enumerate() {
            // Counted by walking the map's leaves: no key is compared, no object read (but by
            // the test of what is kept).
            total += match keep {
                None => self.span_from(from, to).count(),
                Some(_) => self.span_from(from, to).filter(kept).count(),
            };
            let all = || {
                self.objects
                    .range::<_, ObjectKey>((Bound::Included(from), Bound::Excluded(to)))
            };
            let rest: Entries<'s> = match (cursor, ask.desc) {
                (None, false) => Box::new(all()),
                (None, true) => Box::new(all().rev()),
                // The range's first object past the cursor is found by the map; the objects
                // before it are the range's at or before the cursor.
                (Some(c), desc) => {
                    let at = self.past_cursor(from, to, ask.order, c, desc, &kept);
                    earlier = earlier || at.1;
                    at.0
                }
            };
            let rest: Entries<'s> = match keep {
                None => rest,
                Some(_) => Box::new(rest.filter(kept)),
            };
            let mut rest = rest.peekable();
            if let Some(&(k, _)) = rest.peek() {
                heads.push(Head {
                    place: Spot::of(k).place(ask.order),
                    desc: ask.desc,
                    range: i,
                });
            }
            rests.push(rest);
        }
        // One past the page, to know whether there are more.
        let mut items = Vec::with_capacity(ask.first + 1);
        while items.len() <= ask.first {
            let Some(head) = heads.pop() else { break };
            let Some(rest) = rests.get_mut(head.range) else {
                break;
            };
            if let Some((_, r)) = rest.next() {
                items.push(r.object());
            }
            if let Some(&(k, _)) = rest.peek() {
                heads.push(Head {
                    place: Spot::of(k).place(ask.order),
                    ..head
                });
            }
        }
        let more = items.len() > ask.first;
        items.truncate(ask.first);
        Some(KeyPage {
            items,
            total,
            earlier,
            more,
        })
    }

    /// The ranges a page merges, each in the page's order: a datacenter's objects of the kind
    /// (or of its namespace), or for the name order each of its namespaces apart.
    fn ranges(&self, ask: &PageAsk<'_>) -> Option<Vec<(ObjectKey, ObjectKey)>> {
        let kind = ask.kind;
        let dcs = self.datacenters.keys();
        let dcs = dcs.filter(|dc| ask.datacenter.is_none_or(|want| want == dc.key()));
        let mut ranges = Vec::new();
        for dc in dcs {
            let (from, to) = match ask.namespace {
                Some(ns) => ObjectKey::namespace_span(dc, kind, ns),
                None => ObjectKey::datacenter_span(dc, kind),
            };
            if ask.order == KeyOrder::Namespace || ask.namespace.is_some() {
                ranges.push((from, to));
                continue;
            }
            // Each namespace apart, found by one seek each: the first key at or past `next`.
            let mut next = from;
            while let Some((k, _)) = self.span_from(&next, &to).next() {
                if ranges.len() == MOST_RANGES {
                    return None;
                }
                let (start, end) = ObjectKey::namespace_span(dc, kind, &k.namespace);
                next = end.clone();
                ranges.push((start, end));
            }
        }
        Some(ranges)
    }

    /// A range's objects past the cursor `c` in the order (after it ascending, before it
    /// descending, read in the page's direction), and whether the range holds any at or before it
    /// that the page keeps.
    fn past_cursor<'s>(
        &'s self,
        from: &ObjectKey,
        to: &ObjectKey,
        order: KeyOrder,
        c: (&str, &str, &str),
        desc: bool,
        kept: &impl Fn(&(&'s ObjectKey, &'s Held)) -> bool,
    ) -> (Entries<'s>, bool) {
        // Within a range the objects are in key order (namespace, name; the datacenter and kind
        // are the range's), which is the page's order: the cursor falls at the key with its
        // namespace and name in this range, and a key equal in both ties on the datacenter.
        let dc = &from.datacenter;
        let (cursor_key, same) = match order {
            // A range of one namespace: its objects compare to the cursor by name, then
            // (namespace, datacenter) when the names are equal.
            KeyOrder::Name => (
                ObjectKey::new(dc, from.kind, &from.namespace, c.0),
                (&*from.namespace, dc.key()).cmp(&(c.1, c.2)),
            ),
            KeyOrder::Namespace => (ObjectKey::new(dc, from.kind, c.0, c.1), dc.key().cmp(c.2)),
        };
        // The key with the cursor's namespace and name comes after the cursor when its
        // datacenter (or namespace) does.
        let key_after = same == Ordering::Greater;
        let all = || {
            self.objects
                .range::<_, ObjectKey>((Bound::Included(from), Bound::Excluded(to)))
        };
        if !desc {
            // After the cursor: from the cursor's key (itself included when it comes after).
            if cursor_key < *from {
                return (Box::new(all()), false);
            }
            if cursor_key >= *to {
                return (Box::new(std::iter::empty()), all().any(|e| kept(&e)));
            }
            let (start, earlier_end) = if key_after {
                (Bound::Included(&cursor_key), Bound::Excluded(&cursor_key))
            } else {
                (Bound::Excluded(&cursor_key), Bound::Included(&cursor_key))
            };
            let earlier = self
                .objects
                .range::<_, ObjectKey>((Bound::Included(from), earlier_end))
                .any(|e| kept(&e));
            let rest = self
                .objects
                .range::<_, ObjectKey>((start, Bound::Excluded(to)));
            (Box::new(rest), earlier)
        } else {
            // Before the cursor, read backwards: up to the cursor's key (itself included when
            // it comes before).
            let key_before = same == Ordering::Less;
            if cursor_key >= *to {
                return (Box::new(all().rev()), false);
            }
            if cursor_key < *from {
                return (Box::new(std::iter::empty()), all().any(|e| kept(&e)));
            }
            let end = if key_before {
                Bound::Included(&cursor_key)
            } else {
                Bound::Excluded(&cursor_key)
            };
            let earlier_start = if key_before {
                Bound::Excluded(&cursor_key)
            } else {
                Bound::Included(&cursor_key)
            };
            let earlier = self
                .objects
                .range::<_, ObjectKey>((earlier_start, Bound::Excluded(to)))
                .any(|e| kept(&e));
            let rest = self
                .objects
                .range::<_, ObjectKey>((Bound::Included(from), end))
                .rev();
            (Box::new(rest), earlier)
        }
    }
}
