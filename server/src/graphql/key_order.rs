//! A list's page read in the store's key order ([`Snapshot::key_page`]) where its filter and sort
//! allow it: sorted by name or namespace, filtered by what the store's entries answer (a
//! datacenter and a namespace by their ranges; a phase, a label selector and a list's own
//! filter of the briefs by a test of each entry; not a name search), and paged forwards
//! (`first`, `after`): the dashboard's lists as they open, and every page after.
//! Any other page is cut by [`paginate`](super::page_cut::paginate) from every object the filter
//! holds; both give the same page, page info and count (a test compares them on every kind).

use std::sync::Arc;

use async_graphql::connection::{Connection, CursorType, Edge};

use super::narrow::KeepHeld;
use super::paging::{
    CompiledFilter, ConnectionFields, Cursor, DEFAULT_PAGE_SIZE, Filter, PageArgs, Sort,
    SortDirection, SortField, field_name,
};
use crate::model::{Kind, Resource};
use crate::store::held::Held;
use crate::store::list_page::{Keep, KeyOrder, PageAsk, Spot};
use crate::store::{ObjectKey, Snapshot};

/// The page, or None when it is not one the key order gives (or its arguments are refused, which
/// [`paginate`](super::page_cut::paginate) then says why). `by_brief` is the list's own filter,
/// when the briefs answer it.
#[allow(clippy::too_many_arguments)]
pub fn page<T, F>(
    snap: &Snapshot,
    kind: Kind,
    filter: Option<&Filter>,
    by_brief: Option<&KeepHeld<'_>>,
    sort: Option<Sort>,
    page: &PageArgs,
    max_page: usize,
    wrap: F,
) -> Option<Connection<Cursor, T, ConnectionFields>>
where
    T: async_graphql::OutputType,
    F: Fn(Arc<Resource>) -> Option<T>,
{
    let sort = sort.unwrap_or_default();
    let order = match sort.field {
        SortField::Name => KeyOrder::Name,
        SortField::Namespace => KeyOrder::Namespace,
        SortField::Created | SortField::Phase => return None,
    };
    // A name search reads every key to count: `brief_list` reads them ahead, in one walk.
    if filter.is_some_and(|f| f.search.is_some()) || page.before.is_some() || page.last.is_some() {
        return None;
    }
    // The rest of the filter (its datacenter and namespace are the ranges'), tested on each
    // entry when there is a rest. An unreadable filter is the general path's to refuse.
    let tested = filter.filter(|f| f.phase.is_some() || f.label_selector.is_some());
    let rest = match tested.map(CompiledFilter::new).transpose() {
        Ok(rest) => rest.map(|f| f.without_place()),
        Err(_) => return None,
    };
    let test = |key: &ObjectKey, held: &Held| {
        rest.as_ref().is_none_or(|f| f.matches_held(key, held))
            && by_brief.is_none_or(|keep| keep(held))
    };
    let keep: Option<Keep<'_>> = (rest.is_some() || by_brief.is_some()).then_some(&test);
    let first = match page.first {
        None => DEFAULT_PAGE_SIZE.min(max_page),
        Some(n) if n >= 0 && n as usize <= max_page => n as usize,
        Some(_) => return None,
    };
    let decoded = match page.after.as_deref() {
        None => None,
        Some(raw) => match Cursor::decode_cursor(raw) {
            Ok(Cursor::Decoded { field, key }) => Some((field, key)),
            _ => return None,
        },
    };
    let after = match &decoded {
        None => None,
        Some((field, (value, namespace, name, datacenter))) => {
            // A cursor of another sort, or one whose value is not its object's (made by hand),
            // is the general path's to judge.
            let consistent = match order {
                KeyOrder::Name => value == name,
                KeyOrder::Namespace => value == namespace,
            };
            if field != field_name(sort.field) || !consistent {
                return None;
            }
            Some(Spot {
                namespace,
                name,
                datacenter,
            })
        }
    };
    let found = snap.key_page(PageAsk {
        kind,
        datacenter: filter.and_then(|f| f.datacenter.as_deref()),
        namespace: filter.and_then(|f| f.namespace.as_deref()),
        keep,
        order,
        desc: sort.direction == SortDirection::Desc,
        after,
        first,
    })?;
    let mut conn = Connection::with_additional_fields(
        found.earlier,
        found.more,
        ConnectionFields {
            total_count: found.total,
        },
    );
    conn.edges.extend(found.items.into_iter().filter_map(|r| {
        Some(Edge::new(
            Cursor::Item(sort.field, Arc::clone(r)),
            wrap(Arc::clone(r))?,
        ))
    }));
    Some(conn)
}

#[cfg(test)]
#[path = "key_order_tests.rs"]
mod tests;
