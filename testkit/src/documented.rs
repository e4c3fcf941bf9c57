//! The old aggregator's documented JSON (`documented.json` beside this file: its REST routes,
//! `/health`, its metrics table and its log line), and a field-by-field comparison against it;
//! shared by the embedded-source and kube-source tests.
#![allow(dead_code)]

use serde_json::Value;

/// The documented shapes, by route.
pub fn documented(route: &str) -> Value {
    let all: Value = serde_json::from_str(include_str!("documented.json")).expect("fixture");
    all.get(route)
        .cloned()
        .unwrap_or_else(|| panic!("{route} is not documented"))
}

/// Where `actual` differs from the documented shape: every documented field present with its
/// type, and no field the documentation does not name (`{}` documents a free-form object). An
/// `operators` object is a map keyed by operator: the documented four must be there, and an
/// operator the old aggregator did not know (nms, manual-ip, static-ip) must have the same shape
/// as they do.
pub fn differences(path: &str, documented: &Value, actual: &Value, out: &mut Vec<String>) {
    match documented {
        Value::Object(fields) if fields.is_empty() => {
            if !actual.is_object() {
                out.push(format!("{path}: an object expected, got {actual}"));
            }
        }
        Value::Object(fields) => {
            let Some(got) = actual.as_object() else {
                out.push(format!("{path}: an object expected, got {actual}"));
                return;
            };
            for (k, d) in fields {
                match got.get(k) {
                    Some(a) => differences(&format!("{path}.{k}"), d, a, out),
                    None => out.push(format!("{path}.{k}: missing")),
                }
            }
            let keyed_by_operator = path.ends_with(".operators");
            for k in got.keys().filter(|k| !fields.contains_key(*k)) {
                match fields.values().next().filter(|_| keyed_by_operator) {
                    Some(shape) => differences(&format!("{path}.{k}"), shape, &got[k], out),
                    None => out.push(format!("{path}.{k}: not documented")),
                }
            }
        }
        Value::Array(items) => {
            let Some(got) = actual.as_array() else {
                out.push(format!("{path}: an array expected, got {actual}"));
                return;
            };
            for (i, a) in got.iter().enumerate() {
                differences(&format!("{path}[{i}]"), &items[0], a, out);
            }
        }
        Value::String(t) => {
            let ok = match t.as_str() {
                "string" => actual.is_string(),
                "integer" => actual.is_u64(),
                "number" => actual.is_number(),
                "boolean" => actual.is_boolean(),
                "timestamp" => actual
                    .as_str()
                    .is_some_and(|s| s.parse::<jiff::Timestamp>().is_ok()),
                choices => actual
                    .as_str()
                    .is_some_and(|s| choices.split('|').any(|c| c == s)),
            };
            if !ok {
                out.push(format!("{path}: {t} expected, got {actual}"));
            }
        }
        other => out.push(format!("{path}: the fixture has {other}")),
    }
}
