//! The application inventory in the API: `applications` (filtered, sorted, paged), `application`
//! by id or by namespace and name, `applicationInventory` (the design's controls), the admin's
//! pause switch (`applicationChanged` is in `subscription::applications`).
//!
//! Answers read the inventory, not the request's store snapshot, so they are marked volatile
//! (never kept by the response cache).

use std::sync::Arc;

use async_graphql::connection::{Connection, Edge, EmptyFields};
use async_graphql::{Context, Enum, ID, InputObject, Object, SimpleObject};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

use super::mark_volatile;
use super::paging::{DEFAULT_PAGE_SIZE, SortDirection, max_page_size};
use crate::domain::applications::Health;
use crate::error::ErrorCode;
use crate::inventory::{AppEntry, Inventory, Snapshot};
use crate::store::Idx;

/// How an application is doing.
#[derive(Enum, Copy, Clone, Debug, Eq, PartialEq)]
#[graphql(name = "ApplicationHealth")]
pub enum HealthValue {
    /// Deployed, every pod running and ready.
    Healthy,
    /// Deployed, but something is wrong (`reasons` says what).
    Degraded,
    /// The release failed.
    Failed,
    PendingInstall,
    PendingUpgrade,
    PendingRollback,
    Uninstalling,
    Unknown,
}

impl From<Health> for HealthValue {
    fn from(h: Health) -> Self {
        match h {
            Health::Healthy => HealthValue::Healthy,
            Health::Degraded => HealthValue::Degraded,
            Health::Failed => HealthValue::Failed,
            Health::PendingInstall => HealthValue::PendingInstall,
            Health::PendingUpgrade => HealthValue::PendingUpgrade,
            Health::PendingRollback => HealthValue::PendingRollback,
            Health::Uninstalling => HealthValue::Uninstalling,
            Health::Unknown => HealthValue::Unknown,
        }
    }
}

/// Which applications.
#[derive(InputObject, Default, Clone, Debug)]
pub struct ApplicationFilter {
    /// Only this datacenter's (its key).
    pub datacenter: Option<String>,
    /// Only this namespace's.
    pub namespace: Option<String>,
    /// Only these healths.
    pub health: Option<Vec<HealthValue>>,
    /// Only releases of this chart (its name).
    pub chart: Option<String>,
    /// Case-insensitive substring of the release name, namespace or chart.
    pub search: Option<String>,
}

impl ApplicationFilter {
    pub(crate) fn passes(&self, a: &AppEntry) -> bool {
        let r = &a.app.release;
        self.datacenter
            .as_deref()
            .is_none_or(|d| a.datacenter.key() == d)
            && self.namespace.as_deref().is_none_or(|n| r.namespace == n)
            && self
                .health
                .as_ref()
                .is_none_or(|h| h.contains(&a.app.health.into()))
            && self.chart.as_deref().is_none_or(|c| r.chart == c)
            && self.search.as_deref().is_none_or(|s| {
                let s = s.to_lowercase();
                [&r.name, &r.namespace, &r.chart]
                    .iter()
                    .any(|f| f.to_lowercase().contains(&s))
            })
    }
}

/// What applications are sorted by; ties go by datacenter, namespace and name.
#[derive(Enum, Copy, Clone, Debug, Eq, PartialEq, Default)]
pub enum ApplicationSortField {
    /// The release name.
    #[default]
    Name,
    /// The namespace, then the name.
    Namespace,
    /// When the live revision was deployed.
    Updated,
    /// Worst first (failed, degraded, pending, …, healthy) when ascending.
    Health,
}

/// How to order applications.
#[derive(InputObject, Clone, Copy, Debug, Default)]
pub struct ApplicationSort {
    #[graphql(default)]
    pub field: ApplicationSortField,
    #[graphql(default)]
    pub direction: SortDirection,
}

/// Worst first.
fn health_rank(h: Health) -> u8 {
    match h {
        Health::Failed => 0,
        Health::Degraded => 1,
        Health::PendingRollback => 2,
        Health::PendingUpgrade => 3,
        Health::PendingInstall => 4,
        Health::Uninstalling => 5,
        Health::Unknown => 6,
        Health::Healthy => 7,
    }
}

/// The sort key of an application: the field's value, then its identity.
fn sort_key(a: &AppEntry, field: ApplicationSortField) -> Vec<String> {
    let r = &a.app.release;
    let first = match field {
        ApplicationSortField::Name => r.name.clone(),
        ApplicationSortField::Namespace => r.namespace.clone(),
        ApplicationSortField::Updated => r.updated.clone().unwrap_or_default(),
        ApplicationSortField::Health => health_rank(a.app.health).to_string(),
    };
    vec![
        first,
        a.datacenter.key().to_string(),
        r.namespace.clone(),
        r.name.clone(),
    ]
}

/// The inventory, or APPLICATIONS_OFF.
pub(crate) fn inventory<'a>(ctx: &Context<'a>) -> async_graphql::Result<&'a Arc<Inventory>> {
    ctx.data_opt::<Arc<Inventory>>().ok_or_else(|| {
        ErrorCode::ApplicationsOff.graphql(
            "the application inventory is off on this server (APPLICATIONS=true turns it on)",
        )
    })
}

/// An application's global id: `Application:` and its datacenter, namespace and name.
pub fn application_id(a: &AppEntry) -> ID {
    let raw = format!(
        "Application:{}/{}/{}",
        a.datacenter.key(),
        a.app.release.namespace,
        a.app.release.name
    );
    ID(URL_SAFE_NO_PAD.encode(raw))
}

/// (datacenter, namespace, name) of an application id.
fn parse_id(id: &str) -> Option<(String, String, String)> {
    let raw = String::from_utf8(URL_SAFE_NO_PAD.decode(id).ok()?).ok()?;
    let rest = raw.strip_prefix("Application:")?;
    let mut parts = rest.splitn(3, '/');
    Some((
        parts.next()?.to_string(),
        parts.next()?.to_string(),
        parts.next()?.to_string(),
    ))
}

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
    ) -> async_graphql::Result<Option<super::types::ClusterObj>> {
        mark_volatile(ctx);
        let apps = inventory(ctx)?.snapshot();
        let Some(uid) = apps.kube_system_uids.get(&self.0.datacenter) else {
            return Ok(None);
        };
        let store = super::types::snap(ctx);
        // Its own datacenter first: a management cluster usually registers its tenants.
        let mut datacenters: Vec<&crate::model::Datacenter> = store.datacenters().collect();
        datacenters.sort_by_key(|d| **d != self.0.datacenter);
        Ok(datacenters.into_iter().find_map(|dc| {
            store
                .lookup_one(dc, Idx::ClusterByKubeSystemUid, uid)
                .cloned()
                .and_then(super::types::ClusterObj::new)
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

/// Applications of one health.
#[derive(SimpleObject)]
pub struct HealthCount {
    pub health: HealthValue,
    pub count: usize,
}

/// A release the inventory has reconciled, at its live revision.
#[derive(SimpleObject)]
pub struct ReconciledRelease {
    pub datacenter: String,
    pub namespace: String,
    pub name: String,
    pub revision: u64,
}

/// A datacenter's cluster UUID (what the inventory API knows the cluster by).
#[derive(SimpleObject)]
pub struct ClusterUuid {
    pub datacenter: String,
    pub uuid: String,
}

/// The inventory's state and controls (the hossted design's).
pub struct InventoryObj {
    inventory: Arc<Inventory>,
    snapshot: Arc<Snapshot>,
}

#[Object(name = "ApplicationInventory")]
impl InventoryObj {
    /// Pushes to the inventory API are stopped (`APPLICATIONS_PAUSED`, `setApplicationsPaused`).
    async fn paused(&self) -> bool {
        self.inventory.paused()
    }
    /// Each datacenter's cluster UUID, generated once and kept.
    async fn cluster_uuids(&self) -> Vec<ClusterUuid> {
        self.inventory
            .cluster_uuids()
            .into_iter()
            .map(|(dc, uuid)| ClusterUuid {
                datacenter: dc.key().to_string(),
                uuid,
            })
            .collect()
    }
    /// When the applications were last joined again (RFC 3339).
    async fn last_reconciled_at(&self) -> Option<String> {
        self.snapshot.reconciled_ms.map(crate::history::rfc3339)
    }
    /// Namespaces never read.
    async fn denied_namespaces(&self) -> Vec<String> {
        self.inventory.settings().deny.iter().cloned().collect()
    }
    /// Namespaces seen (denied ones excluded), over every datacenter.
    async fn namespaces(&self) -> usize {
        self.snapshot.namespaces.values().map(|n| n.len()).sum()
    }
    /// Applications in all.
    async fn total(&self) -> usize {
        self.snapshot.apps.len()
    }
    /// Applications by health (healths with none left out).
    async fn by_health(&self) -> Vec<HealthCount> {
        self.snapshot
            .counts()
            .into_iter()
            .map(|(h, count)| HealthCount {
                health: h.into(),
                count,
            })
            .collect()
    }
    /// Every release reconciled, with its live revision.
    async fn reconciled(&self) -> Vec<ReconciledRelease> {
        self.snapshot
            .apps
            .values()
            .map(|a| ReconciledRelease {
                datacenter: a.datacenter.key().to_string(),
                namespace: a.app.release.namespace.clone(),
                name: a.app.release.name.clone(),
                revision: a.app.release.revision,
            })
            .collect()
    }
}

/// The applications in numbers.
#[derive(SimpleObject)]
pub struct ApplicationCounts {
    pub total: usize,
    pub healthy: usize,
    pub degraded: usize,
    pub failed: usize,
    /// Pending install, upgrade or rollback.
    pub pending: usize,
    /// Uninstalling, or unknown.
    pub other: usize,
}

#[async_graphql::ComplexObject]
impl crate::domain::summary::InfrastructureSummary {
    /// The application inventory's counts (null when it is off); of its datacenter when it
    /// is one datacenter's. `infrastructureSummary` sends the summary again when they change.
    async fn applications(&self, ctx: &Context<'_>) -> Option<ApplicationCounts> {
        mark_volatile(ctx);
        let inv = ctx.data_opt::<Arc<Inventory>>()?;
        let counts = match &self.application_counts {
            Some(c) => c.clone(),
            None => inv.snapshot().counts_in(self.scope.as_ref()),
        };
        let n = |h: Health| counts.get(&h).copied().unwrap_or(0);
        Some(ApplicationCounts {
            total: counts.values().sum(),
            healthy: n(Health::Healthy),
            degraded: n(Health::Degraded),
            failed: n(Health::Failed),
            pending: n(Health::PendingInstall)
                + n(Health::PendingUpgrade)
                + n(Health::PendingRollback),
            other: n(Health::Uninstalling) + n(Health::Unknown),
        })
    }
}

/// The application fields of the Query root.
#[derive(Default)]
pub struct ApplicationQuery;

#[Object]
impl ApplicationQuery {
    /// Helm releases and what they run, one per release (its live revision).
    async fn applications(
        &self,
        ctx: &Context<'_>,
        filter: Option<ApplicationFilter>,
        sort: Option<ApplicationSort>,
        after: Option<String>,
        first: Option<i32>,
    ) -> async_graphql::Result<Connection<String, ApplicationObj, EmptyFields, EmptyFields>> {
        mark_volatile(ctx);
        let inv = inventory(ctx)?;
        let max = max_page_size(ctx);
        let first = match first {
            None => DEFAULT_PAGE_SIZE.min(max),
            Some(n) if n < 0 => {
                return Err(ErrorCode::BadPageSize.graphql("`first` is negative"));
            }
            Some(n) if n as usize > max => {
                return Err(ErrorCode::PageSizeLimit
                    .graphql(format!("`first` is {n}; at most {max} (MAX_PAGE_SIZE)")));
            }
            Some(n) => n as usize,
        };
        let sort = sort.unwrap_or_default();
        let filter = filter.unwrap_or_default();
        let snap = inv.snapshot();
        let mut items: Vec<(Vec<String>, &Arc<AppEntry>)> = snap
            .apps
            .values()
            .filter(|a| filter.passes(a))
            .map(|a| (sort_key(a, sort.field), a))
            .collect();
        items.sort_by(|a, b| a.0.cmp(&b.0));
        if sort.direction == SortDirection::Desc {
            items.reverse();
        }
        let total = items.len();
        let start = match after {
            None => 0,
            Some(cursor) => {
                let key: Vec<String> = URL_SAFE_NO_PAD
                    .decode(&cursor)
                    .ok()
                    .and_then(|b| serde_json::from_slice(&b).ok())
                    .ok_or_else(|| {
                        ErrorCode::BadCursor.graphql("`after` is not a cursor of this list")
                    })?;
                // The first item past the cursor, in the list's order (the item itself may be
                // gone).
                items
                    .iter()
                    .position(|(k, _)| match sort.direction {
                        SortDirection::Asc => *k > key,
                        SortDirection::Desc => *k < key,
                    })
                    .unwrap_or(total)
            }
        };
        let page = &items[start..(start + first).min(total)];
        let mut conn = Connection::new(start > 0, start + page.len() < total);
        conn.edges.extend(page.iter().map(|(k, a)| {
            let cursor = URL_SAFE_NO_PAD.encode(serde_json::to_vec(k).unwrap_or_default());
            Edge::new(cursor, ApplicationObj((*a).clone()))
        }));
        Ok(conn)
    }

    /// One application: by `id`, or by `namespace` and `name` (with `datacenter` when several
    /// datacenters hold one by that name: AMBIGUOUS otherwise).
    async fn application(
        &self,
        ctx: &Context<'_>,
        id: Option<ID>,
        datacenter: Option<String>,
        namespace: Option<String>,
        name: Option<String>,
    ) -> async_graphql::Result<Option<ApplicationObj>> {
        mark_volatile(ctx);
        let inv = inventory(ctx)?;
        let snap = inv.snapshot();
        let (dc, ns, name) = match (id, namespace, name) {
            (Some(id), _, _) => {
                let Some(parts) = parse_id(&id) else {
                    return Err(ErrorCode::BadId
                        .graphql(format!("`{}` is not an application id", id.as_str())));
                };
                (Some(parts.0), parts.1, parts.2)
            }
            (None, Some(ns), Some(name)) => (datacenter, ns, name),
            _ => {
                return Err(
                    ErrorCode::MissingArgument.graphql("give `id`, or `namespace` and `name`")
                );
            }
        };
        let found: Vec<&Arc<AppEntry>> = snap
            .apps
            .values()
            .filter(|a| {
                a.app.release.namespace == ns
                    && a.app.release.name == name
                    && dc.as_deref().is_none_or(|d| a.datacenter.key() == d)
            })
            .collect();
        if found.len() > 1 {
            let dcs: Vec<crate::model::Datacenter> =
                found.iter().map(|a| a.datacenter.clone()).collect();
            return Err(super::types::ambiguous("Application", &ns, &name, &dcs));
        }
        Ok(found.first().map(|a| ApplicationObj((*a).clone())))
    }

    /// The inventory's state and controls.
    async fn application_inventory(
        &self,
        ctx: &Context<'_>,
    ) -> async_graphql::Result<InventoryObj> {
        mark_volatile(ctx);
        let inv = inventory(ctx)?;
        Ok(InventoryObj {
            inventory: inv.clone(),
            snapshot: inv.snapshot(),
        })
    }
}

/// Stop or resume the pushes (the admin's mutation).
pub fn set_paused(ctx: &Context<'_>, paused: bool) -> async_graphql::Result<InventoryObj> {
    let inv = inventory(ctx)?;
    let was = inv.set_paused(paused);
    if was != paused {
        let who = ctx
            .data_opt::<crate::auth::Principal>()
            .map_or_else(|| "unknown".to_string(), |p| p.name.to_string());
        tracing::info!(paused, by = %who, "application inventory pushes {}", if paused { "stopped" } else { "resumed" });
    }
    Ok(InventoryObj {
        inventory: inv.clone(),
        snapshot: inv.snapshot(),
    })
}

/// The applications that run on a KubernetesCluster: those of every watched cluster whose
/// `kube-system` UID the cluster's `vitistack.io/kube-system-uid` annotation names (empty when
/// the inventory is off or the link is unknown).
pub fn on_cluster(ctx: &Context<'_>, kube_system_uid: Option<&str>) -> Vec<ApplicationObj> {
    mark_volatile(ctx);
    let (Some(uid), Some(inv)) = (kube_system_uid, ctx.data_opt::<Arc<Inventory>>()) else {
        return Vec::new();
    };
    let apps = inv.snapshot();
    apps.kube_system_uids
        .iter()
        .filter(|(_, u)| u.as_str() == uid)
        .flat_map(|(dc, _)| {
            apps.apps
                .values()
                .filter(move |a| a.datacenter == *dc)
                .cloned()
                .map(ApplicationObj)
        })
        .collect()
}
