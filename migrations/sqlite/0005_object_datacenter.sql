-- Several datacenters: an object's identity includes the datacenter it was read from. '' is the
-- one datacenter of a single-cluster server, so every row written before keeps its meaning.
-- SQLite cannot change a primary key in place: the table is rebuilt.
CREATE TABLE objects_by_datacenter (
    datacenter       TEXT    NOT NULL DEFAULT '',
    kind             TEXT    NOT NULL,
    namespace        TEXT    NOT NULL,
    name             TEXT    NOT NULL,
    api_version      TEXT    NOT NULL,
    uid              TEXT    NOT NULL,
    resource_version INTEGER NOT NULL,
    body             TEXT    NOT NULL,
    updated_at       TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    PRIMARY KEY (datacenter, kind, namespace, name)
);
INSERT INTO objects_by_datacenter
    (datacenter, kind, namespace, name, api_version, uid, resource_version, body, updated_at)
    SELECT '', kind, namespace, name, api_version, uid, resource_version, body, updated_at
    FROM objects;
DROP TABLE objects;
ALTER TABLE objects_by_datacenter RENAME TO objects;
CREATE INDEX objects_uid ON objects (uid);
