-- The audit trail: who changed a grant, a token or a credential. Never a value.
CREATE TABLE audit (
    occurred_at_ms BIGINT NOT NULL,
    id             TEXT NOT NULL,
    actor          TEXT NOT NULL,
    action         TEXT NOT NULL,
    target         TEXT NOT NULL,
    detail         TEXT NOT NULL,
    PRIMARY KEY (occurred_at_ms, id)
);
