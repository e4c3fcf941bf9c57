//! Writes asked for through the API: the object a change would leave is validated as the API
//! server validates it (field errors by path), the change is sent to the active source
//! (server-side apply with field manager `vitistack-graphql` on Kubernetes, the store itself on
//! the embedded source), and the write returns once the store shows it, attributed to whoever
//! asked, so the caller reads its own write and the event log names them.

pub(crate) mod apiserver;
pub mod cluster;
pub mod events;
pub mod merge;
pub mod vitistack_status;

pub use apiserver::{KubeClients, owned_fields};
use apiserver::{remove_annotations, send};

use crate::error::ErrorCode;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use crate::model::validation::FieldError;
use crate::model::{Kind, Resource};
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

impl Target {
    /// Where writes to `source`'s objects go: the embedded store itself, or the clusters it
    /// watches (through clients of the serving runtime's own).
    pub fn of(source: &crate::source::Source) -> Self {
        match source.kube_settings() {
            None => Target::Embedded,
            Some(settings) => Target::Kube(Arc::new(KubeClients::new(settings))),
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
                .and_then(|w| w.object.meta().uid.as_ref().map(|u| u.to_string()));
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
                if c.meta().deletion_timestamp().is_some() {
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
                c.change == ChangeType::Deleted || c.object.meta().deletion_timestamp().is_some()
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
