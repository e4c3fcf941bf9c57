-- The timeline: what every object was at every kept moment, so that the whole graph can be
-- rebuilt as it was then (`at(time:)`, `changes(from, to)`).
--
-- timeline_versions holds one row per change, in the order the store applied them. `object` is a
-- small number the writer gives each object (unique from one checkpoint on, which is all a rebuild
-- needs: a restart numbers the objects again in its first checkpoint). `body` is the object as
-- JSON (credentials blanked, as in the store; with its datacenter's key as a top-level
-- `datacenter` when it has one), whole ('F') or as a JSON merge patch
-- (RFC 7386) against the object's previous version ('P'), the tag byte first, the rest raw
-- deflate when that is smaller ('f', 'p'); NULL when the object was deleted.
-- timeline_checkpoints holds the whole graph at a point of that order (`after_version`: every
-- version up to it is in it), deflated: a moment is rebuilt from the newest checkpoint at or
-- before it and the versions after that checkpoint up to the moment. Trimming removes whole
-- checkpoints with the versions before the next one, so every moment left stays rebuildable.
-- `max_object`: the highest object number in use when it was written. `before_bytes`: what the
-- versions between the previous checkpoint and this one take (bodies and a fixed cost per row),
-- for the size bound (HISTORY_MAX_BYTES).
-- datacenter_states: each datacenter's state (CONNECTING, SYNCED, STALE, UNREACHABLE) and what
-- was wrong, whenever either changed (the writer looks every second), and at every start.
CREATE TABLE timeline_versions (
    id     BIGSERIAL PRIMARY KEY,
    at_ms  BIGINT NOT NULL,
    object BIGINT NOT NULL,
    body   BYTEA
);
CREATE TABLE timeline_checkpoints (
    id            BIGSERIAL PRIMARY KEY,
    at_ms         BIGINT NOT NULL,
    after_version BIGINT NOT NULL,
    objects       BIGINT NOT NULL,
    max_object    BIGINT NOT NULL,
    before_bytes  BIGINT NOT NULL,
    body          BYTEA NOT NULL
);
CREATE INDEX timeline_checkpoints_at ON timeline_checkpoints (at_ms);
CREATE TABLE datacenter_states (
    id         BIGSERIAL PRIMARY KEY,
    at_ms      BIGINT NOT NULL,
    datacenter TEXT NOT NULL,
    state      TEXT NOT NULL,
    error      TEXT
);
CREATE INDEX datacenter_states_at ON datacenter_states (at_ms);
