//! Credentials never leave the server. They are blanked when an object is built
//! ([`super::Resource::from_value`], the one way objects enter the graph), so the store holds no
//! credential, and nothing derived from it can show one: GraphQL (`raw` and typed fields),
//! subscriptions, history diffs, webhook bodies, the database, logs.
//!
//! What counts as a credential is a rule, not a list:
//! - a field whose *name* says so, at any depth, in the CRD schemas and in free-form maps alike
//!   ([`is_secret_name`]: `token`, `password`, `secret`, `userData`, `privateKey`, `kubeconfig`,
//!   `credentials`, … but not references to Secrets such as `secretName` or `credentialsRef`);
//! - every value of a free-form map named `config` or `configuration`, and of any free-form map
//!   under an `authentication` object (provider configuration carries keys);
//! - the few fields the rule cannot see by name ([`EXTRA_PATHS`]), each checked to exist in the
//!   embedded schema by a test;
//! - annotations holding a full copy of the object (`kubectl.kubernetes.io/last-applied-configuration`).
//!
//! The paths the rule finds in each CRD are computed from the embedded schemas
//! (`KindSchema::secret_paths`).

use std::collections::HashMap;
use std::sync::OnceLock;

use serde_json::Value;

use super::Kind;
pub use super::secret_name::{REDACTED, is_secret_name};

/// Annotations that carry a full copy of the object (and so of its credentials).
const SECRET_ANNOTATIONS: &[&str] = &["kubectl.kubernetes.io/last-applied-configuration"];

/// Credential fields the name rule cannot recognise: (kind, path). Each must exist in the
/// embedded schema of every version of the kind (tested).
pub const EXTRA_PATHS: &[(Kind, &str)] = &[
    // A provider's CA bundle is not secret in itself, but it is connection material that was
    // always kept back; keeping it back costs nothing.
    (Kind::MachineProvider, "spec.endpoint.caBundle"),
];

/// One step of a credential path.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Step {
    Field(String),
    /// Every item of an array.
    Items,
    /// Every value of a map.
    Values,
}

fn parse_path(path: &str) -> Vec<Step> {
    let mut steps = Vec::new();
    for part in path.split('.') {
        let name_end = part.find(['[', '{']).unwrap_or(part.len());
        if name_end > 0 {
            steps.push(Step::Field(part[..name_end].to_string()));
        }
        let mut rest = &part[name_end..];
        while let Some(r) = rest.strip_prefix("[]") {
            steps.push(Step::Items);
            rest = r;
        }
        while let Some(r) = rest.strip_prefix("{}") {
            steps.push(Step::Values);
            rest = r;
        }
    }
    steps
}

/// The credential paths of a kind at a version: the rule over its embedded schema, plus
/// [`EXTRA_PATHS`]. Empty for kinds without an embedded schema (their free-form and named
/// fields are still caught by the name rule).
fn paths_of(kind: Kind, version: &str) -> &'static [Vec<Step>] {
    type Table = HashMap<(Kind, String), Vec<Vec<Step>>>;
    static TABLE: OnceLock<Table> = OnceLock::new();
    let table = TABLE.get_or_init(|| {
        let mut t = Table::new();
        for k in Kind::ALL.iter().copied().filter(|k| k.is_vitistack()) {
            for v in k.versions() {
                let mut paths: Vec<Vec<Step>> = super::validation::schema_for(k, v)
                    .map(|s| s.secret_paths.iter().map(|p| parse_path(p)).collect())
                    .unwrap_or_default();
                paths.extend(
                    EXTRA_PATHS
                        .iter()
                        .filter(|(ek, _)| *ek == k)
                        .map(|(_, p)| parse_path(p)),
                );
                t.insert((k, (*v).to_string()), paths);
            }
        }
        t
    });
    table
        .get(&(kind, version.to_string()))
        .map_or(&[], Vec::as_slice)
}

/// Blank every credential in an object's JSON (of `kind` read as `version`), and drop server
/// bookkeeping that is noise to clients (`managedFields`).
pub fn redact_value(kind: Kind, version: &str, value: &mut Value) {
    for path in paths_of(kind, version) {
        blank_path(value, path);
    }
    blank_named(value);
    if let Some(meta) = value.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("managedFields");
        if let Some(ann) = meta.get_mut("annotations").and_then(Value::as_object_mut) {
            for key in SECRET_ANNOTATIONS {
                if ann.contains_key(*key) {
                    ann.insert((*key).to_string(), Value::String(REDACTED.into()));
                }
            }
        }
    }
}

fn blank_path(value: &mut Value, steps: &[Step]) {
    let Some((first, rest)) = steps.split_first() else {
        blank_leaves(value);
        return;
    };
    match (first, value) {
        (Step::Field(name), Value::Object(map)) => {
            if let Some(child) = map.get_mut(name) {
                blank_path(child, rest);
            }
        }
        (Step::Items, Value::Array(items)) => items.iter_mut().for_each(|i| blank_path(i, rest)),
        (Step::Values, Value::Object(map)) => map.values_mut().for_each(|v| blank_path(v, rest)),
        _ => {}
    }
}

/// The name rule at any depth: every value whose key names a credential is blanked.
fn blank_named(value: &mut Value) {
    match value {
        Value::Object(map) => {
            for (k, v) in map.iter_mut() {
                if is_secret_name(k) {
                    blank_leaves(v);
                } else {
                    blank_named(v);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(blank_named),
        _ => {}
    }
}

/// Replace every non-empty string under a value, keeping its shape so typed decoding still works.
fn blank_leaves(value: &mut Value) {
    match value {
        Value::String(s) if !s.is_empty() => *s = REDACTED.into(),
        Value::Array(items) => items.iter_mut().for_each(blank_leaves),
        Value::Object(map) => map.values_mut().for_each(blank_leaves),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credential_names_and_references() {
        for secret in [
            "token",
            "password",
            "bindPassword",
            "client_secret",
            "secret",
            "userData",
            "userDataBase64",
            "privateKey",
            "ssh-private-key",
            "kubeconfig",
            "credentials",
            "apiKey",
            "AWS_SECRET_ACCESS_KEY",
            "bootstrapToken",
            "example.com/token",
        ] {
            assert!(is_secret_name(secret), "{secret}");
        }
        for plain in [
            "secretName",
            "secretNamespace",
            "credentialsRef",
            "kubeconfigSecretRef",
            "userDataSecretRef",
            "clientSecretRef",
            "bindPasswordRef",
            "signingKeyRef",
            "tokenFile",
            "key",
            "name",
            "securityGroups",
            "lastSecurityScan",
            "sshKeys",
            "networkData",
            "caBundle",
        ] {
            assert!(!is_secret_name(plain), "{plain}");
        }
    }

    #[test]
    fn proxmox_token_and_last_applied_are_blanked() {
        let mut v = serde_json::json!({
            "metadata": {"name": "pve", "annotations": {
                "kubectl.kubernetes.io/last-applied-configuration": "{\"spec\":{\"token\":\"s3cr3t\"}}"}},
            "spec": {"endpoint": "https://pve", "port": "8006", "username": "root@pam", "token": "s3cr3t", "name": "pve"}
        });
        redact_value(Kind::ProxmoxConfig, "v1alpha1", &mut v);
        let text = v.to_string();
        assert!(!text.contains("s3cr3t"), "{text}");
        assert_eq!(v["spec"]["token"], REDACTED);
        assert_eq!(v["spec"]["endpoint"], "https://pve");
    }

    #[test]
    fn the_rule_finds_the_credentials_of_the_crds() {
        let paths = |k: Kind| {
            super::super::validation::schema_for(k, k.versions()[0])
                .expect("schema")
                .secret_paths
                .clone()
        };
        let kp = paths(Kind::KubernetesProvider);
        for p in [
            "spec.authentication.providers[].config",
            "spec.backup.config",
            "spec.nodePools[].nodeConfig.os.userData",
            "spec.addons.monitoring.config",
            "spec.observability.logging.config",
            "spec.config",
        ] {
            assert!(kp.contains(&p.to_string()), "{p} not in {kp:?}");
        }
        assert!(
            !kp.iter().any(|p| p.contains("authentication.parameters")),
            "no such path in the CRD: {kp:?}"
        );
        let m = paths(Kind::Machine);
        for p in [
            "spec.userData",
            "spec.cloudInit.userData",
            "spec.cloudInit.userDataBase64",
            "spec.providerConfig.config",
        ] {
            assert!(m.contains(&p.to_string()), "{p} not in {m:?}");
        }
        assert!(paths(Kind::MachineProvider).contains(&"spec.authentication.parameters".into()));
        assert!(paths(Kind::ProxmoxConfig).contains(&"spec.token".into()));
    }

    #[test]
    fn every_extra_path_exists_in_the_embedded_schema() {
        for (kind, path) in EXTRA_PATHS {
            for v in kind.versions() {
                let schema = super::super::validation::schema_for(*kind, v).expect("schema");
                assert!(schema.has_path(path), "{kind} {v} has no {path}");
            }
        }
    }

    #[test]
    fn free_form_maps_are_judged_by_their_keys() {
        let mut v = serde_json::json!({"spec": {"data": {"pool": "fast", "admin-password": "pw1"},
            "tags": {"owner": "team", "deploy_token": "tk1"}}});
        redact_value(Kind::ClusterStorageClass, "v1alpha1", &mut v);
        assert_eq!(v["spec"]["data"]["pool"], "fast");
        assert_eq!(v["spec"]["data"]["admin-password"], REDACTED);
        assert_eq!(v["spec"]["tags"]["owner"], "team");
        assert_eq!(v["spec"]["tags"]["deploy_token"], REDACTED);
    }
}
