-- The application inventory's pause (`setApplicationsPaused`, the design's `stop: true`): one row,
-- written by whichever replica an admin reached, read at start-up and by every replica (on
-- PostgreSQL a NOTIFY on `vitistack_inventory_pause` tells them at once). No row: the pushes
-- follow `APPLICATIONS_PAUSED`.
CREATE TABLE inventory_pause (
    id         INTEGER PRIMARY KEY CHECK (id = 1),
    paused     BOOLEAN NOT NULL,
    changed_by TEXT NOT NULL,
    changed_ms BIGINT NOT NULL
);
