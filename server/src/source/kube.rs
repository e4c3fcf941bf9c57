//! The `kube` source: one kube-rs watcher per kind (and per namespace when scoped) feeding the
//! store, never polling.
//!
//! Watch semantics: the watcher lists, then watches from the list's resourceVersion, resuming
//! from the last version seen when a connection drops and relisting on `410 Gone`. Every
//! (re)list is applied as one atomic replacement of that kind's objects in scope: objects missing
//! from the list are delivered as deletions. A watch that goes silent for longer than its server
//! timeout plus a margin is restarted (kube-runtime's idle timeout). Errors back off exponentially
//! with jitter; a kind whose resource is not installed (404) is reported and retried slowly, never
//! fatal.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::api::{ApiResource, DynamicObject};
use kube::runtime::watcher;
use kube::{Api, Client};
use serde_json::Value;

use crate::model::{Kind, Resource};
use crate::store::{Key, Op, Store};

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
    /// Server-side watch timeout; a watch silent for this plus 5 s is restarted.
    pub watch_timeout: Duration,
    /// First retry delay after an error; doubles (with jitter) up to `max_backoff`.
    pub min_backoff: Duration,
    /// Longest retry delay after an error.
    pub max_backoff: Duration,
    /// Retry delay for a kind whose resource is not installed.
    pub absent_retry: Duration,
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

/// Build a client the way kubectl would: `KUBECONFIG` (with `KUBE_CONTEXT`), else in-cluster
/// service account, else `~/.kube/config`.
pub async fn client(settings: &KubeSettings) -> Result<Client, String> {
    let opts = kube::config::KubeConfigOptions {
        context: settings.context.clone(),
        ..Default::default()
    };
    let config = match &settings.kubeconfig {
        Some(paths) => {
            let mut merged: Option<kube::config::Kubeconfig> = None;
            for path in std::env::split_paths(paths).filter(|p| !p.as_os_str().is_empty()) {
                let kc = kube::config::Kubeconfig::read_from(&path)
                    .map_err(|e| format!("KUBECONFIG {}: {e}", path.display()))?;
                merged = Some(match merged {
                    None => kc,
                    Some(m) => m.merge(kc).map_err(|e| format!("KUBECONFIG: {e}"))?,
                });
            }
            let kc = merged.ok_or("KUBECONFIG is empty")?;
            kube::Config::from_custom_kubeconfig(kc, &opts)
                .await
                .map_err(|e| format!("KUBECONFIG {paths}: {e}"))?
        }
        None if settings.context.is_some() => kube::Config::from_kubeconfig(&opts)
            .await
            .map_err(|e| format!("KUBE_CONTEXT: {e}"))?,
        None => kube::Config::infer()
            .await
            .map_err(|e| format!("no cluster configuration found: {e}"))?,
    };
    Client::try_from(config).map_err(|e| format!("cannot build a Kubernetes client: {e}"))
}

/// The version of each kind the source watches: the first version the CRD serves (the one the
/// operators write); `kubevirt.io/v1` VMs and VMIs; core `v1` Nodes.
pub fn watched_kinds() -> Vec<(Kind, &'static str)> {
    Kind::ALL.iter().map(|k| (*k, k.versions()[0])).collect()
}

/// The running watchers.
pub struct KubeSource {
    /// Per-kind state.
    pub status: Arc<SourceStatus>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for KubeSource {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// Start one watcher per kind (per namespace for namespaced kinds when scoped).
pub fn start(client: Client, store: Arc<Store>, settings: &KubeSettings) -> KubeSource {
    let kinds = watched_kinds();
    let scopes_of = |kind: Kind| -> Vec<Option<String>> {
        if kind.namespaced() && !settings.namespaces.is_empty() {
            settings.namespaces.iter().cloned().map(Some).collect()
        } else {
            vec![None]
        }
    };
    let status = Arc::new(SourceStatus::kube(&kinds, |k| scopes_of(k).len()));
    let mut tasks = Vec::new();
    for (kind, version) in kinds {
        let scopes = scopes_of(kind);
        for scope in scopes {
            tasks.push(tokio::spawn(watch_kind(
                client.clone(),
                store.clone(),
                status.clone(),
                settings.clone(),
                kind,
                version,
                scope,
            )));
        }
    }
    KubeSource { status, tasks }
}

/// A store object from an API object: managedFields dropped, credentials blanked.
pub fn to_resource(kind: Kind, version: &str, obj: DynamicObject) -> Result<Resource, String> {
    let mut value = serde_json::to_value(obj).map_err(|e| e.to_string())?;
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
    Resource::from_value(kind, version, value).map_err(|e| e.to_string())
}

/// Exponential backoff with full jitter.
struct Backoff {
    next: Duration,
    min: Duration,
    max: Duration,
}

impl Backoff {
    fn new(min: Duration, max: Duration) -> Self {
        Backoff {
            next: min,
            min,
            max,
        }
    }

    fn reset(&mut self) {
        self.next = self.min;
    }

    fn delay(&mut self) -> Duration {
        let base = self.next;
        self.next = (self.next * 2).min(self.max);
        // Half fixed, half random: never a tight loop, never a thundering herd.
        let jitter = rand::random_range(0.0..=0.5);
        base.mul_f64(0.5 + jitter)
    }
}

fn is_not_found(e: &watcher::Error) -> bool {
    let status_404 = |err: &kube::Error| matches!(err, kube::Error::Api(s) if s.code == 404);
    match e {
        watcher::Error::InitialListFailed(err)
        | watcher::Error::WatchStartFailed(err)
        | watcher::Error::WatchFailed(err) => status_404(err),
        watcher::Error::WatchError(s) => s.code == 404,
        _ => false,
    }
}

async fn watch_kind(
    client: Client,
    store: Arc<Store>,
    status: Arc<SourceStatus>,
    settings: KubeSettings,
    kind: Kind,
    version: &'static str,
    namespace: Option<String>,
) {
    // Kinds served in several versions (NetworkNamespace) fall back to the next version when
    // one is not served, and come back round to the first.
    let versions = kind.versions();
    let mut vi = versions.iter().position(|v| *v == version).unwrap_or(0);
    let mut absent_versions = 0;
    let mut listed_once = false;
    let timeout = settings
        .watch_timeout
        .as_secs()
        .clamp(1, u64::from(u32::MAX)) as u32;
    let mut backoff = Backoff::new(settings.min_backoff, settings.max_backoff);
    let scope = namespace.as_deref();
    'versions: loop {
        let version = versions[vi];
        let ar = ApiResource {
            group: kind.group().into(),
            version: version.into(),
            api_version: kind.api_version(version),
            kind: kind.name().into(),
            plural: kind.plural().into(),
        };
        status.update(kind, |k| k.api_version = ar.api_version.clone());
        let api: Api<DynamicObject> = match &namespace {
            Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
            None => Api::all_with(client.clone(), &ar),
        };
        let config = watcher::Config::default().timeout(timeout);
        let mut stream = watcher::watcher(api, config).boxed();
        let mut listing: Option<Vec<Resource>> = None;
        while let Some(event) = stream.next().await {
            let now = jiff::Timestamp::now();
            match event {
                Ok(watcher::Event::Init) => listing = Some(Vec::new()),
                Ok(watcher::Event::InitApply(obj)) => match to_resource(kind, version, obj) {
                    Ok(r) => listing.get_or_insert_with(Vec::new).push(r),
                    Err(e) => undecodable(kind, &e),
                },
                Ok(watcher::Event::InitDone) => {
                    let listed = listing.take().unwrap_or_default();
                    let first_sync = !listed_once;
                    // The first list is the cluster as it was; a relist's differences are news.
                    let changed = replace_kind(&store, kind, scope, listed, first_sync);
                    backoff.reset();
                    absent_versions = 0;
                    listed_once = true;
                    status.update(kind, |k| {
                        k.served = Some(true);
                        if first_sync {
                            k.unsynced_scopes = k.unsynced_scopes.saturating_sub(1);
                        }
                        k.last_synced_at = Some(now);
                        k.failing_since = None;
                        k.error = None;
                    });
                    tracing::info!(
                        kind = kind.name(),
                        namespace = scope.unwrap_or("*"),
                        changed,
                        "listed"
                    );
                }
                Ok(watcher::Event::Apply(obj)) => match to_resource(kind, version, obj) {
                    Ok(r) => {
                        store.apply(vec![Op::Mirror(r)]);
                        healthy(&status, kind, now);
                    }
                    Err(e) => undecodable(kind, &e),
                },
                Ok(watcher::Event::Delete(obj)) => {
                    let ns = obj.metadata.namespace.clone().unwrap_or_default();
                    let name = obj.metadata.name.clone().unwrap_or_default();
                    store.apply(vec![Op::Delete(Key::new(kind, &ns, &name))]);
                    healthy(&status, kind, now);
                }
                Err(e) => {
                    let absent = is_not_found(&e);
                    let delay = if absent {
                        // Not installed: say so and look again now and then.
                        settings
                            .absent_retry
                            .mul_f64(0.75 + rand::random_range(0.0..=0.5))
                    } else {
                        backoff.delay()
                    };
                    if absent && versions.len() > 1 {
                        vi = (vi + 1) % versions.len();
                        absent_versions += 1;
                        if absent_versions < versions.len() {
                            // Not absent yet: another version may be served.
                            tracing::info!(
                                kind = kind.name(),
                                "{} not served; trying {}",
                                ar.api_version,
                                versions[vi]
                            );
                            continue 'versions;
                        }
                        absent_versions = 0;
                    }
                    status.update(kind, |k| {
                        k.error = Some(if absent {
                            format!(
                                "{} is not served by the API server (CRD not installed?)",
                                versions
                                    .iter()
                                    .map(|v| kind.api_version(v))
                                    .collect::<Vec<_>>()
                                    .join(", ")
                            )
                        } else {
                            e.to_string()
                        });
                        if absent {
                            k.served = Some(false);
                        }
                        k.failing_since.get_or_insert(now);
                    });
                    if absent {
                        tracing::warn!(kind = kind.name(), retry_in = ?delay, "resource not served; retrying");
                    } else {
                        tracing::warn!(kind = kind.name(), error = %e, retry_in = ?delay, "watch failed; retrying");
                    }
                    tokio::time::sleep(delay).await;
                    if absent && versions.len() > 1 {
                        continue 'versions;
                    }
                }
            }
        }
        return;
    }
}

fn healthy(status: &SourceStatus, kind: Kind, now: jiff::Timestamp) {
    status.update(kind, |k| {
        k.last_event_at = Some(now);
        k.failing_since = None;
        k.error = None;
    });
}

fn undecodable(kind: Kind, e: &str) {
    tracing::warn!(kind = kind.name(), error = %e, "object skipped: the model cannot read it");
}

/// Make the store's objects of `kind` (in `namespace`, or all) exactly `listed`, atomically:
/// listed objects are upserted as they are, objects not listed are deleted.
fn replace_kind(
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
        store.apply_loaded(ops).len()
    } else {
        store.apply(ops).len()
    }
}
