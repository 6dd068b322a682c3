-- Persisted catalogs (one row per connector and actor; actor '' is the
-- connector's shared catalog) and the approved fingerprint of each tool.
CREATE TABLE catalogs (
    connector     TEXT NOT NULL,
    actor         TEXT NOT NULL,
    tools         BLOB NOT NULL,
    fingerprint   TEXT NOT NULL,
    fetched_at_ms BIGINT NOT NULL,
    drift         BLOB NOT NULL,
    PRIMARY KEY (connector, actor)
);
CREATE TABLE catalog_approvals (
    connector      TEXT NOT NULL,
    actor          TEXT NOT NULL,
    tool           TEXT NOT NULL,
    fingerprint    TEXT NOT NULL,
    definition     BLOB NOT NULL,
    approved_at_ms BIGINT NOT NULL,
    approved_by    TEXT NOT NULL,
    PRIMARY KEY (connector, actor, tool)
);
