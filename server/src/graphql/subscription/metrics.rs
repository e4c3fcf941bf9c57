//! What subscriptions count: active subscriptions and events by field, resyncs, overflows,
//! shared streams and their renders.

use async_graphql::Context;

use super::events::Mode;

/// Subscription metrics (registered by `http::Metrics`; absent when printing the SDL).
#[derive(Clone, Debug)]
pub struct SubscriptionMetrics {
    /// Active subscriptions by field.
    pub active: prometheus::IntGaugeVec,
    /// Events delivered by field.
    pub events: prometheus::IntCounterVec,
    /// RESYNCs sent by field.
    pub resyncs: prometheus::IntCounterVec,
    /// Subscriptions whose queue overflowed (they owe a RESYNC).
    pub overflows: prometheus::IntCounter,
    /// Shared streams open: one per distinct document and variables.
    pub shared: prometheus::IntGauge,
    /// Events rendered by shared streams (once per event, however many subscribers).
    pub renders: prometheus::IntCounter,
}

impl SubscriptionMetrics {
    /// Create (not yet registered).
    pub fn new() -> Result<Self, prometheus::Error> {
        use prometheus::Opts;
        Ok(SubscriptionMetrics {
            active: prometheus::IntGaugeVec::new(
                Opts::new(
                    "vitistack_subscriptions_active",
                    "Active GraphQL subscriptions by field",
                ),
                &["field"],
            )?,
            events: prometheus::IntCounterVec::new(
                Opts::new(
                    "vitistack_subscription_events_total",
                    "Subscription events delivered by field",
                ),
                &["field"],
            )?,
            resyncs: prometheus::IntCounterVec::new(
                Opts::new(
                    "vitistack_subscription_resyncs_total",
                    "RESYNC events sent to subscribers that fell behind, by field",
                ),
                &["field"],
            )?,
            overflows: prometheus::IntCounter::new(
                "vitistack_subscription_overflows_total",
                "Times a subscription's queue (SUBSCRIPTION_BUFFER) overflowed because its reader fell behind",
            )?,
            shared: prometheus::IntGauge::new(
                "vitistack_subscription_shared_streams",
                "Shared subscription streams open: one per distinct document and variables, rendering each event once for all its subscribers",
            )?,
            renders: prometheus::IntCounter::new(
                "vitistack_subscription_renders_total",
                "Events rendered by shared subscription streams (once per event, however many subscribers)",
            )?,
        })
    }
}

/// The metrics a stream counts in: only a whole stream's (our executor's subscribers count
/// their own: a shared stream is one for many of them).
pub(super) fn counted<'a>(ctx: &'a Context<'_>) -> Option<&'a SubscriptionMetrics> {
    if ctx.data_opt::<Mode>().copied().unwrap_or_default() == Mode::Whole {
        ctx.data_opt::<SubscriptionMetrics>()
    } else {
        None
    }
}

/// Counts one active subscription while it lives (also when the socket drops without `complete`).
/// Its field's gauge and event counter are looked up once, when it opens: a label lookup per
/// event per subscriber (a hash and a lock each) was a million a second at 10,000 subscribers
/// and 100 changes a second.
pub(crate) struct Active(Option<Counted>);

struct Counted {
    active: prometheus::IntGauge,
    events: prometheus::IntCounter,
    /// Looked up when one is sent (rarely): a field that never resyncs shows no series.
    resyncs: prometheus::IntCounterVec,
    field: &'static str,
}

impl Active {
    pub(crate) fn new(metrics: Option<&SubscriptionMetrics>, field: &'static str) -> Self {
        Active(metrics.map(|m| {
            let active = m.active.with_label_values(&[field]);
            active.inc();
            Counted {
                active,
                events: m.events.with_label_values(&[field]),
                resyncs: m.resyncs.clone(),
                field,
            }
        }))
    }

    pub(crate) fn event(&self, resync: bool) {
        if let Some(c) = &self.0 {
            c.events.inc();
            if resync {
                c.resyncs.with_label_values(&[c.field]).inc();
            }
        }
    }
}

impl Drop for Active {
    fn drop(&mut self) {
        if let Some(c) = &self.0 {
            c.active.dec();
        }
    }
}
