//! Two pieces of work at once: one on a scoped thread, the other on the caller's, unless they
//! are too small to pay for a thread. A panic on the other thread comes back as a panic here.

/// `(a(), b())`: `a` on another thread while `b` runs on this one; both here when `small`.
pub fn both<A: Send, B>(
    small: bool,
    a: impl FnOnce() -> A + Send,
    b: impl FnOnce() -> B,
) -> (A, B) {
    if small {
        return (a(), b());
    }
    std::thread::scope(|s| {
        let other = s.spawn(a);
        let here = b();
        match other.join() {
            Ok(there) => (there, here),
            Err(panic) => std::panic::resume_unwind(panic),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::both;

    #[test]
    fn both_answers_come_back_in_order_whether_small_or_not() {
        for small in [true, false] {
            let items: Vec<u32> = (0..100).collect();
            let (left, right) = both(
                small,
                || items[..50].iter().sum::<u32>(),
                || items[50..].iter().sum::<u32>(),
            );
            assert_eq!((left, right), (1225, 3725));
        }
    }

    #[test]
    #[should_panic(expected = "the other thread's panic")]
    fn a_panic_on_the_other_thread_is_the_callers() {
        both(false, || panic!("the other thread's panic"), || 1);
    }
}
