//! The application inventory in the API: `applications` (filtered, sorted, paged), `application`
//! by id or by namespace and name, `applicationInventory` (the design's controls), the admin's
//! pause switch (`applicationChanged` is in `subscription::applications`).
//!
//! Answers read the inventory, not the request's store snapshot, so they are marked volatile
//! (never kept by the response cache).

use std::sync::Arc;

use async_graphql::connection::{Connection, Edge, EmptyFields};
use async_graphql::{Context, Enum, ID, InputObject, Object};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

use super::mark_volatile;
use super::paging::{DEFAULT_PAGE_SIZE, SortDirection, max_page_size};
use crate::domain::applications::Health;
use crate::error::ErrorCode;
use crate::inventory::{AppEntry, Inventory, Snapshot};

mod inventory;
mod types;

pub use inventory::{ApplicationCounts, ClusterUuid, HealthCount, InventoryObj, ReconciledRelease};
pub use types::{
    ApplicationIngress, ApplicationObj, ApplicationPod, ApplicationRevision, ApplicationService,
    ApplicationVolume,
};

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

/// The applications the request shows, as its caller sees them: the inventory's now, or as the
/// timeline kept them at the request's past moment (`at`); APPLICATIONS_OFF when it is off.
pub(crate) fn shown(ctx: &Context<'_>) -> async_graphql::Result<Arc<Snapshot>> {
    let inv = inventory(ctx)?;
    if let Some(crate::graphql::past::PastApplications(past)) = ctx.data_opt() {
        return Ok(past.clone());
    }
    Ok(inv.snapshot().visible(&crate::graphql::scope_of(ctx)))
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
        let snap = shown(ctx)?;
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
        let snap = shown(ctx)?;
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

    /// The inventory's state and controls (now only: refused at a past moment, whose
    /// applications `applications` gives).
    async fn application_inventory(
        &self,
        ctx: &Context<'_>,
    ) -> async_graphql::Result<InventoryObj> {
        mark_volatile(ctx);
        if ctx.data_opt::<crate::graphql::past::PastMoment>().is_some() {
            return Err(crate::graphql::past::live_only(
                "the application inventory's state and controls",
            ));
        }
        let inv = inventory(ctx)?;
        Ok(InventoryObj {
            inventory: inv.clone(),
            snapshot: inv.snapshot().visible(&crate::graphql::scope_of(ctx)),
        })
    }
}

/// Stop or resume the pushes (the admin's mutation): kept in the database first, so a restart
/// and every replica hold it; refused, with nothing changed, while the database is away.
pub async fn set_paused(ctx: &Context<'_>, paused: bool) -> async_graphql::Result<InventoryObj> {
    let inv = inventory(ctx)?;
    let who = ctx
        .data_opt::<crate::auth::Principal>()
        .map_or_else(|| "unknown".to_string(), |p| p.name.to_string());
    let away = || {
        ErrorCode::DatabaseUnavailable
            .graphql("the pause cannot be kept: the database is away; nothing was changed")
    };
    let db = ctx
        .data_opt::<Arc<crate::history::History>>()
        .and_then(|h| h.db())
        .ok_or_else(away)?;
    crate::inventory::pause::set(inv, &db, paused, &who)
        .await
        .map_err(|e| {
            tracing::warn!(error = %e, "application inventory: the pause cannot be kept");
            away()
        })?;
    Ok(InventoryObj {
        inventory: inv.clone(),
        snapshot: inv.snapshot(),
    })
}

/// The applications that run on a KubernetesCluster: those of every watched cluster whose
/// `kube-system` UID the cluster's `vitistack.io/kube-system-uid` annotation names (empty when
/// the inventory is off or the link is unknown).
pub fn on_cluster(
    ctx: &Context<'_>,
    kube_system_uid: Option<&str>,
) -> async_graphql::Result<Vec<ApplicationObj>> {
    mark_volatile(ctx);
    // Empty when the inventory is off (the only reason `shown` refuses).
    let (Some(uid), Ok(apps)) = (kube_system_uid, shown(ctx)) else {
        return Ok(Vec::new());
    };
    Ok(apps
        .kube_system_uids
        .iter()
        .filter(|(_, u)| u.as_str() == uid)
        .flat_map(|(dc, _)| {
            apps.apps
                .values()
                .filter(move |a| a.datacenter == *dc)
                .cloned()
                .map(ApplicationObj)
        })
        .collect())
}
