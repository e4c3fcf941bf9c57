//! Kubernetes Events (events.k8s.io/v1) this server writes about objects of the graph, so
//! `kubectl describe` and `kubectl get events` show what it changed (mutations, `Normal`) and
//! what it saw go wrong (an operator going unhealthy, `Warning`). Written through kube-runtime's
//! `Recorder` with the datacenter's client, in the background: an Event the API server refuses
//! is logged and nothing else waits for it.

use std::sync::Arc;

use kube::runtime::events::{Event, EventType, Recorder, Reporter};

use super::{KubeClients, Target};
use crate::store::ObjectKey;

/// The reporting controller of the Events this server writes.
pub const EVENT_CONTROLLER: &str = "vitistack.io/vitistack-graphql";

/// One Event to write.
#[derive(Clone, Debug)]
pub struct Note {
    /// `Normal` or `Warning`.
    pub warning: bool,
    /// CamelCase, as Kubernetes reasons are (`Scaled`, `OperatorUnhealthy`).
    pub reason: String,
    /// What was done or seen (`Scale`, `Check`).
    pub action: String,
    /// The sentence a person reads.
    pub text: String,
}

/// Writes Events on the Kubernetes API server of each object's datacenter.
#[derive(Clone)]
pub struct EventWriter {
    clients: Arc<KubeClients>,
    /// This replica's name (`reportingInstance`, `POD_NAME`).
    instance: Option<String>,
}

impl EventWriter {
    /// A writer when writes go to Kubernetes; None on the embedded source (nothing to write to).
    pub fn of(target: &Target, instance: Option<String>) -> Option<Self> {
        match target {
            Target::Kube(clients) => Some(EventWriter {
                clients: clients.clone(),
                instance,
            }),
            Target::Embedded => None,
        }
    }

    /// Write `note` about the object `key` (served as `version`, with `uid` when known), in the
    /// background.
    pub fn publish(&self, key: &ObjectKey, version: &str, uid: Option<String>, note: Note) {
        let reference = k8s_openapi::api::core::v1::ObjectReference {
            api_version: Some(format!("{}/{version}", key.kind.group())),
            kind: Some(key.kind.name().to_string()),
            name: Some(key.name.to_string()),
            namespace: (!key.namespace.is_empty()).then(|| key.namespace.to_string()),
            uid,
            ..Default::default()
        };
        let (clients, instance, key) = (self.clients.clone(), self.instance.clone(), key.clone());
        tokio::spawn(async move {
            let client = match clients.client(&key.datacenter).await {
                Ok(c) => c,
                Err(e) => {
                    tracing::warn!(object = %key, reason = note.reason, error = %e.message, "no client to write the Event with");
                    return;
                }
            };
            let recorder = Recorder::new(
                client,
                Reporter {
                    controller: EVENT_CONTROLLER.into(),
                    instance,
                },
            );
            let event = Event {
                type_: if note.warning {
                    EventType::Warning
                } else {
                    EventType::Normal
                },
                reason: note.reason.clone(),
                note: Some(note.text),
                action: note.action,
                secondary: None,
            };
            if let Err(e) = recorder.publish(&event, &reference).await {
                tracing::warn!(object = %key, reason = note.reason, error = %e, "the Event could not be written");
            }
        });
    }
}
