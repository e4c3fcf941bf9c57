//! Server-side apply (managed fields, conflicts, force), merge patch, create and delete.

use super::*;

/// `metadata.managedFields` from the tracked managers (FieldsV1: `f:<key>` maps).
pub(super) fn managed_fields(api_version: &str, managers: &Managers) -> Value {
    let entries: Vec<Value> = managers
        .iter()
        .filter(|(_, paths)| !paths.is_empty())
        .map(|(manager, paths)| {
            let mut fields = json!({});
            for p in paths {
                let keyed: Vec<String> = p.iter().map(|k| format!("f:{k}")).collect();
                set_at(&mut fields, &keyed, json!({}));
            }
            let (manager, operation) = manager.split_once('|').unwrap_or((manager, "Apply"));
            json!({"manager": manager, "operation": operation, "apiVersion": api_version,
                   "time": "2026-11-01T00:00:00Z", "fieldsType": "FieldsV1", "fieldsV1": fields})
        })
        .collect();
    json!(entries)
}

pub(super) fn patch_object(
    shared: &Shared,
    id: &str,
    ns: &str,
    name: &str,
    media: &str,
    q: &HashMap<String, String>,
    body: &[u8],
) -> Response {
    let apply = media.starts_with("application/apply-patch");
    // A strategic merge patch is a merge patch on objects without lists of merge keys (the
    // Leases it is used on here).
    let create = media == "create";
    let merge = create
        || media.starts_with("application/merge-patch+json")
        || media.starts_with("application/strategic-merge-patch+json");
    if !apply && !merge {
        return status(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: application/apply-patch+yaml, application/merge-patch+json (got {media})"
            ),
        );
    }
    let Ok(mut patch) = serde_json::from_slice::<Value>(body) else {
        return status(400, "BadRequest", "the patch is not valid JSON".into());
    };
    let manager = q.get("fieldManager").cloned().unwrap_or_default();
    if apply && manager.is_empty() {
        return status(
            400,
            "BadRequest",
            "PATCH with apply requires a fieldManager".into(),
        );
    }
    let force = q.get("force").map(String::as_str) == Some("true");
    let mut inner = shared.inner.lock();
    let key = (ns.to_string(), name.to_string());
    let state = inner.resources.get_mut(id).expect("served resource");
    let def = state.def.clone();
    let previous = state.objects.get(&key).cloned();
    if create && previous.is_some() {
        return status(
            409,
            "AlreadyExists",
            format!("{} \"{name}\" already exists", def.plural),
        );
    }
    if merge && !create && previous.is_none() {
        return status(
            404,
            "NotFound",
            format!("{} \"{name}\" not found", def.plural),
        );
    }
    if apply {
        for (field, want) in [
            ("apiVersion", def.api_version()),
            ("kind", def.kind.to_string()),
        ] {
            if patch.get(field).and_then(Value::as_str) != Some(want.as_str()) {
                return status(
                    400,
                    "BadRequest",
                    format!("{field} must be {want} in an apply patch"),
                );
            }
        }
        // A name left out is the URL's (kube-apiserver fills it in); a different one is refused.
        if patch["metadata"]["name"]
            .as_str()
            .is_some_and(|given| given != name)
        {
            return status(400, "BadRequest", "metadata.name must match the URL".into());
        }
    }
    // A resourceVersion in the patch is a precondition, not a field.
    if let Some(want) = patch["metadata"]
        .as_object_mut()
        .and_then(|m| m.remove("resourceVersion"))
    {
        let have = previous
            .as_ref()
            .map(|p| p["metadata"]["resourceVersion"].clone())
            .unwrap_or(Value::Null);
        if have != want {
            return moved_on(def.plural, name);
        }
    }
    if let Some(m) = patch.as_object_mut() {
        // The status subresource is written through its own endpoint.
        m.remove("status");
    }
    let mut object = previous.clone().unwrap_or_else(|| {
        json!({"apiVersion": def.api_version(), "kind": def.kind,
               "metadata": {"name": name, "namespace": ns}})
    });
    if !def.namespaced
        && let Some(m) = object["metadata"].as_object_mut()
    {
        m.remove("namespace");
    }
    let managers = state.managers.entry(key.clone()).or_default();
    if apply {
        let mut mine = std::collections::BTreeSet::new();
        leaf_paths(&patch, &mut Vec::new(), &mut mine);
        let structural = |p: &Vec<String>| {
            matches!(p.first().map(String::as_str), Some("apiVersion" | "kind"))
                || (p.first().map(String::as_str) == Some("metadata")
                    && matches!(p.get(1).map(String::as_str), Some("name" | "namespace")))
        };
        mine.retain(|p| !structural(p));
        // Conflicts: fields another manager owns, applied with a different value.
        let mut conflicts = Vec::new();
        for (other, paths) in managers.iter() {
            if *other == manager {
                continue;
            }
            for p in paths.intersection(&mine) {
                if at(&object, p) != at(&patch, p) {
                    conflicts.push((other.clone(), p.join(".")));
                }
            }
        }
        if !conflicts.is_empty() && !force {
            let causes: Vec<Value> = conflicts
                .iter()
                .map(|(m, f)| json!({"reason": "FieldManagerConflict", "message": format!("conflict with \"{m}\""), "field": f}))
                .collect();
            let body = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": format!("Apply failed with {} conflicts", conflicts.len()), "reason": "Conflict",
                "details": {"causes": causes}, "code": 409});
            return json_response(StatusCode::CONFLICT, &body);
        }
        for paths in managers.values_mut() {
            for p in &mine {
                paths.remove(p);
            }
        }
        // Fields this manager owned and no longer applies go, unless someone else owns them.
        let before = managers.remove(&manager).unwrap_or_default();
        for p in before.difference(&mine) {
            if !managers.values().any(|ps| ps.contains(p)) {
                remove_at(&mut object, p);
            }
        }
        merge_patch(&mut object, &patch);
        managers.insert(manager.clone(), mine);
    } else {
        merge_patch(&mut object, &patch);
        // An update owns what it set; fields it removed are nobody's.
        let mut set = std::collections::BTreeSet::new();
        leaf_paths(&patch, &mut Vec::new(), &mut set);
        let name = format!(
            "{}|Update",
            if manager.is_empty() {
                "unknown"
            } else {
                &manager
            }
        );
        for paths in managers.values_mut() {
            paths.retain(|p| at(&object, p).is_some());
        }
        set.retain(|p| at(&object, p).is_some_and(|v| !v.is_null()));
        managers.entry(name).or_default().extend(set);
    }
    let spec_changed = previous
        .as_ref()
        .is_none_or(|p| p.get("spec") != object.get("spec"));
    let generation = previous
        .as_ref()
        .and_then(|p| p["metadata"]["generation"].as_i64())
        .unwrap_or(0);
    let fields = managed_fields(&def.api_version(), managers);
    let unchanged = previous.as_ref().is_some_and(|p| {
        let mut a = p.clone();
        a["metadata"]["managedFields"] = Value::Null;
        let mut b = object.clone();
        b["metadata"]["managedFields"] = Value::Null;
        a == b
    });
    if unchanged {
        let mut same = previous.clone().expect("previous");
        same["metadata"]["managedFields"] = fields;
        state.objects.insert(key, same.clone());
        return json_response(StatusCode::OK, &same);
    }
    inner.rv += 1;
    inner.uid_counter += 1;
    let rv = inner.rv;
    let uid_n = inner.uid_counter;
    let meta = &mut object["metadata"];
    meta["resourceVersion"] = json!(rv.to_string());
    meta["generation"] = json!(if spec_changed {
        generation + 1
    } else {
        generation.max(1)
    });
    meta["managedFields"] = fields;
    if meta.get("uid").is_none() {
        meta["uid"] = json!(format!("00000000-0000-4000-8000-{uid_n:012}"));
        meta["creationTimestamp"] = json!("2026-11-01T00:00:00Z");
    }
    store(
        shared,
        &mut inner,
        id,
        key,
        rv,
        object.clone(),
        previous.clone(),
    );
    let code = if previous.is_some() {
        StatusCode::OK
    } else {
        StatusCode::CREATED
    };
    json_response(code, &object)
}

/// `POST …/namespaces/{ns}/{plural}`: create (409 AlreadyExists when the name is taken).
pub(super) fn create_object(
    shared: &Shared,
    id: &str,
    ns: &str,
    q: &HashMap<String, String>,
    body: &[u8],
) -> Response {
    let Ok(object) = serde_json::from_slice::<Value>(body) else {
        return status(400, "BadRequest", "the object is not valid JSON".into());
    };
    let Some(name) = object["metadata"]["name"].as_str().map(str::to_string) else {
        return status(400, "BadRequest", "metadata.name is required".into());
    };
    {
        let inner = shared.inner.lock();
        let Some(state) = inner.resources.get(id).filter(|s| s.def.served) else {
            return no_such_resource();
        };
        if state.objects.contains_key(&(ns.to_string(), name.clone())) {
            return status(
                409,
                "AlreadyExists",
                format!("{} \"{name}\" already exists", state.def.plural),
            );
        }
    }
    // A create is an update of nothing: the same path as a merge patch, owned by its manager.
    patch_object(shared, id, ns, &name, "create", q, body)
}

pub(super) fn delete_object(shared: &Shared, id: &str, ns: &str, name: &str) -> Response {
    let mut inner = shared.inner.lock();
    let key = (ns.to_string(), name.to_string());
    let state = inner.resources.get_mut(id).expect("served resource");
    let plural = state.def.plural;
    let Some(mut object) = state.objects.get(&key).cloned() else {
        return status(404, "NotFound", format!("{plural} \"{name}\" not found"));
    };
    let before = object.clone();
    let finalizers = object["metadata"]["finalizers"]
        .as_array()
        .is_some_and(|f| !f.is_empty());
    if finalizers && object["metadata"].get("deletionTimestamp").is_some() {
        return json_response(StatusCode::OK, &object);
    }
    inner.rv += 1;
    let rv = inner.rv;
    object["metadata"]["resourceVersion"] = json!(rv.to_string());
    let state = inner.resources.get_mut(id).expect("served resource");
    let typ = if finalizers {
        object["metadata"]["deletionTimestamp"] = json!("2026-11-01T00:00:00Z");
        state.objects.insert(key.clone(), object.clone());
        "MODIFIED"
    } else {
        state.objects.remove(&key);
        state.managers.remove(&key);
        "DELETED"
    };
    let ev = Ev {
        rv,
        resource: id.to_string(),
        namespace: ns.to_string(),
        typ,
        previous: (typ == "MODIFIED").then(|| before.clone()),
        object: object.clone(),
    };
    inner.history.push_back(ev.clone());
    let _ = shared.events.send(ev);
    if finalizers {
        json_response(StatusCode::OK, &object)
    } else {
        let done = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
            "details": {"name": name, "kind": plural}});
        json_response(StatusCode::OK, &done)
    }
}
