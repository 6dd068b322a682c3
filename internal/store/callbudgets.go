package store

import (
	"context"
	"time"
)

// Store operations of the shared call budgets.
const (
	opTakeCall     = "take_call"
	opSweepBudgets = "sweep_call_budgets"
)

// CallBudgets are downstream call budgets every replica on one PostgreSQL
// counts against (docs/replicas.md "Call budgets"). One row per
// (connector, partition, maxCalls) is a ring of the times of the last
// maxCalls admitted calls and the slot of the oldest: a call is admitted
// exactly when that oldest one has left the window, and then takes its
// slot; a refused call waits until it leaves. Each call is one atomic
// upsert — one round trip — whose cost does not grow with the window's
// calls beyond rewriting the row. Times come from the database's clock, so
// replicas' clocks never disagree about a window; a changed maxCalls (a
// reload) starts a new ring.
type CallBudgets struct {
	s *sqlStore
}

// NewCallBudgets returns the shared budgets of st: PostgreSQL only
// (ErrNotShared otherwise; SQLite and memory: keep budgets in the process).
func NewCallBudgets(st Store) (*CallBudgets, error) {
	s, ok := st.(*sqlStore)
	if !ok || s.d.kind != "postgres" {
		return nil, ErrNotShared
	}
	return &CallBudgets{s: s}, nil
}

// takeCallSQL is one rolling-window decision. The upsert locks the row, and
// under READ COMMITTED a conflicting upsert re-reads the row another
// replica just committed, so concurrent calls on every replica serialize on
// it. now is never earlier than the row's last (a statement that waited for
// the lock read the clock before it), so the ring stays in time order. An
// empty slot (NULL: fewer than maxCalls calls so far) is free.
const takeCallSQL = `
INSERT INTO call_budgets AS b (connector, partition_key, max_calls, calls, next_slot, admitted, now_ms, expires_at_ms)
SELECT $1, $2, $3::BIGINT, ARRAY[n.ms], 1 % $3::BIGINT + 1, TRUE, n.ms, n.ms + $4::BIGINT
FROM (SELECT (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT AS ms) n
ON CONFLICT (connector, partition_key, max_calls) DO UPDATE SET
    admitted = COALESCE(b.calls[b.next_slot] <= GREATEST(EXCLUDED.now_ms, b.now_ms) - $4::BIGINT, TRUE),
    calls[b.next_slot] = CASE WHEN COALESCE(b.calls[b.next_slot] <= GREATEST(EXCLUDED.now_ms, b.now_ms) - $4::BIGINT, TRUE)
        THEN GREATEST(EXCLUDED.now_ms, b.now_ms) ELSE b.calls[b.next_slot] END,
    next_slot = CASE WHEN COALESCE(b.calls[b.next_slot] <= GREATEST(EXCLUDED.now_ms, b.now_ms) - $4::BIGINT, TRUE)
        THEN b.next_slot % $3::BIGINT + 1 ELSE b.next_slot END,
    now_ms = GREATEST(EXCLUDED.now_ms, b.now_ms),
    expires_at_ms = CASE WHEN COALESCE(b.calls[b.next_slot] <= GREATEST(EXCLUDED.now_ms, b.now_ms) - $4::BIGINT, TRUE)
        THEN GREATEST(EXCLUDED.now_ms, b.now_ms) + $4::BIGINT ELSE b.expires_at_ms END
RETURNING admitted, CASE WHEN admitted THEN 0 ELSE calls[next_slot] + $4::BIGINT - now_ms END`

// TakeCall records one call of (connector, partition) when fewer than
// maxCalls were made in the last window, on any replica; otherwise it
// records nothing and returns how long until one fits. A failure of the
// database is an *Error matching ErrUnavailable.
func (b *CallBudgets) TakeCall(ctx context.Context, connector, partition string, maxCalls int, window time.Duration) (bool, time.Duration, error) {
	var ok bool
	var retryMs int64
	err := b.s.do(ctx, opTakeCall, func(ctx context.Context) error {
		return b.s.db.QueryRowContext(ctx, takeCallSQL, connector, partition, maxCalls, window.Milliseconds()).Scan(&ok, &retryMs)
	})
	if err != nil {
		return false, 0, err
	}
	return ok, time.Duration(max(retryMs, 0)) * time.Millisecond, nil
}

// sweepCallBudgets deletes at most limit rows whose every call has left
// the window (Maintain's job, on PostgreSQL only). They reset nothing: such
// a row admits the next call whether it exists or not.
func sweepCallBudgets(ctx context.Context, st Store, limit int) (int, error) {
	s, ok := st.(*sqlStore)
	if !ok || s.d.kind != "postgres" {
		return 0, nil
	}
	var n int64
	err := s.do(ctx, opSweepBudgets, func(ctx context.Context) error {
		res, err := s.db.ExecContext(ctx, `DELETE FROM call_budgets WHERE (connector, partition_key, max_calls) IN (
			SELECT connector, partition_key, max_calls FROM call_budgets
			WHERE expires_at_ms < (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT LIMIT $1)`, limit)
		if err == nil {
			n, err = res.RowsAffected()
		}
		return err
	})
	return int(n), err
}
