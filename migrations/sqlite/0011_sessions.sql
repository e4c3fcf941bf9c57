-- Sign-in sessions (OIDC): one row per signed-in browser, read by every replica. `id` is the
-- SHA-256 of the cookie's token (the token itself is never kept); `sealed` holds the provider's
-- refresh and ID tokens sealed with AES-256-GCM under a key derived from the client secret.
-- `refreshing_ms` marks a refresh one replica has claimed.
CREATE TABLE sessions (
    id               TEXT PRIMARY KEY,
    username         TEXT NOT NULL,
    groups_json      TEXT NOT NULL,
    created_ms       BIGINT NOT NULL,
    ends_ms          BIGINT NOT NULL,
    token_expires_ms BIGINT NOT NULL,
    refreshed_ms     BIGINT NOT NULL,
    sealed           TEXT NOT NULL,
    version          BIGINT NOT NULL,
    refreshing_ms    BIGINT
);
CREATE INDEX sessions_ends ON sessions (ends_ms);
