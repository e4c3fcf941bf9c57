//! How a check reports: field paths, the API server's wording of each failure, values shown
//! without credentials.

use serde_json::Value;

use super::FieldError;

pub(super) fn str_list(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

pub(super) fn push_field(path: &mut String, key: &str) {
    if !path.is_empty() {
        path.push('.');
    }
    path.push_str(key);
}

pub(super) fn join(path: &str, key: &str) -> String {
    let mut p = path.to_string();
    push_field(&mut p, key);
    p
}

pub(super) fn err(path: &str, reason: &str) -> FieldError {
    FieldError {
        path: path.to_string(),
        reason: reason.to_string(),
    }
}

pub(super) fn type_err(path: &str, value: &Value, expected: &str) -> FieldError {
    let got = match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_f64() => "number",
        Value::Number(_) => "integer",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    };
    err(
        path,
        &format!("Invalid value: \"{got}\": must be of type {expected}"),
    )
}

/// A value as an error message quotes it: shortened, and never a credential's.
pub(super) fn shown(value: &Value, hide: usize) -> String {
    if hide > 0 {
        return format!("\"{}\"", crate::model::secret_name::REDACTED);
    }
    let text = value.to_string();
    if text.chars().count() > 80 {
        format!("{}…", text.chars().take(77).collect::<String>())
    } else {
        text
    }
}
