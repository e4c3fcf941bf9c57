//! How a partial object lands on a whole one: maps merged key by key, lists and scalars replaced,
//! `null` removing a key. That is a JSON merge patch (RFC 7386), and what server-side apply does
//! for the fields of a CRD without list-type markers (every list of the `vitistack.io` CRDs is
//! atomic); the embedded source applies it to reach the state the API server would reach.

use serde_json::Value;

pub use crate::model::merge_patch::apply as merge;

/// True when `whole` shows every field `part` sets (maps key by key; lists item by item, of the
/// same length; scalars equal; a `null` in `part` means the key is absent). Fields `whole` has
/// beyond `part` do not matter: the API server adds defaults, in list items too.
pub fn shows(whole: &Value, part: &Value) -> bool {
    match (whole, part) {
        (Value::Object(w), Value::Object(p)) => p.iter().all(|(k, v)| match (w.get(k), v) {
            (None, Value::Null) => true,
            (Some(_), Value::Null) | (None, _) => false,
            (Some(wv), pv) => shows(wv, pv),
        }),
        (Value::Array(w), Value::Array(p)) => {
            w.len() == p.len() && w.iter().zip(p).all(|(w, p)| shows(w, p))
        }
        (Value::Number(a), Value::Number(b)) => a.as_f64() == b.as_f64(),
        (w, p) => w == p,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn maps_merge_lists_and_scalars_replace_null_removes() {
        let mut whole = json!({"metadata": {"name": "a", "annotations": {"x": "1", "y": "2"}},
                               "spec": {"pools": [{"name": "p", "replicas": 1}, {"name": "q"}], "n": 1}});
        merge(
            &mut whole,
            &json!({"metadata": {"annotations": {"x": null, "z": "3"}},
                    "spec": {"pools": [{"name": "p", "replicas": 2}]}}),
        );
        assert_eq!(
            whole,
            json!({"metadata": {"name": "a", "annotations": {"y": "2", "z": "3"}},
                   "spec": {"pools": [{"name": "p", "replicas": 2}], "n": 1}})
        );
        assert!(shows(
            &whole,
            &json!({"metadata": {"annotations": {"x": null, "z": "3"}}})
        ));
        assert!(shows(&whole, &json!({"spec": {"n": 1.0}})));
        assert!(shows(&whole, &json!({"spec": {"pools": [{"name": "p"}]}})));
        assert!(!shows(
            &whole,
            &json!({"spec": {"pools": [{"replicas": 1}]}})
        ));
        assert!(!shows(
            &whole,
            &json!({"spec": {"pools": [{"name": "p"}, {"name": "q"}]}})
        ));
        assert!(!shows(
            &whole,
            &json!({"metadata": {"annotations": {"y": null}}})
        ));
    }
}
