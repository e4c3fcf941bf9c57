-- Several datacenters: an object's identity includes the datacenter it was read from. '' is the
-- one datacenter of a single-cluster server, so every row written before keeps its meaning.
ALTER TABLE objects ADD COLUMN datacenter TEXT NOT NULL DEFAULT '';
ALTER TABLE objects DROP CONSTRAINT objects_pkey;
ALTER TABLE objects ADD PRIMARY KEY (datacenter, kind, namespace, name);
