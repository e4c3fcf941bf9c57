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
//! - `POST …/namespaces/{ns}/{plural}` (or `…/{plural}` for a cluster-scoped kind): create (409 `AlreadyExists` when taken);
//!   `application/strategic-merge-patch+json` is taken as a merge patch (right for objects
//!   without merge-keyed lists, such as the Leases of leader election);
//! - `DELETE …/{plural}/{name}`: gone at once, or marked with `deletionTimestamp` while the
//!   object has finalizers; `GET …/{plural}/{name}`;
//! - TokenReview and SubjectAccessReview, from users and grants the test sets and from the
//!   Roles, RoleBindings, ClusterRoles and ClusterRoleBindings it holds.
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

mod apply;
mod read;
mod resources;
mod reviews;
mod selector;
mod write;

use apply::*;
use read::*;
pub use resources::*;
use reviews::*;
use selector::*;
use write::*;

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

    /// A user the API server authenticates by `token`, in `groups` (besides
    /// `system:authenticated`); what it may do is what the RBAC objects held say.
    pub fn add_person(&self, token: &str, name: &str, groups: &[&str]) {
        let mut all: Vec<String> = groups.iter().map(|g| g.to_string()).collect();
        all.push("system:authenticated".into());
        self.shared
            .users
            .lock()
            .insert(token.into(), (name.into(), all));
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
