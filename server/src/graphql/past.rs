//! The graph as it was: `at(time:) { …any Query field… }` answers the whole schema from the graph
//! rebuilt at that moment (`history::timeline`), and `changes(from, to, filter)` lists what was
//! added, removed and changed between two moments, field by field.
//!
//! Every resolver reads the request's snapshot (`types::snap`), so a query at a moment is the
//! same query on another snapshot: before the operation runs, the request pipeline finds an `at`
//! at its root (`moment`), rebuilds that moment and gives the request that snapshot, scoped to
//! what the caller sees now. `at` is then the operation's only root field (several `at`s must
//! name one moment): the answer has one graph.

use std::sync::Arc;

use async_graphql::parser::types::{ExecutableDocument, Selection, SelectionSet};
use async_graphql::{
    Context, Enum, ErrorExtensions, InputObject, Object, SimpleObject, Value, Variables,
};

use super::paging::{CompiledFilter, Filter};
use crate::error::ErrorCode;
use crate::history::History;
use crate::history::timeline::read::PastError;
use crate::model::{Kind, Resource};
use crate::store::{ObjectKey, Snapshot};

/// The moment the request's snapshot shows (request data, set by the pipeline for `at`).
#[derive(Clone, Copy, Debug)]
pub struct PastMoment(pub i64);

/// Why the request's moment could not be rebuilt (request data: `at` answers with it).
#[derive(Clone, Debug)]
pub struct PastRefused(pub async_graphql::Error);

/// The moment an operation asks for: None when its root has no `at`; an error when `at` is mixed
/// with other root fields, names several moments or a time that does not read.
pub fn moment(
    doc: &ExecutableDocument,
    operation: Option<&str>,
    variables: &Variables,
) -> Result<Option<i64>, async_graphql::Error> {
    let Some(op) = super::subscription::executor::find_operation(doc, operation) else {
        return Ok(None);
    };
    let mut times: Vec<Option<String>> = Vec::new();
    let mut others = false;
    root_fields(
        doc,
        variables,
        &op.node.selection_set.node,
        &mut |name, time| match name {
            "at" => times.push(time),
            "__typename" => {}
            _ => others = true,
        },
        0,
    );
    if times.is_empty() {
        return Ok(None);
    }
    if others {
        return Err(ErrorCode::BadRequest.graphql(
            "`at` must be the only field at the root of its operation: one answer shows one moment (ask for the present in another operation)",
        ));
    }
    let mut at = None;
    for text in times {
        let Some(text) = text else {
            return Err(ErrorCode::BadTime.graphql("`at(time:)` needs an RFC 3339 time"));
        };
        let ms = parse_time("time", &text)?;
        match at {
            Some(prev) if prev != ms => {
                return Err(ErrorCode::BadRequest.graphql(
                    "every `at` of an operation must name the same moment: one answer shows one moment",
                ));
            }
            _ => at = Some(ms),
        }
    }
    Ok(at)
}

/// Call `f` with each root field's name and its `time` argument as text (variables read),
/// through fragments.
fn root_fields(
    doc: &ExecutableDocument,
    variables: &Variables,
    set: &SelectionSet,
    f: &mut dyn FnMut(&str, Option<String>),
    depth: usize,
) {
    if depth > 8 {
        return;
    }
    for item in &set.items {
        match &item.node {
            Selection::Field(field) => {
                let time = field.node.get_argument("time").and_then(|v| {
                    match v
                        .node
                        .clone()
                        .into_const_with(|name| variables.get(&name).cloned().ok_or(()))
                    {
                        Ok(Value::String(s)) => Some(s),
                        _ => None,
                    }
                });
                f(field.node.name.node.as_str(), time);
            }
            Selection::InlineFragment(i) => {
                root_fields(doc, variables, &i.node.selection_set.node, f, depth + 1)
            }
            Selection::FragmentSpread(s) => {
                if let Some(frag) = doc.fragments.get(&s.node.fragment_name.node) {
                    root_fields(doc, variables, &frag.node.selection_set.node, f, depth + 1);
                }
            }
        }
    }
}

/// An RFC 3339 time as ms since the epoch.
pub(crate) fn parse_time(arg: &str, text: &str) -> Result<i64, async_graphql::Error> {
    text.parse::<jiff::Timestamp>()
        .map(|t| t.as_millisecond())
        .map_err(|e| {
            ErrorCode::BadTime.graphql(format!("{arg} `{text}` is not an RFC 3339 time: {e}"))
        })
}

/// The error of a field the history cannot answer at a past moment.
pub fn live_only(what: &str) -> async_graphql::Error {
    ErrorCode::BadRequest.graphql(format!(
        "{what} at a past moment: the history keeps the applications (`applications` inside `at`), not this; ask for it outside `at`"
    ))
}

/// A rebuild's failure in the API's words.
pub fn refused(e: &PastError) -> async_graphql::Error {
    match e {
        PastError::Trimmed { oldest, .. } => {
            let oldest = oldest.map(crate::history::rfc3339);
            ErrorCode::HistoryTrimmed
                .graphql(e.to_string())
                .extend_with(move |_, x| {
                    if let Some(o) = &oldest {
                        x.set("oldest", o.as_str());
                    }
                })
        }
        PastError::Behind { .. } => ErrorCode::DatabaseUnavailable.graphql(e.to_string()),
        PastError::Db(db) => {
            tracing::warn!(error = %db, "rebuilding a past moment failed");
            ErrorCode::DatabaseUnavailable.graphql(
                "the history could not be read: the database did not answer (see /health/database)",
            )
        }
        PastError::Damaged(why) => {
            tracing::error!(error = %why, "rebuilding a past moment failed");
            ErrorCode::Internal.graphql("the history could not be rebuilt at that moment (the server's log has the details)")
        }
    }
}

/// The history and its database, or DATABASE_UNAVAILABLE in words.
fn history_db(
    history: Option<&Arc<History>>,
) -> async_graphql::Result<(&Arc<History>, crate::db::Db)> {
    let history = history.ok_or_else(|| {
        ErrorCode::DatabaseUnavailable.graphql("history is not kept by this server")
    })?;
    let db = history.db().ok_or_else(|| {
        ErrorCode::DatabaseUnavailable
            .graphql("history is unavailable: the database is not reachable (see /health/database)")
    })?;
    Ok((history, db))
}

/// The applications at the request's moment, as its caller sees them (request data, set with
/// `PastMoment`).
#[derive(Clone, Debug)]
pub struct PastApplications(pub Arc<crate::inventory::Snapshot>);

/// The graph and the applications at `at_ms` as `scope` sees them: rebuilt from `history` (or
/// shared from its cache).
pub async fn past_graph(
    history: Option<&Arc<History>>,
    store: &crate::store::Store,
    scope: &crate::store::Scope,
    at_ms: i64,
) -> async_graphql::Result<(Arc<Snapshot>, PastApplications)> {
    let (history, db) = history_db(history)?;
    history
        .written
        .caught_up(&db, history.leader.leading(), at_ms)
        .await
        .map_err(|e| refused(&e))?;
    let past = history
        .past
        .at(&db, store, at_ms)
        .await
        .map_err(|e| refused(&e))?;
    Ok((
        store.view(&past.graph, scope),
        PastApplications(past.applications.visible(scope)),
    ))
}

/// The graph at a moment, scoped to what the caller of `ctx` sees.
async fn graph_at(ctx: &Context<'_>, at_ms: i64) -> async_graphql::Result<Arc<Snapshot>> {
    let store = ctx.data_unchecked::<Arc<crate::store::Store>>();
    let (graph, _) = past_graph(
        ctx.data_opt::<Arc<History>>(),
        store,
        &super::scope_of(ctx),
        at_ms,
    )
    .await?;
    super::mark_volatile(ctx);
    Ok(graph)
}

/// The root fields about the past.
#[derive(Default)]
pub struct PastQuery;

/// How an object differs between two moments.
#[derive(Enum, Copy, Clone, Debug, Eq, PartialEq)]
pub enum ObjectChangeType {
    /// There at `to`, not at `from`.
    Added,
    /// There at `from`, not at `to`.
    Removed,
    /// There at both, different.
    Changed,
}

/// One field that differs.
#[derive(SimpleObject, Clone, Debug)]
pub struct FieldChange {
    /// JSON pointer into the object (`/status/phase`).
    pub path: String,
    /// The value at `from` (null: absent).
    pub before: async_graphql::Json<serde_json::Value>,
    /// The value at `to` (null: absent).
    pub after: async_graphql::Json<serde_json::Value>,
}

/// One object that differs between two moments.
#[derive(SimpleObject, Clone, Debug)]
pub struct ObjectChange {
    /// Added, removed or changed.
    pub change: ObjectChangeType,
    /// The object's datacenter ("" on a single-cluster server).
    pub datacenter: String,
    /// Kind.
    pub kind: String,
    /// Namespace ("" for cluster-scoped kinds).
    pub namespace: String,
    /// Name.
    pub name: String,
    /// `metadata.uid`.
    pub uid: String,
    /// Status phase at `from`.
    pub phase_before: Option<String>,
    /// Status phase at `to`.
    pub phase_after: Option<String>,
    /// The fields that differ (for a changed object; `metadata.resourceVersion` left out),
    /// credentials blanked.
    pub fields: Vec<FieldChange>,
}

/// What differs in one datacenter.
#[derive(SimpleObject, Clone, Debug, Default)]
pub struct DatacenterChanges {
    /// The datacenter's key.
    pub datacenter: String,
    /// Objects added.
    pub added: i32,
    /// Objects removed.
    pub removed: i32,
    /// Objects changed.
    pub changed: i32,
}

/// What differs between two moments.
#[derive(SimpleObject, Clone, Debug)]
pub struct GraphChanges {
    /// The earlier moment (RFC 3339).
    pub from: String,
    /// The later moment (RFC 3339).
    pub to: String,
    /// Objects added, removed and changed, per datacenter.
    pub datacenters: Vec<DatacenterChanges>,
    /// How many objects differ (all of them, not only the ones listed).
    pub total_count: i32,
    /// The objects that differ, by datacenter, kind, namespace and name (at most `first`).
    pub objects: Vec<ObjectChange>,
}

/// Which objects `changes` compares.
#[derive(InputObject, Clone, Debug, Default)]
pub struct ChangesFilter {
    /// Only these kinds (`Machine`, `KubernetesCluster`, …).
    pub kinds: Option<Vec<String>>,
    /// Namespace, datacenter, phase, labels and name, as the lists filter (an object passes when
    /// it passes at either moment).
    #[graphql(flatten)]
    pub filter: Filter,
}

#[Object]
impl PastQuery {
    /// The oldest moment `at` and `changes` can answer (RFC 3339); null while the history keeps
    /// none (or keeps no history at all). The newest is now.
    async fn oldest_moment(&self, ctx: &Context<'_>) -> async_graphql::Result<Option<String>> {
        let Ok((_, db)) = history_db(ctx.data_opt::<Arc<History>>()) else {
            return Ok(None);
        };
        let oldest = crate::history::timeline::read::oldest(&db)
            .await
            .map_err(|e| refused(&PastError::Db(e)))?;
        super::mark_volatile(ctx);
        Ok(oldest.map(crate::history::rfc3339))
    }

    /// What was added, removed and changed between two moments (RFC 3339), per datacenter and
    /// object, with each changed object's fields; `first` objects are listed (default 100),
    /// `totalCount` counts them all. Moments are rebuilt as `at` does, and seen as the caller
    /// may see them now.
    async fn changes(
        &self,
        ctx: &Context<'_>,
        from: String,
        to: String,
        filter: Option<ChangesFilter>,
        first: Option<i32>,
    ) -> async_graphql::Result<GraphChanges> {
        let from_ms = parse_time("from", &from)?;
        let to_ms = parse_time("to", &to)?;
        let max = ctx
            .data_opt::<super::Limits>()
            .map_or(500, |l| l.max_page_size);
        let first = first.unwrap_or(100);
        if first < 0 || first as usize > max {
            return Err(ErrorCode::PageSizeLimit.graphql(format!(
                "`first` is {first}: it must be between 0 and the maximum page size of {max} (MAX_PAGE_SIZE)"
            )));
        }
        let first = first as usize;
        let filter = filter.unwrap_or_default();
        let kinds = super::paging::parse_kinds(filter.kinds.as_deref())?;
        let compiled = CompiledFilter::new(&filter.filter)?;
        let before = graph_at(ctx, from_ms).await?;
        let after = graph_at(ctx, to_ms).await?;
        let passes = |r: &Resource| {
            kinds.as_ref().is_none_or(|ks| ks.contains(&r.kind())) && compiled.matches(r)
        };
        let mut found = compare(&before, &after, &passes);
        found.sort_by(|a, b| {
            (&a.datacenter, &a.kind, &a.namespace, &a.name).cmp(&(
                &b.datacenter,
                &b.kind,
                &b.namespace,
                &b.name,
            ))
        });
        let mut per: std::collections::BTreeMap<String, DatacenterChanges> = Default::default();
        for c in &found {
            let d = per
                .entry(c.datacenter.clone())
                .or_insert_with(|| DatacenterChanges {
                    datacenter: c.datacenter.clone(),
                    ..Default::default()
                });
            match c.change {
                ObjectChangeType::Added => d.added += 1,
                ObjectChangeType::Removed => d.removed += 1,
                ObjectChangeType::Changed => d.changed += 1,
            }
        }
        let total = found.len() as i32;
        found.truncate(first);
        Ok(GraphChanges {
            from: crate::history::rfc3339(from_ms),
            to: crate::history::rfc3339(to_ms),
            datacenters: per.into_values().collect(),
            total_count: total,
            objects: found,
        })
    }
}

/// The objects that differ between two graphs (among those `passes` at either).
fn compare(
    before: &Snapshot,
    after: &Snapshot,
    passes: &dyn Fn(&Resource) -> bool,
) -> Vec<ObjectChange> {
    let mut out = Vec::new();
    let entry = |change,
                 r: &Resource,
                 prev: Option<&Resource>,
                 next: Option<&Resource>,
                 fields: Vec<FieldChange>| {
        ObjectChange {
            change,
            datacenter: r.datacenter().key().to_string(),
            kind: r.kind().name().to_string(),
            namespace: r.namespace().to_string(),
            name: r.name().to_string(),
            uid: r.uid().to_string(),
            phase_before: prev.and_then(Resource::phase).map(str::to_string),
            phase_after: next.and_then(Resource::phase).map(str::to_string),
            fields,
        }
    };
    for kind in Kind::ALL {
        for r in before.list(*kind) {
            let key = ObjectKey::of(r);
            match after.get_key(&key) {
                None if passes(r) => out.push(entry(
                    ObjectChangeType::Removed,
                    r,
                    Some(r),
                    None,
                    Vec::new(),
                )),
                Some(now) if (passes(r) || passes(now)) && r != now => {
                    if now.uid() != r.uid() {
                        // The same name, another object: one went, one came.
                        out.push(entry(
                            ObjectChangeType::Removed,
                            r,
                            Some(r),
                            None,
                            Vec::new(),
                        ));
                        out.push(entry(
                            ObjectChangeType::Added,
                            now,
                            None,
                            Some(now),
                            Vec::new(),
                        ));
                        continue;
                    }
                    // Equal but for the resourceVersion: not a change.
                    let fields = field_changes(r, now);
                    if !fields.is_empty() {
                        out.push(entry(
                            ObjectChangeType::Changed,
                            now,
                            Some(r),
                            Some(now),
                            fields,
                        ));
                    }
                }
                _ => {}
            }
        }
        for r in after.list(*kind) {
            if before.get_key(&ObjectKey::of(r)).is_none() && passes(r) {
                out.push(entry(ObjectChangeType::Added, r, None, Some(r), Vec::new()));
            }
        }
    }
    out
}

/// The fields that differ, `metadata.resourceVersion` left out.
fn field_changes(a: &Resource, b: &Resource) -> Vec<FieldChange> {
    let strip = |r: &Resource| {
        let mut v = r.to_value();
        if let Some(m) = v.get_mut("metadata").and_then(|m| m.as_object_mut()) {
            m.remove("resourceVersion");
        }
        v
    };
    crate::history::diff(&strip(a), &strip(b))
        .into_iter()
        .map(|d| FieldChange {
            path: d["path"].as_str().unwrap_or_default().to_string(),
            before: async_graphql::Json(d["before"].clone()),
            after: async_graphql::Json(d["after"].clone()),
        })
        .collect()
}

/// Each datacenter's state at a past moment, as the history recorded it (when it last changed
/// before then); when it was last proven current is not kept.
pub async fn datacenters_at(
    ctx: &Context<'_>,
    at_ms: i64,
) -> async_graphql::Result<Vec<crate::source::datacenters::DatacenterReport>> {
    let (_, db) = history_db(ctx.data_opt::<Arc<History>>())?;
    let rows = crate::history::timeline::read::datacenter_states(&db, at_ms)
        .await
        .map_err(|e| refused(&PastError::Db(e)))?;
    Ok(rows
        .into_iter()
        .filter_map(|(key, state, error)| {
            Some(crate::source::datacenters::DatacenterReport {
                key: crate::model::Datacenter::new(&key),
                state: serde_json::from_value(serde_json::Value::String(state)).ok()?,
                last_synced_at: None,
                age_seconds: None,
                last_error: error,
            })
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn asked(query: &str, variables: serde_json::Value) -> Result<Option<i64>, String> {
        let doc = async_graphql::parser::parse_query(query).expect("parses");
        let vars = Variables::from_json(variables);
        moment(&doc, None, &vars).map_err(|e| e.message)
    }

    #[test]
    fn the_moment_an_operation_asks_for() {
        let t = "2026-11-29T03:00:00Z";
        let ms = t.parse::<jiff::Timestamp>().expect("time").as_millisecond();
        assert_eq!(
            asked("{ clusters { totalCount } }", serde_json::json!({})),
            Ok(None)
        );
        assert_eq!(
            asked(
                &format!("{{ at(time: \"{t}\") {{ sequence }} }}"),
                serde_json::json!({})
            ),
            Ok(Some(ms))
        );
        // Through a variable, a fragment and an alias; two `at`s of one moment are one moment.
        assert_eq!(
            asked(
                "query($t: String!) { ...F b: at(time: $t) { sequence } __typename } fragment F on Query { a: at(time: $t) { sequence } }",
                serde_json::json!({"t": t}),
            ),
            Ok(Some(ms))
        );
        let mixed = asked(
            &format!("{{ at(time: \"{t}\") {{ sequence }} sequence }}"),
            serde_json::json!({}),
        );
        assert!(mixed.is_err_and(|e| e.contains("only field at the root")));
        let two = asked(
            &format!(
                "{{ a: at(time: \"{t}\") {{ sequence }} b: at(time: \"2026-11-29T04:00:00Z\") {{ sequence }} }}"
            ),
            serde_json::json!({}),
        );
        assert!(two.is_err_and(|e| e.contains("same moment")));
        let bad = asked(
            "{ at(time: \"yesterday\") { sequence } }",
            serde_json::json!({}),
        );
        assert!(bad.is_err_and(|e| e.contains("RFC 3339")));
        let missing = asked(
            "query($t: String) { at(time: $t) { sequence } }",
            serde_json::json!({}),
        );
        assert!(missing.is_err_and(|e| e.contains("RFC 3339")));
    }
}
