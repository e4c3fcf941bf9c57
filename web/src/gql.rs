//! The dashboard's GraphQL operations, one per file in `web/graphql/` (a document holds only the
//! operation it sends), typed and checked against the server's `schema.graphql` at compile time
//! by graphql_client: a field the server does not have is a build error, not a blank tile.
#![allow(clippy::upper_case_acronyms, clippy::enum_variant_names)]

use graphql_client::GraphQLQuery;

// The schema's custom scalar, as the generated code names it.
pub type JSON = serde_json::Value;
/// The server's 64-bit integer scalar (byte counts).
pub type Long = i64;

macro_rules! operation {
    ($name:ident, $file:literal) => {
        #[derive(GraphQLQuery)]
        #[graphql(
                                                            schema_path = "../schema.graphql",
                                                            query_path = $file,
                                                            response_derives = "Clone, PartialEq",
                                                            variables_derives = "Clone, PartialEq"
                                                        )]
        pub struct $name;
    };
}

operation!(HostsLive, "graphql/hosts_live.graphql");
operation!(SummaryLive, "graphql/summary_live.graphql");
operation!(Changes, "graphql/changes.graphql");
operation!(SourcesNow, "graphql/sources_now.graphql");
operation!(HostList, "graphql/host_list.graphql");
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
