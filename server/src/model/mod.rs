//! Rust types for every watched kind: the generated CRD trees, open vocabularies, quantities, and
//! the `Resource` sum type the store holds.

pub mod datacenter;
mod generated;
pub mod helm;
pub mod kind;
pub mod kubevirt;
pub mod labels;
pub mod merge_patch;
pub mod meta;
pub mod packed;
pub mod pairs;
pub mod quantity;
pub mod redact;
pub mod secret_name;
pub mod status_page;
pub mod text;
pub mod uid;
pub mod validation;
pub mod vocab;

pub use datacenter::Datacenter;
pub use generated::*;
pub use kind::Kind;
pub use kubevirt::{Node, VirtualMachine, VirtualMachineInstance};
pub use quantity::{IntOrString, Quantity};
pub use vocab::*;

pub use labels::Labels;
pub use meta::ObjectMeta;
pub use pairs::Pairs;
pub use text::{Str, to_strings};
pub use uid::{Uid, UidText};

use serde_json::Value;

/// How ready an object is (see [`Resource::readiness`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Readiness {
    /// Ready.
    pub ready: bool,
    /// Not ready and not expected to become so without a change (condition reason `Error`,
    /// phase `Error`/`Failed`).
    pub failed: bool,
    /// What to tell a person ("has Ready=False: Error VLAN already assigned"), when not plain.
    pub detail: Option<String>,
}

/// Label on Machines, CPVIPs and Secrets naming the cluster (`KubernetesCluster.spec.data.clusterId`).
pub const LABEL_CLUSTER_ID: &str = "vitistack.io/clusterid";
/// Label with the node role of a Machine: `control-plane` or `worker`.
pub const LABEL_NODE_ROLE: &str = "vitistack.io/node-role";
/// Label older talos-operator releases put on the Machines of a cluster instead of
/// [`LABEL_CLUSTER_ID`]: the KubernetesCluster's `metadata.name`.
pub const LABEL_CLUSTER_NAME: &str = "cluster.vitistack.io/cluster-name";
/// Their node-role label (`control-plane`, `controlplane` or `worker`).
pub const LABEL_CLUSTER_ROLE: &str = "cluster.vitistack.io/role";
/// Annotation (and tag) naming the node pool of a worker Machine.
pub const ANNOTATION_NODE_POOL: &str = "vitistack.io/nodepool";
/// Annotation naming the KubevirtConfig a Machine runs through.
pub const ANNOTATION_KUBEVIRT_CONFIG: &str = "vitistack.io/kubevirt-config";
/// Annotation talos-operator writes on a KubernetesCluster: the UID of the tenant cluster's
/// `kube-system` namespace (what ties a cluster seen from inside to its KubernetesCluster).
pub const ANNOTATION_KUBE_SYSTEM_UID: &str = "vitistack.io/kube-system-uid";
/// Label kubevirt-operator puts on the NC, VM and PVCs of a Machine.
pub const LABEL_SOURCE_MACHINE: &str = "vitistack.io/source-machine";
/// Label marking the NetworkConfiguration of a control-plane VIP.
pub const LABEL_PURPOSE: &str = "vitistack.io/purpose";

macro_rules! resources {
    ($($variant:ident($ty:ident) => $kind:ident, $version:literal;)*) => {
        /// One object of a watched kind, typed. Variants are boxed so each object takes only its own size.
        #[derive(Clone, Debug, PartialEq)]
        pub enum Resource {
            $(
                #[doc = concat!("`", stringify!($kind), "` ", $version)]
                $variant(Box<$ty>),
            )*
        }

        impl Resource {
            /// The kind (both NetworkNamespace versions are one kind).
            pub fn kind(&self) -> Kind {
                match self { $(Resource::$variant(_) => Kind::$kind,)* }
            }

            /// `vitistack.io/<version>` of this object.
            pub fn version(&self) -> &'static str {
                match self { $(Resource::$variant(_) => $version,)* }
            }

            /// The object's metadata.
            pub fn meta(&self) -> &ObjectMeta {
                match self { $(Resource::$variant(o) => &o.metadata,)* }
            }

            /// The datacenter it was read from (see [`Datacenter`]).
            pub fn datacenter(&self) -> &Datacenter {
                match self { $(Resource::$variant(o) => &o.datacenter,)* }
            }

            /// The same object, read from `datacenter`: every source tags what it reads.
            pub fn in_datacenter(mut self, datacenter: &Datacenter) -> Self {
                match &mut self { $(Resource::$variant(o) => o.datacenter = datacenter.clone(),)* }
                self
            }

            /// The object's metadata, to fill in server-side fields.
            pub fn meta_mut(&mut self) -> &mut ObjectMeta {
                match self { $(Resource::$variant(o) => &mut o.metadata,)* }
            }

            /// Decode an object of the given kind and version (the value is assumed validated),
            /// with its credentials blanked first (see [`redact`]): this is how every object
            /// enters the graph, so none carries a credential.
            pub fn from_value(kind: Kind, version: &str, mut value: Value) -> Result<Self, serde_json::Error> {
                redact::redact_value(kind, version, &mut value);
                Self::from_kept_value(kind, version, value)
            }

            /// Decode an object this server kept (the timeline's checkpoints): from its JSON
            /// text straight into its type, with no credentials blanked, as they were blanked
            /// when it was first built ([`Resource::from_value`]) and the store held it so.
            pub fn from_kept_json(kind: Kind, version: &str, json: &str) -> Result<Self, serde_json::Error> {
                $(
                    if kind == Kind::$kind && version == $version {
                        return Ok(Resource::$variant(Box::new(serde_json::from_str(json)?)));
                    }
                )*
                Err(serde::de::Error::custom(format!("{} {version} is not served", kind.name())))
            }

            /// [`Resource::from_kept_json`] for an object as JSON: one whose credentials are
            /// already blanked (the timeline's versions: differences between such objects), or
            /// blanked just now ([`Resource::from_value`]).
            pub fn from_kept_value(kind: Kind, version: &str, value: Value) -> Result<Self, serde_json::Error> {
                $(
                    if kind == Kind::$kind && version == $version {
                        return Ok(Resource::$variant(Box::new(serde_json::from_value(value)?)));
                    }
                )*
                Err(serde::de::Error::custom(format!("{} {version} is not served", kind.name())))
            }

            /// The whole object as JSON, with apiVersion and kind (credentials were blanked when
            /// it was built).
            pub fn to_value(&self) -> Value {
                let mut v = match self {
                    $(Resource::$variant(o) => serde_json::to_value(o).unwrap_or(Value::Null),)*
                };
                if let Value::Object(map) = &mut v {
                    map.insert("apiVersion".into(), Value::String(self.kind().api_version(self.version())));
                    map.insert("kind".into(), Value::String(self.kind().name().into()));
                }
                v
            }
        }
    };
}

resources! {
    Vitistack(Vitistack) => Vitistack, "v1alpha1";
    MachineProvider(MachineProvider) => MachineProvider, "v1alpha1";
    MachineClass(MachineClass) => MachineClass, "v1alpha1";
    KubernetesProvider(KubernetesProvider) => KubernetesProvider, "v1alpha1";
    KubevirtConfig(KubevirtConfig) => KubevirtConfig, "v1alpha1";
    ProxmoxConfig(ProxmoxConfig) => ProxmoxConfig, "v1alpha1";
    ClusterStorageClass(ClusterStorageClass) => ClusterStorageClass, "v1alpha1";
    Machine(Machine) => Machine, "v1alpha1";
    KubernetesCluster(KubernetesCluster) => KubernetesCluster, "v1alpha1";
    NetworkNamespace(NetworkNamespace) => NetworkNamespace, "v1alpha1";
    NetworkNamespaceV2(NetworkNamespaceV2) => NetworkNamespace, "v1alpha2";
    NetworkConfiguration(NetworkConfiguration) => NetworkConfiguration, "v1alpha1";
    ControlPlaneVirtualSharedIp(ControlPlaneVirtualSharedIp) => ControlPlaneVirtualSharedIp, "v1alpha1";
    EtcdBackup(EtcdBackup) => EtcdBackup, "v1alpha1";
    ClusterStorage(ClusterStorage) => ClusterStorage, "v1alpha1";
    IpAllocation(IpAllocation) => IpAllocation, "v1alpha2";
    Node(Node) => Node, "v1";
    VirtualMachine(VirtualMachine) => VirtualMachine, "v1";
    VirtualMachineInstance(VirtualMachineInstance) => VirtualMachineInstance, "v1";
}

impl KubernetesClusterSpecTopology {
    /// Every node pool's replicas, summed (saturating).
    pub fn worker_replicas(&self) -> i64 {
        self.workers
            .node_pools
            .iter()
            .map(|p| p.replicas)
            .fold(0, i64::saturating_add)
    }
}

impl Resource {
    /// `metadata.name`.
    pub fn name(&self) -> &str {
        self.meta().name.as_deref().unwrap_or_default()
    }

    /// `metadata.namespace`, empty for cluster-scoped kinds.
    pub fn namespace(&self) -> &str {
        self.meta().namespace.as_deref().unwrap_or_default()
    }

    /// `metadata.uid` (empty when it has none).
    pub fn uid(&self) -> UidText<'_> {
        self.meta()
            .uid
            .as_ref()
            .map_or(UidText::Kept(""), Uid::text)
    }

    /// A label value.
    pub fn label(&self, key: &str) -> Option<&str> {
        self.meta().labels.as_ref()?.get(key)
    }

    /// A Machine's node role, `control-plane` or `worker`: [`LABEL_NODE_ROLE`], else the older
    /// [`LABEL_CLUSTER_ROLE`] (whose `controlplane` is read as `control-plane`).
    pub fn node_role(&self) -> Option<&str> {
        match self.label(LABEL_NODE_ROLE) {
            Some(role) => Some(role),
            None => match self.label(LABEL_CLUSTER_ROLE)? {
                "controlplane" => Some("control-plane"),
                role => Some(role),
            },
        }
    }

    /// True when this object is labelled as one of the cluster's: `vitistack.io/clusterid` is
    /// its clusterId, or, without that label, `cluster.vitistack.io/cluster-name` is its name.
    pub fn labelled_for_cluster(&self, cluster_id: &str, cluster_name: &str) -> bool {
        match self.label(LABEL_CLUSTER_ID) {
            Some(id) => id == cluster_id,
            None => self.label(LABEL_CLUSTER_NAME) == Some(cluster_name),
        }
    }

    /// An annotation value.
    pub fn annotation(&self, key: &str) -> Option<&str> {
        self.meta().annotations.as_ref()?.get(key)
    }

    /// The status phase as written, whatever the kind.
    pub fn phase(&self) -> Option<&str> {
        match self {
            Resource::Vitistack(o) => o.status.as_ref()?.phase.as_ref().map(ProviderPhase::as_str),
            Resource::MachineProvider(o) => {
                o.status.as_ref()?.phase.as_ref().map(ProviderPhase::as_str)
            }
            Resource::MachineClass(o) => o.status.as_ref()?.phase.as_deref(),
            Resource::KubernetesProvider(o) => {
                o.status.as_ref()?.phase.as_ref().map(ProviderPhase::as_str)
            }
            Resource::KubevirtConfig(o) => o.status.as_ref()?.phase.as_deref(),
            Resource::ProxmoxConfig(o) => o.status.as_ref()?.phase.as_deref(),
            Resource::ClusterStorageClass(_) => None,
            Resource::Machine(o) => o.status.as_ref()?.phase.as_ref().map(MachinePhase::as_str),
            Resource::KubernetesCluster(o) => Some(o.status.as_ref()?.phase.as_str()),
            Resource::NetworkNamespace(o) => {
                o.status.as_ref()?.phase.as_ref().map(NetworkPhase::as_str)
            }
            Resource::NetworkNamespaceV2(o) => {
                o.status.as_ref()?.phase.as_ref().map(NetworkPhase::as_str)
            }
            Resource::NetworkConfiguration(o) => {
                o.status.as_ref()?.phase.as_ref().map(NetworkPhase::as_str)
            }
            Resource::ControlPlaneVirtualSharedIp(o) => {
                o.status.as_ref()?.phase.as_ref().map(NetworkPhase::as_str)
            }
            Resource::EtcdBackup(o) => o.status.as_ref()?.phase.as_ref().map(ProviderPhase::as_str),
            Resource::ClusterStorage(o) => {
                o.status.as_ref()?.phase.as_ref().map(ProviderPhase::as_str)
            }
            Resource::IpAllocation(o) => {
                o.status.as_ref()?.phase.as_ref().map(NetworkPhase::as_str)
            }
            Resource::Node(_) => None,
            Resource::VirtualMachine(o) => o.status.as_ref()?.printable_status.as_deref(),
            Resource::VirtualMachineInstance(o) => o.status.as_ref()?.phase.as_deref(),
        }
    }

    /// Status conditions, for the kinds that have them.
    pub fn conditions(&self) -> Option<&[Condition]> {
        match self {
            Resource::Vitistack(o) => o.status.as_ref()?.conditions.as_deref(),
            Resource::MachineProvider(o) => o.status.as_ref()?.conditions.as_deref(),
            Resource::KubernetesProvider(o) => o.status.as_ref()?.conditions.as_deref(),
            Resource::Machine(o) => o.status.as_ref()?.conditions.as_deref(),
            Resource::KubernetesCluster(o) => Some(&o.status.as_ref()?.conditions[..]),
            Resource::NetworkNamespace(o) => o.status.as_ref()?.conditions.as_deref(),
            Resource::NetworkNamespaceV2(o) => o.status.as_ref()?.conditions.as_deref(),
            Resource::NetworkConfiguration(o) => o.status.as_ref()?.conditions.as_deref(),
            Resource::ControlPlaneVirtualSharedIp(o) => o.status.as_ref()?.conditions.as_deref(),
            Resource::EtcdBackup(o) => o.status.as_ref()?.conditions.as_deref(),
            _ => None,
        }
    }

    /// A NetworkNamespace's `status.provisioningPhase` (Pending, Ready, Error): whether its
    /// segment is provisioned. Only common >= v1.0.0 writes it (v1alpha2, and v1alpha1 as that
    /// version serves it); None for other kinds and when it is not written.
    pub fn provisioning_phase(&self) -> Option<&str> {
        match self {
            Resource::NetworkNamespace(o) => o
                .status
                .as_ref()?
                .provisioning_phase
                .as_ref()
                .map(NetworkPhase::as_str),
            Resource::NetworkNamespaceV2(o) => o
                .status
                .as_ref()?
                .provisioning_phase
                .as_ref()
                .map(NetworkPhase::as_str),
            _ => None,
        }
    }

    /// Readiness, read the same way everywhere (pipeline, diagnosis, summaries, `ready` fields):
    /// the `Ready` condition when the object has one (what the operators set and wait for),
    /// otherwise the phase (`Ready` is ready; `Error`/`Failed` are failures). A NetworkNamespace
    /// whose `provisioningPhase` is `Error` has failed and one that is `Pending` is not ready,
    /// whatever else it says: kea and static-ip wait for that phase before they act (an empty
    /// one counts as Ready, as static-ip-operator reads it).
    pub fn readiness(&self) -> Readiness {
        let general = self.general_readiness();
        match self.provisioning_phase() {
            Some("Error") if !general.failed => Readiness {
                ready: false,
                failed: true,
                detail: Some(self.provisioning_detail("Error")),
            },
            Some("Pending") if general.ready => Readiness {
                ready: false,
                failed: false,
                detail: Some(self.provisioning_detail("Pending")),
            },
            _ => general,
        }
    }

    /// "has provisioningPhase Error: <status.message>".
    fn provisioning_detail(&self, phase: &str) -> String {
        let message = match self {
            Resource::NetworkNamespace(o) => o.status.as_ref().and_then(|s| s.message.as_deref()),
            Resource::NetworkNamespaceV2(o) => o.status.as_ref().and_then(|s| s.message.as_deref()),
            _ => None,
        }
        .filter(|m| !m.is_empty());
        match message {
            Some(m) => format!("has provisioningPhase {phase}: {m}"),
            None => format!("has provisioningPhase {phase}"),
        }
    }

    /// Readiness from the `Ready` condition, else the phase.
    fn general_readiness(&self) -> Readiness {
        if let Some(c) = condition(self.conditions(), "Ready") {
            let ready = c.status == ConditionStatus::True;
            let reason = c.reason.clone().unwrap_or_default();
            let message = c.message.clone().unwrap_or_default();
            let failed = !ready && reason == "Error";
            let sep = if message.is_empty() { "" } else { " " };
            return Readiness {
                ready,
                failed,
                detail: Some(format!("has Ready={}: {reason}{sep}{message}", c.status)),
            };
        }
        match self.phase() {
            Some("Ready") => Readiness {
                ready: true,
                failed: false,
                detail: None,
            },
            Some("") | None => Readiness {
                ready: false,
                failed: false,
                detail: Some("has no status yet".into()),
            },
            Some(p) => Readiness {
                ready: false,
                failed: p == "Error" || p == "Failed",
                detail: Some(format!("is in phase {p}")),
            },
        }
    }

    /// The creation time, if the server or the manifest set one.
    pub fn created(&self) -> Option<Time> {
        self.meta().creation_timestamp.get()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn nn(status: Value) -> Resource {
        let v = json!({"metadata": {"name": "n", "namespace": "d"},
            "spec": {"datacenterIdentifier": "dc", "supervisorIdentifier": "s", "clusterIdentifier": "c"},
            "status": status});
        Resource::from_value(Kind::NetworkNamespace, "v1alpha1", v).unwrap()
    }

    #[test]
    fn readiness_prefers_the_ready_condition_and_falls_back_to_the_phase() {
        // The condition wins over a phase that says otherwise.
        let r = nn(
            json!({"phase": "Ready", "conditions": [{"type": "Ready", "status": "False",
            "reason": "Error", "message": "VLAN taken", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}),
        );
        let got = r.readiness();
        assert!(!got.ready && got.failed);
        assert_eq!(
            got.detail.as_deref(),
            Some("has Ready=False: Error VLAN taken")
        );
        // No conditions: the phase decides.
        assert!(nn(json!({"phase": "Ready"})).readiness().ready);
        let failed = nn(json!({"phase": "Failed"})).readiness();
        assert!(!failed.ready && failed.failed);
        assert_eq!(failed.detail.as_deref(), Some("is in phase Failed"));
        let fresh = nn(json!({})).readiness();
        assert!(!fresh.ready && !fresh.failed);
    }

    #[test]
    fn a_network_namespace_is_ready_only_when_its_segment_is_provisioned() {
        let ready = json!([{"type": "Ready", "status": "True", "reason": "Synced",
            "lastTransitionTime": "2026-01-01T00:00:00Z"}]);
        // Ready condition but the segment still Pending: not ready, and the reason says why.
        let pending = nn(json!({"conditions": ready, "provisioningPhase": "Pending"}));
        assert_eq!(pending.provisioning_phase(), Some("Pending"));
        let got = pending.readiness();
        assert!(!got.ready && !got.failed);
        assert_eq!(got.detail.as_deref(), Some("has provisioningPhase Pending"));
        // Error fails it even without conditions, with the operator's message.
        let failed = nn(json!({"provisioningPhase": "Error", "message": "VLAN 10 is taken"}));
        let got = failed.readiness();
        assert!(!got.ready && got.failed);
        assert_eq!(
            got.detail.as_deref(),
            Some("has provisioningPhase Error: VLAN 10 is taken")
        );
        // Ready (or not written) leaves the condition to decide.
        assert!(
            nn(json!({"conditions": ready, "provisioningPhase": "Ready"}))
                .readiness()
                .ready
        );
        assert!(nn(json!({"conditions": ready})).readiness().ready);
        // The same on v1alpha2.
        let v2 = Resource::from_value(
            Kind::NetworkNamespace,
            "v1alpha2",
            json!({"metadata": {"name": "n", "namespace": "d"},
                "spec": {"datacenterIdentifier": "dc", "supervisorIdentifier": "s"},
                "status": {"conditions": ready, "provisioningPhase": "Pending"}}),
        )
        .unwrap();
        assert!(!v2.readiness().ready);
    }
}
