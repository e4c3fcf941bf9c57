//! The Query root: lookups, one connection per kind, the datacenter, and summaries.

use crate::error::ErrorCode;
use std::sync::Arc;

use async_graphql::{Context, ID, Object, SimpleObject};

use super::paging::{Filter, PageArgs, Sort};
use super::types::*;
pub use crate::domain::summary::{
    ClusterSummary, Count, InfrastructureSummary, MachineSummary, NetworkSummary, StorageSummary,
    cluster_summary, datacenter, infrastructure_summary,
};
use crate::model::{Datacenter, Kind, Resource};
use crate::store::{Idx, Snapshot, scoped};

/// The Query root.
pub struct Query;

/// Build version information.
#[derive(SimpleObject)]
pub struct VersionInfo {
    /// Crate version.
    pub version: String,
    /// Git commit the binary was built from, when known.
    pub commit: String,
}

/// The Vitistack singleton: the one named by config (VITISTACKCRDNAME), else the first.
fn datacenter_of(ctx: &Context<'_>) -> Option<Arc<Resource>> {
    let wanted = ctx
        .data_opt::<DatacenterName>()
        .map(|d| d.0.as_str())
        .unwrap_or("vitistack");
    datacenter(&snap(ctx), wanted).cloned()
}

/// An object by `metadata.uid`, else a cluster-scoped object of `kind` by name.
fn by_uid_or_name(
    s: &Snapshot,
    kind: Kind,
    uid: Option<String>,
    name: Option<String>,
) -> Option<&Arc<Resource>> {
    uid.as_deref().and_then(|u| s.by_uid(u)).or_else(|| {
        let n = name.as_deref()?;
        s.datacenters().find_map(|dc| s.get(dc, kind, "", n))
    })
}

/// Which Vitistack is "the" datacenter: the one named by config, else the only/first one.
#[derive(Clone, Debug)]
pub struct DatacenterName(pub String);

/// A kind's objects a filter can hold: its datacenter's and namespace's ranges of the store's
/// ordered map when it names them (a namespace of one datacenter of ten is read alone), else
/// the whole kind. The filter is still applied to each.
fn candidates<'a>(
    snap: &'a Snapshot,
    kind: Kind,
    filter: Option<&'a Filter>,
    labelled: Option<Vec<&'a Arc<Resource>>>,
) -> Box<dyn Iterator<Item = &'a Arc<Resource>> + Send + 'a> {
    let namespace = filter.and_then(|f| f.namespace.as_deref());
    let datacenter = filter
        .and_then(|f| f.datacenter.as_deref())
        .map(|key| snap.datacenters().find(|dc| dc.key() == key).cloned());
    if let Some(labelled) = labelled {
        return Box::new(labelled.into_iter());
    }
    match (datacenter, namespace) {
        // A datacenter this store does not hold has none of the kind.
        (Some(None), _) => Box::new(std::iter::empty()),
        (Some(Some(dc)), Some(ns)) => Box::new(snap.list_in_datacenter(&dc, kind, ns)),
        (Some(Some(dc)), None) => Box::new(snap.list_datacenter(&dc, kind)),
        (None, Some(ns)) => Box::new(snap.list_in(kind, ns)),
        (None, None) => Box::new(snap.list(kind)),
    }
}

/// The objects of `kind` the search indexes name for the filter's label selector's most
/// selective `key=value` or `key` requirement, when it has one and no namespace, the snapshot
/// keeps the indexes and they name few enough (None: read the kind). A label few objects hold
/// is then a few lookups, not a reading of the whole kind.
fn labelled<'a>(
    snap: &'a Snapshot,
    kind: Kind,
    filter: Option<&Filter>,
) -> Option<Vec<&'a Arc<Resource>>> {
    use super::selector::Requirement;
    if filter?.namespace.is_some() {
        return None;
    }
    // An unreadable selector is refused when the filter is compiled, with the reason.
    let selector = super::selector::parse(filter?.label_selector.as_deref()?).ok()?;
    let words = selector.0.iter().filter_map(|req| match req {
        Requirement::Equals(k, v) => Some(format!("{k}={v}")),
        Requirement::Exists(k) => Some(k.clone()),
        _ => None,
    });
    words
        .filter_map(|word| {
            let mut found =
                snap.holding(&word, crate::domain::aggregates::worth_an_index(snap, kind))?;
            found.retain(|r| r.kind() == kind);
            Some(found)
        })
        .min_by_key(Vec::len)
}

/// One connection field per kind, on their own root merged into `QueryRoot`.
pub struct ListQuery;

macro_rules! list_fields {
    ($($(#[$doc:meta])* $field:ident, $kind:expr, $wrap:ty
       $(, only $narrow:path { $($arg:ident: $arg_ty:ty),* })?;)*) => {
        #[Object]
        impl ListQuery {
            $(
                $(#[$doc])*
                #[allow(clippy::too_many_arguments)]
                async fn $field(
                    &self,
                    ctx: &Context<'_>,
                    filter: Option<Filter>,
                    sort: Option<Sort>,
                    after: Option<String>,
                    before: Option<String>,
                    first: Option<i32>,
                    last: Option<i32>,
                    $($($arg: Option<$arg_ty>,)*)?
                ) -> async_graphql::Result<Conn<$wrap>> {
                    let snap = snap(ctx);
                    let page = PageArgs { after, before, first, last };
                    // The field's own filters, beside the common ones (`narrow.rs`).
                    let narrow: Option<super::narrow::Narrow<'_>> = None $(.or($narrow(&snap, $($arg),*)))?;
                    // A page in the store's key order is read from its ranges (`key_order.rs`).
                    // The field's own filter too, where the briefs answer it.
                    if narrow.as_ref().is_none_or(|n| n.by_brief.is_some())
                        && let Some(conn) = super::key_order::page(&snap, $kind, filter.as_ref(), narrow.as_ref().and_then(|n| n.by_brief.as_ref()), sort, &page, super::paging::max_page_size(ctx), |r| <$wrap>::new(r).map(super::parts::Memo))
                    {
                        return Ok(prefetched(ctx, conn).await);
                    }
                    let labelled = labelled(&snap, $kind, filter.as_ref());
                    // Without the field's own filters or an index's candidates, the kind's
                    // entries are read with their briefs (`brief_list.rs`).
                    if labelled.is_none() && narrow.as_ref().is_none_or(|n| n.by_brief.is_some()) {
                        let backwards = super::brief_list::read_backwards(sort.as_ref(), &page);
                        let held = |part, parts| super::brief_list::held_part(&snap, $kind, filter.as_ref(), backwards, part, parts);
                        let keep = narrow.and_then(|n| n.by_brief);
                        return super::brief_list::connection(ctx, held, filter.as_ref(), keep, sort, page, <$wrap>::new).await;
                    }
                    let items = narrowed(candidates(&snap, $kind, filter.as_ref(), labelled), narrow);
                    connection_of(ctx, items, filter.as_ref(), sort, page, <$wrap>::new).await
                }
            )*
        }
    };
}

/// The candidates a list's own filters keep (all of them without): read from the objects an
/// index names, where it names them, else from `items`.
fn narrowed<'a>(
    items: Box<dyn Iterator<Item = &'a Arc<Resource>> + Send + 'a>,
    narrow: Option<super::narrow::Narrow<'a>>,
) -> Box<dyn Iterator<Item = &'a Arc<Resource>> + Send + 'a> {
    match narrow {
        // `connection_of` applies the common filter (namespace, datacenter) to each.
        Some(super::narrow::Narrow {
            keep,
            only: Some(only),
            ..
        }) => Box::new(only.into_iter().filter(move |r| keep(r))),
        Some(super::narrow::Narrow {
            keep, only: None, ..
        }) => Box::new(items.filter(move |r| keep(r))),
        None => items,
    }
}

list_fields! {
    /// Hosts: Kubernetes Nodes running KubeVirt (control-plane nodes included).
    hosts, Kind::Node, HostObj;
    /// KubeVirt VirtualMachines, running or stopped.
    virtual_machines, Kind::VirtualMachine, VirtualMachineObj;
    /// KubeVirt VirtualMachineInstances. `host` (`status.nodeName`) and `clusterId`
    /// (`membership.clusterId`) select, like `filter`, before paging.
    virtual_machine_instances, Kind::VirtualMachineInstance, VirtualMachineInstanceObj,
        only super::narrow::vm_instances { host: String, cluster_id: String };
    /// Machines. `role`, `nodePool` (`vitistack.io/nodepool`) and `clusterId` (the `clusterId`
    /// field: its label, else that of the cluster its name label names) select, like `filter`,
    /// before paging.
    machines, Kind::Machine, MachineObj,
        only super::narrow::machines { role: NodeRole, node_pool: String, cluster_id: String };
    /// KubernetesClusters. `stage` (`pipeline.stage`) and `health` (from `diagnosis`) select,
    /// like `filter`, before paging.
    clusters, Kind::KubernetesCluster, ClusterObj,
        only super::narrow::clusters { stage: crate::domain::pipeline::Stage, health: super::narrow::ClusterHealth };
    /// NetworkNamespaces (both API versions).
    network_namespaces, Kind::NetworkNamespace, NetworkNamespaceObj;
    /// NetworkConfigurations.
    network_configurations, Kind::NetworkConfiguration, NetworkConfigurationObj;
    /// ControlPlaneVirtualSharedIPs.
    control_plane_vips, Kind::ControlPlaneVirtualSharedIp, VipObj;
    /// IPAllocations (v1alpha2).
    ip_allocations, Kind::IpAllocation, IpAllocationObj;
    /// MachineClasses.
    machine_classes, Kind::MachineClass, MachineClassObj;
    /// MachineProviders.
    machine_providers, Kind::MachineProvider, MachineProviderObj;
    /// KubernetesProviders.
    kubernetes_providers, Kind::KubernetesProvider, KubernetesProviderObj;
    /// KubevirtConfigs.
    kubevirt_configs, Kind::KubevirtConfig, KubevirtConfigObj;
    /// ProxmoxConfigs.
    proxmox_configs, Kind::ProxmoxConfig, ProxmoxConfigObj;
    /// EtcdBackups.
    etcd_backups, Kind::EtcdBackup, EtcdBackupObj;
    /// ClusterStorages.
    cluster_storages, Kind::ClusterStorage, ClusterStorageObj;
    /// ClusterStorageClasses.
    cluster_storage_classes, Kind::ClusterStorageClass, ClusterStorageClassObj;
    /// Vitistacks (normally one).
    vitistacks, Kind::Vitistack, VitistackObj;
}

impl Default for Query {
    fn default() -> Self {
        Query
    }
}

impl Default for ListQuery {
    fn default() -> Self {
        ListQuery
    }
}

#[Object(name = "QueryFields")]
impl Query {
    /// Any object by global id; null when it no longer exists. A malformed id is an error.
    async fn node(&self, ctx: &Context<'_>, id: ID) -> async_graphql::Result<Option<Node>> {
        let key = decode_id(&id).map_err(|e| ErrorCode::BadId.graphql(e.to_string()))?;
        Ok(snap(ctx).get_key(&key).cloned().map(to_node))
    }

    /// Objects by global id, in order; null for ids that no longer exist.
    async fn nodes(
        &self,
        ctx: &Context<'_>,
        ids: Vec<ID>,
    ) -> async_graphql::Result<Vec<Option<Node>>> {
        if ids.len() > 500 {
            return Err(ErrorCode::TooManyIds
                .graphql(format!("nodes accepts at most 500 ids (got {})", ids.len())));
        }
        let s = snap(ctx);
        ids.iter()
            .map(|id| {
                let key = decode_id(id).map_err(|e| ErrorCode::BadId.graphql(e.to_string()))?;
                Ok(s.get_key(&key).cloned().map(to_node))
            })
            .collect()
    }

    /// The Vitistack singleton: the zone this management cluster runs, with its providers.
    async fn datacenter(&self, ctx: &Context<'_>) -> Option<VitistackObj> {
        datacenter_of(ctx).and_then(VitistackObj::new)
    }

    /// Every datacenter the server watches, with its state (one, keyed "", on a single-cluster
    /// server).
    async fn datacenters(&self, ctx: &Context<'_>) -> async_graphql::Result<Vec<DatacenterInfo>> {
        // States depend on the clock and the probes, not only on the snapshot.
        crate::graphql::mark_volatile(ctx);
        // A caller limited to namespaces sees the datacenters its grants reach.
        let scope = crate::graphql::scope_of(ctx);
        let reports = match ctx.data_opt::<crate::graphql::past::PastMoment>() {
            // At a past moment: each datacenter's state as the history recorded it then.
            Some(at) => crate::graphql::past::datacenters_at(ctx, at.0).await?,
            None => ctx
                .data_unchecked::<Arc<crate::source::status::SourceStatus>>()
                .datacenters_now(),
        };
        Ok(reports
            .into_iter()
            .filter(|r| r.key.is_single() || scope.sees_datacenter(&r.key))
            .map(DatacenterInfo::from)
            .collect())
    }

    /// Name of the Vitistack (parity with the old `/v1/vitistack/name`).
    async fn vitistack_name(&self, ctx: &Context<'_>) -> Option<String> {
        datacenter_of(ctx).map(|v| v.name().to_string())
    }

    /// Server version (parity with the old `/v1/info/version`).
    async fn version(&self) -> VersionInfo {
        VersionInfo {
            version: crate::VERSION.to_string(),
            commit: crate::COMMIT.to_string(),
        }
    }

    /// A Machine by namespace and name (and datacenter, needed when several hold one).
    async fn machine(
        &self,
        ctx: &Context<'_>,
        namespace: String,
        name: String,
        datacenter: Option<String>,
    ) -> async_graphql::Result<Option<MachineObj>> {
        let found = by_name(
            &snap(ctx),
            datacenter.as_deref(),
            Kind::Machine,
            &namespace,
            &name,
        )?;
        Ok(found.and_then(MachineObj::new))
    }

    /// A KubernetesCluster by namespace and either its name or its clusterId (and datacenter,
    /// needed when several hold one).
    async fn cluster(
        &self,
        ctx: &Context<'_>,
        namespace: String,
        name: Option<String>,
        cluster_id: Option<String>,
        datacenter: Option<String>,
    ) -> async_graphql::Result<Option<ClusterObj>> {
        let s = snap(ctx);
        let dc = datacenter.as_deref();
        match (name, cluster_id) {
            (Some(n), _) => {
                Ok(by_name(&s, dc, Kind::KubernetesCluster, &namespace, &n)?
                    .and_then(ClusterObj::new))
            }
            (None, Some(id)) => {
                let value = scoped(&namespace, &id);
                let found: Vec<&Arc<Resource>> = match dc {
                    Some(dc) => s
                        .lookup_one(&Datacenter::new(dc), Idx::ClusterById, &value)
                        .into_iter()
                        .collect(),
                    None => s
                        .datacenters()
                        .filter_map(|dc| s.lookup_one(dc, Idx::ClusterById, &value))
                        .collect(),
                };
                if found.len() > 1 {
                    let dcs: Vec<Datacenter> =
                        found.iter().map(|r| r.datacenter().clone()).collect();
                    return Err(ambiguous(Kind::KubernetesCluster, &namespace, &id, &dcs));
                }
                Ok(found.into_iter().next().cloned().and_then(ClusterObj::new))
            }
            (None, None) => {
                Err(ErrorCode::MissingArgument.graphql("cluster needs `name` or `clusterId`"))
            }
        }
    }

    /// A NetworkNamespace by namespace and name (and datacenter, needed when several hold one).
    async fn network_namespace(
        &self,
        ctx: &Context<'_>,
        namespace: String,
        name: String,
        datacenter: Option<String>,
    ) -> async_graphql::Result<Option<NetworkNamespaceObj>> {
        let found = by_name(
            &snap(ctx),
            datacenter.as_deref(),
            Kind::NetworkNamespace,
            &namespace,
            &name,
        )?;
        Ok(found.and_then(NetworkNamespaceObj::new))
    }

    /// A MachineClass by name (and datacenter, needed when several hold one).
    async fn machine_class(
        &self,
        ctx: &Context<'_>,
        name: String,
        datacenter: Option<String>,
    ) -> async_graphql::Result<Option<MachineClassObj>> {
        let found = by_name(
            &snap(ctx),
            datacenter.as_deref(),
            Kind::MachineClass,
            "",
            &name,
        )?;
        Ok(found.and_then(MachineClassObj::new))
    }

    /// A MachineProvider by uid or name (parity with the old `/v1/machineproviders/{uid}`).
    async fn machine_provider(
        &self,
        ctx: &Context<'_>,
        uid: Option<String>,
        name: Option<String>,
    ) -> Option<MachineProviderObj> {
        one(
            by_uid_or_name(&snap(ctx), Kind::MachineProvider, uid, name),
            MachineProviderObj::new,
        )
    }

    /// A KubernetesProvider by uid or name (parity with the old `/v1/kubernetesproviders/{uid}`).
    async fn kubernetes_provider(
        &self,
        ctx: &Context<'_>,
        uid: Option<String>,
        name: Option<String>,
    ) -> Option<KubernetesProviderObj> {
        one(
            by_uid_or_name(&snap(ctx), Kind::KubernetesProvider, uid, name),
            KubernetesProviderObj::new,
        )
    }

    /// Machines, networks, storage and clusters in numbers: the fleet's, or one datacenter's
    /// (`datacenter`, its key), as `infrastructureSummary` sends them.
    async fn infrastructure(
        &self,
        ctx: &Context<'_>,
        datacenter: Option<String>,
    ) -> InfrastructureSummary {
        let s = snap(ctx);
        match datacenter.map(|d| crate::model::Datacenter::new(&d)) {
            Some(dc) => s.memo_keyed(dc.clone(), |s| {
                crate::domain::summary::infrastructure_summary_in(s, Some(&dc))
            }),
            None => infrastructure_summary(&s),
        }
    }

    /// Clusters in numbers: total, Ready, failed, by phase and by pipeline stage.
    async fn cluster_summary(&self, ctx: &Context<'_>) -> ClusterSummary {
        cluster_summary(&snap(ctx))
    }

    /// Sequence number of the last change in the snapshot this query read.
    async fn sequence(&self, ctx: &Context<'_>) -> u64 {
        snap(ctx).seq()
    }

    /// Hosts and VMs in numbers: usage against limits, and how many hosts can fail; the fleet's,
    /// or one datacenter's (`datacenter`, its key), as `hostsChanged` sends them.
    async fn host_capacity(&self, ctx: &Context<'_>, datacenter: Option<String>) -> HostCapacity {
        let dc = datacenter.map(|d| crate::model::Datacenter::new(&d));
        host_capacity(
            &snap(ctx),
            crate::graphql::types::overcommit(ctx),
            dc.as_ref(),
        )
    }

    /// The event log, newest first: every change of the graph with its type, phases before and
    /// after and a diff (credentials blanked), filtered by object, kind, namespace, type and time.
    async fn events(
        &self,
        ctx: &Context<'_>,
        filter: Option<crate::graphql::history::EventFilter>,
        first: Option<i32>,
        after: Option<String>,
    ) -> async_graphql::Result<
        async_graphql::connection::Connection<String, crate::graphql::history::HistoryEvent>,
    > {
        crate::graphql::history::events(ctx, filter, first, after).await
    }

    /// Machines that went `Failed`, per UTC day for the last `days` days (every day listed).
    async fn machine_failures_per_day(
        &self,
        ctx: &Context<'_>,
        #[graphql(default = 30)] days: i32,
    ) -> async_graphql::Result<Vec<crate::graphql::history::DayCount>> {
        crate::graphql::history::failures_per_day(ctx, days).await
    }

    /// Where the data comes from and how current each kind is: show staleness instead of
    /// pretending to be live.
    async fn sources(&self, ctx: &Context<'_>) -> crate::source::status::OperatorsReport {
        // Staleness depends on the clock and the watches, not only on the snapshot.
        crate::graphql::mark_volatile(ctx);
        ctx.data_unchecked::<Arc<crate::source::status::SourceStatus>>()
            .report(&snap(ctx))
    }

    /// How the infrastructure operators (proxmox, talos, kea, kubevirt) are doing: judged from
    /// what the graph shows (their kinds served and current, their objects progressing) and
    /// their endpoints' answers when probed (`*_OPERATOR_ENDPOINT`).
    async fn operators(&self, ctx: &Context<'_>) -> Vec<crate::domain::operators::OperatorHealth> {
        crate::graphql::operators_now(ctx).to_vec()
    }

    /// Who is asking: the principal of this request and its role (the dashboard offers
    /// changes only to an operator). Null outside a request (a subscription's event).
    async fn me(&self, ctx: &Context<'_>) -> Option<Me> {
        // The answer depends on the caller, not only on the snapshot.
        crate::graphql::mark_volatile(ctx);
        ctx.data_opt::<crate::auth::Principal>().map(|p| Me {
            name: p.name.to_string(),
            role: p.role,
            anonymous: p.is_anonymous(),
            limited: !p.scope.is_all(),
            sees: p.scope.grants().map(sees).unwrap_or_default(),
            groups: p.credential.groups().to_vec(),
            signed_in_with: p.credential.method().to_string(),
            expires_at: match &p.credential {
                crate::auth::Credential::Oidc(s) => Some(s.person.expires.to_string()),
                _ => None,
            },
        })
    }
}

/// What limited grants show, one entry per datacenter and set of namespaces.
fn sees(grants: &crate::store::Grants) -> Vec<Sees> {
    let mut out: Vec<Sees> = Vec::new();
    for (dc, kinds) in &grants.datacenters {
        for (kind, namespaces) in kinds {
            let namespaces = match namespaces {
                crate::store::Namespaces::All => None,
                crate::store::Namespaces::Only(set) => Some(set.iter().cloned().collect()),
            };
            let datacenter = dc.as_ref().map(|d| d.key().to_string());
            match out
                .iter_mut()
                .find(|s| s.datacenter == datacenter && s.namespaces == namespaces)
            {
                Some(s) => s.kinds.push(kind.name().to_string()),
                None => out.push(Sees {
                    datacenter,
                    namespaces,
                    kinds: vec![kind.name().to_string()],
                }),
            }
        }
    }
    out
}

/// Kinds a limited caller sees, in which namespaces of which datacenters.
#[derive(async_graphql::SimpleObject)]
pub struct Sees {
    /// The datacenter's key; null: every datacenter not listed on its own.
    pub datacenter: Option<String>,
    /// The namespaces; null: all of them (and, for a cluster-scoped kind, the kind).
    pub namespaces: Option<Vec<String>>,
    /// The kinds shown there.
    pub kinds: Vec<String>,
}

/// The caller of a request.
#[derive(async_graphql::SimpleObject)]
pub struct Me {
    /// `key:NAME`, `kubernetes:USER`, `oidc:USER` or `anonymous`.
    pub name: String,
    /// What it may do.
    pub role: crate::auth::Role,
    /// True when no credential was sent (read from a trusted network).
    pub anonymous: bool,
    /// True when the caller sees only part of the fleet (`sees` says which).
    pub limited: bool,
    /// What a limited caller sees (empty when it sees everything).
    pub sees: Vec<Sees>,
    /// The groups the OpenID provider names (empty for keys and Kubernetes tokens).
    pub groups: Vec<String>,
    /// How the caller proved who it is: `api-key`, `kubernetes-token`, `oidc-session` (signed
    /// in to the dashboard), `oidc-token` (a bearer token the provider signed) or `anonymous`.
    pub signed_in_with: String,
    /// When the provider's token behind this caller expires (a session refreshes it before).
    pub expires_at: Option<String>,
}
