//! Writes asked for through the API: the object a change would leave is validated as the API
//! server validates it (field errors by path), the change is sent to the active source
//! (server-side apply with field manager `vitistack-graphql` on Kubernetes, the store itself on
//! the embedded source), and the write returns once the store shows it, attributed to whoever
//! asked, so the caller reads its own write and the event log names them.

pub mod cluster;
pub mod events;
pub mod merge;
pub mod vitistack_status;

use crate::error::ErrorCode;
use std::sync::Arc;
use std::time::Duration;

use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams};
use serde_json::{Value, json};

use crate::model::validation::FieldError;
use crate::model::{Datacenter, Kind, Resource};
use crate::store::{ChangeType, ObjectKey, Op, Store};
use events::{EventWriter, Note};

/// The field manager our server-side applies are recorded under.
pub const FIELD_MANAGER: &str = "vitistack-graphql";

/// Where writes go.
#[derive(Clone)]
pub enum Target {
    /// The embedded store (files, demo, database): written directly.
    Embedded,
    /// The Kubernetes API server of the object's datacenter: written there, seen through the
    /// watches.
    Kube(Arc<KubeClients>),
}

/// Clients of the serving runtime's own (the sources' clients are driven on theirs), one per
/// datacenter, each made on its first write from the settings the source has for it now, and
/// made again when those settings or their kubeconfig file changed (a rotated credential, a
/// datacenter's file replaced): a write never goes out with credentials the source dropped.
pub struct KubeClients {
    settings: crate::source::kube::DatacenterSettings,
    made: tokio::sync::Mutex<std::collections::BTreeMap<Datacenter, Made>>,
}

/// A client and what it was made from.
struct Made {
    settings: crate::source::kube::KubeSettings,
    kubeconfig: Vec<u8>,
    client: kube::Client,
}

/// The content of a datacenter's kubeconfig file(s) (`:`-separated; nothing when it has none:
/// in-cluster credentials, whose token file kube-rs reads again by itself).
fn kubeconfig_content(settings: &crate::source::kube::KubeSettings) -> Vec<u8> {
    let mut out = Vec::new();
    for path in settings.kubeconfig.iter().flat_map(|k| k.split(':')) {
        if let Ok(bytes) = std::fs::read(path) {
            out.extend_from_slice(&bytes);
        }
        out.push(0);
    }
    out
}

impl KubeClients {
    /// The client for writes to `datacenter`.
    async fn client(&self, datacenter: &Datacenter) -> Result<kube::Client, ChangeError> {
        let settings = self
            .settings
            .lock()
            .get(datacenter)
            .cloned()
            .ok_or_else(|| {
                ChangeError::new(
                    ErrorCode::NotFound,
                    format!("no datacenter `{datacenter}` is configured"),
                )
            })?;
        let kubeconfig = kubeconfig_content(&settings);
        let mut made = self.made.lock().await;
        if let Some(m) = made.get(datacenter)
            && m.settings == settings
            && m.kubeconfig == kubeconfig
        {
            return Ok(m.client.clone());
        }
        let client = crate::source::kube::client(&settings).await.map_err(|e| {
            ChangeError::new(
                ErrorCode::Unavailable,
                format!("datacenter `{datacenter}` cannot be reached: {e}"),
            )
        })?;
        made.insert(
            datacenter.clone(),
            Made {
                settings,
                kubeconfig,
                client: client.clone(),
            },
        );
        Ok(client)
    }
}

impl Target {
    /// Where writes to `source`'s objects go: the embedded store itself, or the clusters it
    /// watches (through clients of the serving runtime's own).
    pub fn of(source: &crate::source::Source) -> Self {
        match source.kube_settings() {
            None => Target::Embedded,
            Some(settings) => Target::Kube(Arc::new(KubeClients {
                settings,
                made: Default::default(),
            })),
        }
    }
}

/// A change to one object.
#[derive(Clone, Debug)]
pub enum Edit {
    /// Own these fields (an apply configuration: `metadata.name`/`namespace` and the fields to
    /// set). Creates the object when it does not exist.
    Apply(Value),
    /// Remove these annotations (a JSON merge patch setting them to null: server-side apply only
    /// removes fields its own manager set, and a pause may have been set by kubectl).
    RemoveAnnotations(Vec<String>),
    /// Delete the object (its finalizers run as usual).
    Delete,
}

/// Why a write was refused or did not complete.
#[derive(Clone, Debug, PartialEq)]
pub struct ChangeError {
    /// `INVALID`, `NOT_FOUND`, `ALREADY_EXISTS`, `CONFLICT`, `READ_ONLY`, `CAPACITY`,
    /// `REFUSED_BY_CLUSTER`, `NOT_YET_VISIBLE`, `UNAVAILABLE`.
    pub code: ErrorCode,
    /// In plain words.
    pub message: String,
    /// For `INVALID`: each field and what is wrong with it.
    pub fields: Vec<FieldError>,
}

impl ChangeError {
    /// An error without field details.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ChangeError {
            code,
            message: message.into(),
            fields: Vec::new(),
        }
    }

    /// A refusal listing field errors.
    pub fn invalid(what: &str, fields: Vec<FieldError>) -> Self {
        let list: Vec<String> = fields.iter().map(ToString::to_string).collect();
        ChangeError {
            code: ErrorCode::Invalid,
            message: format!("{what} is not valid: {}", list.join("; ")),
            fields,
        }
    }
}

/// What a write did.
#[derive(Clone, Debug)]
pub struct Written {
    /// The object as the store shows it after the write (its last state after a deletion).
    pub object: Arc<Resource>,
    /// False when the object already was as asked: nothing was sent.
    pub changed: bool,
}

/// The Kubernetes Event a change leaves on its object (events.k8s.io/v1), so `kubectl describe`
/// and `kubectl get events` show what this server changed, why, and for whom.
#[derive(Clone, Debug)]
pub struct Announce {
    /// CamelCase, as Kubernetes reasons are (`Scaled`, `DeletionRequested`).
    pub reason: &'static str,
    /// What was done (`Scale`, `Delete`).
    pub action: &'static str,
    /// The sentence a person reads; the actor is added.
    pub note: String,
}

pub use events::EVENT_CONTROLLER;

/// Sends writes to the active source and waits for them to come back through the store.
pub struct Changer {
    store: Arc<Store>,
    target: Target,
    wait: Duration,
    /// This replica's name, as the Events it writes give it (`reportingInstance`).
    instance: Option<String>,
}

impl std::fmt::Debug for Changer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Changer")
            .field("kube", &self.is_kube())
            .field("wait", &self.wait)
            .finish()
    }
}

/// A field error.
pub fn field(path: &str, reason: impl Into<String>) -> FieldError {
    FieldError {
        path: path.to_string(),
        reason: reason.into(),
    }
}

/// The object's full JSON with `apiVersion` and `kind`.
pub fn full_value(r: &Resource) -> Value {
    let mut v = r.to_value();
    if let Some(m) = v.as_object_mut() {
        m.insert(
            "apiVersion".into(),
            json!(r.kind().api_version(r.version())),
        );
        m.insert("kind".into(), json!(r.kind().name()));
    }
    v
}

/// Validate a whole object as the API server would; the object the store would hold.
pub fn validate(kind: Kind, version: &str, mut value: Value) -> Result<Resource, ChangeError> {
    if let Some(m) = value.as_object_mut() {
        m.insert("apiVersion".into(), json!(kind.api_version(version)));
        m.insert("kind".into(), json!(kind.name()));
    }
    let report = crate::source::manifest::read_value("<mutation>", value);
    if !report.errors.is_empty() {
        let object = report.errors.iter().find_map(|e| e.object.clone());
        let fields = report
            .errors
            .into_iter()
            .map(|e| field(&e.path, e.reason))
            .collect();
        return Err(ChangeError::invalid(
            object.as_deref().unwrap_or(kind.name()),
            fields,
        ));
    }
    report.objects.into_iter().next().ok_or_else(|| {
        ChangeError::new(ErrorCode::Invalid, format!("not a {} object", kind.name()))
    })
}

impl Changer {
    /// Writes to `target`, waiting up to `wait` for each to show in `store`.
    pub fn new(store: Arc<Store>, target: Target, wait: Duration) -> Self {
        Changer {
            store,
            target,
            wait,
            instance: None,
        }
    }

    /// Name this replica in the Events it writes (`POD_NAME`).
    pub fn reporting_as(mut self, instance: Option<String>) -> Self {
        self.instance = instance;
        self
    }

    /// The store writes come back to.
    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }

    /// True when writes go to a Kubernetes API server.
    pub fn is_kube(&self) -> bool {
        matches!(self.target, Target::Kube(_))
    }

    /// Apply `edit` to the object `key` (of `version`), as `actor`; on a Kubernetes API server,
    /// a write that changed something leaves `announce` as an Event on the object (sent in the
    /// background: an Event that cannot be written is logged, the write stands).
    pub async fn write_announced(
        &self,
        key: &ObjectKey,
        version: &str,
        edit: Edit,
        actor: &Arc<str>,
        announce: Announce,
    ) -> Result<Written, ChangeError> {
        let result = self.write(key, version, edit, actor).await;
        let written = match &result {
            Ok(w) if w.changed => true,
            Err(e) => e.code == ErrorCode::NotYetVisible,
            Ok(_) => false,
        };
        if written && let Some(events) = EventWriter::of(&self.target, self.instance.clone()) {
            let uid = result
                .as_ref()
                .ok()
                .and_then(|w| w.object.meta().uid.clone());
            events.publish(
                key,
                version,
                uid,
                Note {
                    warning: false,
                    reason: announce.reason.into(),
                    action: announce.action.into(),
                    text: format!("{} (by {actor})", announce.note),
                },
            );
        }
        result
    }

    /// Apply `edit` to the object `key` (of `version`), as `actor`.
    pub async fn write(
        &self,
        key: &ObjectKey,
        version: &str,
        edit: Edit,
        actor: &Arc<str>,
    ) -> Result<Written, ChangeError> {
        let current = self.store.snapshot().get_key(key).cloned();
        let what = key.to_string();
        // The object the change leaves, validated before anything is sent.
        let after = match (&edit, &current) {
            (Edit::Delete, None) | (Edit::RemoveAnnotations(_), None) => {
                return Err(ChangeError::new(
                    ErrorCode::NotFound,
                    format!("{what} does not exist"),
                ));
            }
            (Edit::Delete, Some(c)) => {
                if c.meta().deletion_timestamp.is_some() {
                    return Ok(Written {
                        object: c.clone(),
                        changed: false,
                    });
                }
                None
            }
            (Edit::Apply(config), c) => {
                let mut whole = c.as_deref().map_or(json!({}), full_value);
                merge::merge(&mut whole, config);
                Some(validate(key.kind, version, whole)?.in_datacenter(&key.datacenter))
            }
            (Edit::RemoveAnnotations(names), Some(c)) => {
                let mut whole = full_value(c);
                merge::merge(&mut whole, &remove_annotations(names));
                Some(validate(key.kind, version, whole)?.in_datacenter(&key.datacenter))
            }
        };
        if let (Some(after), Some(c)) = (&after, &current)
            && crate::store::same_content(after, c)
        {
            return Ok(Written {
                object: c.clone(),
                changed: false,
            });
        }
        let intent: crate::store::Intent = match &edit {
            Edit::Apply(config) => {
                // The store's objects carry no apiVersion and kind.
                let mut config = config.clone();
                if let Some(m) = config.as_object_mut() {
                    m.remove("apiVersion");
                    m.remove("kind");
                }
                Box::new(move |c| {
                    c.change != ChangeType::Deleted && merge::shows(&c.object.to_value(), &config)
                })
            }
            Edit::RemoveAnnotations(names) => {
                let names = names.clone();
                Box::new(move |c| {
                    c.change != ChangeType::Deleted
                        && names.iter().all(|n| c.object.annotation(n).is_none())
                })
            }
            Edit::Delete => Box::new(|c| {
                c.change == ChangeType::Deleted || c.object.meta().deletion_timestamp.is_some()
            }),
        };
        let mut seen = self.store.expect(key.clone(), Some(actor.clone()), intent);
        let sent = match &self.target {
            Target::Embedded => {
                let op = match after {
                    Some(r) => Op::Upsert(r),
                    None => Op::Delete(key.clone()),
                };
                self.store.apply(vec![op]);
                String::new()
            }
            Target::Kube(clients) => {
                let client = clients.client(&key.datacenter).await?;
                send(&client, key, version, &edit).await?
            }
        };
        if !sent.is_empty() {
            use tokio::sync::oneshot::error::TryRecvError;
            match seen.try_recv() {
                Ok(change) => {
                    return Ok(Written {
                        object: change.object.clone(),
                        changed: true,
                    });
                }
                // The API server found nothing to change (our graph was behind it): the object
                // it answered with is the one the store holds already.
                Err(TryRecvError::Empty) => {
                    let settled = self.store.settled();
                    if let Ok(change) = seen.try_recv() {
                        return Ok(Written {
                            object: change.object.clone(),
                            changed: true,
                        });
                    }
                    if let Some(held) = settled.get_key(key)
                        && held.meta().resource_version.as_deref() == Some(sent.as_str())
                    {
                        return Ok(Written {
                            object: held.clone(),
                            changed: false,
                        });
                    }
                }
                Err(TryRecvError::Closed) => {}
            }
        }
        match tokio::time::timeout(self.wait, seen).await {
            Ok(Ok(change)) => Ok(Written {
                object: change.object.clone(),
                changed: true,
            }),
            _ => Err(ChangeError::new(
                ErrorCode::NotYetVisible,
                format!(
                    "{what} was written{} but the watch has not shown the change within {} s; \
                     it will appear when the watch catches up",
                    if sent.is_empty() {
                        String::new()
                    } else {
                        format!(" (resourceVersion {sent})")
                    },
                    self.wait.as_secs()
                ),
            )),
        }
    }
}

/// The fields our manager applied before, with their live values: the paths its
/// `managedFields` entry (operation Apply) lists, taken from `live`. Entries below a list
/// (`k:`/`v:` keys of associative lists, which the vitistack CRDs do not have) count as the
/// whole list.
pub fn owned_fields(live: &Value) -> Value {
    let Some(entry) = live["metadata"]["managedFields"].as_array().and_then(|fs| {
        fs.iter()
            .find(|f| f["manager"] == FIELD_MANAGER && f["operation"] == "Apply")
    }) else {
        return json!({});
    };
    let mut paths = Vec::new();
    collect_paths(&entry["fieldsV1"], &mut Vec::new(), &mut paths);
    let mut out = json!({});
    for path in paths {
        if path.first().map(String::as_str) == Some("metadata")
            && matches!(
                path.get(1).map(String::as_str),
                Some("name" | "namespace" | "resourceVersion")
            )
        {
            continue;
        }
        let Some(value) = path.iter().try_fold(live, |v, k| v.get(k)) else {
            continue;
        };
        let mut at = &mut out;
        for k in &path {
            if !at.is_object() {
                *at = json!({});
            }
            at = at
                .as_object_mut()
                .map(|m| m.entry(k.clone()).or_insert(Value::Null))
                .expect("an object");
        }
        *at = value.clone();
    }
    out
}

/// Field paths of a FieldsV1 set (`f:<name>` keys; a leaf `{}` or anything else ends a path).
fn collect_paths(set: &Value, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    let Some(m) = set.as_object().filter(|m| !m.is_empty()) else {
        if !prefix.is_empty() {
            out.push(prefix.clone());
        }
        return;
    };
    if m.keys().any(|k| !k.starts_with("f:") && k != ".") {
        // Items of a list: the list is the field.
        out.push(prefix.clone());
        return;
    }
    for (k, v) in m {
        if let Some(name) = k.strip_prefix("f:") {
            prefix.push(name.to_string());
            collect_paths(v, prefix, out);
            prefix.pop();
        }
    }
}

fn remove_annotations(names: &[String]) -> Value {
    let annotations: serde_json::Map<String, Value> =
        names.iter().map(|n| (n.clone(), Value::Null)).collect();
    json!({"metadata": {"annotations": annotations}})
}

/// Send one edit to the API server; the resourceVersion it answered with.
async fn send(
    client: &kube::Client,
    key: &ObjectKey,
    version: &str,
    edit: &Edit,
) -> Result<String, ChangeError> {
    let ar = crate::source::kube::api_resource(key.kind, version);
    let api: Api<DynamicObject> = if key.kind.namespaced() {
        Api::namespaced_with(client.clone(), &key.namespace, &ar)
    } else {
        Api::all_with(client.clone(), &ar)
    };
    let rv = |o: DynamicObject| o.metadata.resource_version.unwrap_or_default();
    let sent = match edit {
        Edit::Apply(change) => {
            // An apply states everything its manager wants: a field it set before and leaves
            // out now would be removed. So the fields we own keep their live values, and the
            // change goes on top; the live object's resourceVersion makes it a precondition
            // (a concurrent write answers 409 and is read again).
            let mut attempt = 0;
            loop {
                attempt += 1;
                let live = match api.get_opt(&key.name).await {
                    Ok(o) => o,
                    Err(e) => return Err(refused(key, e)),
                };
                let mut config = match &live {
                    Some(o) => owned_fields(&serde_json::to_value(o).unwrap_or_default()),
                    None => json!({}),
                };
                merge::merge(&mut config, change);
                if let Some(m) = config.as_object_mut() {
                    m.insert("apiVersion".into(), json!(ar.api_version));
                    m.insert("kind".into(), json!(ar.kind));
                }
                if let Some(rv) = live
                    .as_ref()
                    .and_then(|o| o.metadata.resource_version.clone())
                {
                    config["metadata"]["resourceVersion"] = json!(rv);
                }
                // Forced: the user asked for exactly this value, whoever set the field before.
                match api
                    .patch(
                        &key.name,
                        &PatchParams::apply(FIELD_MANAGER).force(),
                        &Patch::Apply(config),
                    )
                    .await
                {
                    Err(kube::Error::Api(s)) if s.code == 409 && attempt < 3 => continue,
                    other => break other.map(rv),
                }
            }
        }
        Edit::RemoveAnnotations(names) => {
            let params = PatchParams {
                field_manager: Some(FIELD_MANAGER.into()),
                ..Default::default()
            };
            api.patch(&key.name, &params, &Patch::Merge(remove_annotations(names)))
                .await
                .map(rv)
        }
        Edit::Delete => api
            .delete(&key.name, &DeleteParams::default())
            .await
            .map(|e| e.left().map(rv).unwrap_or_default()),
    };
    sent.map_err(|e| refused(key, e))
}

/// The API server's refusal in our words (its message is about the object, never a secret: the
/// server's own credentials are not in it).
fn refused(key: &ObjectKey, e: kube::Error) -> ChangeError {
    match e {
        kube::Error::Api(s) => {
            let code = match s.code {
                404 => ErrorCode::NotFound,
                409 => ErrorCode::Conflict,
                422 => ErrorCode::Invalid,
                _ => ErrorCode::RefusedByCluster,
            };
            let mut err = ChangeError::new(
                code,
                format!(
                    "the Kubernetes API refused the change to {key} ({} {}): {}",
                    s.code, s.reason, s.message
                ),
            );
            if let Some(details) = s.details {
                err.fields = details
                    .causes
                    .into_iter()
                    .map(|c| field(&c.field, c.message))
                    .collect();
            }
            err
        }
        other => {
            tracing::warn!(object = %key, error = %other, "write to the Kubernetes API failed");
            ChangeError::new(
                ErrorCode::Unavailable,
                format!("the Kubernetes API could not be reached to change {key}"),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owned_fields_are_read_back_from_our_managed_fields_entry() {
        let live = json!({
            "metadata": {"name": "a", "namespace": "t", "annotations": {"mine": "1", "theirs": "2"},
                "managedFields": [
                    {"manager": FIELD_MANAGER, "operation": "Apply", "fieldsV1": {
                        "f:metadata": {"f:annotations": {"f:mine": {}}, "f:name": {}},
                        "f:spec": {"f:pools": {}, "f:list": {"k:{\"name\":\"x\"}": {".": {}}}}}},
                    {"manager": "kubectl", "operation": "Apply", "fieldsV1": {
                        "f:metadata": {"f:annotations": {"f:theirs": {}}}}}]},
            "spec": {"pools": [{"name": "p", "replicas": 3}], "list": [{"name": "x"}], "other": 1}
        });
        assert_eq!(
            owned_fields(&live),
            json!({"metadata": {"annotations": {"mine": "1"}},
                   "spec": {"pools": [{"name": "p", "replicas": 3}], "list": [{"name": "x"}]}})
        );
        assert_eq!(owned_fields(&json!({"metadata": {}})), json!({}));
    }
}
