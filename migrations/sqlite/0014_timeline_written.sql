-- How far the timeline is written: every change the store applied before `through_ms` is in
-- timeline_versions (or in a checkpoint). One row, kept by the replica that writes the timeline
-- (at each write, and about once a second while nothing changes), so that a replica that does
-- not write it answers a recent moment only once the moment is written, never from half of it.
CREATE TABLE timeline_written (
    id         INTEGER PRIMARY KEY,
    through_ms BIGINT NOT NULL
);
