//! The `k` least of a stream of items, held in at most `2k` places: how a page is cut from a
//! list without sorting the list.

use std::cmp::Ordering;

/// The `k` least items of those pushed, by `order`, holding at most `2k` at a time: when full,
/// a selection keeps the `k` least and the greatest of them becomes the bar that later items
/// must pass to be kept. A page of 100 out of 460,000 Machines kept every item between the
/// cursors (a vector of them all) and selected among them.
pub struct Least<T, F> {
    k: usize,
    items: Vec<T>,
    order: F,
    /// `items[k - 1]` is the greatest kept, and every item not less than it is dropped.
    barred: bool,
}

impl<T, F: Fn(&T, &T) -> Ordering> Least<T, F> {
    pub fn new(k: usize, order: F) -> Self {
        Least {
            k,
            items: Vec::new(),
            order,
            barred: false,
        }
    }

    pub fn push(&mut self, x: T) {
        if self.k == 0 || (self.barred && (self.order)(&x, &self.items[self.k - 1]).is_ge()) {
            return;
        }
        self.items.push(x);
        if self.items.len() >= 2 * self.k {
            self.keep_least();
        }
    }

    /// Keep only the `k` least, the greatest of them at `k - 1`.
    fn keep_least(&mut self) {
        if self.items.len() > self.k {
            let k = self.k;
            let order = &self.order;
            self.items.select_nth_unstable_by(k - 1, |a, b| order(a, b));
            self.items.truncate(k);
            // The greatest of the `k` least is now at `k - 1`: everything before is less.
            self.barred = true;
        }
    }

    /// The `k` least (fewer if fewer were pushed), in order.
    pub fn into_sorted(mut self) -> Vec<T> {
        self.keep_least();
        let order = &self.order;
        self.items.sort_unstable_by(|a, b| order(a, b));
        self.items
    }
}
