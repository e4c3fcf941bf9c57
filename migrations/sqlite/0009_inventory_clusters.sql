-- The application inventory's cluster UUID of each datacenter on the embedded source (the kube
-- source keeps it in a ConfigMap of the cluster): generated once, kept across restarts, the same
-- for every replica. The inventory API knows the cluster by it.
CREATE TABLE inventory_clusters (
    datacenter   TEXT PRIMARY KEY,
    cluster_uuid TEXT NOT NULL
);
