-- Issued access tokens: only a digest of the secret is kept.
CREATE TABLE access_tokens (
    id              TEXT PRIMARY KEY,
    digest          TEXT NOT NULL UNIQUE,
    name            TEXT NOT NULL,
    created_by      TEXT NOT NULL,
    created_at_ms   BIGINT NOT NULL,
    expires_at_ms   BIGINT,
    revoked_at_ms   BIGINT,
    revoked_by      TEXT,
    last_used_at_ms BIGINT
);
