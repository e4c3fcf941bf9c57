//! The watched kinds and what the API server knows about each (group, versions, plural, scope).

use std::fmt;
use std::str::FromStr;

/// The API group of every Viti Stack kind.
pub const GROUP: &str = "vitistack.io";

/// The API group of KubeVirt's kinds.
pub const KUBEVIRT_GROUP: &str = "kubevirt.io";

macro_rules! kinds {
    ($($variant:ident => $name:literal, $group:expr, $plural:literal, $short:literal, $namespaced:literal, [$($version:literal),+];)*) => {
        /// A kind the graph holds: the `vitistack.io` kinds, plus KubeVirt's VMs and VMIs and core
        /// Nodes (the hosts they run on).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Kind {
            $(#[doc = $name] $variant,)*
        }

        impl Kind {
            /// Every kind, in the order dependencies are usually applied.
            pub const ALL: &'static [Kind] = &[$(Kind::$variant),*];

            /// The `kind:` string.
            pub fn name(self) -> &'static str {
                match self { $(Kind::$variant => $name,)* }
            }

            /// The API group (`vitistack.io`, `kubevirt.io`, or empty for core).
            pub fn group(self) -> &'static str {
                match self { $(Kind::$variant => $group,)* }
            }

            /// `group/version` for a version of this kind (`v1` for core).
            pub fn api_version(self, version: &str) -> String {
                if self.group().is_empty() {
                    version.to_string()
                } else {
                    format!("{}/{version}", self.group())
                }
            }

            /// True for the `vitistack.io` kinds (defined by the CRDs in this product's model).
            pub fn is_vitistack(self) -> bool {
                self.group() == GROUP
            }

            /// The plural resource name (`machines`).
            pub fn plural(self) -> &'static str {
                match self { $(Kind::$variant => $plural,)* }
            }

            /// The short name kubectl accepts (`m`, `kc`, `lb`).
            pub fn short_name(self) -> &'static str {
                match self { $(Kind::$variant => $short,)* }
            }

            /// True for namespaced kinds, false for cluster-scoped ones.
            pub fn namespaced(self) -> bool {
                match self { $(Kind::$variant => $namespaced,)* }
            }

            /// The versions the CRDs serve, storage version last.
            pub fn versions(self) -> &'static [&'static str] {
                match self { $(Kind::$variant => &[$($version),+],)* }
            }
        }
    };
}

kinds! {
    Vitistack => "Vitistack", GROUP, "vitistacks", "vs", false, ["v1alpha1"];
    MachineProvider => "MachineProvider", GROUP, "machineproviders", "mp", false, ["v1alpha1"];
    KubernetesProvider => "KubernetesProvider", GROUP, "kubernetesproviders", "kp", false, ["v1alpha1"];
    MachineClass => "MachineClass", GROUP, "machineclasses", "mc", false, ["v1alpha1"];
    KubevirtConfig => "KubevirtConfig", GROUP, "kubevirtconfigs", "kvc", false, ["v1alpha1"];
    ProxmoxConfig => "ProxmoxConfig", GROUP, "proxmoxconfigs", "pxc", false, ["v1alpha1"];
    ClusterStorageClass => "ClusterStorageClass", GROUP, "clusterstorageclasses", "csc", false, ["v1alpha1"];
    NetworkNamespace => "NetworkNamespace", GROUP, "networknamespaces", "nn", true, ["v1alpha1", "v1alpha2"];
    KubernetesCluster => "KubernetesCluster", GROUP, "kubernetesclusters", "kc", true, ["v1alpha1"];
    ControlPlaneVirtualSharedIp => "ControlPlaneVirtualSharedIP", GROUP, "controlplanevirtualsharedips", "lb", true, ["v1alpha1"];
    Machine => "Machine", GROUP, "machines", "m", true, ["v1alpha1"];
    NetworkConfiguration => "NetworkConfiguration", GROUP, "networkconfigurations", "nc", true, ["v1alpha1"];
    IpAllocation => "IPAllocation", GROUP, "ipallocations", "ipa", true, ["v1alpha2"];
    EtcdBackup => "EtcdBackup", GROUP, "etcdbackups", "eb", true, ["v1alpha1"];
    ClusterStorage => "ClusterStorage", GROUP, "clusterstorages", "cls", true, ["v1alpha1"];
    Node => "Node", "", "nodes", "no", false, ["v1"];
    VirtualMachine => "VirtualMachine", KUBEVIRT_GROUP, "virtualmachines", "vm", true, ["v1"];
    VirtualMachineInstance => "VirtualMachineInstance", KUBEVIRT_GROUP, "virtualmachineinstances", "vmi", true, ["v1"];
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A name that is no kind this server knows.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("`{0}` is not a vitistack.io kind")]
pub struct UnknownKind(pub String);

impl FromStr for Kind {
    type Err = UnknownKind;

    /// Accepts the kind, its plural or its short name, case-insensitively.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Kind::ALL
            .iter()
            .copied()
            .find(|k| {
                k.name().eq_ignore_ascii_case(s)
                    || k.plural().eq_ignore_ascii_case(s)
                    || k.short_name().eq_ignore_ascii_case(s)
            })
            .ok_or_else(|| UnknownKind(s.to_string()))
    }
}
