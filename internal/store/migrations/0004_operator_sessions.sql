-- Console sessions: the cookie's digest, never the cookie.
CREATE TABLE operator_sessions (
    digest        TEXT PRIMARY KEY,
    subject       TEXT NOT NULL,
    email         TEXT NOT NULL,
    csrf_digest   TEXT NOT NULL,
    created_at_ms BIGINT NOT NULL,
    expires_at_ms BIGINT NOT NULL
);
CREATE INDEX operator_sessions_by_expiry ON operator_sessions (expires_at_ms);
