-- The last report of each datacenter an old status-page agent pushes (`POST /api/report`), as the
-- server read it (its hosts and VMs; agents send no credentials, and fields the server does not
-- know are not kept). Every replica applies it (on PostgreSQL a NOTIFY on `vitistack_hub_reports`
-- tells them at once), and a restarted server lists the datacenter from it, with its age.
CREATE TABLE hub_reports (
    datacenter  TEXT PRIMARY KEY,
    body        TEXT NOT NULL,
    received_ms BIGINT NOT NULL
);
