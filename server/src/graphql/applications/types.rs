//! An application in the API: the release's live revision, its health, what it runs (pods,
//! services, volumes, ingresses), its revisions and history, and the cluster it runs on.

use std::sync::Arc;

use async_graphql::{Context, ID, Object, SimpleObject};

use super::{HealthValue, application_id};
use crate::graphql::mark_volatile;
use crate::inventory::AppEntry;

/// One application: a Helm release's live revision and what it runs.
pub struct ApplicationObj(pub Arc<AppEntry>);

/// A pod of an application.
#[derive(SimpleObject)]
pub struct ApplicationPod {
    pub name: String,
    /// Its first container's image.
    pub image: String,
    /// Every container's image.
    pub images: Vec<String>,
    /// `Running`, `Pending`, `Failed`, …
    pub phase: String,
    /// Every container ready.
    pub ready: bool,
    /// Restarts over its containers.
    pub restarts: u32,
    /// Why containers wait (`CrashLoopBackOff`, `ImagePullBackOff`, …).
    pub waiting: Vec<String>,
}

/// A service of an application.
#[derive(SimpleObject)]
pub struct ApplicationService {
    pub name: String,
    pub ports: Vec<i32>,
}

/// A PersistentVolumeClaim of an application.
#[derive(SimpleObject)]
pub struct ApplicationVolume {
    pub name: String,
    /// The storage it requests, in bytes.
    pub requested_bytes: Option<f64>,
}

/// An ingress of an application.
#[derive(SimpleObject)]
pub struct ApplicationIngress {
    pub name: String,
    pub hosts: Vec<String>,
}

/// One revision of a release.
#[derive(SimpleObject)]
pub struct ApplicationRevision {
    pub revision: u64,
    /// Helm's status of it (`deployed`, `superseded`, `failed`, `pending-upgrade`, …).
    pub status: String,
    /// When it was deployed (RFC 3339), when Helm says.
    pub updated: Option<String>,
    pub chart_version: String,
    pub app_version: String,
}

#[Object(name = "Application")]
impl ApplicationObj {
    /// Global id.
    async fn id(&self) -> ID {
        application_id(&self.0)
    }
    /// The datacenter's key (`""` on a single-cluster server).
    async fn datacenter(&self) -> &str {
        self.0.datacenter.key()
    }
    /// The release's namespace.
    async fn namespace(&self) -> &str {
        &self.0.app.release.namespace
    }
    /// The release's name.
    async fn name(&self) -> &str {
        &self.0.app.release.name
    }
    /// The live revision.
    async fn revision(&self) -> u64 {
        self.0.app.release.revision
    }
    /// When the live revision was deployed (RFC 3339).
    async fn updated(&self) -> Option<&str> {
        self.0.app.release.updated.as_deref()
    }
    /// Helm's status of the live revision.
    async fn status(&self) -> &str {
        self.0.app.release.status.as_str()
    }
    /// The chart's name.
    async fn chart(&self) -> &str {
        &self.0.app.release.chart
    }
    async fn chart_version(&self) -> &str {
        &self.0.app.release.chart_version
    }
    async fn app_version(&self) -> &str {
        &self.0.app.release.app_version
    }
    async fn health(&self) -> HealthValue {
        self.0.app.health.into()
    }
    /// Why it is not healthy, in words.
    async fn reasons(&self) -> &[String] {
        &self.0.app.reasons
    }
    /// The KubernetesCluster it runs on, where that is known: the one whose
    /// `vitistack.io/kube-system-uid` annotation (written by talos-operator) is the UID of the
    /// watched cluster's `kube-system` namespace, in any datacenter.
    async fn kubernetes_cluster(
        &self,
        ctx: &Context<'_>,
    ) -> async_graphql::Result<Option<crate::graphql::types::ClusterObj>> {
        mark_volatile(ctx);
        let apps = super::shown(ctx)?;
        let Some(uid) = apps.kube_system_uids.get(&self.0.datacenter) else {
            return Ok(None);
        };
        let store = crate::graphql::types::snap(ctx);
        // Its own datacenter first: a management cluster usually registers its tenants.
        let mut datacenters: Vec<&crate::model::Datacenter> = store.datacenters().collect();
        datacenters.sort_by_key(|d| **d != self.0.datacenter);
        Ok(datacenters.into_iter().find_map(|dc| {
            store
                .lookup_one(dc, crate::store::Idx::ClusterByKubeSystemUid, uid)
                .cloned()
                .and_then(crate::graphql::types::ClusterObj::new)
        }))
    }
    /// From the namespace's `uuid` Secret, when it has one.
    async fn app_uuid(&self) -> Option<&str> {
        self.0.app_uuid.as_deref()
    }
    /// Pods ready.
    async fn ready_pods(&self) -> usize {
        self.0.ready_pods().0
    }
    async fn pods(&self) -> Vec<ApplicationPod> {
        self.0
            .app
            .pods
            .iter()
            .map(|p| ApplicationPod {
                name: p.meta.name.clone(),
                image: p.images.first().cloned().unwrap_or_default(),
                images: p.images.clone(),
                phase: p.phase.clone(),
                ready: p.ready,
                restarts: p.restarts,
                waiting: p.waiting.clone(),
            })
            .collect()
    }
    async fn services(&self) -> Vec<ApplicationService> {
        self.0
            .app
            .services
            .iter()
            .map(|s| ApplicationService {
                name: s.meta.name.clone(),
                ports: s.ports.clone(),
            })
            .collect()
    }
    async fn volumes(&self) -> Vec<ApplicationVolume> {
        self.0
            .app
            .volumes
            .iter()
            .map(|v| ApplicationVolume {
                name: v.meta.name.clone(),
                requested_bytes: v.requested_bytes.map(|b| b as f64),
            })
            .collect()
    }
    async fn ingresses(&self) -> Vec<ApplicationIngress> {
        self.0
            .app
            .ingresses
            .iter()
            .map(|i| ApplicationIngress {
                name: i.meta.name.clone(),
                hosts: i.hosts.clone(),
            })
            .collect()
    }
    /// What happened to it, newest first (the event log: installed, each new revision, each
    /// change of health, removed).
    async fn history(
        &self,
        ctx: &Context<'_>,
        first: Option<i32>,
        after: Option<String>,
    ) -> async_graphql::Result<
        async_graphql::connection::Connection<String, crate::graphql::history::HistoryEvent>,
    > {
        let r = &self.0.app.release;
        let dc = self.0.datacenter.key();
        let filter = crate::graphql::history::EventFilter {
            kind: Some(crate::history::applications::KIND.to_string()),
            namespace: Some(r.namespace.clone()),
            name: Some(r.name.clone()),
            datacenter: (!dc.is_empty()).then(|| dc.to_string()),
            ..Default::default()
        };
        crate::graphql::history::events(ctx, Some(filter), first, after).await
    }

    /// Every revision Helm keeps, newest first (the live one among them).
    async fn revisions(&self) -> Vec<ApplicationRevision> {
        self.0
            .revisions
            .iter()
            .map(|r| ApplicationRevision {
                revision: r.revision,
                status: r.status.as_str().to_string(),
                updated: r.updated.clone(),
                chart_version: r.chart_version.clone(),
                app_version: r.app_version.clone(),
            })
            .collect()
    }
}
