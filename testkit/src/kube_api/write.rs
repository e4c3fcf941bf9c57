//! Writes and single-object reads: the route of an object, storing and announcing a write in
//! one place, the status subresource, and the JSON paths and merge patch they use.

use super::*;

/// Writes and single-object reads go to their handlers; everything else is list/watch.
pub(super) async fn dispatch(
    State(shared): State<Arc<Shared>>,
    method: axum::http::Method,
    uri: Uri,
    headers: axum::http::HeaderMap,
    query: Query<HashMap<String, String>>,
    body: Bytes,
) -> Response {
    let mut unplugged = shared.unplugged.subscribe();
    let _ = unplugged.wait_for(|on| !*on).await;
    if method == axum::http::Method::POST
        && let Some((id, ns)) = route(uri.path())
    {
        // A namespaced kind is created in a namespace, a cluster-scoped one outside any.
        let namespaced = shared
            .inner
            .lock()
            .resources
            .get(&id)
            .map(|s| s.def.namespaced);
        return match (namespaced, ns) {
            (Some(true), Some(ns)) => create_object(&shared, &id, &ns, &query.0, &body),
            (Some(false), None) => create_object(&shared, &id, "", &query.0, &body),
            (None, _) => no_such_resource(),
            _ => status(
                405,
                "MethodNotAllowed",
                "create a namespaced kind in its namespace, a cluster-scoped one outside any"
                    .into(),
            ),
        };
    }
    let Some((id, ns, name, subresource)) = object_route(uri.path()) else {
        return handle(State(shared), uri, query).await;
    };
    let known = shared
        .inner
        .lock()
        .resources
        .get(&id)
        .is_some_and(|s| s.def.served);
    if !known {
        return no_such_resource();
    }
    match method {
        axum::http::Method::GET => get_object(&shared, &id, &ns, &name),
        axum::http::Method::PATCH => {
            let media = headers
                .get(header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_string();
            if subresource {
                patch_status(&shared, &id, &ns, &name, &media, &body)
            } else {
                patch_object(&shared, &id, &ns, &name, &media, &query.0, &body)
            }
        }
        axum::http::Method::DELETE if subresource => status(
            405,
            "MethodNotAllowed",
            "the status subresource cannot be deleted".into(),
        ),
        axum::http::Method::DELETE => delete_object(&shared, &id, &ns, &name),
        _ => status(
            405,
            "MethodNotAllowed",
            format!("{method} is not supported here"),
        ),
    }
}

/// (resource id, namespace or "", name, whether it is the `status` subresource) from an
/// object path.
pub(super) fn object_route(path: &str) -> Option<(String, String, String, bool)> {
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, version, rest) = match parts.as_slice() {
        ["api", v, rest @ ..] => ("", *v, rest),
        ["apis", g, v, rest @ ..] => (*g, *v, rest),
        _ => return None,
    };
    let (rest, subresource) = match rest {
        [head @ .., "status"] if head.len() == 2 || head.len() == 4 => (head, true),
        _ => (rest, false),
    };
    match rest {
        [plural, name] => Some((
            format!("{group}/{version}/{plural}"),
            String::new(),
            name.to_string(),
            subresource,
        )),
        ["namespaces", ns, plural, name] => Some((
            format!("{group}/{version}/{plural}"),
            ns.to_string(),
            name.to_string(),
            subresource,
        )),
        _ => None,
    }
}

/// Keep `object` (written at `rv`) and tell the watches: ADDED, or MODIFIED over `previous`.
pub(super) fn store(
    shared: &Shared,
    inner: &mut Inner,
    id: &str,
    key: (String, String),
    rv: u64,
    object: Value,
    previous: Option<Value>,
) {
    let namespace = key.0.clone();
    let state = inner.resources.get_mut(id).expect("served resource");
    state.objects.insert(key, object.clone());
    let ev = Ev {
        rv,
        resource: id.to_string(),
        namespace,
        typ: if previous.is_some() {
            "MODIFIED"
        } else {
            "ADDED"
        },
        object,
        previous,
    };
    inner.history.push_back(ev.clone());
    let _ = shared.events.send(ev);
}

/// 409: a write preconditioned on a resourceVersion the object has moved on from.
pub(super) fn moved_on(plural: &str, name: &str) -> Response {
    status(
        409,
        "Conflict",
        format!(
            "Operation cannot be fulfilled on {plural} \"{name}\": the object has been modified; please apply your changes to the latest version and try again"
        ),
    )
}

/// `PATCH …/{plural}/{name}/status` with a JSON merge patch: only `status` changes (the rest of
/// the patch is ignored, as kube-apiserver ignores it on the subresource), a
/// `metadata.resourceVersion` in the patch is a precondition (409 when the object moved on),
/// `generation` stays.
pub(super) fn patch_status(
    shared: &Shared,
    id: &str,
    ns: &str,
    name: &str,
    media: &str,
    body: &[u8],
) -> Response {
    if !media.starts_with("application/merge-patch+json") {
        return status(
            415,
            "UnsupportedMediaType",
            format!("the status subresource here takes application/merge-patch+json (got {media})"),
        );
    }
    let Ok(patch) = serde_json::from_slice::<Value>(body) else {
        return status(400, "BadRequest", "the patch is not valid JSON".into());
    };
    let mut inner = shared.inner.lock();
    let key = (ns.to_string(), name.to_string());
    let state = inner.resources.get_mut(id).expect("served resource");
    let plural = state.def.plural;
    let Some(previous) = state.objects.get(&key).cloned() else {
        return status(404, "NotFound", format!("{plural} \"{name}\" not found"));
    };
    if let Some(want) = patch["metadata"].get("resourceVersion")
        && *want != previous["metadata"]["resourceVersion"]
    {
        return moved_on(plural, name);
    }
    let mut object = previous.clone();
    if let Some(s) = patch.get("status") {
        if object.get("status").is_none() {
            object["status"] = json!({});
        }
        merge_patch(&mut object["status"], s);
    }
    if object == previous {
        return json_response(StatusCode::OK, &previous);
    }
    inner.rv += 1;
    let rv = inner.rv;
    object["metadata"]["resourceVersion"] = json!(rv.to_string());
    store(
        shared,
        &mut inner,
        id,
        key,
        rv,
        object.clone(),
        Some(previous),
    );
    inner.status_writes += 1;
    json_response(StatusCode::OK, &object)
}

pub(super) fn json_response(code: StatusCode, v: &Value) -> Response {
    (
        code,
        [(header::CONTENT_TYPE, "application/json")],
        v.to_string(),
    )
        .into_response()
}

pub(super) fn get_object(shared: &Shared, id: &str, ns: &str, name: &str) -> Response {
    let inner = shared.inner.lock();
    match inner
        .resources
        .get(id)
        .and_then(|s| s.objects.get(&(ns.to_string(), name.to_string())))
    {
        Some(o) => json_response(StatusCode::OK, o),
        None => status(404, "NotFound", format!("{id} \"{name}\" not found")),
    }
}

/// The fields a partial object sets: paths of map keys down to a scalar or a list.
pub(super) fn leaf_paths(
    v: &Value,
    prefix: &mut Vec<String>,
    out: &mut std::collections::BTreeSet<Vec<String>>,
) {
    match v {
        Value::Object(m) if !m.is_empty() => {
            for (k, child) in m {
                prefix.push(k.clone());
                leaf_paths(child, prefix, out);
                prefix.pop();
            }
        }
        _ => {
            out.insert(prefix.clone());
        }
    }
}

pub(super) fn at<'a>(v: &'a Value, path: &[String]) -> Option<&'a Value> {
    path.iter().try_fold(v, |v, k| v.get(k))
}

pub(super) fn remove_at(v: &mut Value, path: &[String]) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut cur = v;
    for k in parents {
        match cur.get_mut(k) {
            Some(next) => cur = next,
            None => return,
        }
    }
    if let Some(m) = cur.as_object_mut() {
        m.remove(last);
    }
}

pub(super) fn set_at(v: &mut Value, path: &[String], value: Value) {
    let mut cur = v;
    for k in path {
        if !cur.is_object() {
            *cur = json!({});
        }
        cur = cur
            .as_object_mut()
            .expect("object")
            .entry(k.clone())
            .or_insert(Value::Null);
    }
    *cur = value;
}

/// RFC 7386.
pub(super) fn merge_patch(target: &mut Value, patch: &Value) {
    let Value::Object(p) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = json!({});
    }
    let t = target.as_object_mut().expect("object");
    for (k, v) in p {
        if v.is_null() {
            t.remove(k);
        } else {
            merge_patch(t.entry(k.clone()).or_insert(Value::Null), v);
        }
    }
}
