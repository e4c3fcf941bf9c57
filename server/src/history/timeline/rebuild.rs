//! From stored rows to typed objects: a checkpoint with the versions after it replayed and
//! typed, or a built moment carried forward by the versions after it (only the objects that
//! changed are read and typed again).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use serde_json::Value;

use super::applications::{APPLICATION, INVENTORY, is_record};
use super::split::{Head, split};
use super::{Body, Inflater, stored_value};
use crate::model::merge_patch;
use crate::model::{Datacenter, Kind, Resource};
use crate::store::{ObjectKey, Snapshot};

/// Why a moment could not be rebuilt.
#[derive(Debug, thiserror::Error)]
pub enum PastError {
    /// The moment is before the oldest one kept (None: nothing is kept yet).
    #[error("{}", trimmed_message(*asked, *oldest))]
    Trimmed {
        /// The moment asked for (ms).
        asked: i64,
        /// The oldest moment kept (ms).
        oldest: Option<i64>,
    },
    /// The moment is not written yet: the timeline's writer is behind (the database is away,
    /// or slow).
    #[error("{}", behind_message(*asked, *through))]
    Behind {
        /// The moment asked for (ms).
        asked: i64,
        /// Every change before this is written (ms; None: nothing yet).
        through: Option<i64>,
    },
    /// The database failed.
    #[error(transparent)]
    Db(#[from] crate::db::DbError),
    /// A stored row does not read back (never written by this server?).
    #[error("the timeline holds a row that does not read back: {0}")]
    Damaged(String),
}

impl From<sqlx::Error> for PastError {
    fn from(e: sqlx::Error) -> Self {
        PastError::Db(e.into())
    }
}

fn behind_message(asked: i64, through: Option<i64>) -> String {
    let asked = crate::history::rfc3339(asked);
    match through {
        Some(t) => format!(
            "the history is written up to {}, not yet up to {asked}: its writer is behind (see /health/database); ask again shortly",
            crate::history::rfc3339(t)
        ),
        None => format!(
            "the history has written nothing yet, so not {asked}: its writer is behind (see /health/database); ask again shortly"
        ),
    }
}

fn trimmed_message(asked: i64, oldest: Option<i64>) -> String {
    let asked = crate::history::rfc3339(asked);
    match oldest {
        Some(o) => format!(
            "{asked} is before the oldest moment the history keeps ({}): older moments were trimmed (HISTORY_MAX_BYTES, HISTORY_RETENTION_DAYS)",
            crate::history::rfc3339(o)
        ),
        None => format!("{asked}: the history keeps no moment yet"),
    }
}

/// Each object's key by its timeline id.
pub type Ids = imbl::HashMap<i64, ObjectKey>;
/// Each application record's JSON by its timeline id.
pub type Records = imbl::OrdMap<i64, Arc<Value>>;

/// A rebuilt moment's parts, before its snapshot is made.
pub struct Typed {
    pub resources: Vec<Resource>,
    pub applications: crate::inventory::Snapshot,
    /// An estimate of the bytes they take in memory with their indexes (a few times their JSON:
    /// typed fields, indexes, derived state).
    pub bytes: usize,
    pub ids: Ids,
    pub records: Records,
}

/// One object to type: its JSON text as the checkpoint holds it (with what it says of itself,
/// read as the checkpoint was split), its JSON read and patched, or its text in the checkpoint
/// (if it is there) with the versions after it, read and applied where it is typed.
enum Work<'a> {
    Text(i64, &'a str, Head<'a>),
    Json(i64, Value),
    Changed(i64, Option<&'a str>, Vec<Option<Body>>),
}

/// A checkpoint with the versions after it applied, typed: each object read as the kind and
/// version its JSON names, in the datacenter the timeline noted, and the application inventory
/// its records say.
///
/// The checkpoint's objects that no version touches (most of them) are typed straight from their
/// JSON text: the checkpoint holds what the store held, whose credentials were blanked when the
/// objects were first built. The others are read as JSON, patched and typed. The versions are
/// decoded on one thread while the checkpoint is inflated and split on the other; the typing runs
/// on two, each object's versions applied where it is typed. (Reading every object into a
/// `serde_json::Value` first, then typing that, took twice as long; the changed objects read and
/// patched on one thread before the typing were a tenth of a cold moment: `cargo bench --bench
/// timeline_query`.)
pub fn rebuilt(
    checkpoint: &[u8],
    versions: Vec<(i64, Option<Vec<u8>>)>,
) -> Result<Typed, PastError> {
    let (json, versions) = std::thread::scope(|s| {
        let bodies = s.spawn(move || decoded(versions));
        let json = super::inflate(checkpoint);
        let versions = bodies
            .join()
            .unwrap_or_else(|_| Err("decoding the versions failed".into()));
        (json, versions)
    });
    let damaged = |e: &dyn std::fmt::Display| PastError::Damaged(format!("a checkpoint: {e}"));
    let json = json.map_err(|e| damaged(&e))?;
    let versions = versions.map_err(PastError::Damaged)?;
    let entries = split(&json).map_err(|e| damaged(&e))?;
    let mut json_bytes = json.len();
    // Each changed object's versions, in order; the objects the checkpoint does not hold in the
    // order they first changed.
    let mut changed: HashMap<i64, Vec<Option<Body>>> = HashMap::new();
    let mut first_seen = Vec::new();
    for (object, len, body) in versions {
        json_bytes += len;
        changed
            .entry(object)
            .or_insert_with(|| {
                first_seen.push(object);
                Vec::new()
            })
            .push(body);
    }
    let mut work = Vec::with_capacity(entries.len() + changed.len());
    for (id, text, head) in entries {
        work.push(match changed.remove(&id) {
            Some(bodies) => Work::Changed(id, Some(text), bodies),
            None => Work::Text(id, text, head),
        });
    }
    for id in first_seen {
        if let Some(bodies) = changed.remove(&id) {
            work.push(Work::Changed(id, None, bodies));
        }
    }
    let count = work.len();
    let (typed, records) = type_both(work)?;
    let records: Records = records
        .into_iter()
        .map(|(id, v)| (id, Arc::new(v)))
        .collect();
    let ids = typed
        .iter()
        .map(|(id, r)| (*id, ObjectKey::of(r)))
        .collect();
    Ok(Typed {
        resources: typed.into_iter().map(|(_, r)| r).collect(),
        applications: inventory(&records)?,
        bytes: 4 * json_bytes + 512 * count,
        ids,
        records,
    })
}

/// An object's JSON after its versions: from its text in the checkpoint (None: not there), each
/// version a deletion, a whole object or a merge patch. None when the last one deleted it.
fn replayed(
    id: i64,
    text: Option<&str>,
    bodies: Vec<Option<Body>>,
) -> Result<Option<Value>, PastError> {
    let mut object = match text {
        Some(t) => Some(
            serde_json::from_str(t)
                .map_err(|e| PastError::Damaged(format!("a checkpoint: {e}")))?,
        ),
        None => None,
    };
    for body in bodies {
        match body {
            None => object = None,
            Some(Body::Full(v)) => object = Some(v),
            Some(Body::Patch(p)) => {
                let Some(target) = &mut object else {
                    return Err(PastError::Damaged(format!(
                        "a change of object {id} the timeline does not hold"
                    )));
                };
                merge_patch::apply(target, &p);
            }
        }
    }
    Ok(object)
}

/// The application inventory the records say (a later record of one application wins: they are
/// in the order they were first kept).
fn inventory(records: &Records) -> Result<crate::inventory::Snapshot, PastError> {
    super::applications::inventory(records.values().map(|v| (**v).clone()).collect())
        .map_err(PastError::Damaged)
}

/// What the versions after a built graph change in it.
pub struct Forward {
    pub removed: Vec<ObjectKey>,
    pub upserted: Vec<Resource>,
    pub ids: Ids,
    pub records: Records,
    /// The application inventory, when a record changed.
    pub applications: Option<crate::inventory::Snapshot>,
}

/// The versions after a built graph (`graph`, with its objects' `base_ids` and its application
/// `base_records`) applied to it: each changed object's JSON is its typed form in `graph` as the
/// timeline keeps it (which is what its versions were written against), with its versions applied
/// in order, then typed again.
pub fn forward(
    graph: &Snapshot,
    base_ids: &Ids,
    base_records: &Records,
    versions: Vec<(i64, Option<Vec<u8>>)>,
) -> Result<Forward, PastError> {
    // Decoded on two threads, half each.
    let (first, second) = in_halves(versions, decoded);
    let mut versions = first.map_err(PastError::Damaged)?;
    versions.extend(second.map_err(PastError::Damaged)?);
    // The objects whose first change here is a patch start from their JSON in `graph`, as the
    // timeline keeps it: written on two threads too.
    let mut seen = HashSet::new();
    let from_graph: Vec<(i64, &Arc<Resource>)> = versions
        .iter()
        .filter(|(object, _, body)| seen.insert(*object) && matches!(body, Some(Body::Patch(_))))
        .filter(|(object, _, _)| !base_records.contains_key(object))
        .filter_map(|(object, _, _)| {
            let r = base_ids.get(object).and_then(|k| graph.get_key(k))?;
            Some((*object, r))
        })
        .collect();
    let as_kept = |rs: Vec<(i64, &Arc<Resource>)>| -> Vec<(i64, Value)> {
        rs.into_iter()
            .map(|(id, r)| (id, stored_value(r)))
            .collect()
    };
    let (first, second) = in_halves(from_graph, as_kept);
    let mut kept: HashMap<i64, Value> = first.into_iter().chain(second).collect();
    let mut touched: HashMap<i64, Option<Value>> = HashMap::new();
    for (object, _, body) in versions {
        match body {
            None => {
                touched.insert(object, None);
            }
            Some(Body::Full(v)) => {
                touched.insert(object, Some(v));
            }
            Some(Body::Patch(p)) => {
                let target =
                    touched
                        .entry(object)
                        .or_insert_with(|| match base_records.get(&object) {
                            Some(v) => Some((**v).clone()),
                            None => kept.remove(&object),
                        });
                let Some(target) = target else {
                    return Err(PastError::Damaged(format!(
                        "a change of object {object} the timeline does not hold"
                    )));
                };
                merge_patch::apply(target, &p);
            }
        }
    }
    let (mut ids, mut records) = (base_ids.clone(), base_records.clone());
    let (mut removed, mut objects, mut records_changed) = (Vec::new(), Vec::new(), false);
    for (id, value) in touched {
        match value {
            Some(v) if is_record(&v) => {
                records.insert(id, Arc::new(v));
                records_changed = true;
            }
            Some(v) => objects.push((id, v)),
            None if records.remove(&id).is_some() => records_changed = true,
            None => removed.extend(ids.remove(&id)),
        }
    }
    let work = objects
        .into_iter()
        .map(|(id, v)| Work::Json(id, v))
        .collect();
    let (typed, _) = type_both(work)?;
    let mut upserted = Vec::with_capacity(typed.len());
    for (id, r) in typed {
        let key = ObjectKey::of(&r);
        if let Some(old) = ids.insert(id, key.clone())
            && old != key
        {
            removed.push(old);
        }
        upserted.push(r);
    }
    let applications = match records_changed {
        true => Some(inventory(&records)?),
        false => None,
    };
    Ok(Forward {
        removed,
        upserted,
        ids,
        records,
        applications,
    })
}

/// The objects typed on two threads, half each (on one when they are few), and the application
/// records among them.
fn type_both(work: Vec<Work<'_>>) -> Result<TypedRows, PastError> {
    let (first, second) = in_halves(work, type_all);
    let (mut objects, mut records) = first?;
    let (more, more_records) = second?;
    objects.extend(more);
    records.extend(more_records);
    Ok((objects, records))
}

/// `f` of each half of `items`, in order: the second half on another thread (both on this one
/// when they are few: a thread costs more than they do).
fn in_halves<T: Send, R: Send>(mut items: Vec<T>, f: impl Fn(Vec<T>) -> R + Sync) -> (R, R) {
    let second = items.split_off(items.len() / 2);
    let f = &f;
    let (second, first) = crate::both::both(items.len() < 32, move || f(second), move || f(items));
    (first, second)
}

/// Versions' bodies read back, with one inflater: (object, stored bytes, body; None for a
/// deletion).
fn decoded(
    versions: Vec<(i64, Option<Vec<u8>>)>,
) -> Result<Vec<(i64, usize, Option<Body>)>, String> {
    let mut inflater = Inflater::default();
    versions
        .into_iter()
        .map(|(object, body)| {
            let len = body.as_ref().map_or(0, Vec::len);
            let body = body
                .map(|b| Body::decode_with(&b, &mut inflater))
                .transpose()?;
            Ok((object, len, body))
        })
        .collect()
}

/// Typed objects and application records, each by its timeline id.
type TypedRows = (Vec<(i64, Resource)>, Vec<(i64, Value)>);

/// Each object read as the kind and version its JSON names, in the datacenter it was kept with;
/// the application records aside, as JSON.
fn type_all(work: Vec<Work<'_>>) -> Result<TypedRows, PastError> {
    let (mut out, mut records) = (Vec::with_capacity(work.len()), Vec::new());
    for item in work {
        match item {
            Work::Text(id, text, head) => {
                let damaged = |why: String| PastError::Damaged(format!("object {id}: {why}"));
                if let Some(APPLICATION | INVENTORY) = head.kind.as_deref() {
                    let v = serde_json::from_str(text).map_err(|e| damaged(e.to_string()))?;
                    records.push((id, v));
                    continue;
                }
                let (kind, version) =
                    kind_version(head.kind.as_deref(), head.api_version.as_deref())
                        .map_err(damaged)?;
                let datacenter = head
                    .datacenter
                    .map_or_else(Datacenter::default, |d| Datacenter::new(&d));
                let r = Resource::from_kept_json(kind, version, text)
                    .map_err(|e| damaged(e.to_string()))?
                    .in_datacenter(&datacenter);
                out.push((id, r));
            }
            Work::Json(id, v) if is_record(&v) => records.push((id, v)),
            Work::Json(id, v) => out.push((id, from_json(id, v)?)),
            Work::Changed(id, text, bodies) => match replayed(id, text, bodies)? {
                Some(v) if is_record(&v) => records.push((id, v)),
                Some(v) => out.push((id, from_json(id, v)?)),
                None => {}
            },
        }
    }
    Ok((out, records))
}

/// An object read as the kind and version its JSON names, in the datacenter it was kept with.
fn from_json(id: i64, mut value: Value) -> Result<Resource, PastError> {
    let damaged = |why: String| PastError::Damaged(format!("object {id}: {why}"));
    let datacenter = match &mut value {
        Value::Object(m) => match m.remove("datacenter") {
            Some(Value::String(d)) => Datacenter::new(&d),
            _ => Datacenter::default(),
        },
        _ => return Err(damaged("not an object".into())),
    };
    let (kind, version) =
        kind_version(value["kind"].as_str(), value["apiVersion"].as_str()).map_err(damaged)?;
    let version = version.to_string();
    Ok(Resource::from_kept_value(kind, &version, value)
        .map_err(|e| damaged(e.to_string()))?
        .in_datacenter(&datacenter))
}

/// The kind and the version (`v1alpha1` of `vitistack.io/v1alpha1`) an object's JSON names.
fn kind_version<'a>(
    kind: Option<&str>,
    api_version: Option<&'a str>,
) -> Result<(Kind, &'a str), String> {
    let kind: Kind = kind
        .and_then(|k| k.parse().ok())
        .ok_or_else(|| format!("kind {kind:?}"))?;
    let version = api_version
        .and_then(|v| v.rsplit('/').next())
        .ok_or_else(|| "no apiVersion".to_string())?;
    Ok((kind, version))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::timeline::applications::Record;
    use crate::history::timeline::encode_checkpoint;
    use serde_json::json;

    /// The objects as the old way read them: every one into JSON, patched, then typed.
    fn through_json(objects: Vec<(i64, Value)>) -> Vec<(i64, Resource)> {
        let work = objects
            .into_iter()
            .map(|(id, v)| Work::Json(id, v))
            .collect();
        let (mut typed, _) = type_all(work).expect("typed");
        typed.sort_by_key(|(id, _)| *id);
        typed
    }

    #[test]
    fn a_checkpoint_typed_from_its_text_equals_it_read_as_json_then_typed() {
        let fleet = crate::source::demo::fleet(&crate::source::demo::FleetSpec::demo());
        let mut kept: Vec<(i64, Value)> = fleet
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let dc = Datacenter::new(if i % 2 == 0 { "oslo" } else { "bergen" });
                (i as i64 + 1, stored_value(&r.clone().in_datacenter(&dc)))
            })
            .collect();
        let record = Record::Datacenter {
            datacenter: Datacenter::new("oslo"),
            kube_system_uid: Some("u-1".into()),
            namespaces: vec!["shop".into()],
        };
        let n = kept.len() as i64;
        kept.push((n + 1, record.value()));
        let checkpoint = encode_checkpoint(&kept);
        // Object 1 patched twice, object 2 deleted, a new one added.
        let patch = |p: Value| Some(Body::Patch(p).encode());
        let added = (n + 2, kept[3].1.clone());
        let mut renamed = added.1.clone();
        renamed["metadata"]["name"] = json!("added");
        let versions = vec![
            (1, patch(json!({"metadata": {"annotations": {"a": "1"}}}))),
            (2, None),
            (
                1,
                patch(json!({"metadata": {"annotations": {"a": "2", "b": "3"}}})),
            ),
            (added.0, Some(Body::Full(renamed.clone()).encode())),
        ];
        let t = rebuilt(&checkpoint, versions).expect("rebuilt");

        let mut expected = kept[..n as usize].to_vec();
        expected[0].1["metadata"]["annotations"]["a"] = json!("2");
        expected[0].1["metadata"]["annotations"]["b"] = json!("3");
        expected.remove(1);
        expected.push((added.0, renamed));
        let expected = through_json(expected);
        let mut got: Vec<(i64, Resource)> = t
            .resources
            .into_iter()
            .map(|r| {
                let key = ObjectKey::of(&r);
                let id = t.ids.iter().find(|(_, k)| **k == key).map(|(id, _)| *id);
                (id.expect("an id"), r)
            })
            .collect();
        got.sort_by_key(|(id, _)| *id);
        assert_eq!(got.len(), expected.len());
        assert!(
            got == expected,
            "typed from text differs from typed from JSON"
        );
        assert!(got.iter().any(|(_, r)| r.datacenter().key() == "bergen"));
        assert_eq!(t.records.len(), 1, "the application record is kept aside");
        assert_eq!(
            t.applications
                .kube_system_uids
                .get(&Datacenter::new("oslo")),
            Some(&"u-1".to_string())
        );

        // Deleted, then made again whole and patched: the last state counts.
        let again = vec![
            (3, None),
            (3, Some(Body::Full(kept[2].1.clone()).encode())),
            (3, patch(json!({"metadata": {"labels": {"back": "yes"}}}))),
        ];
        let t = rebuilt(&checkpoint, again).expect("rebuilt");
        assert_eq!(t.resources.len(), n as usize);
        let back = t.resources.iter().find(|r| {
            let labels = r.meta().labels.as_ref();
            labels.and_then(|l| l.get("back")).is_some()
        });
        assert_eq!(
            back.and_then(|r| r.meta().name.as_deref()),
            kept[2].1["metadata"]["name"].as_str()
        );
        // A patch of an object the timeline does not hold (deleted before it) is refused.
        let orphan = vec![(4, None), (4, patch(json!({"status": {"phase": "x"}})))];
        match rebuilt(&checkpoint, orphan) {
            Err(PastError::Damaged(why)) => assert!(why.contains("object 4"), "{why}"),
            other => panic!("expected a damaged timeline, got {:?}", other.err()),
        }
    }
}
