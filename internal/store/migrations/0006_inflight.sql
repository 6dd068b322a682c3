-- Requests in flight on every replica, so that a notifications/cancelled
-- reaching another replica than its request still finds it (exactly one
-- match across all replicas), and the replicas alive to own them.
CREATE TABLE replicas (
    id         TEXT PRIMARY KEY,
    seen_at_ms BIGINT NOT NULL
);
CREATE TABLE inflight (
    replica       TEXT NOT NULL,
    seq           BIGINT NOT NULL,
    actor         TEXT NOT NULL,
    request_id    TEXT NOT NULL,
    started_at_ms BIGINT NOT NULL,
    PRIMARY KEY (replica, seq)
);
CREATE INDEX inflight_by_request ON inflight (actor, request_id);
