//! Label and field selectors on lists and watches, and what a change is to a watch with one.

use super::*;

/// One requirement of a label or field selector.
#[derive(Clone, Debug)]
pub(super) enum Requirement {
    Equals(String, String),
    Differs(String, String),
    Exists(String),
    Absent(String),
}

/// `labelSelector` and `fieldSelector` of a request.
#[derive(Clone, Debug, Default)]
pub(super) struct Selector {
    labels: Vec<Requirement>,
    fields: Vec<Requirement>,
}

impl Selector {
    pub(super) fn parse(q: &HashMap<String, String>) -> Result<Selector, String> {
        fn terms(text: &str, bare: bool) -> Result<Vec<Requirement>, String> {
            let mut out = Vec::new();
            for term in text.split(',').map(str::trim).filter(|t| !t.is_empty()) {
                if term.contains(" in ") || term.contains(" notin ") || term.contains('(') {
                    return Err(format!("set-based selector {term:?} is not supported here"));
                }
                let r = if let Some((k, v)) = term.split_once("!=") {
                    Requirement::Differs(k.trim().into(), v.trim().into())
                } else if let Some((k, v)) = term.split_once("==") {
                    Requirement::Equals(k.trim().into(), v.trim().into())
                } else if let Some((k, v)) = term.split_once('=') {
                    Requirement::Equals(k.trim().into(), v.trim().into())
                } else if !bare {
                    return Err(format!("invalid field selector {term:?}"));
                } else if let Some(k) = term.strip_prefix('!') {
                    Requirement::Absent(k.trim().into())
                } else {
                    Requirement::Exists(term.into())
                };
                out.push(r);
            }
            Ok(out)
        }
        Ok(Selector {
            labels: terms(q.get("labelSelector").map_or("", String::as_str), true)?,
            fields: terms(q.get("fieldSelector").map_or("", String::as_str), false)?,
        })
    }

    pub(super) fn matches(&self, object: &Value) -> bool {
        let label = |k: &str| object["metadata"]["labels"][k].as_str().map(str::to_string);
        let field = |path: &str| {
            let mut v = object;
            for part in path.split('.') {
                v = &v[part];
            }
            match v {
                Value::String(s) => Some(s.clone()),
                Value::Null => None,
                other => Some(other.to_string()),
            }
        };
        let holds = |r: &Requirement, get: &dyn Fn(&str) -> Option<String>| match r {
            Requirement::Equals(k, v) => get(k).as_deref() == Some(v.as_str()),
            // A field that is absent reads as empty (kube-apiserver's field sets hold every
            // selectable field); a label that is absent differs from any value.
            Requirement::Differs(k, v) => get(k).unwrap_or_default() != *v,
            Requirement::Exists(k) => get(k).is_some(),
            Requirement::Absent(k) => get(k).is_none(),
        };
        self.labels.iter().all(|r| holds(r, &label))
            && self
                .fields
                .iter()
                .all(|r| holds(r, &|p: &str| field(p).or_else(|| Some(String::new()))))
    }

    /// How a change looks through the selector: its event type, or None when it is not seen.
    pub(super) fn event(&self, ev: &Ev) -> Option<&'static str> {
        let now = self.matches(&ev.object);
        match (ev.typ, &ev.previous) {
            ("MODIFIED", Some(before)) => match (self.matches(before), now) {
                (true, true) => Some("MODIFIED"),
                (false, true) => Some("ADDED"),
                (true, false) => Some("DELETED"),
                (false, false) => None,
            },
            (typ, _) => now.then_some(typ),
        }
    }
}
