//! History over GraphQL: `events(filter, first, after)`, `history` / `phaseTimeline` /
//! time-to-Running and time-to-Ready on Machines and clusters (through DataLoaders: one SQL
//! statement for a page of objects, not one per object), and failures per day.
//!
//! History is read from the database, not from the request's snapshot, so every answer that
//! touches it is marked volatile (never kept by the response cache).

use crate::error::ErrorCode;
use std::collections::HashMap;
use std::sync::Arc;

use async_graphql::connection::{Connection, Edge};
use async_graphql::{ComplexObject, Context, ID, InputObject, SimpleObject};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

use super::loaders::{Loaders, ReadError, db_of, read_failed};
use super::types::{Node, snap, to_node};
use crate::history::query::{self, EventQuery, StoredEvent};
use crate::history::{History, rfc3339};
use crate::model::vocab::PhaseState;

/// One entry of the event log.
#[derive(SimpleObject, Clone, Debug)]
#[graphql(complex)]
pub struct HistoryEvent {
    #[graphql(skip)]
    row: i64,
    /// When the change was seen (RFC 3339).
    pub at: String,
    /// The store's sequence number of the change (the first one missed, for a gap marker).
    pub sequence: i64,
    /// Kind ("" for a gap marker).
    pub kind: String,
    /// Namespace ("" for cluster-scoped kinds).
    pub namespace: String,
    /// Name.
    pub name: String,
    /// `metadata.uid`.
    pub uid: String,
    /// `metadata.resourceVersion` after the change.
    pub resource_version: String,
    /// `ADDED`, `MODIFIED`, `DELETED`, or `GAP` where events were dropped.
    pub change: String,
    /// The event type: `infrastructure.machine.created`, `infrastructure.machine.deleted`,
    /// `infrastructure.cluster.updated`, `infrastructure.operator.status`,
    /// `infrastructure.network.configured`, else `<kind>.<created|updated|deleted>`;
    /// `history.gap` for a gap marker.
    #[graphql(name = "type")]
    pub event_type: String,
    /// Status phase before the change.
    pub phase_before: Option<String>,
    /// Status phase after the change (null after a deletion).
    pub phase_after: Option<String>,
    /// What changed in `spec` and `status`: `[{path, before, after}]` with JSON-pointer paths,
    /// credentials blanked.
    pub diff: async_graphql::Json<serde_json::Value>,
    /// For a gap marker: how many events were dropped because the history buffer was full.
    pub dropped: Option<i64>,
    /// Who asked for this change through this API (`key:NAME`, or a person with how they came
    /// and their groups: `oidc:alice (oidc-session; groups team-1)`, `kubernetes:otto
    /// (kubernetes-token; groups system:serviceaccounts)`); null for changes made elsewhere (the
    /// operators, kubectl). A filter by the name alone (`oidc:alice`) finds a person's changes.
    pub actor: Option<String>,
    /// The key of the object's datacenter (empty on a single-cluster server).
    pub datacenter: String,
}

#[ComplexObject]
impl HistoryEvent {
    /// Opaque id of the entry.
    async fn id(&self) -> ID {
        ID(URL_SAFE_NO_PAD.encode(format!("HistoryEvent:{}", self.row)))
    }

    /// The object as it is now (null when it no longer exists).
    async fn object(&self, ctx: &Context<'_>) -> Option<Node> {
        if self.uid.is_empty() {
            return None;
        }
        let dc = crate::model::Datacenter::new(&self.datacenter);
        snap(ctx).by_uid_in(&dc, &self.uid).cloned().map(to_node)
    }

    /// What the phase after the change means (as `phaseState` on the object); `DELETING` after a
    /// deletion.
    async fn phase_state_after(&self) -> PhaseState {
        if self.change == "DELETED" {
            PhaseState::Deleting
        } else {
            PhaseState::of(self.phase_after.as_deref())
        }
    }
}

impl From<StoredEvent> for HistoryEvent {
    fn from(e: StoredEvent) -> Self {
        HistoryEvent {
            row: e.id,
            at: rfc3339(e.at_ms),
            sequence: e.seq,
            kind: e.kind,
            namespace: e.namespace,
            name: e.name,
            uid: e.uid,
            resource_version: e.resource_version,
            change: e.change,
            event_type: e.event_type,
            phase_before: e.phase_before,
            phase_after: e.phase_after,
            diff: async_graphql::Json(e.diff.0),
            dropped: e.dropped,
            actor: e.actor,
            datacenter: e.datacenter,
        }
    }
}

/// Which events `events` returns; every part optional, all parts must hold.
#[derive(InputObject, Default, Clone, Debug)]
pub struct EventFilter {
    /// One object, by its global id (its events by kind, namespace and name: across re-creation).
    pub object_id: Option<ID>,
    /// One object, by `metadata.uid`.
    pub uid: Option<String>,
    /// Kind name (`Machine`, `KubernetesCluster`, …).
    pub kind: Option<String>,
    /// Namespace.
    pub namespace: Option<String>,
    /// Object name.
    pub name: Option<String>,
    /// Event types, any of (`infrastructure.machine.created`, `history.gap`, …).
    pub types: Option<Vec<String>>,
    /// At or after this time (RFC 3339).
    pub since: Option<String>,
    /// Before this time (RFC 3339).
    pub until: Option<String>,
    /// Changes asked for through this API by this caller (`key:NAME`, `kubernetes:USER`,
    /// `oidc:USER`).
    pub actor: Option<String>,
    /// One datacenter's objects (its key).
    pub datacenter: Option<String>,
}

/// Time spent in one phase.
#[derive(SimpleObject, Clone, Debug, PartialEq)]
pub struct PhaseSpan {
    /// The phase ("" while the object had none).
    pub phase: String,
    /// When it entered the phase (RFC 3339).
    pub since: String,
    /// When it left (null while it is still in it).
    pub until: Option<String>,
    /// Seconds spent in the phase (null while it is still in it).
    pub seconds: Option<f64>,
    /// What the phase means (as `phaseState` on the object).
    pub phase_state: PhaseState,
}

/// Failures on one UTC day.
#[derive(SimpleObject, Clone, Debug)]
pub struct DayCount {
    /// The day (`YYYY-MM-DD`, UTC).
    pub day: String,
    /// How many Machines went Failed that day.
    pub count: i64,
}

const UNAVAILABLE: ErrorCode = ErrorCode::DatabaseUnavailable;

fn not_kept() -> async_graphql::Error {
    UNAVAILABLE.graphql("history is not kept by this server")
}

/// The request's loaders (history is kept and this request reads it).
fn loaders_of<'a>(ctx: &Context<'a>) -> async_graphql::Result<&'a Loaders> {
    crate::graphql::mark_volatile(ctx);
    ctx.data_opt::<Loaders>().ok_or_else(not_kept)
}

fn history_of<'a>(ctx: &Context<'a>) -> async_graphql::Result<&'a Arc<History>> {
    crate::graphql::mark_volatile(ctx);
    ctx.data_opt::<Arc<History>>().ok_or_else(not_kept)
}

/// `first` checked against MAX_PAGE_SIZE.
fn page_size(ctx: &Context<'_>, first: i32) -> async_graphql::Result<usize> {
    let max = super::paging::max_page_size(ctx);
    usize::try_from(first)
        .ok()
        .filter(|n| (1..=max).contains(n))
        .ok_or_else(|| {
            ErrorCode::BadPageSize.graphql(format!(
                "first must be between 1 and {max} (MAX_PAGE_SIZE), not {first}"
            ))
        })
}

fn unavailable(e: ReadError) -> async_graphql::Error {
    UNAVAILABLE.graphql(e.to_string())
}

/// The newest `first` events of the object `uid`.
pub async fn object_history(
    ctx: &Context<'_>,
    uid: &str,
    first: i32,
) -> async_graphql::Result<Vec<HistoryEvent>> {
    let n = page_size(ctx, first)?;
    let events = loaders_of(ctx)?
        .recent
        .load_one((uid.to_string(), n))
        .await
        .map_err(unavailable)?;
    Ok(events
        .unwrap_or_default()
        .into_iter()
        .map(HistoryEvent::from)
        .collect())
}

async fn phase_events(ctx: &Context<'_>, uid: &str) -> async_graphql::Result<Vec<StoredEvent>> {
    Ok(loaders_of(ctx)?
        .phases
        .load_one(uid.to_string())
        .await
        .map_err(unavailable)?
        .unwrap_or_default())
}

/// The phases an object went through, from its phase changes (oldest first).
pub fn timeline(events: &[StoredEvent]) -> Vec<PhaseSpan> {
    let mut spans: Vec<(String, i64)> = Vec::new();
    let mut end = None;
    for e in events {
        match e.change.as_str() {
            "DELETED" => {
                end = Some(e.at_ms);
                break;
            }
            _ => {
                let phase = e.phase_after.clone().unwrap_or_default();
                if spans.last().is_none_or(|(p, _)| *p != phase) {
                    spans.push((phase, e.at_ms));
                }
            }
        }
    }
    let mut out = Vec::with_capacity(spans.len());
    for (i, (phase, from)) in spans.iter().enumerate() {
        let to = spans.get(i + 1).map(|s| s.1).or(end);
        out.push(PhaseSpan {
            phase: phase.clone(),
            since: rfc3339(*from),
            until: to.map(rfc3339),
            seconds: to.map(|t| (t - from) as f64 / 1000.0),
            phase_state: PhaseState::of(Some(phase)),
        });
    }
    out
}

/// Seconds from `created_ms` (else the first event) to the first time the object entered
/// `phase`; None when it never did (as far as the history knows).
pub fn time_to(events: &[StoredEvent], created_ms: Option<i64>, phase: &str) -> Option<f64> {
    let start = created_ms.or_else(|| events.first().map(|e| e.at_ms))?;
    let reached = events
        .iter()
        .find(|e| e.phase_after.as_deref() == Some(phase))?;
    Some((reached.at_ms - start).max(0) as f64 / 1000.0)
}

/// `phaseTimeline` of the object `uid`.
pub async fn object_timeline(
    ctx: &Context<'_>,
    uid: &str,
) -> async_graphql::Result<Vec<PhaseSpan>> {
    Ok(timeline(&phase_events(ctx, uid).await?))
}

/// Time from creation to `phase` of the object `r`.
pub async fn object_time_to(
    ctx: &Context<'_>,
    r: &crate::model::Resource,
    phase: &str,
) -> async_graphql::Result<Option<f64>> {
    let events = phase_events(ctx, &r.uid()).await?;
    let created = r.created().map(|t| t.as_millisecond());
    Ok(time_to(&events, created, phase))
}

fn parse_time(field: &str, v: &Option<String>) -> async_graphql::Result<Option<i64>> {
    v.as_deref()
        .map(|t| {
            t.parse::<jiff::Timestamp>()
                .map(|t| t.as_millisecond())
                .map_err(|e| {
                    ErrorCode::BadTime
                        .graphql(format!("filter.{field} `{t}` is not an RFC 3339 time: {e}"))
                })
        })
        .transpose()
}

const CURSOR_PREFIX: &str = "ev:";

fn cursor(row: i64) -> String {
    URL_SAFE_NO_PAD.encode(format!("{CURSOR_PREFIX}{row}"))
}

fn decode_cursor(c: &str) -> async_graphql::Result<i64> {
    URL_SAFE_NO_PAD
        .decode(c)
        .ok()
        .and_then(|b| String::from_utf8(b).ok())
        .and_then(|s| s.strip_prefix(CURSOR_PREFIX)?.parse().ok())
        .ok_or_else(|| ErrorCode::BadCursor.graphql(format!("`{c}` is not a cursor of events")))
}

/// `events(filter, first, after)`: newest first.
pub async fn events(
    ctx: &Context<'_>,
    filter: Option<EventFilter>,
    first: Option<i32>,
    after: Option<String>,
) -> async_graphql::Result<Connection<String, HistoryEvent>> {
    let history = history_of(ctx)?;
    let limit = page_size(
        ctx,
        first.unwrap_or(super::paging::DEFAULT_PAGE_SIZE as i32),
    )?;
    let f = filter.unwrap_or_default();
    let mut q = EventQuery {
        uid: f.uid.clone(),
        kind: f.kind.clone(),
        namespace: f.namespace.clone(),
        name: f.name.clone(),
        types: f.types.clone().unwrap_or_default(),
        since_ms: parse_time("since", &f.since)?,
        until_ms: parse_time("until", &f.until)?,
        before_id: after.as_deref().map(decode_cursor).transpose()?,
        actor: f.actor.clone(),
        datacenter: f.datacenter.clone(),
        scope: super::scope_of(ctx),
    };
    // At a past moment (`at`), what had happened by then.
    if let Some(super::past::PastMoment(at)) = ctx.data_opt() {
        q.until_ms = Some(q.until_ms.map_or(*at, |u| u.min(*at)));
    }
    if let Some(id) = &f.object_id {
        let key =
            super::types::decode_id(id).map_err(|e| ErrorCode::BadId.graphql(e.to_string()))?;
        q.kind = Some(key.kind.name().to_string());
        q.namespace = Some(key.namespace.to_string());
        q.name = Some(key.name.to_string());
        q.datacenter = Some(key.datacenter.key().to_string());
    }
    let db = db_of(history).map_err(unavailable)?;
    let mut rows = query::page(&db, &q, limit + 1)
        .await
        .map_err(|e| unavailable(read_failed(e)))?;
    let more = rows.len() > limit;
    rows.truncate(limit);
    let mut conn = Connection::new(after.is_some(), more);
    conn.edges.extend(
        rows.into_iter()
            .map(|e| Edge::new(cursor(e.id), HistoryEvent::from(e))),
    );
    Ok(conn)
}

/// `machineFailuresPerDay(days)`: Machines entering `Failed` per UTC day, every day listed.
pub async fn failures_per_day(
    ctx: &Context<'_>,
    days: i32,
) -> async_graphql::Result<Vec<DayCount>> {
    if !(1..=366).contains(&days) {
        return Err(
            ErrorCode::BadDays.graphql(format!("days must be between 1 and 366, not {days}"))
        );
    }
    let history = history_of(ctx)?;
    let db = db_of(history).map_err(unavailable)?;
    const DAY_MS: i64 = 86_400_000;
    let today = crate::history::now_ms() / DAY_MS;
    let first_day = today - i64::from(days) + 1;
    let counts: HashMap<i64, i64> = query::entered_phase_per_day(
        &db,
        "Machine",
        "Failed",
        first_day * DAY_MS,
        &super::scope_of(ctx),
    )
    .await
    .map_err(|e| unavailable(read_failed(e)))?
    .into_iter()
    .collect();
    Ok((first_day..=today)
        .map(|d| DayCount {
            day: rfc3339(d * DAY_MS)
                .get(..10)
                .unwrap_or_default()
                .to_string(),
            count: counts.get(&d).copied().unwrap_or(0),
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(at_ms: i64, change: &str, phase: Option<&str>) -> StoredEvent {
        StoredEvent {
            id: at_ms,
            at_ms,
            seq: at_ms,
            kind: "Machine".into(),
            namespace: "ns".into(),
            name: "m".into(),
            uid: "u".into(),
            resource_version: at_ms.to_string(),
            change: change.into(),
            event_type: String::new(),
            phase_before: None,
            phase_after: phase.map(str::to_string),
            diff: sqlx::types::Json(serde_json::Value::Null),
            dropped: None,
            actor: None,
            datacenter: String::new(),
        }
    }

    #[test]
    fn timeline_and_time_to_phase() {
        let events = [
            ev(1_000, "ADDED", None),
            ev(3_000, "MODIFIED", Some("Pending")),
            ev(10_500, "MODIFIED", Some("Running")),
            ev(20_000, "MODIFIED", Some("Failed")),
        ];
        let t = timeline(&events);
        let phases: Vec<(&str, Option<f64>)> =
            t.iter().map(|s| (s.phase.as_str(), s.seconds)).collect();
        assert_eq!(
            phases,
            [
                ("", Some(2.0)),
                ("Pending", Some(7.5)),
                ("Running", Some(9.5)),
                ("Failed", None)
            ]
        );
        assert_eq!(t[0].since, "1970-01-01T00:00:01Z");
        assert_eq!(time_to(&events, None, "Running"), Some(9.5));
        assert_eq!(time_to(&events, Some(0), "Running"), Some(10.5));
        assert_eq!(time_to(&events, None, "Ready"), None);
        let deleted = [ev(0, "ADDED", Some("Running")), ev(4_000, "DELETED", None)];
        assert_eq!(timeline(&deleted)[0].seconds, Some(4.0));
    }
}
