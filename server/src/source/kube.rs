//! The `kube` source: one list-and-watch loop per kind (and per namespace when scoped) feeding
//! the store, never polling.
//!
//! Watch semantics, as client-go's reflector: list (paged), then watch from the list's
//! resourceVersion with bookmarks, resuming from the last version seen (event or bookmark) when
//! a watch ends or its connection drops, and relisting on `410 Gone`. A relist is applied as one
//! atomic replacement of that kind's objects in scope (objects missing from it are deletions);
//! the first list is loaded paced ([`Store::load`]), as the state the server starts from.
//!
//! Liveness: watches ask for bookmarks, and an API server that does progress sends one (or an
//! event) before it closes a watch at its timeout (kube-apiserver sends it 2 s before). A watch
//! that ends with neither proves nothing: one closed at its timeout with nothing sent, or one that
//! stays open past its timeout plus a margin (it hangs). Either is counted silent: the kind is
//! reported stale from the last event or bookmark received (GraphQL `sources`,
//! `/health/operators`, `/ready`, metrics, a warning), and when the next watch is silent too the
//! kind is relisted, so changes made meanwhile arrive within about two watch timeouts. Errors back off exponentially with jitter; a kind whose resource is not
//! installed (404) is reported and retried slowly, never fatal.
//!
//! Why not kube-runtime's `watcher`: it hides bookmarks and its idle restarts, so neither
//! liveness nor staleness can be told from outside it, and it never relists after restarts that
//! keep hanging. The requests themselves are kube-client's (`Api::list`, `Api::watch`).

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::api::{ApiResource, DynamicObject, ListParams, WatchEvent, WatchParams};
use kube::{Api, Client};
use serde_json::Value;

use crate::model::{Kind, Resource};
use crate::retry::Backoff;
use crate::store::{ChangeType, Key, Op, Store};

use super::status::SourceStatus;

/// How to reach the cluster and what to watch.
#[derive(Clone, Debug)]
pub struct KubeSettings {
    /// Kubeconfig file(s), `:`-separated (`KUBECONFIG`); otherwise in-cluster, then
    /// `~/.kube/config`.
    pub kubeconfig: Option<String>,
    /// Context to use (`KUBE_CONTEXT`); otherwise the current context.
    pub context: Option<String>,
    /// Namespaces to watch namespaced kinds in (`WATCH_NAMESPACES`); empty = all.
    pub namespaces: Vec<String>,
    /// Server-side watch timeout; a watch silent for this plus [`KubeSettings::margin`] hangs.
    pub watch_timeout: Duration,
    /// First retry delay after an error; doubles (with jitter) up to `max_backoff`.
    pub min_backoff: Duration,
    /// Longest retry delay after an error.
    pub max_backoff: Duration,
    /// Retry delay for a kind whose resource is not installed.
    pub absent_retry: Duration,
}

impl KubeSettings {
    /// How much longer than its timeout a watch may stay silent before it counts as hung:
    /// half the timeout, between 1 and 5 seconds.
    pub fn margin(&self) -> Duration {
        (self.watch_timeout / 2).clamp(Duration::from_secs(1), Duration::from_secs(5))
    }

    /// The longest a live watch stays silent: its timeout plus the margin.
    pub fn window(&self) -> Duration {
        self.watch_timeout + self.margin()
    }
}

impl Default for KubeSettings {
    fn default() -> Self {
        KubeSettings {
            kubeconfig: None,
            context: None,
            namespaces: Vec::new(),
            watch_timeout: Duration::from_secs(290),
            min_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(30),
            absent_retry: Duration::from_secs(60),
        }
    }
}

/// Why no client could be built for the cluster (one line, naming the file where there is one).
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error(
        "KUBE_CONTEXT is set but there is no KUBECONFIG and no home directory to find ~/.kube/config in"
    )]
    NoHome,
    #[error("no cluster configuration found: {0}")]
    NoConfig(kube::config::InferConfigError),
    #[error("cannot build a Kubernetes client: {0}")]
    Build(kube::Error),
    #[error("KUBECONFIG is set but names no file")]
    NoFile,
    /// A kubeconfig that cannot be used: the file(s) and what is wrong.
    #[error("kubeconfig {file}: {reason}")]
    Kubeconfig { file: String, reason: String },
    #[error("cannot start the source's thread: {0}")]
    Thread(std::io::Error),
    #[error("cannot connect: {0}")]
    Join(tokio::task::JoinError),
}

impl ClientError {
    fn kubeconfig(file: impl std::fmt::Display, reason: String) -> Self {
        ClientError::Kubeconfig {
            file: file.to_string(),
            reason,
        }
    }
}

/// Build a client the way kubectl would: `KUBECONFIG` (with `KUBE_CONTEXT`), else in-cluster
/// service account, else `~/.kube/config`. A kubeconfig that cannot be used is refused with one
/// line naming the file and what is wrong with it.
pub async fn client(settings: &KubeSettings) -> Result<Client, ClientError> {
    let opts = kube::config::KubeConfigOptions {
        context: settings.context.clone(),
        ..Default::default()
    };
    let files: Vec<std::path::PathBuf> = match (&settings.kubeconfig, &settings.context) {
        (Some(paths), _) => std::env::split_paths(paths)
            .filter(|p| !p.as_os_str().is_empty())
            .collect(),
        // A context names an entry of the default kubeconfig.
        (None, Some(_)) => vec![default_kubeconfig().ok_or(ClientError::NoHome)?],
        (None, None) => {
            let config = kube::Config::infer().await.map_err(ClientError::NoConfig)?;
            return Client::try_from(config).map_err(ClientError::Build);
        }
    };
    let named = files
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(":");
    let mut merged: Option<kube::config::Kubeconfig> = None;
    for path in &files {
        let kc = kube::config::Kubeconfig::read_from(path)
            .map_err(|e| ClientError::kubeconfig(path.display(), explain(&e, None)))?;
        merged = Some(match merged {
            None => kc,
            Some(m) => m
                .merge(kc)
                .map_err(|e| ClientError::kubeconfig(&named, explain(&e, None)))?,
        });
    }
    let kc = merged.ok_or(ClientError::NoFile)?;
    let contexts: Vec<String> = kc.contexts.iter().map(|c| c.name.clone()).collect();
    let config = kube::Config::from_custom_kubeconfig(kc, &opts)
        .await
        .map_err(|e| ClientError::kubeconfig(&named, explain(&e, Some(&contexts))))?;
    Client::try_from(config)
        .map_err(|e| ClientError::kubeconfig(&named, format!("cannot build a client: {e}")))
}

/// `~/.kube/config`, as kubectl finds it.
fn default_kubeconfig() -> Option<std::path::PathBuf> {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(|h| std::path::PathBuf::from(h).join(".kube").join("config"))
}

/// What is wrong with a kubeconfig, in words (the file is named by the caller); `contexts`:
/// the contexts it has, named when the one asked for is not among them.
fn explain(e: &kube::config::KubeconfigError, contexts: Option<&[String]>) -> String {
    use kube::config::KubeconfigError as K;
    let known = || match contexts {
        Some([]) | None => "it has no context at all".to_string(),
        Some(names) => format!("it has {}", names.join(", ")),
    };
    match e {
        K::ReadConfig(io, _) => format!("cannot read it: {io}"),
        // The parser's message goes on with a picture of the line: its first line says it.
        K::Parse(p) => format!(
            "not a kubeconfig (YAML): {}",
            p.to_string()
                .lines()
                .next()
                .unwrap_or_default()
                .trim_start_matches("error: ")
        ),
        K::CurrentContextNotSet => format!(
            "it names no current-context (set current-context in it, or KUBE_CONTEXT); {}",
            known()
        ),
        K::LoadContext(name) => format!("no context named {name:?} (KUBE_CONTEXT); {}", known()),
        K::LoadClusterOfContext(name) => {
            format!("context {name:?} names a cluster the file does not have")
        }
        other => other.to_string(),
    }
}

/// The version of each kind the source watches: the first version the CRD serves (the one the
/// operators write); `kubevirt.io/v1` VMs and VMIs; core `v1` Nodes.
pub fn watched_kinds() -> Vec<(Kind, &'static str)> {
    Kind::ALL.iter().map(|k| (*k, k.versions()[0])).collect()
}

/// The running watchers, on a runtime of their own.
pub struct KubeSource {
    /// Per-kind state.
    pub status: Arc<SourceStatus>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    /// One thread that only reads the cluster and writes the store: however busy serving
    /// sockets keeps the main runtime, the graph stays current (measured with 10,000 subscribers
    /// each sent every one of 100 changes a second: with the watchers on the main runtime the
    /// store held the last change 5.7 s after the API did).
    runtime: Option<tokio::runtime::Runtime>,
}

impl Drop for KubeSource {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

/// Connect with `settings` and start one watcher per kind (per namespace for namespaced kinds
/// when scoped), on the source's own thread.
pub async fn connect(
    store: Arc<Store>,
    settings: &KubeSettings,
) -> Result<KubeSource, ClientError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("vitistack-source")
        .enable_all()
        .build()
        .map_err(ClientError::Thread)?;
    // The client on that runtime too: its connections are driven there.
    let connected = {
        let settings = settings.clone();
        runtime
            .spawn(async move { client(&settings).await })
            .await
            .map_err(ClientError::Join)
            .and_then(|c| c)
    };
    let client = match connected {
        Ok(c) => c,
        Err(e) => {
            // Dropping a runtime blocks on its threads, which async code may not do.
            runtime.shutdown_background();
            return Err(e);
        }
    };
    let mut source = start_on(runtime.handle(), client, store, settings);
    source.runtime = Some(runtime);
    Ok(source)
}

fn start_on(
    runtime: &tokio::runtime::Handle,
    client: Client,
    store: Arc<Store>,
    settings: &KubeSettings,
) -> KubeSource {
    let kinds = watched_kinds();
    let scopes_of = |kind: Kind| -> Vec<Option<String>> {
        if kind.namespaced() && !settings.namespaces.is_empty() {
            settings.namespaces.iter().cloned().map(Some).collect()
        } else {
            vec![None]
        }
    };
    let status = Arc::new(SourceStatus::kube(
        &kinds,
        |k| scopes_of(k).len(),
        settings.window(),
    ));
    let mut tasks = Vec::new();
    for (kind, version) in kinds {
        for scope in scopes_of(kind) {
            let watch = Watch {
                client: client.clone(),
                store: store.clone(),
                status: status.clone(),
                settings: settings.clone(),
                kind,
                scope,
                backoff: Backoff::new(settings.min_backoff, settings.max_backoff),
                listed_once: false,
                delivered: false,
            };
            tasks.push(runtime.spawn(watch.run(version)));
        }
    }
    KubeSource {
        status,
        tasks,
        runtime: None,
    }
}

/// A store object from an API object: managedFields and node image lists dropped (credentials
/// are blanked as the object is built).
pub fn to_resource(
    kind: Kind,
    version: &str,
    obj: DynamicObject,
) -> Result<Resource, serde_json::Error> {
    let mut value = serde_json::to_value(obj)?;
    if let Some(map) = value.as_object_mut() {
        map.remove("apiVersion");
        map.remove("kind");
        if let Some(meta) = map.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.remove("managedFields");
        }
        // A node's image list is large and unused.
        if kind == Kind::Node
            && let Some(status) = map.get_mut("status").and_then(Value::as_object_mut)
        {
            status.remove("images");
        }
    }
    Resource::from_value(kind, version, value)
}

/// Watches in a row that may hang before the kind is relisted instead of watched again.
const SILENT_WATCHES_BEFORE_RELIST: u32 = 2;

/// Page size of lists.
const LIST_PAGE: u32 = 500;

/// How one watch ended.
enum Ended {
    /// The API server closed it (at its timeout): progress when it sent something.
    Closed,
    /// The connection broke mid-stream: watch again from the same version.
    Broken(String),
    /// Nothing at all for the watch timeout plus the margin: it hangs.
    Silent,
    /// The version is too old (410 Gone): relist.
    Gone,
}

/// What a watch delivered.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Delivered {
    /// An object added, modified or deleted.
    Event,
    /// A bookmark: the watch has reached a resourceVersion, nothing changed.
    Bookmark,
}

/// Why a request failed.
enum Failure {
    /// The resource (this version of it) is not served.
    Absent,
    /// Too old a resourceVersion.
    Gone,
    /// Anything else.
    Other(String),
}

/// Why a list-and-watch stopped, which says what comes next.
enum Stopped {
    /// The version is not served: try the next one, then wait.
    Absent,
    /// The resourceVersion is too old: relist at once.
    Gone,
    /// A failure (already recorded and waited out) or a silent watch: relist.
    Relist,
}

fn failure(e: &kube::Error) -> Failure {
    match e {
        kube::Error::Api(s) if s.code == 404 => Failure::Absent,
        kube::Error::Api(s) if s.code == 410 => Failure::Gone,
        other => Failure::Other(other.to_string()),
    }
}

/// One kind (in one scope): list, watch, repeat.
struct Watch {
    client: Client,
    store: Arc<Store>,
    status: Arc<SourceStatus>,
    settings: KubeSettings,
    kind: Kind,
    scope: Option<String>,
    backoff: Backoff,
    listed_once: bool,
    /// The last watch delivered something (an event or a bookmark) before it ended.
    delivered: bool,
}

impl Watch {
    fn scope_key(&self) -> String {
        self.scope.clone().unwrap_or_default()
    }

    fn api(&self, version: &str) -> Api<DynamicObject> {
        let ar = ApiResource {
            group: self.kind.group().into(),
            version: version.into(),
            api_version: self.kind.api_version(version),
            kind: self.kind.name().into(),
            plural: self.kind.plural().into(),
        };
        match &self.scope {
            Some(ns) => Api::namespaced_with(self.client.clone(), ns, &ar),
            None => Api::all_with(self.client.clone(), &ar),
        }
    }

    /// The watch delivered something: the data is current as of now, at `rv`; the kind is no
    /// longer silent.
    fn received(&mut self, rv: &str, what: Delivered) {
        self.delivered = true;
        let (scope, now) = (self.scope_key(), jiff::Timestamp::now());
        self.status.update(self.kind, |k| {
            k.received_at.insert(scope.clone(), now);
            k.resource_versions.insert(scope.clone(), rv.to_string());
            if what == Delivered::Event {
                k.last_event_at = Some(now);
            }
            if k.silent_watches.remove(&scope).is_some() && k.failing_since.is_none() {
                k.error = None;
                tracing::info!(kind = self.kind.name(), "watch alive again");
            }
            if k.failing_since.take().is_some() && k.silent_watches.is_empty() {
                k.error = None;
            }
        });
    }

    /// Record a failure and wait before the next try.
    async fn failed(&mut self, what: &str, error: String) {
        let delay = self.backoff.delay();
        tracing::warn!(kind = self.kind.name(), error = %error, retry_in = ?delay, "{what} failed; retrying");
        self.status.update(self.kind, |k| {
            k.error = Some(format!("{what} failed: {error}"));
            k.failing_since.get_or_insert(jiff::Timestamp::now());
        });
        tokio::time::sleep(delay).await;
    }

    /// Run forever: find a served version, list, watch.
    async fn run(mut self, first_version: &'static str) {
        let versions = self.kind.versions();
        let mut vi = versions
            .iter()
            .position(|v| *v == first_version)
            .unwrap_or(0);
        let mut absent_in_a_row = 0;
        loop {
            let version = versions[vi];
            let api_version = self.kind.api_version(version);
            self.status
                .update(self.kind, |k| k.api_version = api_version.clone());
            match self.list_and_watch(version).await {
                Stopped::Absent => {
                    // Kinds served in several versions (NetworkNamespace) try the next one, and
                    // come back round to the first.
                    vi = (vi + 1) % versions.len();
                    absent_in_a_row += 1;
                    if absent_in_a_row < versions.len() {
                        tracing::info!(
                            kind = self.kind.name(),
                            "{api_version} not served; trying {}",
                            versions[vi]
                        );
                        continue;
                    }
                    absent_in_a_row = 0;
                    let all = versions
                        .iter()
                        .map(|v| self.kind.api_version(v))
                        .collect::<Vec<_>>()
                        .join(", ");
                    let delay = self
                        .settings
                        .absent_retry
                        .mul_f64(0.75 + rand::random_range(0.0..=0.5));
                    tracing::warn!(kind = self.kind.name(), retry_in = ?delay, "resource not served; retrying");
                    self.status.update(self.kind, |k| {
                        k.served = Some(false);
                        k.error = Some(format!(
                            "{all} is not served by the API server (CRD not installed?)"
                        ));
                        k.failing_since.get_or_insert(jiff::Timestamp::now());
                    });
                    tokio::time::sleep(delay).await;
                }
                Stopped::Gone | Stopped::Relist => absent_in_a_row = 0,
            }
        }
    }

    /// List, then watch until a relist is needed; returns why it stopped (Absent: the version
    /// is not served; otherwise: relist).
    async fn list_and_watch(&mut self, version: &'static str) -> Stopped {
        let api = self.api(version);
        let rv = match self.list(&api, version).await {
            Ok(rv) => rv,
            Err(Failure::Absent) => return Stopped::Absent,
            Err(Failure::Gone) => return Stopped::Gone,
            Err(Failure::Other(e)) => {
                self.failed("list", e).await;
                return Stopped::Relist;
            }
        };
        self.watch(&api, version, rv).await
    }

    /// One full list (paged), applied; returns its resourceVersion.
    async fn list(&mut self, api: &Api<DynamicObject>, version: &str) -> Result<String, Failure> {
        let mut objects = Vec::new();
        let mut token: Option<String> = None;
        let rv = loop {
            let lp = ListParams {
                limit: Some(LIST_PAGE),
                continue_token: token.clone(),
                ..Default::default()
            };
            let page = api.list(&lp).await.map_err(|e| failure(&e))?;
            for obj in page.items {
                match to_resource(self.kind, version, obj) {
                    Ok(r) => objects.push(r),
                    Err(e) => undecodable(&self.status, ChangeType::Added, self.kind, &e),
                }
            }
            token = page.metadata.continue_.filter(|t| !t.is_empty());
            if token.is_none() {
                break page.metadata.resource_version.unwrap_or_default();
            }
        };
        if rv.is_empty() {
            return Err(Failure::Other("the list has no resourceVersion".into()));
        }
        let first = !self.listed_once;
        let changed = replace_kind(
            &self.store,
            self.kind,
            self.scope.as_deref(),
            objects,
            first,
        )
        .await;
        self.listed_once = true;
        self.backoff.reset();
        let (scope, now) = (self.scope_key(), jiff::Timestamp::now());
        self.status.update(self.kind, |k| {
            k.served = Some(true);
            if first {
                k.unsynced_scopes = k.unsynced_scopes.saturating_sub(1);
            }
            k.last_synced_at = Some(now);
            k.received_at.insert(scope.clone(), now);
            k.resource_versions.insert(scope, rv.clone());
            if k.failing_since.take().is_some() && k.silent_watches.is_empty() {
                k.error = None;
            }
        });
        tracing::info!(
            kind = self.kind.name(),
            namespace = self.scope.as_deref().unwrap_or("*"),
            changed,
            "listed"
        );
        Ok(rv)
    }

    /// Watch from `rv` until the kind must be relisted (or its version is not served).
    async fn watch(&mut self, api: &Api<DynamicObject>, version: &str, mut rv: String) -> Stopped {
        let timeout = self
            .settings
            .watch_timeout
            .as_secs()
            .clamp(1, u64::from(u32::MAX)) as u32;
        let params = WatchParams::default().timeout(timeout);
        loop {
            let stream = match api.watch(&params, &rv).await {
                Ok(s) => s,
                Err(e) => match failure(&e) {
                    Failure::Gone => return Stopped::Gone,
                    Failure::Absent => return Stopped::Absent,
                    Failure::Other(e) => {
                        self.failed("watch", e).await;
                        continue;
                    }
                },
            };
            let opened = tokio::time::Instant::now();
            let why = match self.follow(stream, version, &mut rv).await {
                // It sent an event or a bookmark, then the API server closed it at its timeout
                // (the proof of progress came with what it sent): watch on from there.
                Ended::Closed if self.delivered => {
                    self.backoff.reset();
                    continue;
                }
                Ended::Closed => {
                    if opened.elapsed() < self.settings.watch_timeout / 2 {
                        // Closed at once with nothing sent: not the API server's timeout; back off.
                        self.failed(
                            "watch",
                            "the watch closed at once without sending anything".into(),
                        )
                        .await;
                    }
                    // Asked for bookmarks, a live API server sends one before it closes a watch
                    // at its timeout: a close with neither event nor bookmark proves nothing.
                    "closed without an event or a bookmark"
                }
                Ended::Broken(e) => {
                    // A dropped connection: resume at once; a watch that keeps breaking before it
                    // delivers anything backs off like any failure (never a tight loop).
                    if self.delivered {
                        tracing::info!(kind = self.kind.name(), error = %e, "watch connection dropped; resuming");
                    } else {
                        self.failed("watch", e).await;
                    }
                    continue;
                }
                Ended::Gone => return Stopped::Gone,
                Ended::Silent => "stayed open past its timeout without an event or a bookmark",
            };
            if self.silent(why) {
                return Stopped::Relist;
            }
        }
    }

    /// A watch ended without proving progress (`why`): counted, the kind reported stale from
    /// the last event or bookmark received; true when it is time to relist.
    fn silent(&self, why: &str) -> bool {
        let scope = self.scope_key();
        let timeout = self.settings.watch_timeout;
        let mut silent = 0;
        self.status.update(self.kind, |k| {
            let n = k.silent_watches.entry(scope.clone()).or_insert(0);
            *n += 1;
            silent = *n;
            k.error = Some(format!(
                "the watch sent nothing (no event, no bookmark) in its {:.0} s: it {why}, {silent} time(s) in a row; the API server does not answer",
                timeout.as_secs_f64()
            ));
        });
        if silent >= SILENT_WATCHES_BEFORE_RELIST {
            tracing::warn!(
                kind = self.kind.name(),
                silent,
                "watches keep sending nothing; relisting"
            );
            return true;
        }
        tracing::warn!(kind = self.kind.name(), timeout = ?timeout, "the watch {why}; the kind is stale; watching again");
        false
    }

    /// Apply a watch's events until it ends.
    async fn follow(
        &mut self,
        stream: impl futures::Stream<Item = kube::Result<WatchEvent<DynamicObject>>>,
        version: &str,
        rv: &mut String,
    ) -> Ended {
        let window = self.settings.window();
        futures::pin_mut!(stream);
        self.delivered = false;
        loop {
            let item = match tokio::time::timeout(window, stream.next()).await {
                Err(_) => return Ended::Silent,
                Ok(None) => return Ended::Closed,
                Ok(Some(item)) => item,
            };
            let change = if matches!(item, Ok(WatchEvent::Added(_))) {
                ChangeType::Added
            } else {
                ChangeType::Modified
            };
            match item {
                Ok(WatchEvent::Added(obj) | WatchEvent::Modified(obj)) => {
                    let at = obj.metadata.resource_version.clone();
                    match to_resource(self.kind, version, obj) {
                        Ok(r) => {
                            self.store.apply(vec![Op::Mirror(r)]);
                        }
                        Err(e) => undecodable(&self.status, change, self.kind, &e),
                    }
                    if let Some(at) = at {
                        *rv = at;
                    }
                    self.received(rv, Delivered::Event);
                }
                Ok(WatchEvent::Deleted(obj)) => {
                    let ns = obj.metadata.namespace.clone().unwrap_or_default();
                    let name = obj.metadata.name.clone().unwrap_or_default();
                    self.store
                        .apply(vec![Op::Delete(Key::new(self.kind, &ns, &name))]);
                    if let Some(at) = obj.metadata.resource_version {
                        *rv = at;
                    }
                    self.received(rv, Delivered::Event);
                }
                Ok(WatchEvent::Bookmark(bm)) => {
                    *rv = bm.metadata.resource_version;
                    self.received(rv, Delivered::Bookmark);
                }
                Ok(WatchEvent::Error(s)) if s.code == 410 => return Ended::Gone,
                Ok(WatchEvent::Error(s)) => {
                    return Ended::Broken(format!("{} ({})", s.message, s.code));
                }
                Err(e) => return Ended::Broken(e.to_string()),
            }
        }
    }
}

fn undecodable(status: &SourceStatus, change: ChangeType, kind: Kind, e: &serde_json::Error) {
    status.undecodable[change as usize].fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    tracing::warn!(kind = kind.name(), error = %e, "object skipped: the model cannot read it");
}

/// Make the store's objects of `kind` (in `namespace`, or all) exactly `listed`: listed objects
/// are upserted as they are, objects not listed are deleted. The first list is the state the
/// source starts from (loaded, paced); a relist is applied atomically and its differences are
/// news.
async fn replace_kind(
    store: &Store,
    kind: Kind,
    namespace: Option<&str>,
    listed: Vec<Resource>,
    first: bool,
) -> usize {
    let snap = store.snapshot();
    let keep: HashSet<Key> = listed.iter().map(Key::of).collect();
    let existing: Vec<Key> = match namespace {
        Some(ns) => snap.list_in(kind, ns).map(|r| Key::of(r)).collect(),
        None => snap.list(kind).map(|r| Key::of(r)).collect(),
    };
    let mut ops: Vec<Op> = existing
        .into_iter()
        .filter(|k| !keep.contains(k))
        .map(Op::Delete)
        .collect();
    ops.extend(listed.into_iter().map(Op::Mirror));
    if first {
        store.load(ops).await
    } else {
        store.apply(ops).len()
    }
}
