//! Reading manifests: multi-document YAML (or JSON) files and directories, validated the way the API
//! server would validate them. A file is all or nothing: one refused document refuses the whole file.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

use crate::model::kind::GROUP;
use crate::model::validation::schema_for;
use crate::model::{Kind, Resource};

/// Why a document was refused, located by file, document index and field path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ManifestError {
    /// The file as given (or `<input>`).
    pub file: String,
    /// 0-based index of the document within the file (`---` separated).
    pub document: usize,
    /// `Kind namespace/name` when known.
    pub object: Option<String>,
    /// The field path, empty when the document as a whole is wrong.
    pub path: String,
    /// What is wrong.
    pub reason: String,
}

impl fmt::Display for ManifestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} document {}", self.file, self.document)?;
        if let Some(o) = &self.object {
            write!(f, " ({o})")?;
        }
        if self.path.is_empty() {
            write!(f, ": {}", self.reason)
        } else {
            write!(f, ": {}: {}", self.path, self.reason)
        }
    }
}

/// A non-fatal remark about a document (pruned unknown fields, skipped kinds).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ManifestNote {
    /// The file.
    pub file: String,
    /// 0-based document index.
    pub document: usize,
    /// What happened.
    pub message: String,
}

impl fmt::Display for ManifestNote {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} document {}: {}",
            self.file, self.document, self.message
        )
    }
}

/// The result of reading one file.
#[derive(Debug, Default)]
pub struct FileReport {
    /// The file.
    pub file: String,
    /// Valid objects, in document order. Empty when `errors` is not.
    pub objects: Vec<Resource>,
    /// Why documents were refused.
    pub errors: Vec<ManifestError>,
    /// Remarks that did not refuse anything.
    pub notes: Vec<ManifestNote>,
}

impl FileReport {
    /// True when the file may be applied.
    pub fn accepted(&self) -> bool {
        self.errors.is_empty()
    }
}

/// Parse and validate manifest text. `file` only names it in messages.
pub fn parse_str(file: &str, text: &str) -> FileReport {
    let mut report = FileReport {
        file: file.to_string(),
        ..Default::default()
    };
    for (index, doc) in serde_yaml::Deserializer::from_str(text).enumerate() {
        let value = match serde_yaml::Value::deserialize(doc) {
            Ok(v) => v,
            Err(e) => {
                report.errors.push(doc_error(
                    file,
                    index,
                    None,
                    "",
                    format!("not valid YAML: {e}"),
                ));
                break;
            }
        };
        if value.is_null() {
            continue;
        }
        match serde_json::to_value(&value) {
            Ok(json) => read_document(&mut report, index, json),
            Err(e) => report.errors.push(doc_error(
                file,
                index,
                None,
                "",
                format!("cannot be read as JSON: {e}"),
            )),
        }
    }
    if !report.errors.is_empty() {
        report.objects.clear();
    }
    report
}

/// Validate one object given as JSON (a mutation's result): the same checks as a document of a
/// file named `file`.
pub fn read_value(file: &str, json: Value) -> FileReport {
    let mut report = FileReport {
        file: file.to_string(),
        ..Default::default()
    };
    read_document(&mut report, 0, json);
    if !report.errors.is_empty() {
        report.objects.clear();
    }
    report
}

/// Read one file from disk.
pub fn parse_file(path: &Path) -> FileReport {
    let name = path.display().to_string();
    match std::fs::read_to_string(path) {
        Ok(text) => parse_str(&name, &text),
        Err(e) => FileReport {
            file: name.clone(),
            errors: vec![doc_error(
                &name,
                0,
                None,
                "",
                format!("cannot read the file: {e}"),
            )],
            ..Default::default()
        },
    }
}

/// Expand files and directories (recursively, `*.yaml`, `*.yml`, `*.json`, sorted) into file paths.
pub fn expand_paths(paths: &[PathBuf]) -> std::io::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for p in paths {
        if p.is_dir() {
            let mut entries: Vec<PathBuf> = std::fs::read_dir(p)?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .collect();
            entries.sort();
            let (dirs, files): (Vec<_>, Vec<_>) = entries.into_iter().partition(|e| e.is_dir());
            out.extend(files.into_iter().filter(|f| is_manifest(f)));
            out.extend(expand_paths(&dirs)?);
        } else if p.exists() {
            out.push(p.clone());
        } else {
            return Err(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!("{} does not exist", p.display()),
            ));
        }
    }
    Ok(out)
}

fn is_manifest(p: &Path) -> bool {
    matches!(
        p.extension().and_then(|e| e.to_str()),
        Some("yaml" | "yml" | "json")
    )
}

fn read_document(report: &mut FileReport, index: usize, mut json: Value) {
    let file = report.file.clone();
    let Some(map) = json.as_object() else {
        let found = match &json {
            Value::String(_) => "text",
            Value::Array(_) => "a list",
            _ => "a scalar",
        };
        report.errors.push(doc_error(
            &file,
            index,
            None,
            "",
            format!("not a Kubernetes object: expected a mapping with apiVersion and kind, found {found}"),
        ));
        return;
    };
    let api_version = map
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let kind_name = map
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    for (field, v) in [("apiVersion", &api_version), ("kind", &kind_name)] {
        if v.is_empty() {
            report.errors.push(doc_error(
                &file,
                index,
                None,
                field,
                "Required value".into(),
            ));
        }
    }
    if api_version.is_empty() || kind_name.is_empty() {
        return;
    }
    let (group, version) = api_version
        .rsplit_once('/')
        .unwrap_or(("", api_version.as_str()));
    if group != GROUP {
        let what = if kind_name == "Secret" {
            "Secret (its contents are never read)"
        } else {
            kind_name.as_str()
        };
        report.notes.push(ManifestNote {
            file,
            document: index,
            message: format!("skipped {what} {api_version}: not a {GROUP} kind"),
        });
        return;
    }
    let Some(kind) = kind_name.parse::<Kind>().ok().filter(|k| k.is_vitistack()) else {
        let hint = match kind_name.as_str() {
            "Datacenter" => " (Datacenter was renamed Vitistack)",
            "LoadBalancer" => " (LoadBalancer was renamed ControlPlaneVirtualSharedIP)",
            _ => "",
        };
        let known: Vec<&str> = Kind::ALL
            .iter()
            .filter(|k| k.is_vitistack())
            .map(|k| k.name())
            .collect();
        report.errors.push(doc_error(
            &file,
            index,
            None,
            "kind",
            format!(
                "Unsupported value: \"{kind_name}\"{hint}: {GROUP} serves {}",
                known.join(", ")
            ),
        ));
        return;
    };
    let schema = match schema_for(kind, version) {
        Ok(s) => s,
        Err(e) => {
            report
                .errors
                .push(doc_error(&file, index, None, "apiVersion", e.to_string()));
            return;
        }
    };
    let meta_errors = check_metadata(kind, &mut json, &mut report.notes, &file, index);
    let object = describe(kind, &json);
    for (path, reason) in meta_errors {
        report
            .errors
            .push(doc_error(&file, index, Some(object.clone()), &path, reason));
    }
    let validation = schema.validate(&mut json);
    for e in validation.errors {
        report.errors.push(doc_error(
            &file,
            index,
            Some(object.clone()),
            &e.path,
            e.reason,
        ));
    }
    if !validation.unknown_fields.is_empty() {
        report.notes.push(ManifestNote {
            file: file.clone(),
            document: index,
            message: format!(
                "{object}: unknown fields pruned as the API server would: {}",
                validation.unknown_fields.join(", ")
            ),
        });
    }
    if !report.errors.is_empty() {
        return;
    }
    // Credentials are blanked as the object is built (`Resource::from_value`): they never
    // reach the store, responses, history, logs or metrics.
    if let Some(m) = json.as_object_mut() {
        m.remove("apiVersion");
        m.remove("kind");
    }
    match Resource::from_value(kind, version, json) {
        Ok(r) => report.objects.push(r),
        Err(e) => report.errors.push(doc_error(
            &file,
            index,
            Some(object),
            "",
            format!("cannot be decoded: {e}"),
        )),
    }
}

/// Validate metadata as the API server does; returns field errors.
fn check_metadata(
    kind: Kind,
    json: &mut Value,
    notes: &mut Vec<ManifestNote>,
    file: &str,
    index: usize,
) -> Vec<(String, String)> {
    let mut errors = Vec::new();
    let Some(obj) = json.as_object_mut() else {
        return errors;
    };
    let meta = obj
        .entry("metadata")
        .or_insert_with(|| Value::Object(Default::default()));
    let Some(meta) = meta.as_object_mut() else {
        errors.push(("metadata".into(), "Invalid value: must be an object".into()));
        return errors;
    };
    match meta.get("name").and_then(Value::as_str) {
        None | Some("") => errors.push((
            "metadata.name".into(),
            "Required value: name is required".into(),
        )),
        Some(name) => {
            if let Some(reason) = dns_subdomain_problem(name) {
                errors.push((
                    "metadata.name".into(),
                    format!("Invalid value: \"{name}\": {reason}"),
                ));
            }
        }
    }
    if kind.namespaced() {
        match meta.get("namespace").and_then(Value::as_str) {
            None | Some("") => {
                meta.insert("namespace".into(), Value::String("default".into()));
            }
            Some(ns) => {
                if let Some(reason) = dns_label_problem(ns) {
                    errors.push((
                        "metadata.namespace".into(),
                        format!("Invalid value: \"{ns}\": {reason}"),
                    ));
                }
            }
        }
    } else if let Some(ns) = meta.remove("namespace") {
        notes.push(ManifestNote {
            file: file.to_string(),
            document: index,
            message: format!(
                "{} is cluster-scoped: metadata.namespace {ns} ignored",
                kind.name()
            ),
        });
    }
    for (field, v) in [
        ("labels", meta.get("labels")),
        ("annotations", meta.get("annotations")),
    ] {
        if let Some(Value::Object(m)) = v {
            for (k, val) in m {
                if !val.is_string() {
                    errors.push((
                        format!("metadata.{field}.{k}"),
                        "Invalid value: must be a string".into(),
                    ));
                }
            }
        }
    }
    for server_field in ["resourceVersion", "managedFields", "selfLink"] {
        meta.remove(server_field);
    }
    errors
}

/// RFC 1123 subdomain rules for object names.
fn dns_subdomain_problem(name: &str) -> Option<&'static str> {
    if name.len() > 253 {
        return Some("must be no more than 253 characters");
    }
    let ok = name.split('.').all(|part| {
        !part.is_empty()
            && part
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            && !part.starts_with('-')
            && !part.ends_with('-')
    });
    (!ok).then_some(
        "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character",
    )
}

/// RFC 1123 label rules for namespaces.
pub fn dns_label_problem(name: &str) -> Option<&'static str> {
    if name.len() > 63 || name.contains('.') {
        return Some("a namespace must be an RFC 1123 label of at most 63 characters");
    }
    dns_subdomain_problem(name)
}

fn describe(kind: Kind, json: &Value) -> String {
    let meta = json.get("metadata");
    let name = meta
        .and_then(|m| m.get("name"))
        .and_then(Value::as_str)
        .unwrap_or("<unnamed>");
    match meta
        .and_then(|m| m.get("namespace"))
        .and_then(Value::as_str)
    {
        Some(ns) if kind.namespaced() => format!("{} {ns}/{name}", kind.name()),
        _ => format!("{} {name}", kind.name()),
    }
}

fn doc_error(
    file: &str,
    document: usize,
    object: Option<String>,
    path: &str,
    reason: String,
) -> ManifestError {
    ManifestError {
        file: file.to_string(),
        document,
        object,
        path: path.to_string(),
        reason,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_bad_document_refuses_the_whole_file() {
        let text = "apiVersion: vitistack.io/v1alpha1\nkind: MachineClass\nmetadata: {name: ok}\nspec:\n  cpu: {cores: 2}\n  memory: {quantity: 4Gi}\n  machineProviders: []\n---\napiVersion: vitistack.io/v1alpha1\nkind: Machine\nmetadata: {name: bad}\nspec: {name: x}\n";
        let r = parse_str("two.yaml", text);
        assert!(r.objects.is_empty());
        assert_eq!(r.errors.len(), 1);
        let e = &r.errors[0];
        assert_eq!(
            (e.document, e.path.as_str(), e.reason.as_str()),
            (1, "spec.provider", "Required value")
        );
        assert_eq!(
            e.to_string(),
            "two.yaml document 1 (Machine default/bad): spec.provider: Required value"
        );
    }

    #[test]
    fn names_and_kinds_are_checked() {
        let r = parse_str(
            "n.yaml",
            "apiVersion: vitistack.io/v1alpha1\nkind: Datacenter\nmetadata: {name: x}\n",
        );
        assert!(
            r.errors[0].reason.contains("renamed Vitistack"),
            "{}",
            r.errors[0]
        );
        let r = parse_str(
            "n.yaml",
            "apiVersion: vitistack.io/v1alpha1\nkind: KubevirtConfig\nmetadata: {name: Bad_Name}\nspec: {name: a, secretNamespace: b, kubeconfigSecretRef: c}\n",
        );
        assert_eq!(r.errors[0].path, "metadata.name");
    }

    #[test]
    fn core_kinds_are_skipped_not_refused() {
        let r = parse_str(
            "cm.yaml",
            "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\ndata: {token: c2VjcmV0}\n",
        );
        assert!(r.accepted() && r.objects.is_empty());
        assert!(r.notes[0].message.contains("never read"));
    }
}
