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
//! keep hanging. The requests themselves are kube-client's (`Api::list`'s request, its answer read
//! by `page.rs`; `Api::watch`).

mod client;
pub mod fleet;
mod page;
mod watch;

pub use client::{ClientError, client, config};
pub use fleet::{Clusters, DatacenterSettings, Fleet, FleetError, FleetSettings};
use watch::Watch;

use std::sync::Arc;
use std::time::Duration;

use kube::Client;
use kube::api::{ApiResource, DynamicObject, ListParams};
use serde_json::Value;

use crate::model::{Datacenter, Kind, Resource};
use crate::retry::Backoff;
use crate::source::datacenters::NoAnswer;
use crate::store::Store;

use super::status::SourceStatus;

/// How to reach the cluster and what to watch.
#[derive(Clone, Debug, PartialEq)]
pub struct KubeSettings {
    /// The datacenter this cluster is (empty: the one datacenter of a single-cluster server).
    pub datacenter: Datacenter,
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
            datacenter: Datacenter::default(),
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

/// The API resource of `kind` served as `version` (what list, watch and apply requests name).
pub fn api_resource(kind: Kind, version: &str) -> ApiResource {
    ApiResource {
        group: kind.group().into(),
        version: version.into(),
        api_version: kind.api_version(version),
        kind: kind.name().into(),
        plural: kind.plural().into(),
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
/// when scoped), on the source's own thread; the watchers report into `status` under the
/// settings' datacenter.
pub async fn connect(
    store: Arc<Store>,
    status: Arc<SourceStatus>,
    settings: &KubeSettings,
    list_permits: Arc<tokio::sync::Semaphore>,
    inventory: Option<Arc<crate::inventory::Inventory>>,
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
    let mut source = start_on(
        runtime.handle(),
        client.clone(),
        store,
        status,
        settings,
        list_permits,
    );
    if let Some(inventory) = inventory {
        source.tasks.extend(crate::source::inventory::start(
            runtime.handle(),
            client,
            settings.datacenter.clone(),
            inventory,
        ));
    }
    source.runtime = Some(runtime);
    Ok(source)
}

fn start_on(
    runtime: &tokio::runtime::Handle,
    client: Client,
    store: Arc<Store>,
    status: Arc<SourceStatus>,
    settings: &KubeSettings,
    list_permits: Arc<tokio::sync::Semaphore>,
) -> KubeSource {
    use tracing::Instrument;
    let kinds = watched_kinds();
    let scopes_of = |kind: Kind| -> Vec<Option<String>> {
        if kind.namespaced() && !settings.namespaces.is_empty() {
            settings.namespaces.iter().cloned().map(Some).collect()
        } else {
            vec![None]
        }
    };
    status.add_datacenter(&settings.datacenter, &kinds, |k| scopes_of(k).len());
    let mut tasks = Vec::new();
    let (recovered, recoveries) = tokio::sync::watch::channel(0u64);
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
                loading: Some(store.loading()),
                delivered: false,
                list_permits: list_permits.clone(),
                recovered: recoveries.clone(),
            };
            // Several datacenters: every line a watcher logs names its datacenter.
            let span = if settings.datacenter.is_single() {
                tracing::Span::none()
            } else {
                tracing::info_span!("datacenter", key = %settings.datacenter)
            };
            tasks.push(runtime.spawn(watch.run(version).instrument(span)));
        }
    }
    if let Some(datacenters) = &status.datacenters {
        let probe = probe(
            client,
            status.clone(),
            settings.datacenter.clone(),
            datacenters.policy,
            recovered,
        );
        let span = tracing::info_span!("datacenter", key = %settings.datacenter);
        tasks.push(runtime.spawn(probe.instrument(span)));
    }
    KubeSource {
        status,
        tasks,
        runtime: None,
    }
}

/// Ask the datacenter's API server every probe interval whether it answers (a one-item list of
/// Vitistacks: any HTTP answer, even 404, proves it does; no answer within the interval does
/// not), long before a silent watch would time out.
async fn probe(
    client: Client,
    status: Arc<SourceStatus>,
    datacenter: crate::model::Datacenter,
    policy: crate::source::datacenters::Policy,
    recovered: tokio::sync::watch::Sender<u64>,
) {
    let ar = api_resource(Kind::Vitistack, Kind::Vitistack.versions()[0]);
    let api: kube::Api<DynamicObject> = kube::Api::all_with(client, &ar);
    let wait = policy.probe_interval.max(Duration::from_millis(100));
    let mut failing = false;
    loop {
        let answer =
            match tokio::time::timeout(wait, api.list(&ListParams::default().limit(1))).await {
                Ok(Ok(_)) | Ok(Err(kube::Error::Api(_))) => Ok(()),
                Ok(Err(e)) => Err(NoAnswer(format!("the API server does not answer: {e}"))),
                Err(_) => Err(NoAnswer(format!(
                    "the API server did not answer within {:.0} s",
                    wait.as_secs_f64()
                ))),
            };
        match &answer {
            Err(e) => {
                if !failing {
                    tracing::warn!(error = %e, "the datacenter's API server does not answer");
                }
                failing = true;
            }
            Ok(()) if failing => {
                // Back: every kind lists again, so what changed meanwhile (deletions included)
                // reaches the graph and its subscribers.
                tracing::info!("the datacenter's API server answers again; relisting");
                failing = false;
                recovered.send_modify(|n| *n += 1);
            }
            Ok(()) => {}
        }
        if let Some(d) = &status.datacenters {
            d.probed(&datacenter, answer);
        }
        tokio::time::sleep(wait).await;
    }
}

/// A store object from an API object: managedFields and node image lists dropped (credentials
/// are blanked as the object is built).
pub fn to_resource(
    datacenter: &Datacenter,
    kind: Kind,
    version: &str,
    obj: DynamicObject,
) -> Result<Resource, serde_json::Error> {
    resource_from_value(datacenter, kind, version, serde_json::to_value(obj)?)
}

/// [`to_resource`] for an API object read as JSON (a list page's item).
pub fn resource_from_value(
    datacenter: &Datacenter,
    kind: Kind,
    version: &str,
    mut value: Value,
) -> Result<Resource, serde_json::Error> {
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
    Ok(Resource::from_value(kind, version, value)?.in_datacenter(datacenter))
}
