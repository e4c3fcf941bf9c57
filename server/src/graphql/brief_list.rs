//! A list read from the store's ordered map with each entry's key and brief
//! ([`crate::store::held`]): its filter and sort are answered without reading the objects, but
//! for a label selector and a phase the brief does not keep. Only the page's objects are read.

use std::sync::Arc;

use async_graphql::Context;

use super::narrow::KeepHeld;
use super::page_cut::{Parts, paginate_split};
use super::paging::{
    self, CompiledFilter, Filter, PageArgs, Row, SelectorMemo, Sort, SortDirection, SortField,
    SortValue,
};
use super::parts::{Memo, ShowsObject};
use super::types::{Conn, prefetched};
use crate::model::{Kind, Resource};
use crate::store::held::{Abbreviated, BriefText, Held};
use crate::store::{ObjectKey, Snapshot};

impl<'a> Row<'a> for (&'a ObjectKey, &'a Held) {
    fn object(self) -> &'a Arc<Resource> {
        self.1.object()
    }

    fn sort(self, field: SortField) -> SortValue<'a> {
        let (key, held) = self;
        match field {
            SortField::Name => SortValue::Text(&key.name),
            SortField::Namespace => SortValue::Text(&key.namespace),
            SortField::Created => SortValue::Time(held.brief().created()),
            SortField::Phase => match held.brief().phase() {
                BriefText::None => SortValue::Text(""),
                BriefText::Known(text) => SortValue::Text(text),
                BriefText::Other => paging::sort_of(held.object(), field),
            },
        }
    }

    fn tie(self) -> (&'a str, &'a str, &'a str) {
        let key = self.0;
        (&key.namespace, &key.name, key.datacenter.key())
    }

    fn abbreviated(self) -> Abbreviated {
        self.1.brief().abbreviated()
    }
}

/// A kind's entries of the store's ordered map a filter can hold, with their briefs: its
/// datacenter's and namespace's ranges when it names them, else the whole kind; in the order
/// the page's selection keeps fewest of ([`read_backwards`]).
pub fn held_candidates<'a>(
    snap: &'a Snapshot,
    kind: Kind,
    filter: Option<&'a Filter>,
    backwards: bool,
) -> Box<dyn Iterator<Item = (&'a ObjectKey, &'a Held)> + Send + 'a> {
    let namespace = filter.and_then(|f| f.namespace.as_deref());
    match filter.and_then(|f| f.datacenter.as_deref()) {
        Some(key) => match snap.datacenters().find(|dc| dc.key() == key) {
            Some(dc) => snap.held(kind, Some(dc), namespace, backwards),
            // A datacenter this store does not hold has none of the kind.
            None => Box::new(std::iter::empty()),
        },
        None => snap.held(kind, None, namespace, backwards),
    }
}

/// Whether [`paginate`](super::page_cut::paginate) keeps fewest items when they come in the reverse of
/// the store's key order (namespace, then name): when the page is cut from the end of that
/// order that its ties fall in. Items that tie come then from the page's end inwards, and after
/// the page's worth each fails the bar; read the other way every one passed it and was kept (a
/// page of the newest Machines, where most have no creation time: 400,000 kept and selected
/// again every 100; p95 98 -> 33 ms at a million objects, `cargo bench --bench search_query`).
pub fn read_backwards(sort: Option<&Sort>, page: &PageArgs) -> bool {
    let desc = sort.is_some_and(|s| s.direction == SortDirection::Desc);
    let from_end = page.first.is_none() && page.last.is_some();
    desc != from_end
}

/// Every `parts`th of [`held_candidates`], from the `part`th on: one part of a list read on
/// more than one thread ([`paginate_split`]). Each part reads the map's entries, and only
/// follows its own.
pub fn held_part<'a>(
    snap: &'a Snapshot,
    kind: Kind,
    filter: Option<&'a Filter>,
    backwards: bool,
    part: usize,
    parts: usize,
) -> Box<dyn Iterator<Item = (&'a ObjectKey, &'a Held)> + Send + 'a> {
    let all = held_candidates(snap, kind, filter, backwards);
    if parts <= 1 {
        return all;
    }
    Box::new(all.skip(part).step_by(parts))
}

/// Most parts a list whose filter reads every object is read in ([`paginate_split`] starts
/// threads for as many as there are cores to spare).
const MOST_PARTS: usize = 4;

/// [`super::types::connection_of`] over entries of the store's ordered map, all of the kind
/// `T` shows and in the filter's namespace and datacenter (`held(part, parts)` gives each part
/// of them), with a list's own filter (`narrow.rs`) when it has one.
pub async fn connection<'a, T, I>(
    ctx: &Context<'_>,
    held: impl Fn(usize, usize) -> I + Sync,
    filter: Option<&Filter>,
    keep: Option<KeepHeld<'_>>,
    sort: Option<Sort>,
    page: PageArgs,
    wrap: impl Fn(Arc<Resource>) -> Option<T>,
) -> async_graphql::Result<Conn<T>>
where
    T: async_graphql::OutputType + ShowsObject,
    I: Iterator<Item = (&'a ObjectKey, &'a Held)> + 'a,
{
    let max = paging::max_page_size(ctx);
    let selects = filter.is_some_and(|f| f.label_selector.is_some());
    // The entries are those of the filter's namespace and datacenter (`held_candidates`).
    let filter = filter
        .map(CompiledFilter::new)
        .transpose()?
        .map(|f| f.without_place());
    // A name search reads every entry's key, a label selector every object's labels: read
    // ahead, their misses overlap, and in parts on more than one core. Without either, only
    // the entries that pass are read further (touching every key cost the lists of a phase 2.5
    // times their time, `cargo bench --bench search_query`), and the entries themselves, kept
    // in the map's leaves, are read fastest by one core.
    // A name is touched only where its letters may hold the search (`may_find_name`).
    let touch_found = |entry: &(&ObjectKey, &Held)| {
        if filter.as_ref().is_some_and(|f| f.may_find_name(entry.1)) {
            touch_name(entry)
        }
    };
    let (stages, parts): (&[&Touch<'_>], usize) = match &filter {
        Some(f) if f.searches() => (&[&touch_found], MOST_PARTS),
        Some(_) if selects => (&[&touch_label_set, &touch_labels], MOST_PARTS),
        _ => (&[], 1),
    };
    let (filter, keep) = (&filter, &keep);
    let part = |part, parts| {
        let items = Ahead::new(held(part, parts), stages);
        let mut memo = SelectorMemo::default();
        items.filter(move |(key, held)| {
            debug_assert!(T::shows(held.object()), "{key} is of the list's kind");
            filter
                .as_ref()
                .is_none_or(|f| f.matches_held_remembering(key, held, &mut memo))
                && keep.as_ref().is_none_or(|keep| keep(held))
        })
    };
    let conn = paginate_split(Parts::granted(parts), part, sort, page, max, |r| {
        wrap(r).map(Memo)
    })?;
    Ok(prefetched(ctx, conn).await)
}

/// Entries read [`AHEAD`] ahead, each one touched where the filter will read it: the keys (one
/// allocation each, shared with the indexes) are where a list's name search reads, the label
/// sets where a label selector does (most of them met before, and remembered). Touched in
/// turn, their cache misses overlap, where read by the filter one at a time each waited for
/// the last. What lies behind a pointer is touched
/// in stages, each a few entries after the last, so that each stage finds the allocation the
/// one before it touched already read: one step to memory an entry at each stage, where
/// touched all at once each waited for the step before it.
struct Ahead<'a, 't, I> {
    entries: I,
    stages: &'t [&'t Touch<'t>],
    read: std::collections::VecDeque<(&'a ObjectKey, &'a Held)>,
}

/// A stage of [`Ahead`]: a read of an entry, its result thrown away.
type Touch<'f> = dyn Fn(&(&ObjectKey, &Held)) + Sync + 'f;

/// The name's text: in the key, or (longer than 15 bytes) in its own allocation.
fn touch_name(entry: &(&ObjectKey, &Held)) {
    std::hint::black_box(entry.0.name.as_bytes().first());
}

/// The shared label set's own allocation, where its pairs' place is ([`Held::labels`]).
fn touch_label_set(entry: &(&ObjectKey, &Held)) {
    std::hint::black_box(entry.1.labels().map(|l| l.len()));
}

/// The labels themselves.
fn touch_labels(entry: &(&ObjectKey, &Held)) {
    let labels = entry.1.labels();
    std::hint::black_box(labels.and_then(|l| l.iter().next()).map(|(_, v)| v.len()));
}

/// How far [`Ahead`] reads ahead.
const AHEAD: usize = 16;

impl<'a, 't, I: Iterator<Item = (&'a ObjectKey, &'a Held)>> Ahead<'a, 't, I> {
    fn new(entries: I, stages: &'t [&'t Touch<'t>]) -> Self {
        Ahead {
            entries,
            stages,
            read: std::collections::VecDeque::with_capacity(AHEAD),
        }
    }
}

impl<'a, I: Iterator<Item = (&'a ObjectKey, &'a Held)>> Iterator for Ahead<'a, '_, I> {
    type Item = (&'a ObjectKey, &'a Held);

    fn next(&mut self) -> Option<Self::Item> {
        if self.stages.is_empty() {
            return self.entries.next();
        }
        while self.read.len() < AHEAD {
            let Some(entry) = self.entries.next() else {
                break;
            };
            self.read.push_back(entry);
            // Stage `s` touches the entry `s` steps of `AHEAD / stages` behind the newest.
            let step = AHEAD / self.stages.len();
            for (s, touch) in self.stages.iter().enumerate() {
                let behind = self.read.len().checked_sub(1 + s * step);
                if let Some(e) = behind.and_then(|at| self.read.get(at)) {
                    touch(e);
                }
            }
        }
        self.read.pop_front()
    }
}

#[cfg(test)]
#[path = "brief_list_tests.rs"]
mod tests;
