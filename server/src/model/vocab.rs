//! Open vocabularies: phases and condition values the operators write, with room for values we do not know yet.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::packed::OptInt;
use super::text::Str;

/// RFC 3339 timestamps as the API server writes them.
pub type Time = jiff::Timestamp;

/// True when `t` is its type's default (a `spec` the object was sent without is not written).
pub fn is_default<T: Default + PartialEq>(t: &T) -> bool {
    *t == T::default()
}

macro_rules! open_vocab {
    ($(#[$meta:meta])* $name:ident { $($variant:ident = $text:literal),* $(,)? }) => {
        $(#[$meta])*
        #[derive(Clone, Debug, PartialEq, Eq, Hash)]
        pub enum $name {
            $(#[doc = $text] $variant,)*
            /// A value this server does not know; kept as written.
            Other(String),
        }

        impl $name {
            /// Every value this server knows, in pipeline order.
            pub const KNOWN: &'static [&'static str] = &[$($text),*];

            /// Read a value, keeping unknown text in `Other`.
            pub fn parse(text: &str) -> Self {
                match text {
                    $($text => $name::$variant,)*
                    other => $name::Other(other.to_string()),
                }
            }

            /// The value as the operators write it.
            pub fn as_str(&self) -> &str {
                match self {
                    $($name::$variant => $text,)*
                    $name::Other(s) => s,
                }
            }
        }

        impl Default for $name {
            fn default() -> Self {
                $name::Other(String::new())
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                Ok($name::parse(&String::deserialize(d)?))
            }
        }
    };
}

open_vocab! {
    /// `Machine.status.phase` as kubevirt-operator and proxmox-operator write it.
    MachinePhase {
        Pending = "Pending", Creating = "Creating", Running = "Running", Stopping = "Stopping",
        Stopped = "Stopped", Succeeded = "Succeeded", Terminating = "Terminating",
        Terminated = "Terminated", Failed = "Failed",
    }
}

open_vocab! {
    /// `KubernetesCluster.status.phase` as talos-operator writes it, in pipeline order.
    ClusterPhase {
        Pending = "Pending", ControlPlaneIpsPending = "ControlPlaneIPsPending",
        ConfigGenerated = "ConfigGenerated", ConfiguringFirstControlPlane = "ConfiguringFirstControlPlane",
        WaitingForFirstControlPlaneApi = "WaitingForFirstControlPlaneAPI", Bootstrapping = "Bootstrapping",
        Bootstrapped = "Bootstrapped", RetrievingKubeconfig = "RetrievingKubeconfig",
        ConfiguringRemainingControlPlanes = "ConfiguringRemainingControlPlanes",
        ConfiguringWorkers = "ConfiguringWorkers", ConfigApplied = "ConfigApplied",
        WaitingForNodes = "WaitingForNodes", Ready = "Ready", UpgradingTalos = "UpgradingTalos",
        UpgradingKubernetes = "UpgradingKubernetes", UpgradeFailed = "UpgradeFailed",
        Failed = "Failed", ValidationError = "ValidationError",
    }
}

open_vocab! {
    /// Phases of the network objects (NetworkNamespace, NetworkConfiguration, CPVIP, IPAllocation).
    NetworkPhase {
        Pending = "Pending", Reconciling = "Reconciling", Allocated = "Allocated", Ready = "Ready",
        Released = "Released", Error = "Error",
    }
}

open_vocab! {
    /// Phases of providers, the Vitistack, backups and storage (statuses few operators write).
    ProviderPhase {
        Pending = "Pending", Initializing = "Initializing", Provisioning = "Provisioning",
        Deploying = "Deploying", Running = "Running", Updating = "Updating", Completed = "Completed",
        Ready = "Ready", Degraded = "Degraded", Offline = "Offline", Deleting = "Deleting", Failed = "Failed",
    }
}

open_vocab! {
    /// A condition's `status`.
    ConditionStatus { True = "True", False = "False", Unknown = "Unknown" }
}

/// What a phase means for the people who run it: the one rule every view sorts phases by
/// (metrics' `status` label, the old aggregator's pending count, the dashboard's colours, served
/// as `phaseState`). It reads the phases of every kind: a Machine's, a VirtualMachine's printable
/// status and a VirtualMachineInstance's (KubeVirt), the network objects' and a cluster's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, async_graphql::Enum)]
pub enum PhaseState {
    /// `Running`, `Ready`.
    Running,
    /// No phase yet, or on its way: `Pending`, `Creating`, `Provisioning`, `Starting`,
    /// `Scheduling`, `Scheduled`, `WaitingForVolumeBinding`.
    Pending,
    /// `Failed`, `Error`, and KubeVirt's and talos-operator's error states (`ErrorUnschedulable`,
    /// `CrashLoopBackOff`, `ErrImagePull`, `UpgradeFailed`, `ValidationError`, …).
    Failed,
    /// `Stopped`, `Stopping`.
    Stopped,
    /// `Terminating`, `Deleting`.
    Deleting,
    /// Any other phase.
    Other,
}

impl PhaseState {
    /// What `phase` means (None: no phase yet).
    pub fn of(phase: Option<&str>) -> Self {
        match phase.unwrap_or_default() {
            "Running" | "Ready" => PhaseState::Running,
            ""
            | "Pending"
            | "Creating"
            | "Provisioning"
            | "Starting"
            | "Scheduling"
            | "Scheduled"
            | "WaitingForVolumeBinding" => PhaseState::Pending,
            "Failed" | "Error" | "ErrorUnschedulable" | "Unschedulable" | "CrashLoopBackOff"
            | "ErrImagePull" | "ImagePullBackOff" | "ErrorPvcNotFound" | "DataVolumeError"
            | "UpgradeFailed" | "ValidationError" => PhaseState::Failed,
            "Stopped" | "Stopping" => PhaseState::Stopped,
            "Terminating" | "Deleting" => PhaseState::Deleting,
            _ => PhaseState::Other,
        }
    }

    /// As a metric label: `running`, `pending`, `failed`, `stopped`, `deleting`, `other`.
    pub fn as_str(self) -> &'static str {
        match self {
            PhaseState::Running => "running",
            PhaseState::Pending => "pending",
            PhaseState::Failed => "failed",
            PhaseState::Stopped => "stopped",
            PhaseState::Deleting => "deleting",
            PhaseState::Other => "other",
        }
    }
}

/// One status condition. Covers metav1.Condition, the Machine's own condition type and the KC's.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Condition {
    /// Condition type, e.g. `Ready`.
    #[serde(rename = "type", default)]
    pub type_: Str,
    /// True, False or Unknown.
    #[serde(default = "unknown_status")]
    pub status: ConditionStatus,
    /// Machine-readable reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<Str>,
    /// Human-readable message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<Str>,
    /// When the status last changed, as written (some kinds use free strings).
    #[serde(
        rename = "lastTransitionTime",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub last_transition_time: Option<Str>,
    /// The generation the condition was computed from.
    #[serde(
        rename = "observedGeneration",
        default,
        skip_serializing_if = "OptInt::is_none"
    )]
    pub observed_generation: OptInt,
}

fn unknown_status() -> ConditionStatus {
    ConditionStatus::Unknown
}

/// Find a condition by type.
pub fn condition<'a>(conditions: Option<&'a [Condition]>, type_: &str) -> Option<&'a Condition> {
    conditions?.iter().find(|c| c.type_ == type_)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_phases_are_kept() {
        assert_eq!(MachinePhase::parse("Running"), MachinePhase::Running);
        let odd = MachinePhase::parse("Hibernating");
        assert_eq!(odd, MachinePhase::Other("Hibernating".into()));
        assert_eq!(odd.as_str(), "Hibernating");
        let p: ClusterPhase = serde_json::from_str("\"ControlPlaneIPsPending\"").expect("phase");
        assert_eq!(p, ClusterPhase::ControlPlaneIpsPending);
    }

    #[test]
    fn phases_sort_like_the_old_page() {
        use PhaseState as S;
        let cases = [
            (None, S::Pending),
            (Some("Running"), S::Running),
            (Some("Ready"), S::Running),
            (Some("Scheduling"), S::Pending),
            (Some("Provisioning"), S::Pending),
            (Some("ErrorUnschedulable"), S::Failed),
            (Some("CrashLoopBackOff"), S::Failed),
            (Some("Failed"), S::Failed),
            (Some("UpgradeFailed"), S::Failed),
            (Some("Stopped"), S::Stopped),
            (Some("Terminating"), S::Deleting),
            (Some("Succeeded"), S::Other),
            (Some("Bootstrapping"), S::Other),
        ];
        for (phase, state) in cases {
            assert_eq!(PhaseState::of(phase), state, "{phase:?}");
        }
        assert_eq!(PhaseState::of(Some("Stopping")).as_str(), "stopped");
    }
}
