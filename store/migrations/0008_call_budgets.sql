-- Downstream call budgets every replica counts against (PostgreSQL only; a
-- SQLite or memory: store keeps budgets in the process): one row per
-- (connector, partition) holding the start times of the calls still in its
-- rolling window, updated by one atomic upsert per call (call_budgets.go).
CREATE TABLE call_budgets (
    connector     TEXT NOT NULL,
    partition_key TEXT NOT NULL,
    calls         CALL_TIMES NOT NULL,
    admitted      BOOLEAN NOT NULL,
    now_ms        BIGINT NOT NULL,
    expires_at_ms BIGINT NOT NULL,
    PRIMARY KEY (connector, partition_key)
);
CREATE INDEX call_budgets_by_expiry ON call_budgets (expires_at_ms);
