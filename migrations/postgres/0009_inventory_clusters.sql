-- The application inventory's cluster UUID of each datacenter on the embedded source (the kube
-- source keeps it in a ConfigMap of the cluster): generated once, kept across restarts, the same
-- for every replica. The inventory API knows the cluster by it.
CREATE TABLE inventory_clusters (
    datacenter   TEXT PRIMARY KEY,
    cluster_uuid TEXT NOT NULL
);

-- What the inventory API was last sent for each application: the fingerprint of its revision and
-- pods' readiness, and how the push went. A push whose fingerprint is delivered is not sent again
-- (by any replica, after any restart).
CREATE TABLE inventory_pushes (
    datacenter  TEXT NOT NULL,
    namespace   TEXT NOT NULL,
    name        TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    state       TEXT NOT NULL,
    attempts    INTEGER NOT NULL DEFAULT 0,
    last_status INTEGER,
    last_error  TEXT,
    updated_ms  BIGINT NOT NULL,
    PRIMARY KEY (datacenter, namespace, name)
);
