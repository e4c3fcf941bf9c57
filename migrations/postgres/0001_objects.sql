-- Objects of the embedded source, so a restart keeps what was imported or changed.
-- body is the object as JSON with credentials already redacted.
CREATE TABLE objects (
    kind             TEXT        NOT NULL,
    namespace        TEXT        NOT NULL,
    name             TEXT        NOT NULL,
    api_version      TEXT        NOT NULL,
    uid              TEXT        NOT NULL,
    resource_version BIGINT      NOT NULL,
    body             JSONB       NOT NULL,
    updated_at       TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (kind, namespace, name)
);
CREATE INDEX objects_uid ON objects (uid);
