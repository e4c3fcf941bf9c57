//! The one backoff every retry loop uses (watches, the object and history writers, webhook
//! deliveries): exponential, capped, with jitter.

use std::time::Duration;

/// Exponential backoff with jitter: each delay is half fixed, half random (never a tight loop,
/// never a thundering herd), and the next one doubles up to `max`.
#[derive(Clone, Debug)]
pub struct Backoff {
    next: Duration,
    min: Duration,
    max: Duration,
}

impl Backoff {
    /// A backoff starting at `min` and doubling up to `max`.
    pub fn new(min: Duration, max: Duration) -> Self {
        Backoff {
            next: min,
            min,
            max: max.max(min),
        }
    }

    /// Back to the first delay (after a success).
    pub fn reset(&mut self) {
        self.next = self.min;
    }

    /// The delay before the next try; the one after it doubles.
    pub fn delay(&mut self) -> Duration {
        let base = self.next;
        self.next = (self.next * 2).min(self.max);
        base.mul_f64(0.5 + rand::random_range(0.0..=0.5))
    }

    /// The undelayed base of the next delay (its upper bound).
    pub fn upcoming(&self) -> Duration {
        self.next
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_up_to_the_cap_with_jitter_and_resets() {
        let ms = Duration::from_millis;
        let mut b = Backoff::new(ms(100), ms(1000));
        let mut bases = Vec::new();
        for _ in 0..6 {
            let base = b.upcoming();
            let d = b.delay();
            assert!(d >= base / 2 && d <= base, "{d:?} of {base:?}");
            bases.push(base.as_millis());
        }
        assert_eq!(bases, [100, 200, 400, 800, 1000, 1000]);
        b.reset();
        assert_eq!(b.upcoming(), ms(100));
    }
}
