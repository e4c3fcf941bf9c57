//! A list's page read in the store's key order ([`Snapshot::key_page`]) where its filter and sort
//! allow it: sorted by name or namespace, limited to a datacenter and a namespace at most, and
//! paged forwards (`first`, `after`): the dashboard's lists as they open, and every page after.
//! Any other page is cut by [`paginate`](super::paging::paginate) from every object the filter
//! holds; both give the same page, page info and count (a test compares them on every kind).

use std::sync::Arc;

use async_graphql::connection::{Connection, CursorType, Edge};

use super::paging::{
    ConnectionFields, Cursor, DEFAULT_PAGE_SIZE, Filter, PageArgs, Sort, SortDirection, SortField,
    field_name,
};
use crate::model::{Kind, Resource};
use crate::store::Snapshot;
use crate::store::list_page::{KeyOrder, PageAsk, Spot};

/// The page, or None when it is not one the key order gives (or its arguments are refused, which
/// [`paginate`](super::paging::paginate) then says why).
pub fn page<T, F>(
    snap: &Snapshot,
    kind: Kind,
    filter: Option<&Filter>,
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
    if filter.is_some_and(|f| f.phase.is_some() || f.label_selector.is_some() || f.search.is_some())
        || page.before.is_some()
        || page.last.is_some()
    {
        return None;
    }
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
