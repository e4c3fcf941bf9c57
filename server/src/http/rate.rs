//! Rate limits per principal (per client address when anonymous), counting GraphQL
//! operations, not HTTP requests: a query, a subscription opened on a socket or a stream each
//! count one. governor's GCRA per role: a steady rate per minute and a burst.

use std::num::NonZeroU32;
use std::time::Duration;

use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota};

use crate::auth::{Principal, RateKey, Role};

/// One role's limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RateLimit {
    /// Operations per minute (0: unlimited).
    pub per_minute: u32,
    /// Operations allowed at once above the steady rate.
    pub burst: u32,
}

/// Why a text is not a rate limit.
#[derive(Debug, PartialEq, thiserror::Error)]
pub enum RateLimitError {
    #[error("`{text}`: {what} `{value}` is not a whole number (PER_MINUTE/BURST, e.g. 60/10)")]
    NotANumber {
        text: String,
        what: &'static str,
        value: String,
    },
    #[error("`{0}`: the burst must be at least 1")]
    NoBurst(String),
}

impl std::str::FromStr for RateLimit {
    type Err = RateLimitError;

    /// `PER_MINUTE/BURST` (`60/10`), `PER_MINUTE` (burst = the rate), or `0` (unlimited).
    fn from_str(s: &str) -> Result<Self, RateLimitError> {
        let (rate, burst) = s.split_once('/').unwrap_or((s, ""));
        let number = |v: &str, what: &'static str| {
            v.trim()
                .parse::<u32>()
                .map_err(|_| RateLimitError::NotANumber {
                    text: s.to_string(),
                    what,
                    value: v.to_string(),
                })
        };
        let per_minute = number(rate, "the rate")?;
        let burst = if burst.is_empty() {
            per_minute
        } else {
            number(burst, "the burst")?
        };
        if per_minute > 0 && burst == 0 {
            return Err(RateLimitError::NoBurst(s.to_string()));
        }
        Ok(RateLimit { per_minute, burst })
    }
}

impl std::fmt::Display for RateLimit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.per_minute, self.burst)
    }
}

/// A refused operation: which limit, its value, and when to come back.
#[derive(Clone, Debug)]
pub struct Limited {
    /// The message a client reads.
    pub message: String,
    /// Seconds until one more operation is allowed.
    pub retry_after: u64,
}

/// The limits of every role.
pub struct RateLimits {
    limiters: Vec<(Role, RateLimit, Option<DefaultKeyedRateLimiter<RateKey>>)>,
    clock: DefaultClock,
}

impl RateLimits {
    /// Limits per role (a role not listed is unlimited).
    pub fn new(limits: &[(Role, RateLimit)]) -> Self {
        let limiters = limits
            .iter()
            .map(|&(role, limit)| {
                let limiter = NonZeroU32::new(limit.per_minute).map(|rate| {
                    let burst = NonZeroU32::new(limit.burst).unwrap_or(rate);
                    DefaultKeyedRateLimiter::keyed(Quota::per_minute(rate).allow_burst(burst))
                });
                (role, limit, limiter)
            })
            .collect();
        RateLimits {
            limiters,
            clock: DefaultClock::default(),
        }
    }

    /// Count `operations` against `principal`, or say why not.
    pub fn check(&self, principal: &Principal, operations: u32) -> Result<(), Limited> {
        let Some((role, limit, Some(limiter))) =
            self.limiters.iter().find(|(r, _, _)| *r == principal.role)
        else {
            return Ok(());
        };
        let Some(n) = NonZeroU32::new(operations) else {
            return Ok(());
        };
        let who = principal.rate_key();
        let refused = |wait: Duration| {
            let retry_after = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
            Limited {
                message: format!(
                    "rate limit exceeded for {who}: the limit for the {role} role \
                     (RATE_LIMIT_{}) is {} operations per minute with a burst of {}; retry in {retry_after} s",
                    role.as_str().to_uppercase(),
                    limit.per_minute,
                    limit.burst
                ),
                retry_after,
            }
        };
        match limiter.check_key_n(&who, n) {
            Ok(Ok(())) => Ok(()),
            Ok(Err(not_until)) => Err(refused(not_until.wait_time_from(self.clock.now()))),
            // More operations at once than the burst: never allowed as one.
            Err(_) => Err(refused(Duration::from_secs(60))),
        }
    }

    /// Forget principals that are back to a full allowance (bounds the memory).
    pub fn forget_idle(&self) {
        for (_, _, l) in &self.limiters {
            if let Some(l) = l {
                l.retain_recent();
                l.shrink_to_fit();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_parse_and_count_operations_per_principal() {
        assert_eq!(
            "60/10".parse(),
            Ok(RateLimit {
                per_minute: 60,
                burst: 10
            })
        );
        assert_eq!(
            "30".parse(),
            Ok(RateLimit {
                per_minute: 30,
                burst: 30
            })
        );
        assert_eq!(
            "0".parse(),
            Ok(RateLimit {
                per_minute: 0,
                burst: 0
            })
        );
        assert!("60/0".parse::<RateLimit>().is_err());
        assert!(
            "fast"
                .parse::<RateLimit>()
                .unwrap_err()
                .to_string()
                .contains("`fast`")
        );

        let limits = RateLimits::new(&[
            (Role::Viewer, "60/10".parse().expect("limit")),
            (Role::Admin, "0".parse().expect("limit")),
        ]);
        let key = |name: &str| Principal {
            name: name.into(),
            role: Role::Viewer,
            credential: crate::auth::Credential::Key(crate::auth::keys::hash(name)),
            address: std::net::IpAddr::from([127, 0, 0, 1]),
            scope: crate::store::Scope::All,
        };
        let (alice, bob) = (key("key:alice"), key("key:bob"));
        for _ in 0..10 {
            limits.check(&alice, 1).expect("within the burst");
        }
        let e = limits.check(&alice, 1).expect_err("past the burst");
        assert!(
            e.message.contains("key:alice")
                && e.message
                    .contains("60 operations per minute with a burst of 10"),
            "{}",
            e.message
        );
        assert!((1..=2).contains(&e.retry_after), "{}", e.retry_after);
        limits.check(&bob, 10).expect("bob has his own allowance");
        assert!(
            limits.check(&bob, 11).is_err(),
            "more at once than the burst"
        );
        let admin = Principal::internal("key:root");
        for _ in 0..1000 {
            limits.check(&admin, 1).expect("unlimited");
        }
    }
}
