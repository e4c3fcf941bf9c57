//! A list read from the store's ordered map with each entry's key and brief
//! ([`crate::store::held`]): its filter and sort are answered without reading the objects, but
//! for a label selector and a phase the brief does not keep. Only the page's objects are read.

use std::sync::Arc;

use async_graphql::Context;

use super::narrow::KeepHeld;
use super::paging::{self, CompiledFilter, Filter, PageArgs, Row, Sort, SortField, SortValue};
use super::parts::{Memo, ShowsObject};
use super::types::{Conn, prefetched};
use crate::model::Resource;
use crate::store::ObjectKey;
use crate::store::held::{BriefText, Held};

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
}

/// [`super::types::connection_of`] over entries of the store's ordered map, all of the kind
/// `T` shows and in the filter's namespace and datacenter, with a list's own filter
/// (`narrow.rs`) when it has one.
pub async fn connection<'a, T: async_graphql::OutputType + ShowsObject>(
    ctx: &Context<'_>,
    items: impl Iterator<Item = (&'a ObjectKey, &'a Held)>,
    filter: Option<&Filter>,
    keep: Option<KeepHeld<'_>>,
    sort: Option<Sort>,
    page: PageArgs,
    wrap: impl Fn(Arc<Resource>) -> Option<T>,
) -> async_graphql::Result<Conn<T>> {
    let max = paging::max_page_size(ctx);
    // The entries are those of the filter's namespace and datacenter (`held_candidates`).
    let filter = filter
        .map(CompiledFilter::new)
        .transpose()?
        .map(|f| f.without_place());
    let items = items.filter(|(key, held)| {
        debug_assert!(T::shows(held.object()), "{key} is of the list's kind");
        filter.as_ref().is_none_or(|f| f.matches_held(key, held))
            && keep.as_ref().is_none_or(|keep| keep(held))
    });
    let conn = paging::paginate(items, sort, page, max, |r| wrap(r).map(Memo))?;
    Ok(prefetched(ctx, conn).await)
}

#[cfg(test)]
#[path = "brief_list_tests.rs"]
mod tests;
