//! JSON merge patches (RFC 7386): maps merged key by key, lists and scalars replaced, `null`
//! removing a key. The embedded source applies them as the API server's apply would
//! (`change::merge`), and the timeline keeps each change of an object as one
//! (`history::timeline`).

use serde_json::{Map, Value};

/// Merge `part` into `whole` (apply the patch `part`).
pub fn apply(whole: &mut Value, part: &Value) {
    let Value::Object(fields) = part else {
        *whole = part.clone();
        return;
    };
    if !whole.is_object() {
        *whole = Value::Object(Default::default());
    }
    if let Value::Object(target) = whole {
        for (k, v) in fields {
            if v.is_null() {
                target.remove(k);
            } else {
                apply(target.entry(k.clone()).or_insert(Value::Null), v);
            }
        }
    }
}

/// The JSON merge patch (RFC 7386) that turns `before` into `after`, or None when no patch can
/// (a null inside `after`'s objects reads as "remove" in a merge patch): then the whole object is
/// kept instead.
pub fn diff(before: &Value, after: &Value) -> Option<Value> {
    match (before, after) {
        (Value::Object(a), Value::Object(b)) => {
            let mut out = Map::new();
            for (k, v) in b {
                match a.get(k) {
                    Some(old) if old == v => {}
                    Some(old) if old.is_object() && v.is_object() => {
                        out.insert(k.clone(), diff(old, v)?);
                    }
                    _ => {
                        if contains_null(v) {
                            return None;
                        }
                        out.insert(k.clone(), v.clone());
                    }
                }
            }
            for k in a.keys() {
                if !b.contains_key(k) {
                    out.insert(k.clone(), Value::Null);
                }
            }
            Some(Value::Object(out))
        }
        _ if contains_null(after) => None,
        _ => Some(after.clone()),
    }
}

/// True when a null sits anywhere in `v`'s objects (or `v` is null).
fn contains_null(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Object(m) => m.values().any(contains_null),
        // Arrays are replaced whole by a merge patch: their nulls stay as they are.
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_merge_patch_turns_the_old_object_into_the_new() {
        let before = json!({"metadata": {"labels": {"a": "1", "b": "2"}, "name": "m"},
                            "spec": {"cpu": 2, "disks": [1, 2]}, "status": {"phase": "Pending"}});
        let after = json!({"metadata": {"labels": {"a": "1", "c": "3"}, "name": "m"},
                           "spec": {"cpu": 2, "disks": [1]}, "status": {"phase": "Running", "ip": "10.0.0.1"}});
        let patch = diff(&before, &after).expect("a patch");
        assert_eq!(
            patch,
            json!({"metadata": {"labels": {"b": null, "c": "3"}},
                   "spec": {"disks": [1]}, "status": {"phase": "Running", "ip": "10.0.0.1"}})
        );
        let mut rebuilt = before.clone();
        apply(&mut rebuilt, &patch);
        assert_eq!(rebuilt, after);
        // A null the new object holds cannot be said by a merge patch: no patch, the whole object.
        assert_eq!(diff(&before, &json!({"spec": {"x": null}})), None);
    }
}
