//! History: the event log of every change of the graph, kept in the database.
//!
//! Each change is one row: time, sequence, kind, namespace, name, uid, resourceVersion, change type,
//! the old operator's event type name where one exists, phase before and after, and a JSON diff of
//! `spec` and `status` with credentials blanked (never the credentials themselves, not even as
//! "changed from X").

pub mod applications;
pub mod query;
pub mod timeline;
pub mod webhooks;
pub mod writer;

use std::sync::Arc;

use arc_swap::ArcSwapOption;
use serde_json::{Map, Value};

use crate::db::Db;

use crate::model::{Kind, Resource};
use crate::store::{Change, ChangeType};

/// One row of the event log.
#[derive(Clone, Debug, PartialEq)]
pub struct EventRow {
    /// When the change was applied (ms since the Unix epoch).
    pub at_ms: i64,
    /// The key of the object's datacenter ("" on a single-cluster server).
    pub datacenter: String,
    /// The store's sequence number.
    pub seq: u64,
    /// Kind name.
    pub kind: &'static str,
    /// Namespace ("" for cluster-scoped kinds).
    pub namespace: String,
    /// Name.
    pub name: String,
    /// metadata.uid.
    pub uid: String,
    /// metadata.resourceVersion.
    pub resource_version: String,
    /// ADDED, MODIFIED or DELETED.
    pub change: &'static str,
    /// The old operator's event type (`infrastructure.machine.created`, …) or `<kind>.<change>`.
    pub event_type: String,
    /// Status phase before the change.
    pub phase_before: Option<String>,
    /// Status phase after the change (None for deletions).
    pub phase_after: Option<String>,
    /// `[{"path": "/spec/…", "before": …, "after": …}]`, credentials blanked.
    pub diff: Value,
    /// For a gap marker: how many events were dropped.
    pub dropped: Option<u64>,
    /// Who asked for the change through the API (a mutation's principal), when someone did.
    pub actor: Option<String>,
}

/// The event type of a gap marker.
pub const GAP: &str = "history.gap";

impl EventRow {
    /// A marker for `dropped` events lost from sequence `first_seq` on.
    pub fn gap(first_seq: u64, dropped: u64, at_ms: i64) -> Self {
        EventRow {
            at_ms,
            datacenter: String::new(),
            seq: first_seq,
            kind: "",
            namespace: String::new(),
            name: String::new(),
            uid: String::new(),
            resource_version: format!("gap-{first_seq}-{at_ms}"),
            change: "GAP",
            event_type: GAP.into(),
            phase_before: None,
            phase_after: None,
            diff: Value::Array(Vec::new()),
            dropped: Some(dropped),
            actor: None,
        }
    }
}

pub use crate::clock::now_ms;

/// An event time (ms since the Unix epoch) as RFC 3339, the form GraphQL and webhooks send.
pub fn rfc3339(ms: i64) -> String {
    jiff::Timestamp::from_millisecond(ms)
        .map(|t| t.to_string())
        .unwrap_or_default()
}

/// History metrics (registered by `http::Metrics`).
#[derive(Clone, Debug)]
pub struct HistoryMetrics {
    /// Events waiting to be written.
    pub pending: prometheus::IntGauge,
    /// Events written.
    pub written: prometheus::IntCounter,
    /// Events dropped because the buffer was full.
    pub dropped: prometheus::IntCounter,
    /// Gap markers recorded.
    pub gaps: prometheus::IntCounter,
    /// SQL statements run to answer history queries.
    pub queries: prometheus::IntCounter,
    /// Webhook deliveries by outcome (`delivered`, `retried`, `failed`).
    pub webhooks: prometheus::IntCounterVec,
    /// Timeline rows written: `version` (a change), `checkpoint` (the whole graph), `restart`
    /// (a checkpoint written because the chain of versions may be broken: a start, missed
    /// changes, leading again).
    pub timeline: prometheus::IntCounterVec,
    /// Past moments asked, by how their graph was had: `cached` (built before), `forward` (a
    /// built earlier moment carried forward by the changes since), `checkpoint` (rebuilt from a
    /// checkpoint).
    pub past_moments: prometheus::IntCounterVec,
}

impl HistoryMetrics {
    /// Create (not yet registered).
    pub fn new() -> Result<Self, prometheus::Error> {
        use prometheus::{IntCounter, IntGauge};
        Ok(HistoryMetrics {
            pending: IntGauge::new(
                "vitistack_history_pending_events",
                "History events waiting to be written to the database",
            )?,
            written: IntCounter::new(
                "vitistack_history_events_written_total",
                "History events written to the database",
            )?,
            dropped: IntCounter::new(
                "vitistack_history_events_dropped_total",
                "History events dropped because the buffer (HISTORY_BUFFER) was full",
            )?,
            gaps: IntCounter::new(
                "vitistack_history_gaps_total",
                "Gap markers recorded in the history where events were dropped",
            )?,
            queries: IntCounter::new(
                "vitistack_history_queries_total",
                "SQL statements run to answer history queries",
            )?,
            webhooks: prometheus::IntCounterVec::new(
                prometheus::Opts::new(
                    "vitistack_webhook_deliveries_total",
                    "Webhook delivery attempts by outcome",
                ),
                &["outcome"],
            )?,
            timeline: prometheus::IntCounterVec::new(
                prometheus::Opts::new(
                    "vitistack_history_timeline_rows_total",
                    "Timeline rows written: version (a change), checkpoint (the whole graph), restart (a checkpoint because changes may have been missed)",
                ),
                &["row"],
            )?,
            past_moments: prometheus::IntCounterVec::new(
                prometheus::Opts::new(
                    "vitistack_history_past_moments_total",
                    "Past moments asked, by how their graph was had: cached (built before), forward (an earlier built moment carried forward by the changes since), checkpoint (rebuilt from a checkpoint)",
                ),
                &["how"],
            )?,
        })
    }

    /// Every metric, for registration.
    pub fn collectors(&self) -> Vec<Box<dyn prometheus::core::Collector>> {
        vec![
            Box::new(self.pending.clone()),
            Box::new(self.written.clone()),
            Box::new(self.dropped.clone()),
            Box::new(self.gaps.clone()),
            Box::new(self.queries.clone()),
            Box::new(self.webhooks.clone()),
            Box::new(self.timeline.clone()),
            Box::new(self.past_moments.clone()),
        ]
    }
}

/// The event log's shared state: the database once reachable, settings and metrics.
pub struct History {
    db: ArcSwapOption<Db>,
    /// Batching, bound and retention.
    pub settings: writer::HistorySettings,
    /// Metrics.
    pub metrics: HistoryMetrics,
    /// Webhook endpoints fed with new events (set once, when configured).
    pub webhooks: std::sync::OnceLock<Arc<webhooks::Webhooks>>,
    /// Whether this replica delivers webhooks, trims the log and writes the timeline (every
    /// replica writes events: rows are idempotent per datacenter, uid and resourceVersion).
    pub leader: crate::leader::Leader,
    /// The graph at past moments, rebuilt from the timeline and kept (`HISTORY_CACHE_MB`).
    pub past: timeline::read::Past,
    /// How far the timeline is written (a moment is answered once it is).
    pub written: timeline::written::Written,
    /// Each datacenter's state now (key, state, what is wrong), for the timeline to record
    /// (set once the source runs).
    pub datacenters: std::sync::OnceLock<DatacenterStates>,
}

/// Each datacenter's state now: key, state (`SYNCED`, …), what is wrong.
pub type DatacenterStates = Arc<dyn Fn() -> Vec<(String, String, Option<String>)> + Send + Sync>;

impl std::fmt::Debug for History {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("History")
            .field("connected", &self.db().is_some())
            .field("settings", &self.settings)
            .finish()
    }
}

impl History {
    /// No database yet.
    pub fn new(settings: writer::HistorySettings, metrics: HistoryMetrics) -> Self {
        History {
            db: ArcSwapOption::empty(),
            past: timeline::read::Past::new(settings.cache_bytes, metrics.past_moments.clone()),
            written: Default::default(),
            datacenters: std::sync::OnceLock::new(),
            settings,
            metrics,
            webhooks: std::sync::OnceLock::new(),
            leader: crate::leader::Leader::sole(),
        }
    }

    /// The same, with the once-only work done only while `leader` leads.
    pub fn led_by(self, leader: crate::leader::Leader) -> Self {
        History { leader, ..self }
    }

    /// Start the event log: its webhooks (with `webhooks`' endpoints) and its writer on `store`'s
    /// change stream, with the database as the start found it (or its own connection once it is
    /// reachable). Every change from then on is an event, except state being loaded (a source's
    /// first list, the demo fleet), which is marked as such; and every change, loaded or not, is
    /// kept in the timeline (`timeline::writer`), with the application inventory's changes when
    /// `applications` (its snapshots) is given. The writers end after `stop`.
    #[allow(clippy::too_many_arguments)]
    pub fn start(
        settings: writer::HistorySettings,
        webhooks: &webhooks::WebhookSettings,
        leader: crate::leader::Leader,
        metrics: HistoryMetrics,
        lagged: prometheus::IntCounter,
        db: &crate::db::Start,
        store: &Arc<crate::store::Store>,
        applications: Option<tokio::sync::watch::Receiver<Arc<crate::inventory::Snapshot>>>,
        health: Arc<crate::db::health::DbHealth>,
        stop: tokio::sync::watch::Receiver<bool>,
    ) -> (Arc<History>, tokio::task::JoinHandle<()>) {
        let history = Arc::new(History::new(settings, metrics).led_by(leader));
        if let Some(hooks) = webhooks::Webhooks::start(webhooks, history.clone()) {
            let _ = history.webhooks.set(hooks);
        }
        let timeline = timeline::writer::spawn(
            history.clone(),
            store.clone(),
            store.subscribe(),
            applications,
            stop.clone(),
        );
        let events = writer::spawn(
            db.clone(),
            history.clone(),
            store.subscribe(),
            health,
            stop,
            lagged,
        );
        let both = tokio::spawn(async move {
            let _ = events.await;
            let _ = timeline.await;
        });
        (history, both)
    }

    /// The database, when reachable.
    pub fn db(&self) -> Option<Db> {
        self.db.load_full().map(|d| (*d).clone())
    }

    /// Publish the connection.
    pub fn connected(&self, db: Db) {
        self.db.store(Some(Arc::new(db)));
    }
}

/// The old operator's event type names, where a change has one; else `<kind>.<change>`.
pub fn event_type(kind: Kind, change: ChangeType) -> String {
    let named = match (kind, change) {
        (Kind::Machine, ChangeType::Added) => Some("infrastructure.machine.created"),
        (Kind::Machine, ChangeType::Deleted) => Some("infrastructure.machine.deleted"),
        (Kind::KubernetesCluster, _) => Some("infrastructure.cluster.updated"),
        (Kind::NetworkConfiguration | Kind::NetworkNamespace, ChangeType::Modified) => {
            Some("infrastructure.network.configured")
        }
        (
            Kind::Vitistack
            | Kind::MachineProvider
            | Kind::KubernetesProvider
            | Kind::ProxmoxConfig
            | Kind::KubevirtConfig,
            ChangeType::Modified,
        ) => Some("infrastructure.operator.status"),
        _ => None,
    };
    named.map_or_else(
        || {
            let c = match change {
                ChangeType::Added => "created",
                ChangeType::Modified => "updated",
                ChangeType::Deleted => "deleted",
            };
            format!("{}.{c}", kind.name().to_ascii_lowercase())
        },
        str::to_string,
    )
}

fn change_name(c: ChangeType) -> &'static str {
    match c {
        ChangeType::Added => "ADDED",
        ChangeType::Modified => "MODIFIED",
        ChangeType::Deleted => "DELETED",
    }
}

/// `spec` and `status` of an object as JSON (credentials were blanked when it was built).
fn watched_parts(r: &Resource) -> Value {
    let v = r.to_value();
    let mut out = Map::new();
    for part in ["spec", "status"] {
        if let Some(x) = v.get(part) {
            out.insert(part.into(), x.clone());
        }
    }
    Value::Object(out)
}

/// The differences between two JSON values as JSON-pointer paths (objects compared key by key,
/// arrays and scalars as wholes).
pub fn diff(before: &Value, after: &Value) -> Vec<Value> {
    let mut out = Vec::new();
    walk("", before, after, &mut out);
    out
}

fn walk(path: &str, before: &Value, after: &Value, out: &mut Vec<Value>) {
    match (before, after) {
        (Value::Object(a), Value::Object(b)) => {
            let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
            keys.sort();
            keys.dedup();
            for k in keys {
                let p = format!("{path}/{}", k.replace('~', "~0").replace('/', "~1"));
                walk(
                    &p,
                    a.get(k).unwrap_or(&Value::Null),
                    b.get(k).unwrap_or(&Value::Null),
                    out,
                );
            }
        }
        (a, b) if a != b => {
            out.push(serde_json::json!({"path": path, "before": a, "after": b}));
        }
        _ => {}
    }
}

/// The event-log row of a change, applied at `at_ms`.
pub fn row_of(c: &Change, at_ms: i64) -> EventRow {
    let object = &c.object;
    let after = match c.change {
        ChangeType::Deleted => Value::Null,
        _ => watched_parts(object),
    };
    let before = c.previous.as_deref().map_or(Value::Null, watched_parts);
    EventRow {
        at_ms,
        datacenter: object.datacenter().key().to_string(),
        seq: c.seq,
        kind: object.kind().name(),
        namespace: object.namespace().to_string(),
        name: object.name().to_string(),
        uid: object.uid().to_string(),
        resource_version: object
            .meta()
            .resource_version
            .as_deref()
            .unwrap_or_default()
            .to_string(),
        change: change_name(c.change),
        event_type: event_type(object.kind(), c.change),
        phase_before: c
            .previous
            .as_deref()
            .and_then(Resource::phase)
            .map(str::to_string),
        phase_after: (c.change != ChangeType::Deleted)
            .then(|| object.phase().map(str::to_string))
            .flatten(),
        diff: Value::Array(diff(&before, &after)),
        dropped: None,
        actor: c.actor.as_deref().map(str::to_string),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{ObjectKey, Op, Store};
    use serde_json::json;

    fn machine(name: &str, phase: &str, user_data: &str) -> Resource {
        Resource::from_value(
            Kind::Machine,
            "v1alpha1",
            json!({"metadata": {"name": name, "namespace": "ns"},
                   "spec": {"provider": "kubevirt", "userData": user_data},
                   "status": {"phase": phase}}),
        )
        .expect("machine")
    }

    #[test]
    fn a_machine_s_life_as_event_rows_without_its_credentials() {
        let store = Store::new();
        let created = store.apply(vec![Op::Upsert(machine(
            "m",
            "Pending",
            "password=hunter2",
        ))]);
        let r = row_of(&created[0], 1);
        assert_eq!(r.event_type, "infrastructure.machine.created");
        assert_eq!(
            (
                r.change,
                r.phase_before.as_deref(),
                r.phase_after.as_deref()
            ),
            ("ADDED", None, Some("Pending"))
        );
        assert!(!r.uid.is_empty() && !r.resource_version.is_empty());

        let changed = store.apply(vec![Op::Upsert(machine(
            "m",
            "Running",
            "password=swordfish",
        ))]);
        let r = row_of(&changed[0], 2);
        assert_eq!(r.event_type, "machine.updated");
        assert_eq!(
            (r.phase_before.as_deref(), r.phase_after.as_deref()),
            (Some("Pending"), Some("Running"))
        );
        // Only the phase changed as far as the log can tell: the credential is blanked on both sides.
        assert_eq!(
            r.diff,
            json!([{"path": "/status/phase", "before": "Pending", "after": "Running"}])
        );
        let deleted = store.apply(vec![Op::Delete(ObjectKey::new(
            &Default::default(),
            Kind::Machine,
            "ns",
            "m",
        ))]);
        let r = row_of(&deleted[0], 3);
        assert_eq!(r.event_type, "infrastructure.machine.deleted");
        assert_eq!(
            (r.phase_before.as_deref(), r.phase_after.as_deref()),
            (Some("Running"), None)
        );
        for row in [row_of(&created[0], 1), row_of(&changed[0], 2), r] {
            let text = row.diff.to_string();
            assert!(
                !text.contains("hunter2") && !text.contains("swordfish"),
                "{text}"
            );
        }
    }

    #[test]
    fn old_operator_event_names() {
        assert_eq!(
            event_type(Kind::KubernetesCluster, ChangeType::Modified),
            "infrastructure.cluster.updated"
        );
        assert_eq!(
            event_type(Kind::NetworkNamespace, ChangeType::Modified),
            "infrastructure.network.configured"
        );
        assert_eq!(
            event_type(Kind::Vitistack, ChangeType::Modified),
            "infrastructure.operator.status"
        );
        assert_eq!(
            event_type(Kind::NetworkNamespace, ChangeType::Added),
            "networknamespace.created"
        );
    }

    #[test]
    fn diff_paths_are_json_pointers() {
        let d = diff(
            &json!({"spec": {"a/b": 1, "same": [1, 2], "gone": true}}),
            &json!({"spec": {"a/b": 2, "same": [1, 2], "new": "x"}}),
        );
        assert_eq!(
            d,
            vec![
                json!({"path": "/spec/a~1b", "before": 1, "after": 2}),
                json!({"path": "/spec/gone", "before": true, "after": null}),
                json!({"path": "/spec/new", "before": null, "after": "x"}),
            ]
        );
    }
}
