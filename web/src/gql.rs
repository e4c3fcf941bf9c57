//! The dashboard's GraphQL operations, one per file in `web/graphql/` (a document holds only the
//! operation it sends), typed and checked against the server's `schema.graphql` at compile time
//! by graphql_client: a field the server does not have is a build error, not a blank tile.
#![allow(clippy::upper_case_acronyms, clippy::enum_variant_names)]

use graphql_client::GraphQLQuery;

// The schema's custom scalar, as the generated code names it.
pub type JSON = serde_json::Value;
/// The server's 64-bit integer scalar (byte counts).
pub type Long = i64;

/// The schema's enums the views match on, defined once for every operation (graphql_client's
/// `extern_enums`): each operation would otherwise have its own copy of each, and the views
/// compared them as strings. A value this dashboard does not know yet reads as `Other`.
macro_rules! schema_enum {
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident = $wire:literal),* $(,)? }) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum $name {
            $($(#[$vmeta])* $variant,)*
            /// A value newer than this dashboard.
            Other,
        }

        // By hand, not derived: serde's derive for an enum with an `other` value is about 700
        // bytes of WebAssembly per enum and per reader, this is a string read and a look-up.
        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let wire = String::deserialize(d)?;
                Ok($name::from_wire(&wire).unwrap_or($name::Other))
            }
        }

        // Written as the schema spells it, for the enums a view sends (a sort); the others'
        // go unused and are left out of the build.
        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.wire())
            }
        }

        // Not every enum's views list its values or write them into a URL.
        #[allow(dead_code)]
        impl $name {
            /// Every value, in the schema's order.
            pub const ALL: &[$name] = &[$($name::$variant),*];

            /// The value as the schema spells it (URL parameters carry it).
            pub fn wire(self) -> &'static str {
                match self {
                    $($name::$variant => $wire,)*
                    $name::Other => "",
                }
            }

            /// The value this wire name names (a URL's parameter), if the dashboard knows it.
            pub fn from_wire(wire: &str) -> Option<Self> {
                $name::ALL.iter().copied().find(|v| v.wire() == wire)
            }
        }
    };
}

schema_enum! {
    /// Where a cluster is in the operators' pipeline.
    PipelineStage {
        Network = "NETWORK", MachinesCreated = "MACHINES_CREATED", IpsAllocated = "IPS_ALLOCATED",
        MachinesRunning = "MACHINES_RUNNING", VipReady = "VIP_READY", Talos = "TALOS", Ready = "READY",
    }
}
schema_enum! {
    /// A cluster's health as the lists group it (the clusters list's `state` filter).
    ClusterHealth { Ready = "READY", Attention = "ATTENTION", Failed = "FAILED" }
}
schema_enum! {
    /// How far one pipeline stage got.
    PipelineStepState {
        Done = "DONE", InProgress = "IN_PROGRESS", Failed = "FAILED", NotStarted = "NOT_STARTED",
        Degraded = "DEGRADED",
    }
}
schema_enum! {
    /// A host's Ready condition.
    HostReadiness { Ready = "READY", NotReady = "NOT_READY", Unknown = "UNKNOWN" }
}
schema_enum! {
    /// What a phase means (the server's one rule, `phaseState`).
    PhaseState {
        Running = "RUNNING", Pending = "PENDING", Failed = "FAILED", Stopped = "STOPPED",
        Deleting = "DELETING",
    }
}
schema_enum! {
    /// Whether a planned change fits on the hosts.
    CapacityVerdict {
        Fits = "FITS", BelowRedundancy = "BELOW_REDUNDANCY", DoesNotFit = "DOES_NOT_FIT",
        Unknown = "UNKNOWN",
    }
}
schema_enum! {
    /// A Machine's role.
    NodeRole { ControlPlane = "CONTROL_PLANE", Worker = "WORKER" }
}
schema_enum! {
    /// A planned Machine's role.
    PlannedRole { ControlPlane = "CONTROL_PLANE", Worker = "WORKER" }
}
schema_enum! {
    /// How current a datacenter's objects are.
    DatacenterState {
        Connecting = "CONNECTING", Synced = "SYNCED", Stale = "STALE", Unreachable = "UNREACHABLE",
    }
}
schema_enum! {
    /// What happened to an object.
    ResourceEventType {
        Added = "ADDED", Modified = "MODIFIED", Deleted = "DELETED", Synced = "SYNCED",
        Resync = "RESYNC",
    }
}

schema_enum! {
    ApplicationHealth {
        Healthy = "HEALTHY", Degraded = "DEGRADED", Failed = "FAILED",
        PendingInstall = "PENDING_INSTALL", PendingUpgrade = "PENDING_UPGRADE",
        PendingRollback = "PENDING_ROLLBACK", Uninstalling = "UNINSTALLING", Unknown = "UNKNOWN",
    }
}

schema_enum! {
    /// What a list is sorted by on the server (ties: namespace, then name).
    SortField { Name = "NAME", Namespace = "NAMESPACE", Created = "CREATED", Phase = "PHASE" }
}
schema_enum! {
    /// Which way a list is sorted.
    SortDirection { Asc = "ASC", Desc = "DESC" }
}

macro_rules! operation {
    ($name:ident, $file:literal) => {
        #[derive(GraphQLQuery)]
        #[graphql(
                                                            schema_path = "../schema.graphql",
                                                            query_path = $file,
                                                            response_derives = "Clone, PartialEq",
                                                            variables_derives = "Clone, PartialEq",
                                                            extern_enums(
                                                                "PipelineStage",
                                                                "ClusterHealth",
                                                                "PipelineStepState",
                                                                "HostReadiness",
                                                                "PhaseState",
                                                                "CapacityVerdict",
                                                                "NodeRole",
                                                                "PlannedRole",
                                                                "ResourceEventType",
                                                                "DatacenterState",
                                                                "ApplicationHealth",
                                                                "SortField",
                                                                "SortDirection"
                                                            )
                                                        )]
        pub struct $name;
    };
}

operation!(HostsLive, "graphql/hosts_live.graphql");
operation!(SummaryLive, "graphql/summary_live.graphql");
operation!(Changes, "graphql/changes.graphql");
operation!(SourcesNow, "graphql/sources_now.graphql");
operation!(DatacenterCards, "graphql/datacenter_cards.graphql");
operation!(ApplicationList, "graphql/application_list.graphql");
operation!(ApplicationCounts, "graphql/application_counts.graphql");
operation!(ApplicationDetail, "graphql/application_detail.graphql");
operation!(ApplicationsLive, "graphql/applications_live.graphql");
operation!(HostList, "graphql/host_list.graphql");
// The overview's allocation charts: each host's figures, without the VMs the hosts page lists
// (at 100,000 objects HostList answers 5.9 MB and took 1.2 s on a fresh server).
operation!(HostFigures, "graphql/host_figures.graphql");
operation!(ClusterList, "graphql/cluster_list.graphql");
operation!(ClusterVms, "graphql/cluster_vms.graphql");
operation!(ClusterId, "graphql/cluster_id.graphql");
operation!(ClusterLive, "graphql/cluster_live.graphql");
operation!(ObjectById, "graphql/object_by_id.graphql");
operation!(EventList, "graphql/event_list.graphql");
operation!(ClusterHistory, "graphql/cluster_history.graphql");
operation!(MachineList, "graphql/machine_list.graphql");
operation!(VmList, "graphql/vm_list.graphql");
operation!(NetworkList, "graphql/network_list.graphql");
operation!(Me, "graphql/me.graphql");
operation!(ScaleCluster, "graphql/scale_cluster.graphql");
operation!(PauseCluster, "graphql/pause_cluster.graphql");
operation!(ResumeCluster, "graphql/resume_cluster.graphql");
operation!(RequestUpgrade, "graphql/request_upgrade.graphql");
operation!(DeleteCluster, "graphql/delete_cluster.graphql");
operation!(ClusterPlan, "graphql/cluster_plan.graphql");
operation!(CreateCluster, "graphql/create_cluster.graphql");
operation!(OldestMoment, "graphql/oldest_moment.graphql");
operation!(GraphChanges, "graphql/graph_changes.graphql");
operation!(Search, "graphql/search.graphql");
