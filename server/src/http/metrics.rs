//! Prometheus metrics. Labels are bounded (kinds, outcomes): no object names.

use std::time::Duration;

use prometheus::{
    Encoder, HistogramOpts, HistogramVec, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry,
    TextEncoder,
};

use crate::db::health::DbHealth;
use crate::model::Kind;
use crate::source::status::OperatorsReport;
use crate::store::Snapshot;

/// The server's metrics.
pub struct Metrics {
    registry: Registry,
    objects: IntGaugeVec,
    sequence: IntGauge,
    requests: IntCounterVec,
    duration: HistogramVec,
    db_up: IntGauge,
    db_pending: IntGauge,
    db_failures: prometheus::IntCounter,
    health_checks: prometheus::IntCounter,
    /// Client connections open, and those the server closed by `reason`.
    pub connections: crate::http::serve::ConnectionMetrics,
    /// Writes of a Vitistack's status (`WRITE_VITISTACK_STATUS`).
    pub vitistack_status_writes: prometheus::IntCounter,
    kind_served: IntGaugeVec,
    kind_synced: IntGaugeVec,
    kind_stale: prometheus::GaugeVec,
    kind_is_stale: IntGaugeVec,
    datacenter_state: IntGaugeVec,
    datacenter_age: prometheus::GaugeVec,
    /// Open GraphQL WebSockets.
    pub ws_open: IntGauge,
    /// WebSocket closes by code (`client` when the client closed or vanished).
    pub ws_closes: IntCounterVec,
    /// Open GraphQL SSE streams.
    pub sse_open: IntGauge,
    /// Queries answered from the response cache.
    pub cache_hits: prometheus::IntCounter,
    /// Queries executed (cache miss, uncacheable, or cache off).
    pub cache_misses: prometheus::IntCounter,
    /// Connection items reused from the part cache.
    pub part_hits: prometheus::IntCounter,
    /// Connection items resolved (not kept, changed, or first seen).
    pub part_misses: prometheus::IntCounter,
    /// Requests whose document was parsed before.
    pub document_hits: prometheus::IntCounter,
    /// Requests whose document was parsed (first seen, forgotten, or the cache is off).
    pub document_misses: prometheus::IntCounter,
    /// Subscription gauges and counters (handed to the schema).
    pub subscriptions: crate::graphql::subscription::SubscriptionMetrics,
    /// History writer, queries and webhooks.
    pub history: crate::history::HistoryMetrics,
    /// Changes a reader of the change stream missed because it fell behind, by reader.
    pub lagged: IntCounterVec,
    /// The old aggregator's `vitistack_operator_*` family.
    pub operator: super::operator_metrics::OperatorMetrics,
    /// The application inventory's (`vitistack_applications`, `vitistack_inventory_pushes_total`).
    pub inventory: crate::inventory::InventoryMetrics,
    /// 1 while this replica does the once-only work (webhooks, history retention).
    pub leader: IntGauge,
    /// One scrape at a time: counters kept in step with others advance by differences.
    scraping: parking_lot::Mutex<()>,
}

impl Metrics {
    /// Register every metric.
    pub fn new() -> Result<Self, prometheus::Error> {
        let registry = Registry::new();
        let objects = IntGaugeVec::new(
            Opts::new("vitistack_store_objects", "Objects in the store by kind"),
            &["kind"],
        )?;
        let sequence = IntGauge::new(
            "vitistack_store_sequence",
            "Sequence number of the last change applied to the store",
        )?;
        let requests = IntCounterVec::new(
            Opts::new(
                "vitistack_graphql_requests_total",
                "GraphQL operations executed, by outcome",
            ),
            &["outcome"],
        )?;
        let duration = HistogramVec::new(
            HistogramOpts::new(
                "vitistack_graphql_request_duration_seconds",
                "Time to execute a GraphQL operation",
            )
            .buckets(vec![
                0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0,
            ]),
            &["outcome"],
        )?;
        let db_up = IntGauge::new(
            "vitistack_database_up",
            "1 when the last database operation succeeded",
        )?;
        let db_pending = IntGauge::new(
            "vitistack_database_pending_writes",
            "Objects waiting to be written to the database",
        )?;
        let db_failures = prometheus::IntCounter::new(
            "vitistack_database_failures_total",
            "Failed database connects and writes since start",
        )?;
        let health_checks = prometheus::IntCounter::new(
            "vitistack_health_checks_total",
            "Health checks made since start (every HEALTH_CHECK_INTERVAL: the database asked, the operators judged)",
        )?;
        let connections = crate::http::serve::ConnectionMetrics {
            open: IntGauge::new(
                "vitistack_http_connections",
                "Client connections open now (WebSocket connections once upgraded are not counted)",
            )?,
            closed: IntCounterVec::new(
                Opts::new(
                    "vitistack_http_connections_closed_total",
                    "Client connections the server closed for a limit: read_timeout (headers not sent in SERVER_READ_TIMEOUT), write_timeout (a write waited SERVER_WRITE_TIMEOUT), idle_timeout (SERVER_IDLE_TIMEOUT with no request)",
                ),
                &["reason"],
            )?,
        };
        for reason in ["read_timeout", "write_timeout", "idle_timeout"] {
            connections.closed.with_label_values(&[reason]);
        }
        let vitistack_status_writes = crate::change::vitistack_status::writes_counter(&registry)?;
        let kind_served = IntGaugeVec::new(
            Opts::new(
                "vitistack_source_kind_served",
                "1 when the API server serves the kind, 0 when its CRD is not installed",
            ),
            &["kind"],
        )?;
        let kind_synced = IntGaugeVec::new(
            Opts::new(
                "vitistack_source_kind_synced",
                "1 once the kind has been listed in full",
            ),
            &["kind"],
        )?;
        let kind_stale = prometheus::GaugeVec::new(
            Opts::new(
                "vitistack_source_kind_stale_seconds",
                "0 while the kind's watch is healthy, else seconds since it started failing",
            ),
            &["kind"],
        )?;
        // A counter, registered.
        let counter =
            |name: &str, help: &str| -> Result<prometheus::IntCounter, prometheus::Error> {
                let c = prometheus::IntCounter::new(name, help)?;
                registry.register(Box::new(c.clone()))?;
                Ok(c)
            };
        let cache_hits = counter(
            "vitistack_graphql_cache_hits_total",
            "GraphQL queries answered from the response cache (same query on an unchanged graph)",
        )?;
        let cache_misses = counter(
            "vitistack_graphql_cache_misses_total",
            "GraphQL operations executed instead of answered from the response cache",
        )?;
        let part_hits = counter(
            "vitistack_graphql_part_hits_total",
            "Connection items of query answers reused from the part cache (their objects unchanged)",
        )?;
        let part_misses = counter(
            "vitistack_graphql_part_misses_total",
            "Connection items of query answers resolved instead of reused from the part cache",
        )?;
        let document_hits = counter(
            "vitistack_graphql_document_hits_total",
            "GraphQL requests whose document was parsed before (its syntax tree copied, not parsed again)",
        )?;
        let document_misses = counter(
            "vitistack_graphql_document_misses_total",
            "GraphQL requests whose document was parsed",
        )?;
        let ws_open = IntGauge::new("vitistack_websockets_open", "Open GraphQL WebSockets")?;
        let ws_closes = IntCounterVec::new(
            Opts::new(
                "vitistack_websocket_closes_total",
                "GraphQL WebSockets closed, by close code the server sent (`client`: closed by the client)",
            ),
            &["code"],
        )?;
        let sse_open = IntGauge::new("vitistack_sse_streams_open", "Open GraphQL SSE streams")?;
        registry.register(Box::new(ws_closes.clone()))?;
        registry.register(Box::new(sse_open.clone()))?;
        let subscriptions = crate::graphql::subscription::SubscriptionMetrics::new()?;
        registry.register(Box::new(ws_open.clone()))?;
        registry.register(Box::new(subscriptions.active.clone()))?;
        registry.register(Box::new(subscriptions.events.clone()))?;
        registry.register(Box::new(subscriptions.resyncs.clone()))?;
        registry.register(Box::new(subscriptions.overflows.clone()))?;
        registry.register(Box::new(subscriptions.shared.clone()))?;
        registry.register(Box::new(subscriptions.renders.clone()))?;
        let lagged = IntCounterVec::new(
            Opts::new(
                "vitistack_change_stream_lagged_total",
                "Changes a reader of the change stream missed because it fell behind (CHANGE_BUFFER), by reader",
            ),
            &["reader"],
        )?;
        for reader in ["fanout", "object_writer", "history"] {
            lagged.with_label_values(&[reader]);
        }
        registry.register(Box::new(lagged.clone()))?;
        let history = crate::history::HistoryMetrics::new()?;
        for c in history.collectors() {
            registry.register(c)?;
        }
        registry.register(Box::new(kind_served.clone()))?;
        registry.register(Box::new(kind_synced.clone()))?;
        registry.register(Box::new(kind_stale.clone()))?;
        let kind_is_stale = IntGaugeVec::new(
            Opts::new(
                "vitistack_source_kind_stale",
                "1 while a kind's data may be behind the cluster (its watch fails or hangs)",
            ),
            &["kind"],
        )?;
        registry.register(Box::new(kind_is_stale.clone()))?;
        let datacenter_state = IntGaugeVec::new(
            Opts::new(
                "vitistack_datacenter_state",
                "Several datacenters: 1 for each datacenter's present state (CONNECTING, SYNCED, STALE, UNREACHABLE)",
            ),
            &["datacenter", "state"],
        )?;
        let datacenter_age = prometheus::GaugeVec::new(
            Opts::new(
                "vitistack_datacenter_age_seconds",
                "Several datacenters: seconds since each one's data was last proven current",
            ),
            &["datacenter"],
        )?;
        registry.register(Box::new(datacenter_state.clone()))?;
        registry.register(Box::new(datacenter_age.clone()))?;
        registry.register(Box::new(db_up.clone()))?;
        registry.register(Box::new(db_pending.clone()))?;
        registry.register(Box::new(db_failures.clone()))?;
        registry.register(Box::new(health_checks.clone()))?;
        registry.register(Box::new(connections.open.clone()))?;
        registry.register(Box::new(connections.closed.clone()))?;
        registry.register(Box::new(objects.clone()))?;
        registry.register(Box::new(sequence.clone()))?;
        // Both outcomes exist from the start: panels and alerts read 0, not "no data".
        for outcome in ["ok", "error"] {
            requests.with_label_values(&[outcome]);
            duration.with_label_values(&[outcome]);
        }
        registry.register(Box::new(requests.clone()))?;
        registry.register(Box::new(duration.clone()))?;
        let leader = crate::leader::leading_gauge(&registry)?;
        let operator = super::operator_metrics::OperatorMetrics::new(&registry)?;
        let inventory = crate::inventory::InventoryMetrics::register(&registry)?;
        Ok(Metrics {
            inventory,
            operator,
            leader,
            scraping: parking_lot::Mutex::new(()),
            registry,
            objects,
            sequence,
            requests,
            duration,
            db_up,
            db_pending,
            db_failures,
            health_checks,
            vitistack_status_writes,
            connections,
            kind_served,
            kind_synced,
            kind_stale,
            kind_is_stale,
            datacenter_state,
            datacenter_age,
            ws_open,
            ws_closes,
            sse_open,
            cache_hits,
            cache_misses,
            part_hits,
            part_misses,
            document_hits,
            document_misses,
            subscriptions,
            history,
            lagged,
        })
    }

    /// Count a closed WebSocket: the code the server sent, or None when the client ended it.
    pub fn ws_closed(&self, code: Option<u16>) {
        let label = code.map_or_else(|| "client".to_string(), |c| c.to_string());
        self.ws_closes.with_label_values(&[label.as_str()]).inc();
    }

    /// Count one GraphQL operation.
    pub fn observe_graphql(&self, took: Duration, ok: bool) {
        let outcome = if ok { "ok" } else { "error" };
        self.requests.with_label_values(&[outcome]).inc();
        self.duration
            .with_label_values(&[outcome])
            .observe(took.as_secs_f64());
    }

    /// The text exposition, with store gauges read from the snapshot (and each datacenter's
    /// state, when there are several).
    pub fn render(
        &self,
        snap: &Snapshot,
        db: &DbHealth,
        source: &OperatorsReport,
        datacenters: &[crate::source::datacenters::DatacenterReport],
        scrape: &super::operator_metrics::Scrape<'_>,
    ) -> String {
        let _one_at_a_time = self.scraping.lock();
        self.operator.update(snap, scrape, self.caches());
        // A kind watched in several datacenters is reported at its worst: served and synced
        // only where it is in every one, stale where it is in any.
        let mut kinds: std::collections::BTreeMap<&str, KindWorst> =
            std::collections::BTreeMap::new();
        for k in &source.kinds {
            let e = kinds
                .entry(k.name.as_str())
                .or_insert((k.served, true, false, None));
            e.0 = match (e.0, k.served) {
                (Some(a), Some(b)) => Some(a && b),
                (a, b) => a.or(b),
            };
            e.1 &= k.synced;
            e.2 |= k.stale;
            e.3 = match (e.3, k.stale_seconds) {
                (Some(a), Some(b)) => Some(a.max(b)),
                (a, b) => a.or(b),
            };
        }
        for (name, (served, synced, stale, stale_seconds)) in kinds {
            if let Some(served) = served {
                self.kind_served
                    .with_label_values(&[name])
                    .set(i64::from(served));
            }
            self.kind_synced
                .with_label_values(&[name])
                .set(i64::from(synced));
            self.kind_is_stale
                .with_label_values(&[name])
                .set(i64::from(stale));
            if let Some(stale) = stale_seconds {
                self.kind_stale.with_label_values(&[name]).set(stale);
            }
        }
        self.datacenter_state.reset();
        self.datacenter_age.reset();
        for d in datacenters {
            let state = serde_json::to_value(d.state).unwrap_or_default();
            self.datacenter_state
                .with_label_values(&[d.key.key(), state.as_str().unwrap_or_default()])
                .set(1);
            if let Some(age) = d.age_seconds {
                self.datacenter_age
                    .with_label_values(&[d.key.key()])
                    .set(age);
            }
        }
        self.db_up.set(i64::from(db.is_up()));
        self.db_pending.set(db.pending() as i64);
        let failures = db.failures();
        self.db_failures
            .inc_by(failures.saturating_sub(self.db_failures.get()));
        self.health_checks.inc_by(
            scrape
                .health_checks
                .saturating_sub(self.health_checks.get()),
        );
        for kind in Kind::ALL {
            self.objects
                .with_label_values(&[kind.name()])
                .set(snap.count(*kind) as i64);
        }
        self.sequence.set(snap.seq() as i64);
        let mut buf = Vec::new();
        if TextEncoder::new()
            .encode(&self.registry.gather(), &mut buf)
            .is_err()
        {
            return String::new();
        }
        String::from_utf8(buf).unwrap_or_default()
    }

    /// The cache counters under the old `cache_type` names: (type, hits, misses).
    fn caches(&self) -> [(&'static str, u64, u64); 3] {
        [
            ("response", self.cache_hits.get(), self.cache_misses.get()),
            ("part", self.part_hits.get(), self.part_misses.get()),
            (
                "document",
                self.document_hits.get(),
                self.document_misses.get(),
            ),
        ]
    }
}

/// A kind over every datacenter: served, synced, stale, stale seconds.
type KindWorst = (Option<bool>, bool, bool, Option<f64>);
