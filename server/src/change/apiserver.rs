//! Writes to a datacenter's Kubernetes API server: a client per datacenter (made again when its
//! settings or kubeconfig change), one edit sent as server-side apply, a merge patch or a delete,
//! the fields our manager owns read back, and the API server's refusals in our words.

use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams};
use serde_json::{Value, json};

use super::{ChangeError, Edit, FIELD_MANAGER, field};
use crate::error::ErrorCode;
use crate::model::Datacenter;
use crate::store::ObjectKey;

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
    /// Clients for the datacenters `settings` names, each made on its first write.
    pub(crate) fn new(settings: crate::source::kube::DatacenterSettings) -> Self {
        KubeClients {
            settings,
            made: Default::default(),
        }
    }

    /// The client for writes to `datacenter`.
    pub(crate) async fn client(
        &self,
        datacenter: &Datacenter,
    ) -> Result<kube::Client, ChangeError> {
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

pub(super) fn remove_annotations(names: &[String]) -> Value {
    let annotations: serde_json::Map<String, Value> =
        names.iter().map(|n| (n.clone(), Value::Null)).collect();
    json!({"metadata": {"annotations": annotations}})
}

/// Send one edit to the API server; the resourceVersion it answered with.
pub(super) async fn send(
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
                super::merge::merge(&mut config, change);
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
