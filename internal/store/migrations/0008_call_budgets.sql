-- Downstream call budgets every replica counts against (PostgreSQL only; a
-- SQLite or memory: store keeps budgets in the process): one row per
-- (connector, partition, maxCalls) holding a ring of the times of its last
-- maxCalls admitted calls, updated by one atomic upsert per call
-- (internal/store/callbudgets.go).
CREATE TABLE call_budgets (
    connector     TEXT NOT NULL,
    partition_key TEXT NOT NULL,
    max_calls     BIGINT NOT NULL,
    calls         CALL_TIMES NOT NULL,
    next_slot     BIGINT NOT NULL,
    admitted      BOOLEAN NOT NULL,
    now_ms        BIGINT NOT NULL,
    expires_at_ms BIGINT NOT NULL,
    PRIMARY KEY (connector, partition_key, max_calls)
);
CREATE INDEX call_budgets_by_expiry ON call_budgets (expires_at_ms);
