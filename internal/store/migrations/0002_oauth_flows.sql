-- Pending downstream OAuth flows (state, sealed PKCE verifier and redirect):
-- a callback may land on any replica. Grants and client registrations are
-- sealed values in `secrets` (kinds oauth_grant, oauth_client).
CREATE TABLE oauth_flows (
    state         TEXT PRIMARY KEY,
    connector     TEXT NOT NULL,
    key_id        TEXT NOT NULL,
    sealed        BLOB NOT NULL,
    expires_at_ms BIGINT NOT NULL
);
CREATE INDEX oauth_flows_by_expiry ON oauth_flows (expires_at_ms);
