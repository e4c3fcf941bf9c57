//! The application inventory's facts from a datacenter's cluster, by watch (kube-rs's
//! `watcher`: list, then watch, relist after a gap): Helm's release Secrets (only those of type
//! `helm.sh/release.v1`, by field selector) and ConfigMaps (label `owner=helm`), Pods, Services,
//! PersistentVolumeClaims, Ingresses, Namespaces, and each namespace's `uuid` Secret (by name).
//!
//! Every object is trimmed to its facts here; a release's values, config and manifest are read
//! by the decoder and dropped there.

use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{
    ConfigMap, Namespace, PersistentVolumeClaim, Pod, Secret, Service,
};
use k8s_openapi::api::networking::v1::Ingress;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::runtime::watcher::{self, Event};
use kube::runtime::{WatchStreamExt, watcher as watch_all};
use kube::{Api, Client, Resource};

use crate::domain::applications::{IngressFacts, Meta, PodFacts, ServiceFacts, VolumeFacts};
use crate::inventory::{Fact, FactKind, Inventory};
use crate::model::Datacenter;
use crate::model::helm;

/// Helm's Secret type for releases.
pub const RELEASE_SECRET_TYPE: &str = "helm.sh/release.v1";

/// Start every watch of the inventory for datacenter `dc` on `runtime`.
pub fn start(
    runtime: &tokio::runtime::Handle,
    client: Client,
    dc: Datacenter,
    inventory: Arc<Inventory>,
) -> Vec<tokio::task::JoinHandle<()>> {
    let w = |kind: FactKind| Watching {
        dc: dc.clone(),
        inventory: inventory.clone(),
        kind,
    };
    inventory.expect(
        &dc,
        &[
            FactKind::Release,
            FactKind::ConfigMapRelease,
            FactKind::AppUuid,
            FactKind::Pod,
            FactKind::Service,
            FactKind::Volume,
            FactKind::Ingress,
            FactKind::Namespace,
        ],
    );
    let secrets: Api<Secret> = Api::all(client.clone());
    let uuid = runtime.spawn(keep_cluster_uuid(
        client.clone(),
        dc.clone(),
        inventory.clone(),
    ));
    let configmaps: Api<ConfigMap> = Api::all(client.clone());
    vec![
        uuid,
        runtime.spawn(w(FactKind::Release).follow(
            secrets.clone(),
            watcher::Config::default().fields(&format!("type={RELEASE_SECRET_TYPE}")),
            release_of_secret,
            "Helm release Secrets",
        )),
        runtime.spawn(w(FactKind::ConfigMapRelease).follow(
            configmaps,
            watcher::Config::default().labels("owner=helm"),
            release_of_configmap,
            "Helm release ConfigMaps",
        )),
        runtime.spawn(w(FactKind::AppUuid).follow(
            secrets,
            watcher::Config::default().fields("metadata.name=uuid"),
            app_uuid,
            "uuid Secrets",
        )),
        runtime.spawn(w(FactKind::Pod).follow(
            Api::<Pod>::all(client.clone()),
            watcher::Config::default(),
            |p| Some(Fact::Pod(pod(p))),
            "Pods",
        )),
        runtime.spawn(w(FactKind::Service).follow(
            Api::<Service>::all(client.clone()),
            watcher::Config::default(),
            |s| Some(Fact::Service(service(s))),
            "Services",
        )),
        runtime.spawn(w(FactKind::Volume).follow(
            Api::<PersistentVolumeClaim>::all(client.clone()),
            watcher::Config::default(),
            |v| Some(Fact::Volume(volume(v))),
            "PersistentVolumeClaims",
        )),
        runtime.spawn(w(FactKind::Ingress).follow(
            Api::<Ingress>::all(client.clone()),
            watcher::Config::default(),
            |i| Some(Fact::Ingress(ingress(i))),
            "Ingresses",
        )),
        runtime.spawn(w(FactKind::Namespace).follow(
            Api::<Namespace>::all(client),
            watcher::Config::default(),
            |n| {
                Some(Fact::Namespace {
                    name: n.metadata.name.clone().unwrap_or_default(),
                    uid: n.metadata.uid.clone().unwrap_or_default(),
                })
            },
            "Namespaces",
        )),
    ]
}

/// The ConfigMap that keeps the cluster's UUID (in the namespace the server runs in).
pub const CLUSTER_UUID_CONFIGMAP: &str = "vitistack-graphql-inventory";

/// Read the cluster's UUID from its ConfigMap, or make it there once (a replica that loses the
/// race to create it reads the winner's); tried again until it works.
async fn keep_cluster_uuid(client: Client, dc: Datacenter, inventory: Arc<Inventory>) {
    let namespace = inventory
        .settings()
        .namespace
        .clone()
        .unwrap_or_else(|| client.default_namespace().to_string());
    let api: Api<ConfigMap> = Api::namespaced(client, &namespace);
    let mut backoff = crate::retry::Backoff::new(
        std::time::Duration::from_millis(500),
        std::time::Duration::from_secs(60),
    );
    loop {
        match cluster_uuid(&api).await {
            Ok(uuid) => {
                tracing::info!(datacenter = %dc, namespace = %namespace, configmap = CLUSTER_UUID_CONFIGMAP, cluster_uuid = %uuid, "application inventory: cluster UUID");
                inventory.set_cluster_uuid(&dc, uuid);
                return;
            }
            Err(e) => {
                tracing::warn!(datacenter = %dc, namespace = %namespace, error = %e, "application inventory: the cluster UUID cannot be read or kept in ConfigMap {CLUSTER_UUID_CONFIGMAP}; trying again");
            }
        }
        tokio::time::sleep(backoff.delay()).await;
    }
}

/// Why the cluster UUID is not known yet.
#[derive(Debug, thiserror::Error)]
enum UuidError {
    #[error(transparent)]
    Kube(#[from] kube::Error),
    #[error("the ConfigMap has no `clusterUuid`")]
    Empty,
}

async fn cluster_uuid(api: &Api<ConfigMap>) -> Result<String, UuidError> {
    let read = |c: ConfigMap| c.data.and_then(|mut d| d.remove("clusterUuid"));
    if let Some(uuid) = api.get_opt(CLUSTER_UUID_CONFIGMAP).await?.and_then(read) {
        return Ok(uuid);
    }
    let made = ConfigMap {
        metadata: ObjectMeta {
            name: Some(CLUSTER_UUID_CONFIGMAP.into()),
            labels: Some(
                [(
                    "app.kubernetes.io/managed-by".to_string(),
                    "vitistack-graphql".to_string(),
                )]
                .into(),
            ),
            ..Default::default()
        },
        data: Some([("clusterUuid".to_string(), uuid::Uuid::new_v4().to_string())].into()),
        ..Default::default()
    };
    match api.create(&Default::default(), &made).await {
        Ok(c) => read(c).ok_or(UuidError::Empty),
        // Another replica made it first: theirs is the one.
        Err(kube::Error::Api(e)) if e.code == 409 => api
            .get(CLUSTER_UUID_CONFIGMAP)
            .await
            .map(read)?
            .ok_or(UuidError::Empty),
        Err(e) => Err(e.into()),
    }
}

/// One watch's destination.
struct Watching {
    dc: Datacenter,
    inventory: Arc<Inventory>,
    kind: FactKind,
}

impl Watching {
    /// Follow `api` for ever: every object trimmed by `trim` (None: not a fact, e.g. a release
    /// that cannot be read) into the inventory; a relist replaces what this watch said before.
    async fn follow<K>(
        self,
        api: Api<K>,
        config: watcher::Config,
        trim: impl Fn(&K) -> Option<Fact>,
        what: &'static str,
    ) where
        K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
    {
        let mut stream = watch_all(api, config).default_backoff().boxed();
        // A relist's objects, kept until it is complete.
        let mut listed: Vec<Fact> = Vec::new();
        let mut failing = false;
        while let Some(event) = stream.next().await {
            let event = match event {
                Ok(e) => e,
                Err(e) => {
                    if !failing {
                        tracing::warn!(datacenter = %self.dc, error = %e, "application inventory: cannot watch {what}; trying again");
                    }
                    failing = true;
                    continue;
                }
            };
            if failing {
                tracing::info!(datacenter = %self.dc, "application inventory: watching {what} again");
                failing = false;
            }
            match event {
                Event::Init => listed.clear(),
                Event::InitApply(o) => listed.extend(trim(&o)),
                Event::InitDone => {
                    self.inventory
                        .replace(&self.dc, self.kind, std::mem::take(&mut listed));
                }
                Event::Apply(o) => match trim(&o) {
                    Some(f) => self.inventory.apply(&self.dc, f),
                    None => {
                        let (ns, name) = place(o.meta(), self.kind);
                        self.inventory.delete(&self.dc, self.kind, &ns, &name);
                    }
                },
                Event::Delete(o) => {
                    let (ns, name) = place(o.meta(), self.kind);
                    self.inventory.delete(&self.dc, self.kind, &ns, &name);
                }
            }
        }
    }
}

/// Where a deleted object's fact was kept: (namespace, name); a namespace is its own.
fn place(meta: &ObjectMeta, kind: FactKind) -> (String, String) {
    let name = meta.name.clone().unwrap_or_default();
    match kind {
        FactKind::Namespace => (name.clone(), name),
        FactKind::AppUuid => (meta.namespace.clone().unwrap_or_default(), "uuid".into()),
        _ => (meta.namespace.clone().unwrap_or_default(), name),
    }
}

fn meta(m: &ObjectMeta) -> Meta {
    Meta {
        name: m.name.clone().unwrap_or_default(),
        namespace: m.namespace.clone().unwrap_or_default(),
        labels: m.labels.clone().unwrap_or_default(),
        annotations: m.annotations.clone().unwrap_or_default(),
    }
}

/// A release from Helm's Secret (None, with a warning naming it, when it cannot be read).
fn release_of_secret(s: &Secret) -> Option<Fact> {
    if s.type_.as_deref() != Some(RELEASE_SECRET_TYPE) {
        return None;
    }
    let data = s.data.as_ref()?.get("release")?;
    release_fact(&s.metadata, helm::decode(&data.0), false)
}

/// A release from Helm's ConfigMap storage.
fn release_of_configmap(c: &ConfigMap) -> Option<Fact> {
    let data = c.data.as_ref()?.get("release")?;
    release_fact(&c.metadata, helm::from_configmap_data(data), true)
}

fn release_fact(
    m: &ObjectMeta,
    decoded: Result<helm::HelmRelease, helm::HelmError>,
    in_configmap: bool,
) -> Option<Fact> {
    let object = m.name.clone().unwrap_or_default();
    let namespace = m.namespace.clone().unwrap_or_default();
    match decoded {
        Ok(mut release) => {
            // Helm keeps a release in its own namespace; the object's is the truth.
            release.namespace = namespace;
            Some(Fact::Release {
                object,
                release: Box::new(release),
                in_configmap,
            })
        }
        Err(e) => {
            tracing::warn!(namespace = %namespace, object = %object, error = %e, "application inventory: a Helm release cannot be read; skipped");
            None
        }
    }
}

/// A namespace's app UUID (the `uuid` Secret's `uuid` key, else its only key).
fn app_uuid(s: &Secret) -> Option<Fact> {
    let data = s.data.as_ref()?;
    let value = data
        .get("uuid")
        .or_else(|| (data.len() == 1).then(|| data.values().next()).flatten())?;
    let uuid = String::from_utf8(value.0.clone()).ok()?.trim().to_string();
    // A UUID, not whatever else a Secret called `uuid` may hold.
    uuid::Uuid::parse_str(&uuid).ok()?;
    Some(Fact::AppUuid {
        namespace: s.metadata.namespace.clone().unwrap_or_default(),
        uuid,
    })
}

/// A pod's facts.
pub fn pod(p: &Pod) -> PodFacts {
    let statuses = p
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.clone())
        .unwrap_or_default();
    PodFacts {
        meta: meta(&p.metadata),
        images: p
            .spec
            .as_ref()
            .map(|s| {
                s.containers
                    .iter()
                    .filter_map(|c| c.image.clone())
                    .collect()
            })
            .unwrap_or_default(),
        phase: p
            .status
            .as_ref()
            .and_then(|s| s.phase.clone())
            .unwrap_or_default(),
        ready: !statuses.is_empty() && statuses.iter().all(|c| c.ready),
        restarts: statuses
            .iter()
            .map(|c| u32::try_from(c.restart_count).unwrap_or(0))
            .sum(),
        waiting: statuses
            .iter()
            .filter_map(|c| c.state.as_ref()?.waiting.as_ref()?.reason.clone())
            .collect(),
        ready_since: p
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
            .and_then(|c| c.last_transition_time.as_ref())
            .map(|t| t.0.to_string()),
    }
}

fn service(s: &Service) -> ServiceFacts {
    ServiceFacts {
        meta: meta(&s.metadata),
        ports: s
            .spec
            .as_ref()
            .and_then(|s| s.ports.as_ref())
            .map(|ports| ports.iter().map(|p| p.port).collect())
            .unwrap_or_default(),
    }
}

fn volume(v: &PersistentVolumeClaim) -> VolumeFacts {
    let requested = v.spec.as_ref().and_then(|s| {
        s.resources
            .as_ref()?
            .requests
            .as_ref()?
            .get("storage")
            .cloned()
    });
    VolumeFacts {
        meta: meta(&v.metadata),
        requested_bytes: requested
            .and_then(|q| crate::model::quantity::Quantity::parse(&q.0).ok()?.bytes())
            .map(i128::from),
    }
}

fn ingress(i: &Ingress) -> IngressFacts {
    let mut hosts: Vec<String> = i
        .spec
        .as_ref()
        .and_then(|s| s.rules.as_ref())
        .map(|rules| rules.iter().filter_map(|r| r.host.clone()).collect())
        .unwrap_or_default();
    hosts.dedup();
    IngressFacts {
        meta: meta(&i.metadata),
        hosts,
    }
}
