//! The watched kinds and what the API server knows about each (group, versions, plural, scope).

use std::fmt;
use std::str::FromStr;

/// The API group of every Viti Stack kind.
pub const GROUP: &str = "vitistack.io";

macro_rules! kinds {
    ($($variant:ident => $name:literal, $plural:literal, $short:literal, $namespaced:literal, [$($version:literal),+];)*) => {
        /// A `vitistack.io` kind.
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
    Vitistack => "Vitistack", "vitistacks", "vs", false, ["v1alpha1"];
    MachineProvider => "MachineProvider", "machineproviders", "mp", false, ["v1alpha1"];
    KubernetesProvider => "KubernetesProvider", "kubernetesproviders", "kp", false, ["v1alpha1"];
    MachineClass => "MachineClass", "machineclasses", "mc", false, ["v1alpha1"];
    KubevirtConfig => "KubevirtConfig", "kubevirtconfigs", "kvc", false, ["v1alpha1"];
    ProxmoxConfig => "ProxmoxConfig", "proxmoxconfigs", "pxc", false, ["v1alpha1"];
    ClusterStorageClass => "ClusterStorageClass", "clusterstorageclasses", "csc", false, ["v1alpha1"];
    NetworkNamespace => "NetworkNamespace", "networknamespaces", "nn", true, ["v1alpha1", "v1alpha2"];
    KubernetesCluster => "KubernetesCluster", "kubernetesclusters", "kc", true, ["v1alpha1"];
    ControlPlaneVirtualSharedIp => "ControlPlaneVirtualSharedIP", "controlplanevirtualsharedips", "lb", true, ["v1alpha1"];
    Machine => "Machine", "machines", "m", true, ["v1alpha1"];
    NetworkConfiguration => "NetworkConfiguration", "networkconfigurations", "nc", true, ["v1alpha1"];
    IpAllocation => "IPAllocation", "ipallocations", "ipa", true, ["v1alpha2"];
    EtcdBackup => "EtcdBackup", "etcdbackups", "eb", true, ["v1alpha1"];
    ClusterStorage => "ClusterStorage", "clusterstorages", "cls", true, ["v1alpha1"];
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Kind {
    type Err = String;

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
            .ok_or_else(|| format!("`{s}` is not a vitistack.io kind"))
    }
}
