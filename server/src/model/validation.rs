//! CRD structural schemas (embedded at build time from `model/schemas/`) and validation against them,
//! the way the API server checks an object: types, required fields, enums, patterns, bounds, formats,
//! the CEL rules we know, defaults applied, unknown fields pruned and reported.

mod report;

use report::{err, join, push_field, shown, str_list, type_err};
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::OnceLock;

use regex::Regex;
use serde_json::Value;

use super::Kind;

macro_rules! embedded {
    ($($file:literal),* $(,)?) => {
        &[$(($file, include_str!(concat!("schemas/", $file)))),*]
    };
}

const EMBEDDED: &[(&str, &str)] = embedded!(
    "clusterstorageclasses.v1alpha1.json",
    "clusterstorages.v1alpha1.json",
    "controlplanevirtualsharedips.v1alpha1.json",
    "etcdbackups.v1alpha1.json",
    "ipallocations.v1alpha2.json",
    "kubernetesclusters.v1alpha1.json",
    "kubernetesproviders.v1alpha1.json",
    "kubevirtconfigs.v1alpha1.json",
    "machineclasses.v1alpha1.json",
    "machineproviders.v1alpha1.json",
    "machines.v1alpha1.json",
    "networkconfigurations.v1alpha1.json",
    "networknamespaces.v1alpha1.json",
    "networknamespaces.v1alpha2.json",
    "proxmoxconfigs.v1alpha1.json",
    "vitistacks.v1alpha1.json",
);

/// One problem with an object, located by field path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldError {
    /// Dotted path with indices, e.g. `spec.networkInterfaces[0].macAddress`.
    pub path: String,
    /// What is wrong, in the API server's words where it has them.
    pub reason: String,
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.reason)
    }
}

/// The outcome of validating one object.
#[derive(Debug, Default)]
pub struct Validation {
    /// Problems that make the API server refuse the object.
    pub errors: Vec<FieldError>,
    /// Fields the schema does not know; the API server prunes them (kubectl --validate=strict refuses them).
    pub unknown_fields: Vec<String>,
    /// Above 0 while checking inside a credential field: its value is not quoted in errors.
    hide: usize,
}

/// A compiled structural schema node.
#[derive(Debug, Default)]
pub struct Schema {
    ty: Option<String>,
    properties: BTreeMap<String, Schema>,
    required: Vec<String>,
    items: Option<Box<Schema>>,
    additional: Option<Box<Schema>>,
    preserve_unknown: bool,
    int_or_string: bool,
    enum_values: Vec<Value>,
    pattern: Option<(String, Regex)>,
    format: Option<String>,
    min_length: Option<u64>,
    max_length: Option<u64>,
    minimum: Option<f64>,
    maximum: Option<f64>,
    min_items: Option<u64>,
    max_items: Option<u64>,
    default: Option<Value>,
    nullable: bool,
    rules: Vec<Rule>,
    /// A credential (see [`super::redact`]): its value is never quoted in an error.
    secret: bool,
}

/// The CEL rules that appear in the CRDs, as far as we evaluate them.
#[derive(Debug)]
enum Rule {
    /// `self % modulus == remainder`, with the CRD's message.
    Modulo {
        modulus: i64,
        remainder: i64,
        message: String,
    },
}

impl Schema {
    fn compile(v: &Value) -> Result<Schema, SchemaError> {
        let mut s = Schema {
            ty: v.get("type").and_then(Value::as_str).map(str::to_string),
            required: str_list(v.get("required")),
            preserve_unknown: v
                .get("x-kubernetes-preserve-unknown-fields")
                .and_then(Value::as_bool)
                == Some(true),
            int_or_string: v.get("x-kubernetes-int-or-string").and_then(Value::as_bool)
                == Some(true),
            enum_values: v
                .get("enum")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default(),
            format: v.get("format").and_then(Value::as_str).map(str::to_string),
            min_length: v.get("minLength").and_then(Value::as_u64),
            max_length: v.get("maxLength").and_then(Value::as_u64),
            minimum: v.get("minimum").and_then(Value::as_f64),
            maximum: v.get("maximum").and_then(Value::as_f64),
            min_items: v.get("minItems").and_then(Value::as_u64),
            max_items: v.get("maxItems").and_then(Value::as_u64),
            default: v.get("default").cloned(),
            nullable: v.get("nullable").and_then(Value::as_bool) == Some(true),
            ..Schema::default()
        };
        if let Some(p) = v.get("pattern").and_then(Value::as_str) {
            let re = Regex::new(p).map_err(|e| SchemaError::Pattern {
                pattern: p.to_string(),
                reason: e.to_string(),
            })?;
            s.pattern = Some((p.to_string(), re));
        }
        if let Some(props) = v.get("properties").and_then(Value::as_object) {
            for (k, sub) in props {
                s.properties.insert(k.clone(), Schema::compile(sub)?);
            }
        }
        if let Some(items) = v.get("items") {
            s.items = Some(Box::new(Schema::compile(items)?));
        }
        if let Some(add) = v.get("additionalProperties") {
            if add.is_object() {
                s.additional = Some(Box::new(Schema::compile(add)?));
            } else if add.as_bool() == Some(true) {
                s.preserve_unknown = true;
            }
        }
        for rule in v
            .get("x-kubernetes-validations")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let text = rule.get("rule").and_then(Value::as_str).unwrap_or_default();
            let message = rule
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or(text)
                .to_string();
            let modulo = modulo_rule().map_err(|e| SchemaError::Rule(e.to_string()))?;
            if let Some(c) = modulo.captures(text) {
                let number = |n: &str| n.parse().map_err(|_| SchemaError::Rule(text.to_string()));
                let modulus = number(&c[1])?;
                let remainder = number(&c[2])?;
                s.rules.push(Rule::Modulo {
                    modulus,
                    remainder,
                    message,
                });
            } else {
                return Err(SchemaError::UnknownRule(text.to_string()));
            }
        }
        Ok(s)
    }

    /// Validate `value` in place: apply defaults, prune unknown fields, collect errors.
    fn check(&self, value: &mut Value, path: &mut String, out: &mut Validation) {
        out.hide += usize::from(self.secret);
        self.check_value(value, path, out);
        out.hide -= usize::from(self.secret);
    }

    fn check_value(&self, value: &mut Value, path: &mut String, out: &mut Validation) {
        if value.is_null() {
            if !self.nullable {
                out.errors
                    .push(err(path, "Invalid value: null: must not be null"));
            }
            return;
        }
        if self.int_or_string {
            if !(value.is_i64() || value.is_u64() || value.is_string()) {
                out.errors.push(err(
                    path,
                    &format!(
                        "Invalid value: {}: must be an integer or a string",
                        shown(value, out.hide)
                    ),
                ));
                return;
            }
            if let (Some((src, re)), Some(s)) = (&self.pattern, value.as_str())
                && !re.is_match(s)
            {
                out.errors.push(err(
                    path,
                    &format!(
                        "Invalid value: {}: should match '{src}'",
                        shown(value, out.hide)
                    ),
                ));
            }
            return;
        }
        match self.ty.as_deref() {
            Some("object") => self.check_object(value, path, out),
            Some("array") => self.check_array(value, path, out),
            Some("string") => self.check_string(value, path, out),
            Some("integer") => self.check_number(value, path, out, true),
            Some("number") => self.check_number(value, path, out, false),
            Some("boolean") if !value.is_boolean() => {
                out.errors.push(type_err(path, value, "boolean"))
            }
            _ => {}
        }
        self.check_enum(value, path, out);
    }

    fn check_object(&self, value: &mut Value, path: &mut String, out: &mut Validation) {
        let Some(map) = value.as_object_mut() else {
            out.errors.push(type_err(path, value, "object"));
            return;
        };
        for (name, prop) in &self.properties {
            if !map.contains_key(name)
                && let Some(d) = &prop.default
            {
                map.insert(name.clone(), d.clone());
            }
        }
        for name in &self.required {
            if !map.contains_key(name) {
                out.errors.push(err(&join(path, name), "Required value"));
            }
        }
        let keys: Vec<String> = map.keys().cloned().collect();
        for key in keys {
            let len = path.len();
            push_field(path, &key);
            if let Some(prop) = self.properties.get(&key) {
                if let Some(child) = map.get_mut(&key) {
                    prop.check(child, path, out);
                }
            } else if let Some(add) = &self.additional {
                if let Some(child) = map.get_mut(&key) {
                    add.check(child, path, out);
                }
            } else if !self.preserve_unknown && !self.properties.is_empty() {
                out.unknown_fields.push(path.clone());
                map.remove(&key);
            }
            path.truncate(len);
        }
    }

    fn check_array(&self, value: &mut Value, path: &mut String, out: &mut Validation) {
        let Some(items) = value.as_array_mut() else {
            out.errors.push(type_err(path, value, "array"));
            return;
        };
        let n = items.len() as u64;
        if let Some(min) = self.min_items
            && n < min
        {
            out.errors.push(err(
                path,
                &format!("Invalid value: {n} items: must have at least {min} items"),
            ));
        }
        if let Some(max) = self.max_items
            && n > max
        {
            out.errors.push(err(
                path,
                &format!("Too many: {n}: must have at most {max} items"),
            ));
        }
        if let Some(item_schema) = &self.items {
            for (i, item) in items.iter_mut().enumerate() {
                let len = path.len();
                path.push_str(&format!("[{i}]"));
                item_schema.check(item, path, out);
                path.truncate(len);
            }
        }
    }

    fn check_string(&self, value: &Value, path: &str, out: &mut Validation) {
        let Some(s) = value.as_str() else {
            out.errors.push(type_err(path, value, "string"));
            return;
        };
        let chars = s.chars().count() as u64;
        if let Some(min) = self.min_length
            && chars < min
        {
            out.errors.push(err(
                path,
                &format!(
                    "Invalid value: {}: should be at least {min} chars long",
                    shown(value, out.hide)
                ),
            ));
        }
        if let Some(max) = self.max_length
            && chars > max
        {
            out.errors.push(err(
                path,
                &format!("Too long: may not be more than {max} bytes (got {chars})"),
            ));
        }
        if let Some((src, re)) = &self.pattern
            && !re.is_match(s)
        {
            out.errors.push(err(
                path,
                &format!(
                    "Invalid value: {}: should match '{src}'",
                    shown(value, out.hide)
                ),
            ));
        }
        if self.format.as_deref() == Some("date-time") && s.parse::<jiff::Timestamp>().is_err() {
            out.errors.push(err(
                path,
                &format!(
                    "Invalid value: {}: must be an RFC 3339 date-time",
                    shown(value, out.hide)
                ),
            ));
        }
    }

    fn check_number(&self, value: &Value, path: &str, out: &mut Validation, integer: bool) {
        let Some(n) = value.as_f64() else {
            out.errors.push(type_err(
                path,
                value,
                if integer { "integer" } else { "number" },
            ));
            return;
        };
        if integer && !(value.is_i64() || value.is_u64()) {
            out.errors.push(type_err(path, value, "integer"));
            return;
        }
        if let Some(min) = self.minimum
            && n < min
        {
            out.errors.push(err(
                path,
                &format!(
                    "Invalid value: {}: must be greater than or equal to {min}",
                    shown(value, out.hide)
                ),
            ));
        }
        if let Some(max) = self.maximum
            && n > max
        {
            out.errors.push(err(
                path,
                &format!(
                    "Invalid value: {}: must be less than or equal to {max}",
                    shown(value, out.hide)
                ),
            ));
        }
        for rule in &self.rules {
            let Rule::Modulo {
                modulus,
                remainder,
                message,
            } = rule;
            if let Some(i) = value.as_i64()
                && *modulus != 0
                && i % modulus != *remainder
            {
                out.errors
                    .push(err(path, &format!("Invalid value: {i}: {message}")));
            }
        }
    }

    fn check_enum(&self, value: &Value, path: &str, out: &mut Validation) {
        if self.enum_values.is_empty() || self.enum_values.contains(value) {
            return;
        }
        let supported: Vec<String> = self.enum_values.iter().map(Value::to_string).collect();
        out.errors.push(err(
            path,
            &format!(
                "Unsupported value: {}: supported values: {}",
                shown(value, out.hide),
                supported.join(", ")
            ),
        ));
    }
}

/// The one CEL shape the CRDs use: `self % N == M`.
fn modulo_rule() -> Result<&'static Regex, regex::Error> {
    static RE: OnceLock<Result<Regex, regex::Error>> = OnceLock::new();
    RE.get_or_init(|| Regex::new(r"^\s*self\s*%\s*(\d+)\s*==\s*(\d+)\s*$"))
        .as_ref()
        .map_err(Clone::clone)
}

impl Schema {
    /// Mark the credential fields below this node (`path` is this node's, dotted) and list
    /// their paths (`[]` = every item of an array, `{}` = every value of a map).
    fn mark_secrets(&mut self, path: &str, out: &mut Vec<String>) {
        let in_auth = path.split(['.', '[', '{']).any(|p| p == "authentication");
        for (name, prop) in &mut self.properties {
            let child = if path.is_empty() {
                name.clone()
            } else {
                format!("{path}.{name}")
            };
            let free_map = prop.properties.is_empty()
                && (prop.additional.is_some() || prop.preserve_unknown)
                && prop.ty.as_deref() == Some("object");
            let config_map =
                free_map && (in_auth || matches!(name.as_str(), "config" | "configuration"));
            if super::secret_name::is_secret_name(name) || config_map {
                prop.secret = true;
                out.push(child);
            } else {
                prop.mark_secrets(&child, out);
            }
        }
        if let Some(items) = &mut self.items {
            items.mark_secrets(&format!("{path}[]"), out);
        }
        if let Some(values) = &mut self.additional {
            values.mark_secrets(&format!("{path}{{}}"), out);
        }
    }

    /// True when `path` (dotted, `[]` for array items) names a field of this schema.
    fn has_path(&self, path: &str) -> bool {
        let mut node = self;
        for part in path.split('.') {
            let (name, arrays) = match part.find("[]") {
                Some(i) => (&part[..i], part[i..].matches("[]").count()),
                None => (part, 0),
            };
            let Some(next) = node.properties.get(name) else {
                return false;
            };
            node = next;
            for _ in 0..arrays {
                let Some(items) = node.items.as_deref() else {
                    return false;
                };
                node = items;
            }
        }
        true
    }
}

/// The compiled schema of one served kind/version.
pub struct KindSchema {
    /// `vitistack.io/v1alpha1`-style version.
    pub version: String,
    root: Schema,
    /// Paths of the credential fields the rule finds in this schema (see [`super::redact`]).
    pub secret_paths: Vec<String>,
}

impl KindSchema {
    /// True when `path` (dotted from the object's root, `[]` for array items) exists.
    pub fn has_path(&self, path: &str) -> bool {
        self.root.has_path(path)
    }

    /// Validate an object's spec and status (metadata is checked by the importer).
    pub fn validate(&self, object: &mut Value) -> Validation {
        let mut out = Validation::default();
        let mut path = String::new();
        if let Some(map) = object.as_object_mut() {
            for (key, sub) in &self.root.properties {
                if matches!(key.as_str(), "apiVersion" | "kind" | "metadata") {
                    continue;
                }
                if let Some(child) = map.get_mut(key) {
                    path.clear();
                    path.push_str(key);
                    sub.check(child, &mut path, &mut out);
                }
            }
            let known: Vec<String> = map
                .keys()
                .filter(|k| !self.root.properties.contains_key(*k))
                .cloned()
                .collect();
            for k in known {
                out.unknown_fields.push(k.clone());
                map.remove(&k);
            }
        }
        out
    }
}

type SchemaTable = HashMap<(Kind, &'static str), KindSchema>;

static SCHEMAS: OnceLock<Result<SchemaTable, SchemaError>> = OnceLock::new();

/// Why there is no schema to check an object against.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum SchemaError {
    /// The version is not one the CRD serves.
    #[error("{group}/{version} is not served; {kind} serves {served}")]
    NotServed {
        group: &'static str,
        version: String,
        kind: &'static str,
        served: String,
    },
    /// An embedded schema file cannot be read (a build defect: the tests load every one).
    #[error("{file}: {reason}")]
    Embedded { file: &'static str, reason: String },
    #[error("pattern {pattern}: {reason}")]
    Pattern { pattern: String, reason: String },
    #[error("rule {0}")]
    Rule(String),
    #[error("CEL rule `{0}` is not understood; teach model::validation about it")]
    UnknownRule(String),
}

/// The schema the API server would apply to `kind` at `version`, or why there is none.
pub fn schema_for(kind: Kind, version: &str) -> Result<&'static KindSchema, SchemaError> {
    let all = SCHEMAS
        .get_or_init(load_all)
        .as_ref()
        .map_err(Clone::clone)?;
    let key = kind.versions().iter().copied().find(|v| *v == version);
    key.and_then(|v| all.get(&(kind, v)))
        .ok_or_else(|| SchemaError::NotServed {
            group: super::kind::GROUP,
            version: version.to_string(),
            kind: kind.name(),
            served: kind.versions().join(", "),
        })
}

fn load_all() -> Result<SchemaTable, SchemaError> {
    let mut map = HashMap::new();
    for &(file, text) in EMBEDDED {
        let embedded = |reason: String| SchemaError::Embedded { file, reason };
        let doc: Value = serde_json::from_str(text).map_err(|e| embedded(e.to_string()))?;
        let kind_name = doc.get("kind").and_then(Value::as_str).unwrap_or_default();
        let version = doc
            .get("version")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let kind: Kind = kind_name.parse().map_err(|e| embedded(format!("{e}")))?;
        let Some(v) = kind.versions().iter().copied().find(|v| *v == version) else {
            return Err(embedded(format!(
                "{kind_name} {version} is not in Kind::versions"
            )));
        };
        let mut root = Schema::compile(doc.get("schema").unwrap_or(&Value::Null))
            .map_err(|e| embedded(e.to_string()))?;
        let mut secret_paths = Vec::new();
        root.mark_secrets("", &mut secret_paths);
        map.insert(
            (kind, v),
            KindSchema {
                version: v.to_string(),
                root,
                secret_paths,
            },
        );
    }
    Ok(map)
}

#[cfg(test)]
mod tests;
