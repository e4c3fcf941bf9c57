-- The event log: one row per change of the graph (or a gap marker when events had to be dropped).
-- at_ms is milliseconds since the Unix epoch; diff is a JSON array of {path, before, after} with
-- credentials blanked. (uid, resource_version, change) is unique so a replayed change (several
-- replicas, a restart) is stored once.
CREATE TABLE events (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    at_ms            INTEGER NOT NULL,
    seq              INTEGER NOT NULL,
    kind             TEXT    NOT NULL,
    namespace        TEXT    NOT NULL,
    name             TEXT    NOT NULL,
    uid              TEXT    NOT NULL,
    resource_version TEXT    NOT NULL,
    change           TEXT    NOT NULL,
    event_type       TEXT    NOT NULL,
    phase_before     TEXT,
    phase_after      TEXT,
    diff             TEXT    NOT NULL,
    dropped          INTEGER
);
CREATE UNIQUE INDEX events_identity ON events (uid, resource_version, change);
CREATE INDEX events_object ON events (kind, namespace, name, id);
CREATE INDEX events_at ON events (at_ms);
CREATE INDEX events_type ON events (event_type, id);

-- Webhook deliveries: one row per (endpoint, event); state is pending, delivered or failed.
CREATE TABLE webhook_deliveries (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    endpoint      TEXT    NOT NULL,
    event_seq     INTEGER NOT NULL,
    event_type    TEXT    NOT NULL,
    state         TEXT    NOT NULL,
    attempts      INTEGER NOT NULL,
    last_status   INTEGER,
    last_error    TEXT,
    created_ms    INTEGER NOT NULL,
    updated_ms    INTEGER NOT NULL
);
CREATE INDEX webhook_deliveries_state ON webhook_deliveries (state, id);
