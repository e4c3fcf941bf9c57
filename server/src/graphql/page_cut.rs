//! One page cut from a list in sort order: the items before the cursors and between them counted,
//! and only the page's worth nearest the end it is cut from kept ([`Least`]) and sorted.
//!
//! A list whose filter reads every object (a label selector, a name search) can be cut on more
//! than one core: each part reads every `parts`th candidate, counts and keeps its own, and the
//! parts' counts are summed and their kept items cut once more ([`paginate_split`]). The parts
//! share no state while they read, so two cores read twice the objects in the time of one (a
//! label selector that half of one million objects pass read the labels of 460,000 Machines one
//! at a time, memory's latency each: `cargo bench --bench search_query`).

use std::cmp::Ordering;
use std::sync::Arc;
use std::sync::LazyLock;
use std::sync::atomic::{AtomicUsize, Ordering as Atomic};

use async_graphql::OutputType;
use async_graphql::connection::{Connection, CursorType, Edge};

use super::least::Least;
use super::paging::{
    Bound, ConnectionFields, Cursor, DEFAULT_PAGE_SIZE, PageArgs, Row, Sort, SortDirection,
    SortField, SortKey, SortValue, bound, field_name, page_size,
};
use crate::error::ErrorCode;
use crate::model::Resource;
use crate::store::held::Abbreviated;

/// A page of `T`s, or why the page's arguments are refused.
pub type PageOf<T> = async_graphql::Result<Connection<Cursor, T, ConnectionFields>>;

/// An item as a page orders it: its sort value, its tie's abbreviation, the item.
type Item<'a, R> = (SortValue<'a>, Abbreviated, R);

/// Cut one page in sort order, building a Relay connection. `max_page` bounds `first`/`last`.
///
/// The page is selected, not the list sorted: one pass counts the items before the cursors and
/// between them and keeps only the page's worth nearest the end the page is cut from ([`Least`]),
/// and only those are sorted (a page of 100 of 460,000 Machines took a sort of all of them).
pub fn paginate<'a, R, T, F>(
    items: impl IntoIterator<Item = R>,
    sort: Option<Sort>,
    page: PageArgs,
    max_page: usize,
    wrap: F,
) -> PageOf<T>
where
    R: Row<'a>,
    T: OutputType,
    F: Fn(Arc<Resource>) -> Option<T>,
{
    cut(sort, page, max_page, wrap, |window| {
        vec![window.pass(items)]
    })
}

/// The page `read`'s tallies of the window give: the sort and cursors decoded and checked, the
/// window read, its tallies put together.
fn cut<'a, R: Row<'a>, T: OutputType>(
    sort: Option<Sort>,
    page: PageArgs,
    max_page: usize,
    wrap: impl Fn(Arc<Resource>) -> Option<T>,
    read: impl FnOnce(&Window<'_>) -> Vec<Tally<'a, R>>,
) -> PageOf<T> {
    let sort = sort.unwrap_or_default();
    let (after, before) = cursors(sort.field, &page, max_page)?;
    let window = Window::new(sort, &page, max_page, after.as_ref(), before.as_ref())?;
    let tallies = read(&window);
    Ok(window.finish(tallies, &page, wrap))
}

/// How a list is read in parts: how many, on how many threads (this one and the rest).
pub struct Parts {
    parts: usize,
    threads: usize,
    /// The threads granted beside this one, given back when the list is read.
    _helpers: Helpers,
}

impl Parts {
    /// Up to `wanted` parts, each on a thread of its own as far as [`Helpers`] grants them
    /// (with none, the list is one part read here).
    pub fn granted(wanted: usize) -> Parts {
        let helpers = Helpers::take(wanted.saturating_sub(1));
        let threads = 1 + helpers.granted;
        Parts {
            parts: threads,
            threads,
            _helpers: helpers,
        }
    }

    /// `parts` parts on `threads` threads, whatever the cores.
    #[cfg(test)]
    pub fn exactly(parts: usize, threads: usize) -> Parts {
        Parts {
            parts,
            threads,
            _helpers: Helpers { granted: 0 },
        }
    }
}

/// [`paginate`] over the items `make(part, parts)` gives for each part, read on the threads
/// `parts` says (a part whose thread cannot be started is read here). Every item must be in
/// exactly one part; the page is the one [`paginate`] cuts from all of them, whatever the parts.
pub fn paginate_split<'a, R, I, T, F>(
    parts: Parts,
    make: impl Fn(usize, usize) -> I + Sync,
    sort: Option<Sort>,
    page: PageArgs,
    max_page: usize,
    wrap: F,
) -> PageOf<T>
where
    R: Row<'a> + Send,
    I: Iterator<Item = R>,
    T: OutputType,
    F: Fn(Arc<Resource>) -> Option<T>,
{
    let (parts, threads, _helpers) = (parts.parts, parts.threads, parts._helpers);
    let (parts, threads) = (parts.max(1), threads.clamp(1, parts.max(1)));
    cut(sort, page, max_page, wrap, |window| {
        // The parts thread `t` reads: `t`, `t + threads`, …
        let read = |t: usize| {
            (t..parts)
                .step_by(threads)
                .map(|part| window.pass(make(part, parts)))
                .collect::<Vec<_>>()
        };
        if threads == 1 {
            return read(0);
        }
        std::thread::scope(|s| {
            let others: Vec<_> = (1..threads)
                .map(|t| {
                    std::thread::Builder::new()
                        .name("list-part".into())
                        .spawn_scoped(s, move || read(t))
                        .map_err(|_| t)
                })
                .collect();
            let mut tallies = read(0);
            for other in others {
                tallies.extend(match other {
                    Ok(handle) => handle
                        .join()
                        .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
                    // No thread could be started for these parts: they are read here.
                    Err(t) => read(t),
                });
            }
            tallies
        })
    })
}

/// The threads lists may read parts on besides their own: one fewer than the cores, shared by
/// every list being read at once, so that lists read in parallel never take more cores than
/// there are (a list granted none reads on its own thread).
struct Helpers {
    granted: usize,
}

static HELPERS_IN_USE: AtomicUsize = AtomicUsize::new(0);

static MOST_HELPERS: LazyLock<usize> =
    LazyLock::new(|| std::thread::available_parallelism().map_or(0, |n| n.get().saturating_sub(1)));

impl Helpers {
    fn take(wanted: usize) -> Helpers {
        if wanted == 0 {
            return Helpers { granted: 0 };
        }
        let most = *MOST_HELPERS;
        let mut granted = 0;
        let _ = HELPERS_IN_USE.fetch_update(Atomic::AcqRel, Atomic::Acquire, |in_use| {
            granted = wanted.min(most.saturating_sub(in_use));
            Some(in_use + granted)
        });
        Helpers { granted }
    }
}

impl Drop for Helpers {
    fn drop(&mut self) {
        HELPERS_IN_USE.fetch_sub(self.granted, Atomic::AcqRel);
    }
}

/// The page's `after` and `before` cursors decoded, after its sizes are checked.
fn cursors(
    sort: SortField,
    page: &PageArgs,
    max_page: usize,
) -> async_graphql::Result<(Option<SortKey>, Option<SortKey>)> {
    let field = field_name(sort);
    for (name, v) in [("first", page.first), ("last", page.last)] {
        if let Some(n) = v {
            page_size(name, n, max_page)?;
        }
    }
    let decode = |arg: &str, raw: &Option<String>| -> async_graphql::Result<Option<SortKey>> {
        let Some(raw) = raw else { return Ok(None) };
        let c = Cursor::decode_cursor(raw).map_err(|e| {
            ErrorCode::BadCursor.graphql(format!("`{arg}` cursor `{raw}` is invalid: {e}"))
        })?;
        let Cursor::Decoded {
            field: made_for,
            key,
        } = c
        else {
            return Ok(None);
        };
        if made_for != field {
            return Err(ErrorCode::BadCursor.graphql(format!(
                "`{arg}` cursor was made for sorting by {made_for}, this query sorts by {field}"
            )));
        }
        Ok(Some(key))
    };
    Ok((
        decode("after", &page.after)?,
        decode("before", &page.before)?,
    ))
}

/// What a page asks of the items: its order, the cursors it lies between, the end it is cut
/// from and how many it keeps.
struct Window<'k> {
    sort: Sort,
    after_at: Option<Bound<'k>>,
    before_at: Option<Bound<'k>>,
    from_end: bool,
    keep: usize,
}

/// One part's reading: how many items, how many before the window and in it, and the window's
/// items nearest the end the page is cut from (at most the page's worth).
struct Tally<'a, R> {
    total: usize,
    before_window: usize,
    within: usize,
    kept: Vec<Item<'a, R>>,
}

impl<'k> Window<'k> {
    fn new(
        sort: Sort,
        page: &PageArgs,
        max_page: usize,
        after: Option<&'k SortKey>,
        before: Option<&'k SortKey>,
    ) -> async_graphql::Result<Self> {
        let after_at = bound("after", page.after.as_deref(), after, sort.field)?;
        let before_at = bound("before", page.before.as_deref(), before, sort.field)?;
        // The page is cut from the window's front (`first`, or neither) or its end (`last`
        // alone): the `keep` items nearest that end are all the pass keeps.
        let (from_end, keep) = match (page.first, page.last) {
            (Some(n), _) => (false, n as usize),
            (None, Some(m)) => (true, m as usize),
            (None, None) => (false, DEFAULT_PAGE_SIZE.min(max_page)),
        };
        Ok(Window {
            sort,
            after_at,
            before_at,
            from_end,
            keep,
        })
    }

    fn directed(&self, o: Ordering) -> Ordering {
        if self.sort.direction == SortDirection::Desc {
            o.reverse()
        } else {
            o
        }
    }

    /// Ties by their abbreviations where those tell, else by namespace, name and datacenter.
    fn order<'a, R: Row<'a>>(&self, a: &Item<'a, R>, b: &Item<'a, R>) -> Ordering {
        self.directed(
            a.0.cmp(&b.0)
                .then_with(|| a.1.order(b.1).unwrap_or_else(|| a.2.tie().cmp(&b.2.tie()))),
        )
    }

    fn to<'a, R: Row<'a>>(&self, x: &Item<'a, R>, at: &Bound<'_>) -> Ordering {
        self.directed(
            x.0.cmp(&at.0)
                .then_with(|| x.1.order(at.1).unwrap_or_else(|| x.2.tie().cmp(&at.2))),
        )
    }

    /// Nearest the end the page is cut from first.
    fn nearest<'a, R: Row<'a>>(&self, a: &Item<'a, R>, b: &Item<'a, R>) -> Ordering {
        if self.from_end {
            self.order(b, a)
        } else {
            self.order(a, b)
        }
    }

    /// One pass: how many items lie between the cursors, and how many before them.
    fn pass<'a, R: Row<'a>>(&self, items: impl IntoIterator<Item = R>) -> Tally<'a, R> {
        let mut kept = Least::new(self.keep, |a: &Item<'a, R>, b: &Item<'a, R>| {
            self.nearest(a, b)
        });
        let (mut total, mut before_window, mut within) = (0, 0, 0);
        for r in items {
            total += 1;
            let x = (r.sort(self.sort.field), r.abbreviated(), r);
            if self
                .after_at
                .as_ref()
                .is_some_and(|at| self.to(&x, at) != Ordering::Greater)
            {
                before_window += 1;
            } else if self
                .before_at
                .as_ref()
                .is_none_or(|at| self.to(&x, at) == Ordering::Less)
            {
                within += 1;
                kept.push(x);
            }
        }
        Tally {
            total,
            before_window,
            within,
            kept: kept.into_sorted(),
        }
    }

    /// The page of the parts' tallies.
    fn finish<'a, R: Row<'a>, T: OutputType>(
        &self,
        tallies: Vec<Tally<'a, R>>,
        page: &PageArgs,
        wrap: impl Fn(Arc<Resource>) -> Option<T>,
    ) -> Connection<Cursor, T, ConnectionFields> {
        let (mut total, mut before_window, mut w) = (0, 0, 0);
        let mut shown = Vec::new();
        for t in tallies {
            total += t.total;
            before_window += t.before_window;
            w += t.within;
            shown.extend(t.kept);
        }
        // The items kept, in the list's order: the window's first `keep` or its last.
        shown.sort_unstable_by(|a, b| self.nearest(a, b));
        shown.truncate(self.keep);
        if self.from_end {
            shown.reverse();
        }
        // The page's place in the window: items skipped at its front, and how many it holds.
        let (skip, take) = match (page.first, page.last) {
            (Some(n), last) => {
                let n = (n as usize).min(w);
                let m = last.map_or(n, |m| (m as usize).min(n));
                (n - m, m)
            }
            (None, Some(m)) => {
                let m = (m as usize).min(w);
                (w - m, m)
            }
            (None, None) => (0, self.keep.min(w)),
        };
        // Kept from the front, the page drops the first `skip`; kept from the end, it is all kept.
        if !self.from_end {
            shown.drain(..skip.min(shown.len()));
        }
        let (start, end) = (before_window + skip, before_window + skip + take);
        // hasPreviousPage / hasNextPage: whether any matching item lies before / after this page.
        let mut conn = Connection::with_additional_fields(
            start > 0,
            end < total,
            ConnectionFields { total_count: total },
        );
        let field = self.sort.field;
        conn.edges.extend(shown.into_iter().filter_map(|(_, _, r)| {
            let r = r.object();
            Some(Edge::new(
                Cursor::Item(field, Arc::clone(r)),
                wrap(Arc::clone(r))?,
            ))
        }));
        conn
    }
}
