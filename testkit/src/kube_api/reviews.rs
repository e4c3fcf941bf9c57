//! TokenReview and SubjectAccessReview, answered from the users and grants the test sets.

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
    let allowed = shared.grants.lock().get(user).is_some_and(|g| {
        g.iter().any(|(verb, group, resource)| {
            attrs["verb"] == verb.as_str()
                && attrs["group"] == group.as_str()
                && attrs["resource"] == resource.as_str()
        })
    });
    let answer = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
        "metadata": {}, "spec": spec, "status": {"allowed": allowed}});
    (
        [(header::CONTENT_TYPE, "application/json")],
        answer.to_string(),
    )
        .into_response()
}
