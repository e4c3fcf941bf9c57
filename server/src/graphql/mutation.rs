//! The mutations: the cluster lifecycle for operators (plan, create, scale, delete, pause,
//! resume, upgrade) and manifest import for admins. Each is checked for role, validated like the
//! CRD with field-level errors, written through [`crate::change::Changer`], and answers once the
//! change is in the store: the fields of its answer read the graph after the write.

mod guard;
mod resize;
mod types;

use resize::Resize;

pub use guard::RoleGuard;
pub use types::{
    ClusterChange, ImportResult, ManifestFileInput, ManifestFileResult, ManifestProblem, PoolScale,
};

use crate::error::ErrorCode;
use std::sync::Arc;

use async_graphql::{Context, Object};
use serde_json::json;

use crate::auth::{Principal, Role};
use crate::change::cluster::{
    self, CapacityVerdict, ClusterInput, ClusterPlan, DO_NOT_RECONCILE, KUBERNETES_TARGET,
    TALOS_TARGET,
};
use crate::change::{Announce, ChangeError, Changer, Edit, field};
use crate::graphql::types::{ClusterObj, by_name, snap};
use crate::model::{Datacenter, Kind};
use crate::store::{ObjectKey, Op};

/// What the mutations are configured with.
#[derive(Clone, Copy, Debug)]
pub struct ChangeSettings {
    /// Hosts that must still be able to fail once new Machines are placed.
    pub min_hosts_that_can_fail: usize,
}

/// The root of the mutations.
#[derive(Default)]
pub struct MutationRoot;

fn changer<'a>(ctx: &Context<'a>) -> async_graphql::Result<&'a Arc<Changer>> {
    ctx.data_opt::<Arc<Changer>>()
        .ok_or_else(|| ErrorCode::ReadOnly.graphql("changes are not accepted by this server"))
}

/// Who asked, as the history and the Kubernetes Event record it: the principal's name, and for
/// a person (signed in by the OpenID provider, or a Kubernetes user) how they came and their
/// groups (`oidc:alice (oidc-session; groups team-1, viewers)`, `kubernetes:otto
/// (kubernetes-token; groups system:serviceaccounts)`).
fn actor(ctx: &Context<'_>) -> Arc<str> {
    let Some(p) = ctx.data_opt::<Principal>() else {
        return Arc::from("unknown");
    };
    match &p.credential {
        crate::auth::Credential::Oidc(_) | crate::auth::Credential::Kubernetes(..) => {
            let groups = p.credential.groups();
            let groups = if groups.is_empty() {
                String::new()
            } else {
                format!("; groups {}", groups.join(", "))
            };
            format!("{} ({}{groups})", p.name, p.credential.method()).into()
        }
        _ => p.name.clone(),
    }
}

/// The whole live graph, whatever the caller sees: plans check capacity against every host (a
/// tenant sees no Node, yet its cluster's Machines land on them). What a plan answers names no
/// object outside the plan itself.
fn fleet(ctx: &Context<'_>) -> Arc<crate::store::Snapshot> {
    ctx.data_unchecked::<Arc<crate::store::Store>>().snapshot()
}

fn settings(ctx: &Context<'_>) -> (crate::domain::hosts::Overcommit, usize) {
    let o = crate::graphql::types::overcommit(ctx);
    let min = ctx
        .data_opt::<ChangeSettings>()
        .map_or(1, |s| s.min_hosts_that_can_fail);
    (o, min)
}

/// The cluster `namespace/name` (in whichever datacenter holds it), or NOT_FOUND, or AMBIGUOUS
/// when several datacenters hold one.
fn existing_cluster(
    ctx: &Context<'_>,
    namespace: &str,
    name: &str,
) -> async_graphql::Result<Arc<crate::model::Resource>> {
    by_name(&snap(ctx), None, Kind::KubernetesCluster, namespace, name)?.ok_or_else(|| {
        ChangeError::new(
            ErrorCode::NotFound,
            format!("KubernetesCluster {namespace}/{name} does not exist"),
        )
        .into()
    })
}

/// The datacenter a new cluster goes to: the one named, else the only one there is.
fn new_cluster_datacenter(
    s: &crate::store::Snapshot,
    given: Option<&str>,
) -> async_graphql::Result<Datacenter> {
    if let Some(key) = given {
        let dc = Datacenter::new(key);
        return match s.datacenters().any(|d| *d == dc) {
            true => Ok(dc),
            false => Err(ErrorCode::NotFound.graphql(format!("no datacenter `{key}`"))),
        };
    }
    let all: Vec<&Datacenter> = s.datacenters().collect();
    match all.as_slice() {
        [] => Ok(Datacenter::default()),
        [one] => Ok((*one).clone()),
        several => {
            let keys: Vec<&str> = several.iter().map(|d| d.key()).collect();
            Err(ErrorCode::MissingArgument.graphql(format!(
                "this server watches {} datacenters ({}): name one with `datacenter`",
                keys.len(),
                keys.join(", ")
            )))
        }
    }
}

/// Write `edit` to the cluster `key` as the caller, and answer with the cluster the store then
/// shows (and the plan the change was checked against).
async fn write_cluster(
    ctx: &Context<'_>,
    changer: &Changer,
    key: &ObjectKey,
    edit: Edit,
    plan: Option<ClusterPlan>,
    announce: Announce,
) -> async_graphql::Result<ClusterChange> {
    let verb = match &edit {
        Edit::Delete => "delete",
        Edit::Apply(_) if fleet(ctx).get_key(key).is_none() => "create",
        _ => "patch",
    };
    may_change(ctx, key, verb).await?;
    let written = changer
        .write_announced(key, "v1alpha1", edit, &actor(ctx), announce)
        .await?;
    answer(written, plan)
}

/// Refuse a write the caller may not make: a Kubernetes user's own RBAC for `verb` on the
/// object (asked of its datacenter's API server, not the server's rights), a key's namespaces.
/// An object it cannot see was already NOT_FOUND to it; this refuses creating one there.
async fn may_change(ctx: &Context<'_>, key: &ObjectKey, verb: &str) -> async_graphql::Result<()> {
    let Some(p) = ctx.data_opt::<Principal>() else {
        return Ok(());
    };
    let allowed = match ctx.data_opt::<Arc<crate::auth::Auth>>() {
        Some(auth) => auth
            .may(p, verb, key)
            .await
            .map_err(|r| r.code().graphql(r.message()))?,
        None => p.scope.sees_key(key),
    };
    if allowed {
        return Ok(());
    }
    let place = match key.namespace.as_str() {
        "" => String::new(),
        ns => format!(" in namespace `{ns}`"),
    };
    let dc = match key.datacenter.is_single() {
        true => String::new(),
        false => format!(" of datacenter `{}`", key.datacenter),
    };
    Err(ErrorCode::Forbidden.graphql(format!(
        "{} may not {verb} {}{place}{dc}",
        p.name,
        key.kind.plural()
    )))
}

/// The Event a cluster change leaves on the KubernetesCluster.
fn announce(reason: &'static str, action: &'static str, note: String) -> Announce {
    Announce {
        reason,
        action,
        note,
    }
}

/// Refuse a plan whose Machines do not fit, unless the caller accepts that.
fn check_capacity(plan: &ClusterPlan, allow: bool) -> Result<(), ChangeError> {
    let bad = matches!(
        plan.capacity.verdict,
        CapacityVerdict::DoesNotFit | CapacityVerdict::BelowRedundancy
    );
    if bad && !allow {
        return Err(ChangeError::new(
            ErrorCode::Capacity,
            format!(
                "{} (pass allowOverCapacity: true to write it anyway)",
                plan.capacity.message
            ),
        ));
    }
    Ok(())
}

/// The answer of a cluster write.
fn answer(
    written: crate::change::Written,
    plan: Option<ClusterPlan>,
) -> async_graphql::Result<ClusterChange> {
    let cluster = ClusterObj::new(written.object)
        .ok_or_else(|| async_graphql::Error::new("the change did not leave a KubernetesCluster"))?;
    Ok(ClusterChange {
        cluster,
        changed: written.changed,
        plan,
    })
}

/// Version strings talos-operator accepts as upgrade targets.
fn version_problem(v: &str) -> Option<String> {
    let rest = v.strip_prefix('v').unwrap_or(v);
    let parts: Vec<&str> = rest.split('.').collect();
    let ok = parts.len() == 3
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()));
    (!ok).then(|| {
        format!("Invalid value: \"{v}\": must be a version like v1.11.5 (^v?\\d+\\.\\d+\\.\\d+$)")
    })
}

#[Object]
impl MutationRoot {
    /// Preview a cluster without writing anything: the KubernetesCluster, every Machine
    /// talos-operator will generate for it (or, for an existing cluster, add and remove), their
    /// YAML, the problems that would refuse it, and whether the new Machines fit on the hosts
    /// with enough hosts left able to fail. `datacenter` (its key) says where it would go; it is
    /// needed when the server watches several.
    #[graphql(guard = "RoleGuard(Role::Operator)")]
    async fn cluster_plan(
        &self,
        ctx: &Context<'_>,
        input: ClusterInput,
        datacenter: Option<String>,
    ) -> async_graphql::Result<ClusterPlan> {
        let (o, min) = settings(ctx);
        let s = fleet(ctx);
        let dc = new_cluster_datacenter(&s, datacenter.as_deref())?;
        Ok(cluster::plan(&s, &dc, &input, o, min))
    }

    /// Create a Talos Kubernetes cluster. Refused with field errors when the plan is not valid,
    /// with `ALREADY_EXISTS` when it exists, and with `CAPACITY` when its Machines do not fit
    /// (unless `allowOverCapacity`). `datacenter` (its key) says where to create it; it is
    /// needed when the server watches several.
    #[graphql(guard = "RoleGuard(Role::Operator)")]
    async fn create_kubernetes_cluster(
        &self,
        ctx: &Context<'_>,
        input: ClusterInput,
        #[graphql(default)] allow_over_capacity: bool,
        datacenter: Option<String>,
    ) -> async_graphql::Result<ClusterChange> {
        let changer = changer(ctx)?;
        let (o, min) = settings(ctx);
        let snapshot = fleet(ctx);
        let dc = new_cluster_datacenter(&snapshot, datacenter.as_deref())?;
        let key = ObjectKey::new(&dc, Kind::KubernetesCluster, &input.namespace, &input.name);
        may_change(ctx, &key, "create").await?;
        if snapshot.get_key(&key).is_some() {
            return Err(ChangeError::new(
                ErrorCode::AlreadyExists,
                format!(
                    "KubernetesCluster {}/{} exists already: scale or delete it instead",
                    input.namespace, input.name
                ),
            )
            .into());
        }
        let object = input.object(&snapshot, &dc);
        let plan = cluster::plan_object(&snapshot, &dc, &object, input.problems(), o, min);
        drop(snapshot);
        cluster::refuse_invalid(&plan, "the cluster")?;
        check_capacity(&plan, allow_over_capacity)?;
        write_cluster(
            ctx,
            changer,
            &key,
            Edit::Apply(object),
            Some(plan),
            announce(
                "Created",
                "Create",
                "created through vitistack-graphql".to_string(),
            ),
        )
        .await
    }

    /// Set the size of a cluster at once: the control plane and any of its pools, in one
    /// server-side apply. With `dryRun` nothing is written: the answer's plan says which
    /// Machines talos-operator would add and remove and whether they fit (the dashboard's
    /// preview). Refused like `scaleNodePool` and `scaleControlPlane`.
    #[graphql(guard = "RoleGuard(Role::Operator)")]
    // Each parameter is one of the mutation's GraphQL arguments.
    #[allow(clippy::too_many_arguments)]
    async fn scale_cluster(
        &self,
        ctx: &Context<'_>,
        namespace: String,
        name: String,
        control_plane_replicas: Option<i32>,
        #[graphql(default)] node_pools: Vec<PoolScale>,
        #[graphql(default)] allow_over_capacity: bool,
        #[graphql(default)] dry_run: bool,
    ) -> async_graphql::Result<ClusterChange> {
        self.resize(
            ctx,
            Resize {
                namespace,
                name,
                control_plane: control_plane_replicas,
                pools: node_pools,
                allow_over_capacity,
                dry_run,
            },
        )
        .await
    }

    /// Set the replicas of one worker pool. Refused when the pool does not exist, and with
    /// `CAPACITY` when the new Machines do not fit (unless `allowOverCapacity`).
    #[graphql(guard = "RoleGuard(Role::Operator)")]
    async fn scale_node_pool(
        &self,
        ctx: &Context<'_>,
        namespace: String,
        name: String,
        pool: String,
        replicas: i32,
        #[graphql(default)] allow_over_capacity: bool,
    ) -> async_graphql::Result<ClusterChange> {
        self.resize(
            ctx,
            Resize {
                namespace,
                name,
                control_plane: None,
                pools: vec![PoolScale {
                    name: pool,
                    replicas,
                }],
                allow_over_capacity,
                dry_run: false,
            },
        )
        .await
    }

    /// Set the control plane's replicas (odd, at least 1: the CRD's rule). Refused with
    /// `CAPACITY` when new Machines do not fit (unless `allowOverCapacity`).
    #[graphql(guard = "RoleGuard(Role::Operator)")]
    async fn scale_control_plane(
        &self,
        ctx: &Context<'_>,
        namespace: String,
        name: String,
        replicas: i32,
        #[graphql(default)] allow_over_capacity: bool,
    ) -> async_graphql::Result<ClusterChange> {
        self.resize(
            ctx,
            Resize {
                namespace,
                name,
                control_plane: Some(replicas),
                pools: Vec::new(),
                allow_over_capacity,
                dry_run: false,
            },
        )
        .await
    }

    /// Delete a cluster. `confirm` must repeat its name. talos-operator's finalizer then removes
    /// its VIP, Secret and Machines; until it has, the cluster shows as deleting.
    #[graphql(guard = "RoleGuard(Role::Operator)")]
    async fn delete_kubernetes_cluster(
        &self,
        ctx: &Context<'_>,
        namespace: String,
        name: String,
        confirm: String,
    ) -> async_graphql::Result<ClusterChange> {
        let changer = changer(ctx)?;
        let key = ObjectKey::of(existing_cluster(ctx, &namespace, &name)?.as_ref());
        if confirm != name {
            return Err(ChangeError::invalid(
                "the deletion",
                vec![field(
                    "confirm",
                    format!("Invalid value: \"{confirm}\": repeat the cluster's name \"{name}\" to delete it"),
                )],
            )
            .into());
        }
        let note = "deletion requested through vitistack-graphql".to_string();
        let event = announce("DeletionRequested", "Delete", note);
        write_cluster(ctx, changer, &key, Edit::Delete, None, event).await
    }

    /// Make talos-operator leave the cluster alone (annotation
    /// `upgrade.vitistack.io/do-not-reconcile`).
    #[graphql(guard = "RoleGuard(Role::Operator)")]
    async fn pause_cluster_reconciliation(
        &self,
        ctx: &Context<'_>,
        namespace: String,
        name: String,
    ) -> async_graphql::Result<ClusterChange> {
        let changer = changer(ctx)?;
        let key = ObjectKey::of(existing_cluster(ctx, &namespace, &name)?.as_ref());
        let config = json!({"metadata": {"name": name, "namespace": namespace,
                                         "annotations": {DO_NOT_RECONCILE: "true"}}});
        let note = format!("talos-operator's reconciliation paused ({DO_NOT_RECONCILE})");
        let event = announce("ReconciliationPaused", "Pause", note);
        write_cluster(ctx, changer, &key, Edit::Apply(config), None, event).await
    }

    /// Let talos-operator reconcile the cluster again (removes the pause annotation, whoever set
    /// it).
    #[graphql(guard = "RoleGuard(Role::Operator)")]
    async fn resume_cluster_reconciliation(
        &self,
        ctx: &Context<'_>,
        namespace: String,
        name: String,
    ) -> async_graphql::Result<ClusterChange> {
        let changer = changer(ctx)?;
        let key = ObjectKey::of(existing_cluster(ctx, &namespace, &name)?.as_ref());
        write_cluster(
            ctx,
            changer,
            &key,
            Edit::RemoveAnnotations(vec![DO_NOT_RECONCILE.into()]),
            None,
            announce(
                "ReconciliationResumed",
                "Resume",
                format!("talos-operator's reconciliation resumed ({DO_NOT_RECONCILE} removed)"),
            ),
        )
        .await
    }

    /// Ask talos-operator to upgrade Talos and/or Kubernetes (annotations
    /// `upgrade.vitistack.io/talos-target` and `kubernetes-target`).
    #[graphql(guard = "RoleGuard(Role::Operator)")]
    async fn request_upgrade(
        &self,
        ctx: &Context<'_>,
        namespace: String,
        name: String,
        talos_version: Option<String>,
        kubernetes_version: Option<String>,
    ) -> async_graphql::Result<ClusterChange> {
        let changer = changer(ctx)?;
        let key = ObjectKey::of(existing_cluster(ctx, &namespace, &name)?.as_ref());
        let mut problems = Vec::new();
        let mut annotations = serde_json::Map::new();
        for (arg, value, annotation) in [
            ("talosVersion", &talos_version, TALOS_TARGET),
            ("kubernetesVersion", &kubernetes_version, KUBERNETES_TARGET),
        ] {
            if let Some(v) = value {
                match version_problem(v) {
                    Some(p) => problems.push(field(arg, p)),
                    None => {
                        annotations.insert(annotation.into(), json!(v));
                    }
                }
            }
        }
        if talos_version.is_none() && kubernetes_version.is_none() {
            problems.push(field(
                "talosVersion",
                "Required value: give talosVersion, kubernetesVersion or both",
            ));
        }
        if !problems.is_empty() {
            return Err(ChangeError::invalid("the upgrade request", problems).into());
        }
        let targets: Vec<String> = annotations
            .iter()
            .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
            .collect();
        let event = announce(
            "UpgradeRequested",
            "Upgrade",
            format!("upgrade requested: {}", targets.join(", ")),
        );
        let config = json!({"metadata": {"name": name, "namespace": namespace,
                                         "annotations": annotations}});
        write_cluster(ctx, changer, &key, Edit::Apply(config), None, event).await
    }

    /// Stop (`true`) or resume (`false`) the pushes to the inventory API (the hossted design's
    /// `stop`); the inventory itself stays live. Admins only.
    #[graphql(guard = "RoleGuard(Role::Admin)")]
    async fn set_applications_paused(
        &self,
        ctx: &Context<'_>,
        paused: bool,
    ) -> async_graphql::Result<crate::graphql::applications::InventoryObj> {
        crate::graphql::applications::set_paused(ctx, paused).await
    }

    /// Import manifests into the embedded source, as `vitistack import` does: each file all or
    /// nothing (one refused document refuses the file), refusals by document and field path.
    /// With the Kubernetes source, apply manifests to the cluster instead.
    #[graphql(guard = "RoleGuard(Role::Admin)")]
    async fn import_manifests(
        &self,
        ctx: &Context<'_>,
        files: Vec<ManifestFileInput>,
    ) -> async_graphql::Result<ImportResult> {
        let changer = changer(ctx)?;
        if changer.is_kube() {
            return Err(ChangeError::new(
                ErrorCode::ReadOnly,
                "importManifests writes the embedded source; this server reads a Kubernetes cluster: apply the manifests there (kubectl apply) and they appear through the watch",
            )
            .into());
        }
        let actor = actor(ctx);
        let mut out = ImportResult {
            files: Vec::new(),
            changed: 0,
            unchanged: 0,
        };
        for f in files {
            let report = crate::source::manifest::parse_str(&f.name, &f.content);
            let n = report.objects.len();
            if report.accepted() {
                let ops = report.objects.iter().cloned().map(Op::Upsert).collect();
                let made = changer.store().apply_as(ops, &actor).len();
                out.changed += i32::try_from(made).unwrap_or(i32::MAX);
                out.unchanged += i32::try_from(n.saturating_sub(made)).unwrap_or(i32::MAX);
            }
            out.files.push(ManifestFileResult {
                name: f.name,
                accepted: report.accepted(),
                objects: i32::try_from(n).unwrap_or(i32::MAX),
                problems: report
                    .errors
                    .into_iter()
                    .map(|e| ManifestProblem {
                        document: i32::try_from(e.document).unwrap_or(i32::MAX),
                        object: e.object,
                        path: e.path,
                        reason: e.reason,
                    })
                    .collect(),
                notes: report.notes.into_iter().map(|n| n.message).collect(),
            });
        }
        Ok(out)
    }
}
