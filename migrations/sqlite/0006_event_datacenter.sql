-- Several datacenters: a history row names the datacenter of its object, and a row is one per
-- (datacenter, uid, resourceVersion, change): two datacenters' API servers may give out the
-- same uid and versions. '' is the one datacenter of a single-cluster server.
ALTER TABLE events ADD COLUMN datacenter TEXT NOT NULL DEFAULT '';
DROP INDEX events_identity;
CREATE UNIQUE INDEX events_identity ON events (datacenter, uid, resource_version, change);
