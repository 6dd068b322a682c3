-- The get_result stash, the activity history and sealed vault values.
-- Times are Unix milliseconds (BIGINT) so both dialects compare them alike.
CREATE TABLE results (
    id            TEXT PRIMARY KEY,
    size          BIGINT NOT NULL,
    created_at_ms BIGINT NOT NULL,
    expires_at_ms BIGINT NOT NULL,
    data          BLOB NOT NULL -- last: the small columns never read through its overflow pages
);
CREATE INDEX results_by_expiry ON results (expires_at_ms);
CREATE INDEX results_by_age ON results (created_at_ms, id, size); -- covers the byte bound's sum and eviction

CREATE TABLE activity (
    occurred_at_ms BIGINT NOT NULL,
    id             TEXT NOT NULL,
    connector_id   TEXT NOT NULL,
    outcome        TEXT NOT NULL,
    actor          TEXT NOT NULL,
    event          BLOB NOT NULL,
    PRIMARY KEY (occurred_at_ms, id)
);
CREATE INDEX activity_by_connector ON activity (connector_id, occurred_at_ms);
CREATE INDEX activity_by_actor ON activity (actor, occurred_at_ms);

CREATE TABLE secrets (
    kind          TEXT NOT NULL,
    connector     TEXT NOT NULL,
    name          TEXT NOT NULL,
    key_id        TEXT NOT NULL,
    sealed        BLOB NOT NULL,
    updated_at_ms BIGINT NOT NULL,
    PRIMARY KEY (kind, connector, name)
);
