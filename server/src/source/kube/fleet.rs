//! Several clusters, one datacenter each. Viti Stack runs one management cluster per datacenter;
//! the kube source watches each with its own client, watches and backoff (a [`KubeSource`] per
//! datacenter, on its own thread), so one that is slow or away never holds the others back.
//!
//! Which clusters: the one of `KUBECONFIG`/`KUBE_CONTEXT` (the single-datacenter case, as before),
//! the contexts named in `KUBE_CONTEXTS` (the context is the datacenter's key), or one kubeconfig
//! file per datacenter in `DATACENTERS_DIR` (the file name is the key; each file mounted from its
//! own Secret). The directory is read again every `DATACENTERS_RESCAN_SECONDS`: a file added is a
//! datacenter connected, a file removed is a datacenter dropped (its objects deleted from the
//! graph, so subscribers see them go), a file changed (a rotated credential) is a reconnection.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use super::{ClientError, KubeSettings, KubeSource, connect};
use crate::model::datacenter::{KeyError, valid_key};
use crate::model::{Datacenter, Kind};
use crate::source::status::SourceStatus;
use crate::store::{ObjectKey, Op, Store};

/// Why the datacenters cannot be watched as configured.
#[derive(Debug, thiserror::Error)]
pub enum FleetError {
    /// A context or file name that is not a datacenter key.
    #[error("{setting} {at}: {source}")]
    Key {
        setting: &'static str,
        at: String,
        source: KeyError,
    },
    /// The directory or one of its files cannot be read.
    #[error("DATACENTERS_DIR {at}: {source}")]
    Unreadable { at: String, source: std::io::Error },
    /// Two files name one datacenter (`west.yaml` and `west.conf`).
    #[error("DATACENTERS_DIR: {first} and {second} both name datacenter `{key}`")]
    SameKey {
        key: String,
        first: String,
        second: String,
    },
    /// Two files (or contexts) reach one cluster.
    #[error(
        "{first} and {second} reach the same cluster (Vitistack uid {uid}): datacenter `{key}` is not watched a second time as well as `{other}`"
    )]
    SameCluster {
        key: Datacenter,
        other: Datacenter,
        first: String,
        second: String,
        uid: String,
    },
    /// The single cluster cannot be reached.
    #[error(transparent)]
    Client(#[from] ClientError),
}

/// Each configured datacenter's settings, kept current as datacenters come and go.
pub type DatacenterSettings = Arc<Mutex<BTreeMap<Datacenter, KubeSettings>>>;

/// Which clusters the kube source watches.
#[derive(Clone, Debug, Default)]
pub enum Clusters {
    /// One cluster (`KUBECONFIG`, `KUBE_CONTEXT`, in-cluster): the single-datacenter case.
    #[default]
    One,
    /// One datacenter per context of the kubeconfig (`KUBE_CONTEXTS`); the context is the key.
    Contexts(Vec<String>),
    /// One datacenter per kubeconfig file in a directory (`DATACENTERS_DIR`); the file name
    /// (without a `.yaml`/`.yml`/`.conf` ending) is the key.
    Directory(PathBuf),
}

/// The kube source's settings: what every datacenter shares, and which clusters there are.
#[derive(Clone, Debug)]
pub struct FleetSettings {
    /// Shared by every datacenter (namespaces, timeouts, backoff); its kubeconfig and context
    /// are the single cluster's, or the file the contexts are read from.
    pub template: KubeSettings,
    /// Which clusters.
    pub clusters: Clusters,
    /// How often `DATACENTERS_DIR` is read again.
    pub rescan: Duration,
    /// How many first lists run at once, over every datacenter (`LIST_CONCURRENCY`): a start
    /// with many datacenters does not list all of them together.
    pub list_concurrency: usize,
    /// How several datacenters are judged (probes, staleness, readiness).
    pub policy: crate::source::datacenters::Policy,
    /// Other datacenters' agents push reports (`HUB_TOKENS_FILE`): datacenters are judged even
    /// with one cluster watched.
    pub pushed: bool,
    /// Where each datacenter's Helm releases and workloads go (None: not watched).
    pub inventory: Option<Arc<crate::inventory::Inventory>>,
}

impl Default for FleetSettings {
    fn default() -> Self {
        FleetSettings {
            template: KubeSettings::default(),
            clusters: Clusters::One,
            rescan: Duration::from_secs(10),
            list_concurrency: 4,
            policy: Default::default(),
            pushed: false,
            inventory: None,
        }
    }
}

/// A datacenter as configured: its settings, and the file content it was read from (a change
/// of the file is a reconnection).
#[derive(Clone, Debug, Default, PartialEq)]
struct Configured {
    settings_key: String,
    fingerprint: Vec<u8>,
}

impl FleetSettings {
    /// The single cluster's settings.
    pub fn one(template: KubeSettings) -> Self {
        FleetSettings {
            template,
            ..FleetSettings::default()
        }
    }

    /// The datacenters configured now, each with its settings, or why the configuration
    /// cannot be used (a bad key, an unreadable directory).
    pub fn datacenters(&self) -> Result<Vec<KubeSettings>, FleetError> {
        Ok(self.configured()?.into_iter().map(|(s, _)| s).collect())
    }

    fn configured(&self) -> Result<Vec<(KubeSettings, Configured)>, FleetError> {
        let with =
            |datacenter: &str, kubeconfig: Option<String>, context: Option<String>| KubeSettings {
                datacenter: Datacenter::new(datacenter),
                kubeconfig,
                context,
                ..self.template.clone()
            };
        match &self.clusters {
            Clusters::One => Ok(vec![(self.template.clone(), Configured::default())]),
            Clusters::Contexts(contexts) => contexts
                .iter()
                .map(|c| {
                    valid_key(c).map_err(|source| FleetError::Key {
                        setting: "KUBE_CONTEXTS",
                        at: c.clone(),
                        source,
                    })?;
                    Ok((
                        with(c, self.template.kubeconfig.clone(), Some(c.clone())),
                        Configured {
                            settings_key: c.clone(),
                            fingerprint: Vec::new(),
                        },
                    ))
                })
                .collect(),
            Clusters::Directory(dir) => {
                let mut out = Vec::new();
                for (key, path) in kubeconfig_files(dir)? {
                    let fingerprint =
                        std::fs::read(&path).map_err(|source| FleetError::Unreadable {
                            at: path.display().to_string(),
                            source,
                        })?;
                    let file = path.display().to_string();
                    out.push((
                        with(&key, Some(file.clone()), None),
                        Configured {
                            settings_key: file,
                            fingerprint,
                        },
                    ));
                }
                Ok(out)
            }
        }
    }
}

/// The kubeconfig files of a directory, by datacenter key: regular files (or links to them, as
/// a mounted Secret has), hidden ones left out (a Secret volume's `..data` bookkeeping).
fn kubeconfig_files(dir: &Path) -> Result<Vec<(String, PathBuf)>, FleetError> {
    let entries = std::fs::read_dir(dir).map_err(|source| FleetError::Unreadable {
        at: dir.display().to_string(),
        source,
    })?;
    let mut out = BTreeMap::new();
    for entry in entries.flatten() {
        let path = entry.path();
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        if name.starts_with('.') || !path.is_file() {
            continue;
        }
        let key = [".yaml", ".yml", ".conf", ".kubeconfig"]
            .iter()
            .find_map(|end| name.strip_suffix(end))
            .unwrap_or(name);
        valid_key(key).map_err(|source| FleetError::Key {
            setting: "DATACENTERS_DIR",
            at: path.display().to_string(),
            source,
        })?;
        if let Some(other) = out.insert(key.to_string(), path.clone()) {
            return Err(FleetError::SameKey {
                key: key.to_string(),
                first: other.display().to_string(),
                second: path.display().to_string(),
            });
        }
    }
    Ok(out.into_iter().collect())
}

/// One running datacenter.
struct Member {
    source: Option<KubeSource>,
    configured: Configured,
}

/// The running kube source: one [`KubeSource`] per datacenter.
pub struct Fleet {
    /// Every datacenter's per-kind state.
    pub status: Arc<SourceStatus>,
    members: Arc<Mutex<BTreeMap<Datacenter, Member>>>,
    settings: DatacenterSettings,
    rescan: Option<tokio::task::JoinHandle<()>>,
}

impl Drop for Fleet {
    fn drop(&mut self) {
        if let Some(t) = &self.rescan {
            t.abort();
        }
    }
}

impl Fleet {
    /// Connect every configured datacenter. With one cluster a client that cannot be built is
    /// an error (the server cannot do anything); with several, such a datacenter is reported
    /// unreachable and tried again at the next rescan, while the others are served.
    pub async fn start(store: Arc<Store>, settings: &FleetSettings) -> Result<Fleet, FleetError> {
        let permits = Arc::new(tokio::sync::Semaphore::new(
            settings.list_concurrency.max(1),
        ));
        let mut fleet = Fleet {
            status: Arc::new(SourceStatus::kube(
                settings.template.window(),
                (settings.pushed || !matches!(settings.clusters, Clusters::One))
                    .then_some(settings.policy),
            )),
            members: Default::default(),
            settings: Default::default(),
            rescan: None,
        };
        let configured = settings.configured()?;
        let handle = fleet.handle(settings.inventory.clone());
        if let Clusters::One = settings.clusters {
            for (one, configured) in configured {
                let source = connect(
                    store.clone(),
                    fleet.status.clone(),
                    &one,
                    permits.clone(),
                    settings.inventory.clone(),
                );
                handle.add(&one, configured, Some(source.await?));
            }
            return Ok(fleet);
        }
        reconcile(&handle, &store, configured, &permits, true).await?;
        // Read the configuration again now and then: the directory's files may change, and a
        // datacenter that could not be reached is tried again.
        let settings = settings.clone();
        fleet.rescan = Some(tokio::spawn(async move {
            loop {
                tokio::time::sleep(settings.rescan).await;
                match settings.configured() {
                    Ok(now) => {
                        // Refusals after the start are reported per datacenter.
                        let _ = reconcile(&handle, &store, now, &permits, false).await;
                    }
                    Err(e) => tracing::warn!(error = %e, "datacenters not read again"),
                }
            }
        }));
        Ok(fleet)
    }

    fn handle(&self, inventory: Option<Arc<crate::inventory::Inventory>>) -> Handle {
        Handle {
            status: self.status.clone(),
            members: self.members.clone(),
            settings: self.settings.clone(),
            inventory,
        }
    }

    /// The settings of each datacenter now (writes go to the datacenter of their object).
    pub fn settings(&self) -> DatacenterSettings {
        self.settings.clone()
    }

    /// The datacenters configured now.
    pub fn datacenters(&self) -> Vec<Datacenter> {
        self.members.lock().keys().cloned().collect()
    }
}

/// What the rescan task shares with the fleet.
#[derive(Clone)]
struct Handle {
    status: Arc<SourceStatus>,
    members: Arc<Mutex<BTreeMap<Datacenter, Member>>>,
    settings: DatacenterSettings,
    inventory: Option<Arc<crate::inventory::Inventory>>,
}

impl Handle {
    fn add(&self, settings: &KubeSettings, configured: Configured, source: Option<KubeSource>) {
        self.settings
            .lock()
            .insert(settings.datacenter.clone(), settings.clone());
        self.members
            .lock()
            .insert(settings.datacenter.clone(), Member { source, configured });
    }

    /// Drop a datacenter: its watches stop, its status goes, and its objects leave the graph.
    fn remove(&self, store: &Store, dc: &Datacenter) {
        let member = self.members.lock().remove(dc);
        drop(member);
        self.settings.lock().remove(dc);
        self.status.remove_datacenter(dc);
        let snap = store.snapshot();
        let gone: Vec<Op> = Kind::ALL
            .iter()
            .flat_map(|k| snap.list_datacenter(dc, *k))
            .map(|r| Op::Delete(ObjectKey::of(r)))
            .collect();
        let n = gone.len();
        store.apply(gone);
        if let Some(inventory) = &self.inventory {
            inventory.forget(dc);
        }
        tracing::info!(datacenter = %dc, objects = n, "datacenter removed");
    }
}

/// Make the running datacenters the configured ones: connect the new, drop the removed,
/// reconnect the changed, retry the ones whose client could not be built. A datacenter whose
/// cluster is one already watched (the same Vitistack uid: two files for one cluster) is not
/// connected: at start (`strict`) that refuses the start, naming both; later it is reported.
async fn reconcile(
    handle: &Handle,
    store: &Arc<Store>,
    configured: Vec<(KubeSettings, Configured)>,
    permits: &Arc<tokio::sync::Semaphore>,
    strict: bool,
) -> Result<(), FleetError> {
    let wanted: BTreeMap<Datacenter, (KubeSettings, Configured)> = configured
        .into_iter()
        .map(|(s, c)| (s.datacenter.clone(), (s, c)))
        .collect();
    let running: Vec<(Datacenter, Configured, bool)> = handle
        .members
        .lock()
        .iter()
        .map(|(dc, m)| (dc.clone(), m.configured.clone(), m.source.is_some()))
        .collect();
    for (dc, _, _) in running.iter().filter(|(dc, _, _)| !wanted.contains_key(dc)) {
        handle.remove(store, dc);
    }
    // The clusters already watched, by their Vitistack's uid.
    let mut clusters: BTreeMap<String, (Datacenter, String)> = BTreeMap::new();
    let snap = store.snapshot();
    for (dc, configured, _) in &running {
        for v in snap.list_datacenter(dc, Kind::Vitistack) {
            clusters.insert(
                v.uid().to_string(),
                (dc.clone(), configured.settings_key.clone()),
            );
        }
    }
    drop(snap);
    for (dc, (settings, configured)) in wanted {
        let current = running.iter().find(|(d, _, _)| *d == dc);
        match current {
            Some((_, c, true)) if *c == configured => continue,
            Some((_, c, _)) if *c != configured => {
                tracing::info!(datacenter = %dc, "datacenter configuration changed; reconnecting");
                // Its objects stay until the new watches list them again (a relist replaces).
                handle.members.lock().remove(&dc);
                handle.status.remove_datacenter(&dc);
                clusters.retain(|_, (d, _)| *d != dc);
            }
            _ => {}
        }
        let uids = vitistack_uids(&settings).await;
        let same = uids.iter().find_map(|uid| {
            clusters
                .get(uid)
                .filter(|(other, _)| *other != dc)
                .map(|(other, at)| (uid.clone(), other.clone(), at.clone()))
        });
        if let Some((uid, other, at)) = same {
            let refused = FleetError::SameCluster {
                key: dc.clone(),
                other,
                first: configured.settings_key.clone(),
                second: at,
                uid,
            };
            if strict {
                return Err(refused);
            }
            let reason = refused.to_string();
            tracing::warn!(datacenter = %dc, "{reason}");
            handle
                .status
                .unreachable(&dc, &super::watched_kinds(), &reason);
            handle.add(&settings, configured, None);
            continue;
        }
        match connect(
            store.clone(),
            handle.status.clone(),
            &settings,
            permits.clone(),
            handle.inventory.clone(),
        )
        .await
        {
            Ok(source) => {
                tracing::info!(datacenter = %dc, "datacenter connected");
                for uid in uids {
                    clusters.insert(uid, (dc.clone(), configured.settings_key.clone()));
                }
                handle.add(&settings, configured, Some(source));
            }
            Err(e) => {
                // Reported through the status (unreachable, with the reason) and tried again
                // at the next rescan; the others are served meanwhile.
                tracing::warn!(datacenter = %dc, error = %e, "datacenter cannot be reached");
                handle
                    .status
                    .unreachable(&dc, &super::watched_kinds(), &e.to_string());
                handle.add(&settings, configured, None);
            }
        }
    }
    Ok(())
}

/// The uids of the Vitistacks a datacenter's cluster holds (none when it cannot be asked within
/// a few seconds: it is then told apart by nothing, and checked again when it is reconnected).
async fn vitistack_uids(settings: &KubeSettings) -> Vec<String> {
    let ask = async {
        let client = super::client(settings).await.ok()?;
        let ar = super::api_resource(Kind::Vitistack, Kind::Vitistack.versions()[0]);
        let api: kube::Api<kube::api::DynamicObject> = kube::Api::all_with(client, &ar);
        let list = api.list(&kube::api::ListParams::default()).await.ok()?;
        Some(
            list.items
                .into_iter()
                .filter_map(|o| o.metadata.uid)
                .collect::<Vec<_>>(),
        )
    };
    tokio::time::timeout(Duration::from_secs(5), ask)
        .await
        .ok()
        .flatten()
        .unwrap_or_default()
}
