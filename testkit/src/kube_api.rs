//! A Kubernetes API test server, for tests and benchmarks only.
//!
//! It is a test double for kube-apiserver, which cannot be installed on the machines these tests
//! run on. It speaks the part of the HTTP protocol list/watch clients (kube-rs's watcher) rely on,
//! and tries to be faithful there rather than broad:
//!
//! - `GET /api/v1/{plural}`, `/apis/{group}/{version}/{plural}` and the `namespaces/{ns}/` forms:
//!   a `…List` with `metadata.resourceVersion`, paged by `limit`/`continue`;
//! - `?watch=true&resourceVersion=N`: a chunked stream of `{"type","object"}` lines replaying every
//!   change after N, then live changes; `BOOKMARK` events when `allowWatchBookmarks=true`, every
//!   `bookmark_every` and, as kube-apiserver does, 2 s before the watch's deadline (when that is
//!   still ahead); the stream ends after `timeoutSeconds`;
//! - a `resourceVersion` older than the retained history gets `410 Gone` (an `ERROR` event with a
//!   `Status` of code 410 on watches, HTTP 410 on lists), as after etcd compaction;
//! - resources not installed answer `404 NotFound` with a `Status` body;
//! - resourceVersions are one cluster-wide counter, as in etcd.
//!
//! Test controls (in process): apply/delete objects, compact history, drop every open watch
//! connection, hang watches (connection open, nothing sent, not even bookmarks, never closed),
//! stall them (nothing sent, closed normally at their timeout), install or remove a resource, and
//! a log of the requests received.
//!
//! - `PATCH …/{plural}/{name}` with `application/apply-patch+yaml` (server-side apply): the
//!   manager's fields are tracked per object (`metadata.managedFields`), fields it owned and no
//!   longer applies are removed, a field another manager owns with a different value is a 409
//!   conflict unless `force=true` (which moves ownership), a `metadata.resourceVersion` in the
//!   patch is a precondition (409 when the object moved on), `status` is ignored (subresource),
//!   `generation` moves when `spec` does; `application/merge-patch+json` (RFC 7386); every list
//!   is atomic, as in the vitistack CRDs, which mark none;
//! - `POST …/namespaces/{ns}/{plural}`: create (409 `AlreadyExists` when taken);
//!   `application/strategic-merge-patch+json` is taken as a merge patch (right for objects
//!   without merge-keyed lists, such as the Leases of leader election);
//! - `DELETE …/{plural}/{name}`: gone at once, or marked with `deletionTimestamp` while the
//!   object has finalizers; `GET …/{plural}/{name}`;
//! - TokenReview and SubjectAccessReview, from users and grants the test sets.
//!
//! - `labelSelector` (`k=v`, `k==v`, `k!=v`, `k`, `!k`) and `fieldSelector` (`path=v`,
//!   `path!=v` over the object's JSON, e.g. `metadata.name`, `type`, `status.phase`) on lists and
//!   watches; on a watch, an object that starts matching arrives as `ADDED` and one that stops
//!   as `DELETED`, as kube-apiserver sends them. Set-based selectors (`in`, `notin`) answer 400.
//!
//! - `PATCH …/{plural}/{name}/status` (JSON merge patch): the status subresource, which changes
//!   `status` only, with the same resourceVersion precondition.
//!
//! Not implemented: update (PUT) over HTTP, discovery, schema validation.

#![allow(dead_code)]

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::extract::{Query, State};
use axum::http::{StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio::sync::{broadcast, mpsc, watch};

/// A resource the server knows.
#[derive(Clone, Debug)]
pub struct ResourceDef {
    pub group: &'static str,
    pub version: &'static str,
    pub plural: &'static str,
    pub kind: &'static str,
    pub namespaced: bool,
    /// False: answers 404 as if the CRD were not installed.
    pub served: bool,
}

impl ResourceDef {
    fn id(&self) -> String {
        format!("{}/{}/{}", self.group, self.version, self.plural)
    }

    fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }
}

/// `coordination.k8s.io/v1` Leases (leader election).
pub fn leases() -> ResourceDef {
    ResourceDef {
        group: "coordination.k8s.io",
        version: "v1",
        plural: "leases",
        kind: "Lease",
        namespaced: true,
        served: true,
    }
}

/// `events.k8s.io/v1` Events (what the server's changes leave on their objects).
pub fn events() -> ResourceDef {
    ResourceDef {
        group: "events.k8s.io",
        version: "v1",
        plural: "events",
        kind: "Event",
        namespaced: true,
        served: true,
    }
}

/// The core resources the application inventory reads (Helm's release Secrets and ConfigMaps,
/// Pods, Services, PersistentVolumeClaims, Namespaces) and `networking.k8s.io/v1` Ingresses.
pub fn inventory_resources() -> Vec<ResourceDef> {
    let core = |plural: &'static str, kind: &'static str, namespaced: bool| ResourceDef {
        group: "",
        version: "v1",
        plural,
        kind,
        namespaced,
        served: true,
    };
    vec![
        core("secrets", "Secret", true),
        core("configmaps", "ConfigMap", true),
        core("pods", "Pod", true),
        core("services", "Service", true),
        core("persistentvolumeclaims", "PersistentVolumeClaim", true),
        core("namespaces", "Namespace", false),
        ResourceDef {
            group: "networking.k8s.io",
            version: "v1",
            plural: "ingresses",
            kind: "Ingress",
            namespaced: true,
            served: true,
        },
    ]
}

/// Every resource the vitistack server watches (vitistack.io, kubevirt.io, core nodes), installed.
pub fn watched_resources() -> Vec<ResourceDef> {
    vitistack::source::kube::watched_kinds()
        .into_iter()
        .map(|(k, version)| ResourceDef {
            group: k.group(),
            version,
            plural: k.plural(),
            kind: k.name(),
            namespaced: k.namespaced(),
            served: true,
        })
        .collect()
}

#[derive(Clone, Debug)]
struct Ev {
    rv: u64,
    resource: String,
    namespace: String,
    typ: &'static str,
    object: Value,
    /// The object before a `MODIFIED` change (selectors turn it into `ADDED` or `DELETED`).
    previous: Option<Value>,
}

/// One requirement of a label or field selector.
#[derive(Clone, Debug)]
enum Requirement {
    Equals(String, String),
    Differs(String, String),
    Exists(String),
    Absent(String),
}

/// `labelSelector` and `fieldSelector` of a request.
#[derive(Clone, Debug, Default)]
struct Selector {
    labels: Vec<Requirement>,
    fields: Vec<Requirement>,
}

impl Selector {
    fn parse(q: &HashMap<String, String>) -> Result<Selector, String> {
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

    fn matches(&self, object: &Value) -> bool {
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
    fn event(&self, ev: &Ev) -> Option<&'static str> {
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

/// Each server-side-apply manager's fields: paths of map keys (a list or a scalar is one field).
type Managers = BTreeMap<String, std::collections::BTreeSet<Vec<String>>>;

struct ResourceState {
    def: ResourceDef,
    objects: BTreeMap<(String, String), Value>,
    /// Per object: each server-side-apply manager's fields (paths of map keys; a list or a
    /// scalar is one field).
    managers: BTreeMap<(String, String), Managers>,
}

struct Inner {
    rv: u64,
    resources: HashMap<String, ResourceState>,
    /// Every change after `compacted_to`, oldest first.
    history: VecDeque<Ev>,
    compacted_to: u64,
    uid_counter: u64,
    /// Writes to a `status` subresource that changed something.
    status_writes: u64,
}

/// One request the server received.
#[derive(Clone, Debug)]
pub struct Request {
    pub resource: String,
    pub watch: bool,
    pub resource_version: Option<String>,
    /// `allowWatchBookmarks=true` was asked.
    pub bookmarks: bool,
    pub at: Instant,
}

/// A verb allowed on a resource of an API group.
type Grant = (String, String, String);

struct Shared {
    inner: Mutex<Inner>,
    events: broadcast::Sender<Ev>,
    drop_gen: watch::Sender<u64>,
    hang: AtomicBool,
    /// How many times `hang(true)` was called: a watch open when it was is hung for good.
    hangs: std::sync::atomic::AtomicU64,
    stall: AtomicBool,
    hold_lists: watch::Sender<bool>,
    unplugged: watch::Sender<bool>,
    bookmark_every: Duration,
    requests: Mutex<Vec<Request>>,
    /// Bearer tokens the API server knows: token → (user name, groups).
    users: Mutex<HashMap<String, (String, Vec<String>)>>,
    /// What RBAC allows each user: (verb, group, resource).
    grants: Mutex<HashMap<String, Vec<Grant>>>,
    /// TokenReviews and SubjectAccessReviews answered.
    reviews: Mutex<(usize, usize)>,
    /// While true, TokenReviews get no answer (an API server that does not respond).
    hold_reviews: watch::Sender<bool>,
}

/// The running test server.
pub struct KubeApi {
    pub addr: SocketAddr,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for KubeApi {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl KubeApi {
    /// Serve these resources on a random local port.
    pub async fn start(defs: &[ResourceDef], bookmark_every: Duration) -> KubeApi {
        let resources = defs
            .iter()
            .map(|d| {
                (
                    d.id(),
                    ResourceState {
                        def: d.clone(),
                        objects: BTreeMap::new(),
                        managers: BTreeMap::new(),
                    },
                )
            })
            .collect();
        let (events, _) = broadcast::channel(1 << 16);
        let shared = Arc::new(Shared {
            inner: Mutex::new(Inner {
                rv: 1000,
                resources,
                history: VecDeque::new(),
                compacted_to: 1000,
                uid_counter: 0,
                status_writes: 0,
            }),
            events,
            drop_gen: watch::channel(0).0,
            hang: AtomicBool::new(false),
            hangs: std::sync::atomic::AtomicU64::new(0),
            stall: AtomicBool::new(false),
            hold_lists: watch::channel(false).0,
            unplugged: watch::channel(false).0,
            bookmark_every,
            requests: Mutex::new(Vec::new()),
            users: Mutex::new(HashMap::new()),
            grants: Mutex::new(HashMap::new()),
            reviews: Mutex::new((0, 0)),
            hold_reviews: watch::channel(false).0,
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind test API server");
        let addr = listener.local_addr().expect("addr");
        let app = axum::Router::new()
            .route(
                "/apis/authentication.k8s.io/v1/tokenreviews",
                axum::routing::post(token_review),
            )
            .route(
                "/apis/authorization.k8s.io/v1/subjectaccessreviews",
                axum::routing::post(access_review),
            )
            .fallback(dispatch)
            .with_state(shared.clone());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        KubeApi { addr, shared, task }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// A user the API server authenticates by `token`, whom RBAC allows `grants` (verb,
    /// resource) on `vitistack.io`.
    pub fn add_user(&self, token: &str, name: &str, grants: &[(&str, &str)]) {
        self.shared.users.lock().insert(
            token.into(),
            (name.into(), vec!["system:authenticated".into()]),
        );
        self.shared.grants.lock().insert(
            name.into(),
            grants
                .iter()
                .map(|(v, r)| (v.to_string(), "vitistack.io".to_string(), r.to_string()))
                .collect(),
        );
    }

    /// Forget a token (as when a service account's token is revoked).
    pub fn remove_token(&self, token: &str) {
        self.shared.users.lock().remove(token);
    }

    /// While `on`, TokenReviews wait without an answer; answered once it is off again.
    pub fn hold_reviews(&self, on: bool) {
        self.shared.hold_reviews.send_replace(on);
    }

    /// (TokenReviews, SubjectAccessReviews) answered so far.
    pub fn reviews(&self) -> (usize, usize) {
        *self.shared.reviews.lock()
    }

    /// A kubeconfig file with a context `test` pointing at this server; the current context is
    /// `elsewhere` (nothing listens there), so a client must honour the context it is given.
    pub fn write_kubeconfig(&self, path: &std::path::Path) {
        let text = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: test\n  cluster:\n    server: {}\n\
             - name: elsewhere\n  cluster:\n    server: http://127.0.0.1:1\n\
             users:\n- name: test\n  user:\n    token: test-token\n\
             contexts:\n- name: test\n  context:\n    cluster: test\n    user: test\n\
             - name: elsewhere\n  context:\n    cluster: elsewhere\n    user: test\n\
             current-context: elsewhere\n",
            self.url()
        );
        std::fs::write(path, text).expect("write kubeconfig");
    }

    /// Create or replace an object; returns its new resourceVersion.
    pub fn apply(&self, plural: &str, mut object: Value) -> u64 {
        let mut inner = self.shared.inner.lock();
        let id = inner
            .resources
            .keys()
            .find(|k| k.ends_with(&format!("/{plural}")))
            .cloned()
            .unwrap_or_else(|| panic!("unknown resource {plural}"));
        inner.rv += 1;
        inner.uid_counter += 1;
        let rv = inner.rv;
        let uid_n = inner.uid_counter;
        let state = inner.resources.get_mut(&id).expect("resource");
        let def = state.def.clone();
        let ns = object["metadata"]["namespace"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let name = object["metadata"]["name"]
            .as_str()
            .expect("metadata.name")
            .to_string();
        let key = (ns.clone(), name);
        let previous = state.objects.get(&key).cloned();
        let uid = previous
            .as_ref()
            .and_then(|p| p["metadata"]["uid"].as_str().map(String::from))
            .unwrap_or_else(|| format!("00000000-0000-4000-8000-{uid_n:012}"));
        let typ = if previous.is_some() {
            "MODIFIED"
        } else {
            "ADDED"
        };
        object["apiVersion"] = json!(def.api_version());
        object["kind"] = json!(def.kind);
        let meta = &mut object["metadata"];
        meta["resourceVersion"] = json!(rv.to_string());
        meta["uid"] = json!(uid);
        if meta.get("creationTimestamp").is_none() {
            meta["creationTimestamp"] = json!("2026-11-01T00:00:00Z");
        }
        meta["managedFields"] = json!([{"manager": "kubectl", "operation": "Apply",
            "apiVersion": def.api_version(), "time": "2026-11-01T00:00:00Z", "fieldsType": "FieldsV1",
            "fieldsV1": {"f:spec": {}}}]);
        state.objects.insert(key, object.clone());
        let ev = Ev {
            rv,
            resource: id,
            namespace: ns,
            typ,
            object,
            previous,
        };
        inner.history.push_back(ev.clone());
        let _ = self.shared.events.send(ev);
        rv
    }

    /// An object as the server holds it now.
    pub fn object(&self, plural: &str, namespace: &str, name: &str) -> Option<Value> {
        let inner = self.shared.inner.lock();
        inner
            .resources
            .iter()
            .find(|(k, _)| k.ends_with(&format!("/{plural}")))
            .and_then(|(_, s)| s.objects.get(&(namespace.to_string(), name.to_string())))
            .cloned()
    }

    /// Every object of a resource, in every namespace.
    pub fn objects(&self, plural: &str) -> Vec<Value> {
        let inner = self.shared.inner.lock();
        inner
            .resources
            .iter()
            .find(|(k, _)| k.ends_with(&format!("/{plural}")))
            .map(|(_, s)| s.objects.values().cloned().collect())
            .unwrap_or_default()
    }

    /// Delete an object; returns the resourceVersion of the deletion.
    pub fn delete(&self, plural: &str, namespace: &str, name: &str) -> Option<u64> {
        let mut inner = self.shared.inner.lock();
        let id = inner
            .resources
            .keys()
            .find(|k| k.ends_with(&format!("/{plural}")))
            .cloned()?;
        let mut object = inner
            .resources
            .get_mut(&id)?
            .objects
            .remove(&(namespace.to_string(), name.to_string()))?;
        inner.rv += 1;
        let rv = inner.rv;
        object["metadata"]["resourceVersion"] = json!(rv.to_string());
        let ev = Ev {
            rv,
            resource: id,
            namespace: namespace.to_string(),
            typ: "DELETED",
            object,
            previous: None,
        };
        inner.history.push_back(ev.clone());
        let _ = self.shared.events.send(ev);
        Some(rv)
    }

    /// Delete an object without telling open watches (as if the deletion happened while the
    /// client was away and history was compacted): only a relist can reveal it.
    pub fn delete_silently(&self, plural: &str, namespace: &str, name: &str) {
        let mut inner = self.shared.inner.lock();
        let id = inner
            .resources
            .keys()
            .find(|k| k.ends_with(&format!("/{plural}")))
            .cloned();
        if let Some(id) = id
            && let Some(state) = inner.resources.get_mut(&id)
        {
            state
                .objects
                .remove(&(namespace.to_string(), name.to_string()));
        }
        inner.rv += 1;
    }

    /// Forget all history: any resourceVersion older than now gets 410 Gone.
    pub fn compact(&self) {
        let mut inner = self.shared.inner.lock();
        inner.history.clear();
        inner.compacted_to = inner.rv;
    }

    /// Cut every open watch connection mid-stream.
    pub fn drop_watches(&self) {
        self.shared.drop_gen.send_modify(|g| *g += 1);
    }

    /// While on, watch streams go silent (and stay silent): connection open, nothing sent. A
    /// watch that was open at `hang(true)` stays hung after `hang(false)`; only watches opened
    /// after that are answered again.
    pub fn hang(&self, on: bool) {
        if on {
            self.shared.hangs.fetch_add(1, Ordering::SeqCst);
        }
        self.shared.hang.store(on, Ordering::SeqCst);
    }

    /// While on, the API server stalls: watches deliver no event and no bookmark, and close
    /// normally at their `timeoutSeconds` (lists still answer). A watch that saw the stall stays
    /// silent until it closes, as it would have to replay what it held back.
    pub fn stall(&self, on: bool) {
        self.shared.stall.store(on, Ordering::SeqCst);
    }

    /// While on, the API server answers nothing, as behind a network that drops every packet:
    /// requests wait until it is plugged in again, and open watches go silent for good (as with
    /// [`KubeApi::hang`]).
    pub fn unplug(&self, on: bool) {
        self.hang(on);
        self.shared.unplugged.send_replace(on);
    }

    /// While on, list requests wait (as a slow API server would).
    pub fn hold_lists(&self, on: bool) {
        self.shared.hold_lists.send_replace(on);
    }

    /// Install or remove a resource (404 when removed).
    pub fn set_served(&self, plural: &str, served: bool) {
        let mut inner = self.shared.inner.lock();
        for state in inner.resources.values_mut() {
            if state.def.plural == plural {
                state.def.served = served;
            }
        }
    }

    /// Writes to a `status` subresource that changed an object.
    pub fn status_writes(&self) -> u64 {
        self.shared.inner.lock().status_writes
    }

    /// Every request received for a resource (by plural), oldest first.
    pub fn requests(&self, plural: &str) -> Vec<Request> {
        self.shared
            .requests
            .lock()
            .iter()
            .filter(|r| r.resource.ends_with(&format!("/{plural}")))
            .cloned()
            .collect()
    }

    /// The current resourceVersion.
    pub fn resource_version(&self) -> u64 {
        self.shared.inner.lock().rv
    }
}

fn status(code: u16, reason: &str, message: String) -> Response {
    let body = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "reason": reason, "code": code});
    (
        StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

/// `POST …/tokenreviews`: authenticated when the token is a known user's.
async fn token_review(State(shared): State<Arc<Shared>>, body: Bytes) -> Response {
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
async fn access_review(State(shared): State<Arc<Shared>>, body: Bytes) -> Response {
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

/// (resource id, namespace) from a request path.
fn route(path: &str) -> Option<(String, Option<String>)> {
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, version, rest) = match parts.as_slice() {
        ["api", v, rest @ ..] => ("", *v, rest),
        ["apis", g, v, rest @ ..] => (*g, *v, rest),
        _ => return None,
    };
    match rest {
        [plural] => Some((format!("{group}/{version}/{plural}"), None)),
        ["namespaces", ns, plural] => {
            Some((format!("{group}/{version}/{plural}"), Some(ns.to_string())))
        }
        _ => None,
    }
}

async fn handle(
    State(shared): State<Arc<Shared>>,
    uri: Uri,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let Some((id, namespace)) = route(uri.path()) else {
        return status(
            404,
            "NotFound",
            "the server could not find the requested resource".into(),
        );
    };
    let watching = matches!(q.get("watch").map(String::as_str), Some("true" | "1"));
    shared.requests.lock().push(Request {
        resource: id.clone(),
        watch: watching,
        resource_version: q.get("resourceVersion").cloned(),
        bookmarks: q.get("allowWatchBookmarks").map(String::as_str) == Some("true"),
        at: Instant::now(),
    });
    let served = shared
        .inner
        .lock()
        .resources
        .get(&id)
        .is_some_and(|s| s.def.served);
    if !served {
        return status(
            404,
            "NotFound",
            "the server could not find the requested resource".into(),
        );
    }
    let selector = match Selector::parse(&q) {
        Ok(s) => s,
        Err(e) => return status(400, "BadRequest", e),
    };
    if watching {
        watch_response(shared, id, namespace, &q, selector)
    } else {
        let mut held = shared.hold_lists.subscribe();
        let _ = held.wait_for(|on| !*on).await;
        list_response(&shared, &id, namespace.as_deref(), &q, &selector)
    }
}

fn list_response(
    shared: &Shared,
    id: &str,
    namespace: Option<&str>,
    q: &HashMap<String, String>,
    selector: &Selector,
) -> Response {
    let inner = shared.inner.lock();
    let Some(state) = inner.resources.get(id) else {
        return status(404, "NotFound", "not found".into());
    };
    // continue = "<rv of the first page>:<offset>"
    let (list_rv, offset) = match q.get("continue").filter(|c| !c.is_empty()) {
        Some(token) => {
            let Some((rv, off)) = token.split_once(':') else {
                return status(400, "BadRequest", format!("invalid continue token {token}"));
            };
            let (Ok(rv), Ok(off)) = (rv.parse::<u64>(), off.parse::<usize>()) else {
                return status(400, "BadRequest", format!("invalid continue token {token}"));
            };
            if rv < inner.compacted_to {
                return status(
                    410,
                    "Expired",
                    "The provided continue parameter is too old to display a consistent list result."
                        .into(),
                );
            }
            (rv, off)
        }
        None => (inner.rv, 0),
    };
    let limit = q
        .get("limit")
        .and_then(|l| l.parse::<usize>().ok())
        .filter(|l| *l > 0)
        .unwrap_or(usize::MAX);
    let matching = state
        .objects
        .iter()
        .filter(|((ns, _), _)| namespace.is_none_or(|want| want == ns))
        .filter(|(_, o)| selector.matches(o));
    let items: Vec<&Value> = matching
        .skip(offset)
        .take(limit.saturating_add(1))
        .map(|(_, v)| v)
        .collect();
    let more = items.len() > limit;
    let items: Vec<&Value> = items.into_iter().take(limit).collect();
    let mut metadata = json!({"resourceVersion": list_rv.to_string()});
    if more {
        metadata["continue"] = json!(format!("{list_rv}:{}", offset + items.len()));
        metadata["remainingItemCount"] = json!(0);
    }
    let body = json!({"kind": format!("{}List", state.def.kind), "apiVersion": state.def.api_version(),
        "metadata": metadata, "items": items});
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

fn line(typ: &str, object: &Value) -> Bytes {
    let mut s = json!({"type": typ, "object": object}).to_string();
    s.push('\n');
    Bytes::from(s)
}

fn watch_response(
    shared: Arc<Shared>,
    id: String,
    namespace: Option<String>,
    q: &HashMap<String, String>,
    selector: Selector,
) -> Response {
    let since: u64 = q
        .get("resourceVersion")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let bookmarks = q.get("allowWatchBookmarks").map(String::as_str) == Some("true");
    let timeout = q
        .get("timeoutSeconds")
        .and_then(|t| t.parse::<u64>().ok())
        .map(Duration::from_secs);
    let (tx, rx) = mpsc::channel::<Result<Bytes, std::io::Error>>(256);

    // Under the lock: the replay and the live subscription join without a gap.
    // `current`: every change up to it is either in the replay or was for another resource, so
    // bookmarks may name it.
    let (replay, mut live, kind, api_version, gone, current) = {
        let inner = shared.inner.lock();
        let def = inner.resources.get(&id).map(|s| s.def.clone());
        let (kind, api_version) = def
            .map(|d| (d.kind.to_string(), d.api_version()))
            .unwrap_or_default();
        let since = if since == 0 { inner.rv } else { since };
        let gone = (since < inner.compacted_to).then_some((since, inner.compacted_to));
        let replay: Vec<Ev> = inner
            .history
            .iter()
            .filter(|e| e.rv > since && e.resource == id)
            .filter(|e| namespace.as_ref().is_none_or(|ns| ns == &e.namespace))
            .cloned()
            .collect();
        (
            replay,
            shared.events.subscribe(),
            kind,
            api_version,
            gone,
            inner.rv,
        )
    };
    let mut drop_rx = shared.drop_gen.subscribe();
    let hangs_at_open = shared.hangs.load(Ordering::SeqCst);
    tokio::spawn(async move {
        let hung = || {
            shared.hang.load(Ordering::SeqCst)
                || shared.hangs.load(Ordering::SeqCst) > hangs_at_open
        };
        if let Some((asked, oldest)) = gone {
            let err = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": format!("too old resource version: {asked} ({oldest})"), "reason": "Expired", "code": 410});
            let _ = tx.send(Ok(line("ERROR", &err))).await;
            return;
        }
        let stalled = || shared.stall.load(Ordering::SeqCst);
        // Once a watch has seen the stall it sends nothing more: what it held back would have
        // to come first.
        let mut silent = stalled();
        let mut last_rv = since;
        let mut seen_rv = since.max(current);
        for ev in replay {
            if hung() || silent {
                break;
            }
            last_rv = ev.rv;
            let Some(typ) = selector.event(&ev) else {
                continue;
            };
            if tx.send(Ok(line(typ, &ev.object))).await.is_err() {
                return;
            }
        }
        let far = tokio::time::Instant::now() + Duration::from_secs(24 * 3600);
        let deadline = timeout.map_or(far, |t| tokio::time::Instant::now() + t);
        // kube-apiserver's last bookmark: 2 s before the deadline, when that is still ahead.
        let mut last_bookmark = timeout
            .filter(|t| *t > Duration::from_secs(2))
            .map(|_| deadline - Duration::from_secs(2));
        let mut tick = tokio::time::interval(shared.bookmark_every);
        tick.tick().await;
        loop {
            if hung() {
                // Silent for good: the client has to notice and reconnect.
                tokio::select! {
                    _ = drop_rx.changed() => {
                        let _ = tx.send(Err(std::io::Error::other("connection dropped"))).await;
                    }
                    _ = tx.closed() => {}
                }
                return;
            }
            silent = silent || stalled();
            let bookmark = json!({"kind": kind, "apiVersion": api_version,
                "metadata": {"resourceVersion": seen_rv.max(last_rv).to_string()}});
            tokio::select! {
                ev = live.recv() => match ev {
                    Ok(ev) => {
                        // Everything up to here has been seen (the channel is ordered), so a
                        // bookmark may name this version.
                        seen_rv = seen_rv.max(ev.rv);
                        if ev.resource != id
                            || ev.rv <= last_rv
                            || namespace.as_ref().is_some_and(|ns| ns != &ev.namespace)
                            || hung()
                            || silent
                            || stalled()
                        {
                            continue;
                        }
                        last_rv = ev.rv;
                        let Some(typ) = selector.event(&ev) else {
                            continue;
                        };
                        if tx.send(Ok(line(typ, &ev.object))).await.is_err() {
                            return;
                        }
                    }
                    Err(_) => {
                        let err = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                            "message": "watch fell behind", "reason": "Expired", "code": 410});
                        let _ = tx.send(Ok(line("ERROR", &err))).await;
                        return;
                    }
                },
                _ = tick.tick(), if bookmarks && !silent => {
                    if tx.send(Ok(line("BOOKMARK", &bookmark))).await.is_err() {
                        return;
                    }
                }
                _ = tokio::time::sleep_until(last_bookmark.unwrap_or(far)), if bookmarks && last_bookmark.is_some() => {
                    last_bookmark = None;
                    if !silent && tx.send(Ok(line("BOOKMARK", &bookmark))).await.is_err() {
                        return;
                    }
                }
                _ = tokio::time::sleep_until(deadline) => return,
                _ = drop_rx.changed() => {
                    let _ = tx.send(Err(std::io::Error::other("connection dropped"))).await;
                    return;
                }
                _ = tx.closed() => return,
            }
        }
    });
    let stream = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|item| (item, rx))
    });
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from_stream(stream))
        .unwrap_or_else(|_| status(500, "InternalError", "response".into()))
}

/// Writes and single-object reads go to their handlers; everything else is list/watch.
async fn dispatch(
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
        && let Some((id, Some(ns))) = route(uri.path())
    {
        return create_object(&shared, &id, &ns, &query.0, &body);
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
        return status(
            404,
            "NotFound",
            "the server could not find the requested resource".into(),
        );
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
fn object_route(path: &str) -> Option<(String, String, String, bool)> {
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
fn store(
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
fn moved_on(plural: &str, name: &str) -> Response {
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
fn patch_status(
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

fn json_response(code: StatusCode, v: &Value) -> Response {
    (
        code,
        [(header::CONTENT_TYPE, "application/json")],
        v.to_string(),
    )
        .into_response()
}

fn get_object(shared: &Shared, id: &str, ns: &str, name: &str) -> Response {
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
fn leaf_paths(
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

fn at<'a>(v: &'a Value, path: &[String]) -> Option<&'a Value> {
    path.iter().try_fold(v, |v, k| v.get(k))
}

fn remove_at(v: &mut Value, path: &[String]) {
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

fn set_at(v: &mut Value, path: &[String], value: Value) {
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
fn merge_patch(target: &mut Value, patch: &Value) {
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

/// `metadata.managedFields` from the tracked managers (FieldsV1: `f:<key>` maps).
fn managed_fields(api_version: &str, managers: &Managers) -> Value {
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

fn patch_object(
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
fn create_object(
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
            return status(
                404,
                "NotFound",
                "the server could not find the requested resource".into(),
            );
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

fn delete_object(shared: &Shared, id: &str, ns: &str, name: &str) -> Response {
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
