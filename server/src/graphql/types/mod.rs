//! GraphQL object types: one per kind, sharing the common fields (id, metadata, phase, conditions,
//! raw), each with its typed fields and relationships resolved through the store's indexes.

mod cluster;
mod compute;
mod datacenter;
mod hosts;
mod network;

use std::sync::Arc;

use async_graphql::{Context, Interface, Json, SimpleObject};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

pub use cluster::*;
pub use compute::*;
pub use datacenter::*;
pub use hosts::*;
pub use network::*;

use super::paging::{self, ConnectionFields, Cursor, Filter, PageArgs, Sort};
use super::parts::{Memo, ShowsObject};
use crate::error::ErrorCode;
use crate::model::{Condition, Datacenter, Kind, Resource};
use crate::store::{ObjectKey, Snapshot};

/// The snapshot a request reads (set once per request, so the whole answer is consistent).
pub fn snap<'a>(ctx: &Context<'a>) -> std::borrow::Cow<'a, Arc<Snapshot>> {
    match ctx.data_opt::<Arc<Snapshot>>() {
        // Queries: borrowed, no reference count touched per resolver.
        Some(s) => std::borrow::Cow::Borrowed(s),
        // Mutations and subscriptions have no per-request snapshot: they read the live graph,
        // as much of it as the caller may see.
        None => {
            let store = ctx.data_unchecked::<Arc<crate::store::Store>>();
            let live = store.snapshot();
            std::borrow::Cow::Owned(store.view(&live, &crate::graphql::scope_of(ctx)))
        }
    }
}

/// A Relay connection of store objects.
/// Its items are resolved through [`Memo`], so their values can be kept across changes.
pub type Conn<T> = async_graphql::connection::Connection<Cursor, Memo<T>, ConnectionFields>;

/// Filter, sort and paginate objects for a connection field; the history the selection asks of
/// the page's items is loaded for all of them at once (see [`crate::graphql::loaders::prefetch`]).
pub async fn connection<T: async_graphql::OutputType + ShowsObject>(
    ctx: &Context<'_>,
    items: Vec<Arc<Resource>>,
    filter: Option<&Filter>,
    sort: Option<Sort>,
    page: PageArgs,
    wrap: impl Fn(Arc<Resource>) -> Option<T>,
) -> async_graphql::Result<Conn<T>> {
    connection_of(ctx, items.iter(), filter, sort, page, wrap).await
}

/// [`connection`] over objects borrowed (from the request's snapshot): only the page's are
/// cloned.
pub async fn connection_of<'a, T: async_graphql::OutputType + ShowsObject>(
    ctx: &Context<'_>,
    items: impl Iterator<Item = &'a Arc<Resource>>,
    filter: Option<&Filter>,
    sort: Option<Sort>,
    page: PageArgs,
    wrap: impl Fn(Arc<Resource>) -> Option<T>,
) -> async_graphql::Result<Conn<T>> {
    let max = super::paging::max_page_size(ctx);
    let filter = filter.map(paging::CompiledFilter::new).transpose()?;
    // Items of another kind are dropped first so that totalCount and the pages agree.
    let items = items.filter(|r| T::shows(r) && filter.as_ref().is_none_or(|f| f.matches(r)));
    let conn = super::page_cut::paginate(items, sort, page, max, |r| wrap(r).map(Memo))?;
    Ok(prefetched(ctx, conn).await)
}

/// A page, once the history its selection asks of its items is loaded for all of them at once.
pub async fn prefetched<T: async_graphql::OutputType + ShowsObject>(
    ctx: &Context<'_>,
    conn: Conn<T>,
) -> Conn<T> {
    let uids: Vec<crate::model::UidText<'_>> = conn
        .edges
        .iter()
        .filter_map(|e| match &e.cursor {
            Cursor::Item(_, r) => Some(r.uid()),
            Cursor::Decoded { .. } => None,
        })
        .filter(|u| !u.is_empty())
        .collect();
    let uids: Vec<&str> = uids.iter().map(|u| &**u).collect();
    crate::graphql::loaders::prefetch(ctx, &uids).await;
    conn
}

/// Opaque global id of an object: base64url of `["Kind","namespace","name","datacenter"]`, or
/// of `["Kind","namespace","name"]` in the one datacenter of a single-cluster deployment (the
/// ids it gave out before there were several stay valid).
pub fn global_id(r: &Resource) -> async_graphql::ID {
    encode_id(r.kind(), r.namespace(), r.name(), r.datacenter())
}

/// The global id of the object with this key (see [`global_id`]).
pub fn key_id(key: &ObjectKey) -> async_graphql::ID {
    encode_id(key.kind, &key.namespace, &key.name, &key.datacenter)
}

fn encode_id(kind: Kind, namespace: &str, name: &str, dc: &Datacenter) -> async_graphql::ID {
    let json = if dc.is_single() {
        serde_json::to_vec(&[kind.name(), namespace, name])
    } else {
        serde_json::to_vec(&[kind.name(), namespace, name, dc.key()])
    };
    async_graphql::ID(URL_SAFE_NO_PAD.encode(json.unwrap_or_default()))
}

/// An object by name: in the datacenter named, else in whichever one holds it; `AMBIGUOUS`
/// (with the datacenters in `extensions.datacenters`) when several do.
pub fn by_name(
    s: &Snapshot,
    datacenter: Option<&str>,
    kind: Kind,
    namespace: &str,
    name: &str,
) -> async_graphql::Result<Option<Arc<Resource>>> {
    let dc = datacenter.map(Datacenter::new);
    match s.find(dc.as_ref(), kind, namespace, name) {
        Ok(found) => Ok(found.cloned()),
        Err(several) => Err(ambiguous(kind, namespace, name, &several)),
    }
}

/// The `AMBIGUOUS` error of a look-up that matched in several datacenters.
pub fn ambiguous(
    kind: impl std::fmt::Display,
    namespace: &str,
    name: &str,
    datacenters: &[Datacenter],
) -> async_graphql::Error {
    use async_graphql::ErrorExtensions;
    let keys: Vec<String> = datacenters.iter().map(|d| d.key().to_string()).collect();
    let what = if namespace.is_empty() {
        format!("{kind} {name}")
    } else {
        format!("{kind} {namespace}/{name}")
    };
    ErrorCode::Ambiguous
        .graphql(format!(
            "{what} exists in {} datacenters ({}): name one with `datacenter`",
            keys.len(),
            keys.join(", ")
        ))
        .extend_with(move |_, e| {
            e.set(
                "datacenters",
                async_graphql::Value::List(keys.iter().cloned().map(Into::into).collect()),
            )
        })
}

/// Why a text is not a global id of this server.
#[derive(Debug, PartialEq, thiserror::Error)]
pub enum IdError {
    #[error("`{0}` is not a global id of this server")]
    NotAnId(String),
    #[error("`{0}` names an unknown kind")]
    UnknownKind(String),
}

/// Decode a global id into a key, or say why it is not one.
pub fn decode_id(id: &str) -> Result<ObjectKey, IdError> {
    let not_an_id = || IdError::NotAnId(id.to_string());
    let bytes = URL_SAFE_NO_PAD.decode(id).map_err(|_| not_an_id())?;
    let parts: Vec<String> = serde_json::from_slice(&bytes).map_err(|_| not_an_id())?;
    let (kind, ns, name, dc) = match parts.as_slice() {
        [kind, ns, name] => (kind, ns, name, Datacenter::default()),
        [kind, ns, name, dc] if !dc.is_empty() => (kind, ns, name, Datacenter::new(dc)),
        _ => return Err(not_an_id()),
    };
    let kind: Kind = kind
        .parse()
        .map_err(|_| IdError::UnknownKind(id.to_string()))?;
    Ok(ObjectKey::new(&dc, kind, ns, name))
}

pub use crate::domain::summary::Long;

/// A label or annotation.
#[derive(SimpleObject, Clone, Debug)]
pub struct KeyValue {
    /// The key.
    pub key: String,
    /// The value.
    pub value: String,
}

/// A status condition.
#[derive(SimpleObject, Clone, Debug)]
#[graphql(name = "Condition")]
pub struct ConditionGql {
    /// Condition type, e.g. `Ready`.
    #[graphql(name = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// Machine-readable reason.
    pub reason: Option<String>,
    /// Human-readable message.
    pub message: Option<String>,
    /// When the status last changed.
    pub last_transition_time: Option<String>,
}

impl From<&Condition> for ConditionGql {
    fn from(c: &Condition) -> Self {
        ConditionGql {
            type_: c.type_.to_string(),
            status: c.status.to_string(),
            reason: c.reason.as_deref().map(String::from),
            message: c.message.as_deref().map(String::from),
            last_transition_time: c.last_transition_time.as_deref().map(String::from),
        }
    }
}

fn pairs(map: Option<&crate::model::Pairs>) -> Vec<KeyValue> {
    map.map(|m| {
        m.iter()
            .map(|(k, v)| KeyValue {
                key: k.into(),
                value: v.into(),
            })
            .collect()
    })
    .unwrap_or_default()
}

/// Wrap any object in its GraphQL type.
pub fn to_node(r: Arc<Resource>) -> Node {
    match r.kind() {
        Kind::Machine => Node::Machine(MachineObj(r)),
        Kind::MachineClass => Node::MachineClass(MachineClassObj(r)),
        Kind::MachineProvider => Node::MachineProvider(MachineProviderObj(r)),
        Kind::KubevirtConfig => Node::KubevirtConfig(KubevirtConfigObj(r)),
        Kind::ProxmoxConfig => Node::ProxmoxConfig(ProxmoxConfigObj(r)),
        Kind::KubernetesCluster => Node::KubernetesCluster(ClusterObj(r)),
        Kind::KubernetesProvider => Node::KubernetesProvider(KubernetesProviderObj(r)),
        Kind::EtcdBackup => Node::EtcdBackup(EtcdBackupObj(r)),
        Kind::ClusterStorage => Node::ClusterStorage(ClusterStorageObj(r)),
        Kind::ClusterStorageClass => Node::ClusterStorageClass(ClusterStorageClassObj(r)),
        Kind::NetworkNamespace => Node::NetworkNamespace(NetworkNamespaceObj(r)),
        Kind::NetworkConfiguration => Node::NetworkConfiguration(NetworkConfigurationObj(r)),
        Kind::ControlPlaneVirtualSharedIp => Node::ControlPlaneVirtualSharedIp(VipObj(r)),
        Kind::IpAllocation => Node::IpAllocation(IpAllocationObj(r)),
        Kind::Vitistack => Node::Vitistack(VitistackObj(r)),
        Kind::Node => Node::Host(HostObj(r)),
        Kind::VirtualMachine => Node::VirtualMachine(VirtualMachineObj(r)),
        Kind::VirtualMachineInstance => Node::VirtualMachineInstance(VirtualMachineInstanceObj(r)),
    }
}

/// Any object with a global id.
#[derive(Interface, Clone)]
#[graphql(
    field(
        name = "id",
        ty = "async_graphql::ID",
        desc = "Opaque global id; pass it to `node`."
    ),
    field(name = "name", ty = "String", desc = "`metadata.name`."),
    field(name = "kind", ty = "String", desc = "The Kubernetes kind."),
    field(
        name = "api_version",
        ty = "String",
        desc = "`group/version` the object was read as (`vitistack.io/v1alpha1`, `kubevirt.io/v1`, `v1`)."
    ),
    field(
        name = "namespace",
        ty = "Option<String>",
        desc = "`metadata.namespace`; null for cluster-scoped kinds."
    ),
    field(name = "uid", ty = "String", desc = "`metadata.uid`."),
    field(
        name = "datacenter",
        ty = "String",
        desc = "The key of the datacenter it was read from (empty on a single-cluster server)."
    ),
    field(
        name = "resource_version",
        ty = "Option<String>",
        desc = "`metadata.resourceVersion`."
    ),
    field(
        name = "created_at",
        ty = "Option<String>",
        desc = "`metadata.creationTimestamp` (RFC 3339)."
    ),
    field(name = "labels", ty = "Vec<KeyValue>", desc = "Labels."),
    field(name = "annotations", ty = "Vec<KeyValue>", desc = "Annotations."),
    field(
        name = "phase",
        ty = "Option<String>",
        desc = "`status.phase` as written; null when there is none yet."
    ),
    field(
        name = "conditions",
        ty = "Vec<ConditionGql>",
        desc = "`status.conditions`."
    ),
    field(
        name = "raw",
        ty = "Json<serde_json::Value>",
        desc = "The whole object as JSON (credentials redacted, managedFields dropped)."
    )
)]
#[allow(
    missing_docs,
    clippy::large_enum_variant,
    clippy::duplicated_attributes
)]
pub enum Node {
    Machine(MachineObj),
    MachineClass(MachineClassObj),
    MachineProvider(MachineProviderObj),
    KubevirtConfig(KubevirtConfigObj),
    ProxmoxConfig(ProxmoxConfigObj),
    KubernetesCluster(ClusterObj),
    KubernetesProvider(KubernetesProviderObj),
    EtcdBackup(EtcdBackupObj),
    ClusterStorage(ClusterStorageObj),
    ClusterStorageClass(ClusterStorageClassObj),
    NetworkNamespace(NetworkNamespaceObj),
    NetworkConfiguration(NetworkConfigurationObj),
    ControlPlaneVirtualSharedIp(VipObj),
    IpAllocation(IpAllocationObj),
    Vitistack(VitistackObj),
    Host(HostObj),
    VirtualMachine(VirtualMachineObj),
    VirtualMachineInstance(VirtualMachineInstanceObj),
}

/// Declare a GraphQL type for a kind: the wrapper, its constructor, the common fields, and `$body`.
macro_rules! node_type {
    ($(#[$doc:meta])* $wrapper:ident, $gql:literal, $($variant:ident)|+ ; { $($body:tt)* }) => {
        $(#[$doc])*
        #[derive(Clone, Debug)]
        pub struct $wrapper(pub std::sync::Arc<crate::model::Resource>);

        impl $wrapper {
            /// Wrap an object of this kind; `None` for other kinds.
            pub fn new(r: std::sync::Arc<crate::model::Resource>) -> Option<Self> {
                <Self as crate::graphql::parts::ShowsObject>::shows(&r).then(|| $wrapper(r))
            }
        }

        impl crate::graphql::parts::ShowsObject for $wrapper {
            fn object(&self) -> &std::sync::Arc<crate::model::Resource> {
                &self.0
            }

            fn shows(r: &crate::model::Resource) -> bool {
                matches!(r, $(crate::model::Resource::$variant(_))|+)
            }
        }

        #[async_graphql::Object(name = $gql)]
        impl $wrapper {
            /// Opaque global id; pass it to `node`.
            pub async fn id(&self, _ctx: &async_graphql::Context<'_>) -> async_graphql::Result<async_graphql::ID> {
                Ok(crate::graphql::types::global_id(&self.0))
            }

            /// `metadata.name`.
            pub async fn name(&self, _ctx: &async_graphql::Context<'_>) -> async_graphql::Result<String> {
                Ok(self.0.name().to_string())
            }

            /// The Kubernetes kind.
            pub async fn kind(&self, _ctx: &async_graphql::Context<'_>) -> async_graphql::Result<String> {
                Ok(self.0.kind().name().to_string())
            }

            /// `group/version` the object was read as (`vitistack.io/v1alpha1`, `kubevirt.io/v1`, `v1`).
            pub async fn api_version(&self, _ctx: &async_graphql::Context<'_>) -> async_graphql::Result<String> {
                Ok(self.0.kind().api_version(self.0.version()))
            }

            /// `metadata.namespace`; null for cluster-scoped kinds.
            pub async fn namespace(&self, _ctx: &async_graphql::Context<'_>) -> async_graphql::Result<Option<String>> {
                Ok(Some(self.0.namespace()).filter(|n| !n.is_empty()).map(str::to_owned))
            }

            /// `metadata.uid`.
            pub async fn uid(&self, _ctx: &async_graphql::Context<'_>) -> async_graphql::Result<String> {
                Ok(self.0.uid().to_owned())
            }

            /// The key of the datacenter it was read from (empty on a single-cluster server).
            pub async fn datacenter(&self, _ctx: &async_graphql::Context<'_>) -> async_graphql::Result<String> {
                Ok(self.0.datacenter().key().to_owned())
            }

            /// `metadata.resourceVersion`.
            pub async fn resource_version(&self, _ctx: &async_graphql::Context<'_>) -> async_graphql::Result<Option<String>> {
                Ok(self.0.meta().resource_version.as_deref().map(str::to_string))
            }

            /// `metadata.creationTimestamp` (RFC 3339).
            pub async fn created_at(&self, _ctx: &async_graphql::Context<'_>) -> async_graphql::Result<Option<String>> {
                Ok(self.0.created().map(|t| t.to_string()))
            }

            /// Labels.
            pub async fn labels(&self, _ctx: &async_graphql::Context<'_>) -> async_graphql::Result<Vec<crate::graphql::types::KeyValue>> {
                Ok(crate::graphql::types::pairs(self.0.meta().labels.as_deref()))
            }

            /// Annotations.
            pub async fn annotations(&self, _ctx: &async_graphql::Context<'_>) -> async_graphql::Result<Vec<crate::graphql::types::KeyValue>> {
                Ok(crate::graphql::types::pairs(self.0.meta().annotations.as_ref()))
            }

            /// `status.phase` as written; null when there is none yet.
            pub async fn phase(&self, _ctx: &async_graphql::Context<'_>) -> async_graphql::Result<Option<String>> {
                Ok(self.0.phase().filter(|p| !p.is_empty()).map(str::to_owned))
            }

            /// What the phase means (running, pending, failed, stopped, deleting, other): the
            /// one rule the dashboard colours by and the metrics count by.
            pub async fn phase_state(&self, _ctx: &async_graphql::Context<'_>) -> async_graphql::Result<crate::model::vocab::PhaseState> {
                Ok(crate::model::vocab::PhaseState::of(self.0.phase()))
            }

            /// `status.conditions`.
            pub async fn conditions(&self, _ctx: &async_graphql::Context<'_>) -> async_graphql::Result<Vec<crate::graphql::types::ConditionGql>> {
                Ok(self.0.conditions().unwrap_or_default().iter().map(Into::into).collect())
            }

            /// The whole object as JSON (credentials redacted, managedFields dropped).
            pub async fn raw(&self, _ctx: &async_graphql::Context<'_>) -> async_graphql::Result<async_graphql::Json<serde_json::Value>> {
                Ok(async_graphql::Json(self.0.to_value()))
            }

            $($body)*
        }
    };
}
pub(crate) use node_type;

/// Resolve a relationship to zero or one object.
pub fn one<T>(r: Option<&Arc<Resource>>, wrap: impl Fn(Arc<Resource>) -> Option<T>) -> Option<T> {
    r.cloned().and_then(wrap)
}

/// Resolve a relationship to a list.
pub fn many<'a, T>(
    items: impl Iterator<Item = &'a Arc<Resource>>,
    wrap: impl Fn(Arc<Resource>) -> Option<T>,
) -> Vec<T> {
    items.cloned().filter_map(wrap).collect()
}

/// Raw JSON of any object (used by `raw` on embedded parts).
pub fn json(v: serde_json::Value) -> Json<serde_json::Value> {
    Json(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_carry_the_datacenter_and_old_ids_stay_valid() {
        let east = Datacenter::new("east");
        let key = ObjectKey::new(&east, Kind::Machine, "t", "m");
        assert_eq!(decode_id(&key_id(&key)), Ok(key.clone()));
        // An id of the single-cluster server (three parts) still names its object.
        let single = ObjectKey::new(&Datacenter::default(), Kind::Machine, "t", "m");
        let old = URL_SAFE_NO_PAD.encode(br#"["Machine","t","m"]"#);
        assert_eq!(decode_id(&old), Ok(single.clone()));
        assert_eq!(key_id(&single).0, old);
        assert_ne!(key_id(&single), key_id(&key));
        // An empty datacenter is written as three parts, never as a fourth.
        let four_empty = URL_SAFE_NO_PAD.encode(br#"["Machine","t","m",""]"#);
        assert!(decode_id(&four_empty).is_err());
    }
}
