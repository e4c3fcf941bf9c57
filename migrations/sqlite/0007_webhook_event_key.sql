-- Which event a delivery is for, the same on every replica: `datacenter/uid/resourceVersion/change`
-- (the events table's identity). With the endpoint it is unique, so one event is claimed for
-- delivery once across replicas and Lease holders; `owner` is the replica that claimed it last.
-- Rows from before have no key (NULLs never conflict).
ALTER TABLE webhook_deliveries ADD COLUMN event_key TEXT;
ALTER TABLE webhook_deliveries ADD COLUMN owner TEXT;
CREATE UNIQUE INDEX webhook_deliveries_event ON webhook_deliveries (endpoint, event_key);
