//! Keyed lists: rows keyed by their object and the version of their content, drawn by one keyed
//! list (Leptos's keyed diff, see [`each`]), so a new answer redraws only the rows that changed.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use leptos::prelude::*;
use leptos::tachys::reactive_graph::OwnedView;
use leptos::tachys::view::keyed::keyed as keyed_view;

/// A row with its key (the object's id) and a version that changes when its content does: a
/// keyed list draws a row again only when one of the two changes.
#[derive(Clone, PartialEq)]
pub struct Keyed<T> {
    pub key: String,
    pub version: u32,
    pub row: T,
}

/// `rows` keyed by `key`, each keeping the version it had in `before` while its content is the
/// same and taking the next one when it changed.
pub fn versions<T: PartialEq>(
    before: &[Keyed<T>],
    rows: Vec<T>,
    key: impl Fn(&T) -> String,
) -> Vec<Keyed<T>> {
    let index: HashMap<&str, usize> = before
        .iter()
        .enumerate()
        .map(|(i, k)| (k.key.as_str(), i))
        .collect();
    rows.into_iter()
        .map(|row| {
            let key = key(&row);
            let version = match index.get(key.as_str()).map(|i| &before[*i]) {
                Some(old) if old.row == row => old.version,
                Some(old) => old.version.wrapping_add(1),
                None => 0,
            };
            Keyed { key, version, row }
        })
        .collect()
}

/// `rows` keyed and versioned (see [`versions`]) each time they are read: the closure keeps the
/// rows it gave last. Not a memo: a memo per row type cost ~46 KB of WebAssembly before
/// optimisation (13 row types), and the keyed list below only draws what changed anyway.
pub fn keyed<T>(
    rows: impl Fn() -> Vec<T> + Send + Sync + 'static,
    key: fn(&T) -> String,
) -> impl Fn() -> Vec<Keyed<T>> + Clone + Send + Sync + 'static
where
    T: Clone + PartialEq + Send + 'static,
{
    keyed_boxed(Arc::new(rows), key)
}

/// [`keyed`] compiled once per row type, not once per call.
fn keyed_boxed<T>(
    rows: Arc<dyn Fn() -> Vec<T> + Send + Sync>,
    key: fn(&T) -> String,
) -> impl Fn() -> Vec<Keyed<T>> + Clone + Send + Sync + 'static
where
    T: Clone + PartialEq + Send + 'static,
{
    let last = Arc::new(Mutex::new(Vec::<Keyed<T>>::new()));
    move || advance(&last, rows(), key).clone()
}

/// `rows` versioned against the rows `last` holds, which it then holds instead.
fn advance<T: PartialEq>(
    last: &Mutex<Vec<Keyed<T>>>,
    rows: Vec<T>,
    key: fn(&T) -> String,
) -> MutexGuard<'_, Vec<Keyed<T>>> {
    let mut last = last.lock().unwrap_or_else(PoisonError::into_inner);
    *last = versions(&last, rows, key);
    last
}

/// One item of a keyed list: its key (object, content version) and how to draw it.
pub struct Item {
    key: (String, u32),
    draw: Box<dyn FnOnce() -> AnyView + Send>,
    /// Drawn in a reactive scope of its own (for items with resources, subscriptions or effects
    /// of their own; see [`each`]).
    scoped: bool,
}

impl Item {
    /// The item `key` at `version`, drawn by `draw` when it first shows. Its view must hold no
    /// reactive state of its own (see [`each`]); [`Item::scoped`] for one that does.
    pub fn new<V: IntoView + 'static>(
        key: String,
        version: u32,
        draw: impl FnOnce() -> V + Send + 'static,
    ) -> Self {
        Item {
            key: (key, version),
            draw: Box::new(move || draw().into_any()),
            scoped: false,
        }
    }

    /// An item drawn in a reactive scope of its own, disposed when it goes.
    pub fn scoped<V: IntoView + 'static>(
        key: String,
        draw: impl FnOnce() -> V + Send + 'static,
    ) -> Self {
        Item {
            scoped: true,
            ..Item::new(key, 0, draw)
        }
    }

    fn key(&self) -> (String, u32) {
        self.key.clone()
    }

    fn draw(self, place: Option<&Owner>) -> AnyView {
        match place.filter(|_| self.scoped) {
            Some(place) => {
                let owner = place.with(Owner::new);
                let view = owner.with(self.draw);
                OwnedView::new_with_owner(view, owner).into_any()
            }
            None => (self.draw)(),
        }
    }
}

impl<T: Clone + Send + 'static> Keyed<T> {
    /// This row as a list item drawn by `draw`, redrawn when its content changes.
    pub fn item<V: IntoView + 'static>(&self, draw: fn(T) -> V) -> Item {
        let row = self.row.clone();
        Item::new(self.key.clone(), self.version, move || draw(row))
    }
}

/// The rows of `rows` as items drawn by `draw` (each redrawn when its content changes).
pub fn items<T, V>(rows: &[Keyed<T>], draw: fn(T) -> V) -> Vec<Item>
where
    T: Clone + Send + 'static,
    V: IntoView + 'static,
{
    rows.iter().map(|k| k.item(draw)).collect()
}

/// `rows` as a keyed list (see [`versions`] and [`each`]), each row drawn by `draw`.
pub fn each_keyed<T, V>(
    rows: impl Fn() -> Vec<T> + Send + Sync + 'static,
    key: fn(&T) -> String,
    draw: fn(T) -> V,
) -> AnyView
where
    T: Clone + PartialEq + Send + 'static,
    V: IntoView + 'static,
{
    each(keyed_items(Arc::new(rows), key, draw))
}

/// The items of `rows`, versioned against the rows it gave last (kept, not copied).
pub fn keyed_items<T, V>(
    rows: Arc<dyn Fn() -> Vec<T> + Send + Sync>,
    key: fn(&T) -> String,
    draw: fn(T) -> V,
) -> impl Fn() -> Vec<Item> + Send + 'static
where
    T: Clone + PartialEq + Send + 'static,
    V: IntoView + 'static,
{
    let last = Mutex::new(Vec::<Keyed<T>>::new());
    move || items(&advance(&last, rows(), key), draw)
}

/// A keyed list of `items`: an item is drawn when its key first shows, kept while it stays, and
/// removed when it goes.
///
/// Not Leptos's `<For>`, for two measured reasons. `<For>` gives every row a reactive scope of
/// its own, a child of the list's: the parent keeps a reference to every child it ever had until
/// it is itself cleaned up, so a live list whose rows change 20 times a second grew the heap by
/// ~270 KiB a minute (`e2e/web/heapprobe.mjs`). Here a row is drawn in the list's own scope,
/// which is cleaned at every redraw, so rows hold no reactive state (a scoped item gets a scope
/// of its own, made rarely: the clusters' cards). And every list goes through this one function:
/// a `<For>` per item type compiled the keyed diff again (61 KB more gzip for 17 lists).
pub fn each(items: impl Fn() -> Vec<Item> + Send + 'static) -> AnyView {
    each_erased(Box::new(items))
}

fn each_erased(items: Box<dyn Fn() -> Vec<Item> + Send>) -> AnyView {
    // Where the list is: the scope a scoped item's own scope hangs from.
    let place = Owner::current();
    (move || {
        let place = place.clone();
        keyed_view(items(), Item::key, move |_, item: Item| {
            (drop, item.draw(place.as_ref()))
        })
    })
    .into_any()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_keeps_its_version_until_its_content_changes() {
        let key = |r: &(&str, i32)| r.0.to_owned();
        let first = versions(&[], vec![("a", 1), ("b", 1)], key);
        assert_eq!(first.iter().map(|k| k.version).collect::<Vec<_>>(), [0, 0]);
        // b changes, c is new, a is the same (in another place).
        let second = versions(&first, vec![("c", 1), ("b", 2), ("a", 1)], key);
        let seen: Vec<_> = second.iter().map(|k| (k.key.as_str(), k.version)).collect();
        assert_eq!(seen, [("c", 0), ("b", 1), ("a", 0)]);
    }
}
