//! TokenReview and SubjectAccessReview, answered from the users and grants the test sets and
//! from the RBAC objects the server holds (Roles, RoleBindings, ClusterRoles,
//! ClusterRoleBindings, as the API server's RBAC authorizer reads them: a cluster-wide question
//! is answered by ClusterRoleBindings only; one in a namespace also by that namespace's
//! RoleBindings, to a Role of the namespace or a ClusterRole).

use super::*;

/// `POST …/tokenreviews`: authenticated when the token is a known user's.
pub(super) async fn token_review(State(shared): State<Arc<Shared>>, body: Bytes) -> Response {
    let mut held = shared.hold_reviews.subscribe();
    let _ = held.wait_for(|on| !*on).await;
    shared.reviews.lock().0 += 1;
    let review: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let token = review["spec"]["token"].as_str().unwrap_or_default();
    let status = match shared.users.lock().get(token) {
        Some((name, groups)) => {
            json!({"authenticated": true, "user": {"username": name, "uid": format!("uid-{name}"), "groups": groups}})
        }
        None => json!({"authenticated": false, "error": "invalid bearer token"}),
    };
    let answer = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
        "metadata": {}, "spec": review["spec"], "status": status});
    (
        [(header::CONTENT_TYPE, "application/json")],
        answer.to_string(),
    )
        .into_response()
}

/// `POST …/subjectaccessreviews`: allowed when the user was granted the verb on the resource.
pub(super) async fn access_review(State(shared): State<Arc<Shared>>, body: Bytes) -> Response {
    shared.reviews.lock().1 += 1;
    let review: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let spec = &review["spec"];
    let attrs = &spec["resourceAttributes"];
    let user = spec["user"].as_str().unwrap_or_default();
    let groups: Vec<String> = spec["groups"]
        .as_array()
        .map(|g| {
            g.iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    let granted = shared.grants.lock().get(user).is_some_and(|g| {
        g.iter().any(|(verb, group, resource)| {
            attrs["verb"] == verb.as_str()
                && attrs["group"] == group.as_str()
                && attrs["resource"] == resource.as_str()
        })
    });
    let allowed = granted || rbac_allows(&shared.inner.lock(), user, &groups, attrs);
    let answer = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
        "metadata": {}, "spec": spec, "status": {"allowed": allowed}});
    (
        [(header::CONTENT_TYPE, "application/json")],
        answer.to_string(),
    )
        .into_response()
}

/// Whether the RBAC objects held allow `user` (in `groups`) what `attrs` asks.
fn rbac_allows(inner: &Inner, user: &str, groups: &[String], attrs: &Value) -> bool {
    let namespace = attrs["namespace"].as_str().unwrap_or_default();
    let objects = |plural: &str| -> Vec<&Value> {
        inner
            .resources
            .get(&format!("rbac.authorization.k8s.io/v1/{plural}"))
            .map(|r| r.objects.values().collect())
            .unwrap_or_default()
    };
    let has = |list: &Value, wanted: &Value| {
        list.as_array()
            .is_some_and(|l| l.iter().any(|v| v == "*" || v == wanted))
    };
    let rules_allow = |role: Option<&Value>| {
        role.and_then(|r| r["rules"].as_array())
            .is_some_and(|rules| {
                rules.iter().any(|r| {
                    has(&r["apiGroups"], &attrs["group"])
                        && has(&r["resources"], &attrs["resource"])
                        && has(&r["verbs"], &attrs["verb"])
                })
            })
    };
    let binds = |b: &Value| {
        b["subjects"].as_array().is_some_and(|subjects| {
            subjects.iter().any(|s| {
                let name = s["name"].as_str().unwrap_or_default();
                match s["kind"].as_str() {
                    Some("User") => name == user,
                    Some("Group") => groups.iter().any(|g| g == name),
                    Some("ServiceAccount") => {
                        let ns = s["namespace"].as_str().unwrap_or_default();
                        user == format!("system:serviceaccount:{ns}:{name}")
                    }
                    _ => false,
                }
            })
        })
    };
    let find = |plural: &str, ns: &str, name: &str| {
        objects(plural).into_iter().find(|o| {
            o["metadata"]["name"] == name
                && o["metadata"]["namespace"].as_str().unwrap_or_default() == ns
        })
    };
    let cluster_role = |b: &Value| {
        (b["roleRef"]["kind"] == "ClusterRole")
            .then(|| {
                find(
                    "clusterroles",
                    "",
                    b["roleRef"]["name"].as_str().unwrap_or_default(),
                )
            })
            .flatten()
    };
    if objects("clusterrolebindings")
        .into_iter()
        .any(|b| binds(b) && rules_allow(cluster_role(b)))
    {
        return true;
    }
    if namespace.is_empty() {
        return false;
    }
    objects("rolebindings")
        .into_iter()
        .filter(|b| b["metadata"]["namespace"] == namespace)
        .any(|b| {
            binds(b)
                && match b["roleRef"]["kind"].as_str() {
                    Some("Role") => rules_allow(find(
                        "roles",
                        namespace,
                        b["roleRef"]["name"].as_str().unwrap_or_default(),
                    )),
                    _ => rules_allow(cluster_role(b)),
                }
        })
}
