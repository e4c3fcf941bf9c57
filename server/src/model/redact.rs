//! Credentials that must never leave the server: where they sit in each kind, and how they are blanked.

use serde_json::Value;

use super::Kind;

/// What a redacted value reads as.
pub const REDACTED: &str = "<redacted>";

/// Annotations that carry a full copy of the object (and so of its credentials).
const SECRET_ANNOTATIONS: &[&str] = &["kubectl.kubernetes.io/last-applied-configuration"];

/// JSON paths (dot-separated, `[]` = every array item) of credential fields per kind.
fn secret_paths(kind: Kind) -> &'static [&'static str] {
    match kind {
        Kind::ProxmoxConfig => &["spec.token"],
        Kind::Machine => &[
            "spec.userData",
            "spec.cloudInit.userData",
            "spec.cloudInit.userDataBase64",
            "spec.providerConfig.config",
        ],
        Kind::MachineProvider => &[
            "spec.authentication.parameters",
            "spec.endpoint.caBundle",
            "spec.config",
        ],
        Kind::KubernetesProvider => &["spec.authentication.parameters", "spec.config"],
        _ => &[],
    }
}

/// Blank every credential in an object's JSON, and drop server bookkeeping that is noise to clients.
pub fn redact_value(kind: Kind, value: &mut Value) {
    for path in secret_paths(kind) {
        let parts: Vec<&str> = path.split('.').collect();
        blank(value, &parts);
    }
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

fn blank(value: &mut Value, parts: &[&str]) {
    let Some((first, rest)) = parts.split_first() else {
        blank_leaves(value);
        return;
    };
    if let Some(field) = first.strip_suffix("[]") {
        if let Some(Value::Array(items)) = value.get_mut(field) {
            for item in items {
                blank(item, rest);
            }
        }
    } else if let Some(child) = value.get_mut(*first) {
        blank(child, rest);
    }
}

/// Replace every string under a value, keeping its shape so typed decoding still works.
fn blank_leaves(value: &mut Value) {
    match value {
        Value::String(s) => *s = REDACTED.into(),
        Value::Array(items) => items.iter_mut().for_each(blank_leaves),
        Value::Object(map) => map.values_mut().for_each(blank_leaves),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proxmox_token_and_last_applied_are_blanked() {
        let mut v = serde_json::json!({
            "metadata": {"name": "pve", "annotations": {
                "kubectl.kubernetes.io/last-applied-configuration": "{\"spec\":{\"token\":\"s3cr3t\"}}"}},
            "spec": {"endpoint": "https://pve", "port": "8006", "username": "root@pam", "token": "s3cr3t", "name": "pve"}
        });
        redact_value(Kind::ProxmoxConfig, &mut v);
        let text = v.to_string();
        assert!(!text.contains("s3cr3t"), "{text}");
        assert_eq!(v["spec"]["token"], REDACTED);
        assert_eq!(v["spec"]["endpoint"], "https://pve");
    }
}
