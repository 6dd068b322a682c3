package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"
)

// opTimeout bounds one store operation, so a database that stops answering
// fails the call that needed it instead of holding it until its deadline.
const opTimeout = 5 * time.Second

// dialect is what differs between SQLite and PostgreSQL in our SQL.
type dialect struct {
	kind string
	// numbered placeholders ($1, $2, …) instead of ?
	numbered bool
	// lockResults serializes stash writers across processes inside tx
	// (PostgreSQL advisory transaction lock); nil where the transaction
	// itself is exclusive (SQLite's immediate transactions).
	lockResults func(ctx context.Context, tx *sql.Tx) error
}

// rebind turns ? placeholders into $n for PostgreSQL. Our SQL has no ? in
// literals.
func (d dialect) rebind(q string) string {
	if !d.numbered {
		return q
	}
	var b strings.Builder
	n := 0
	for _, r := range q {
		if r == '?' {
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// ddl adapts a migration statement: BLOB is BYTEA on PostgreSQL, and
// CALL_TIMES (a list of millisecond times, call_budgets) is BIGINT[] there
// and TEXT on SQLite, which never reads it.
func (d dialect) ddl(stmt string) string {
	if d.kind == "postgres" {
		return strings.NewReplacer("BLOB", "BYTEA", "CALL_TIMES", "BIGINT[]").Replace(stmt)
	}
	return strings.ReplaceAll(stmt, "CALL_TIMES", "TEXT")
}

// sqlStore is the SQLite and PostgreSQL backend.
type sqlStore struct {
	db      *sql.DB
	d       dialect
	m       *metrics
	log     *slog.Logger
	onClose func() error

	mu     sync.Mutex
	health Health
}

func newSQLStore(db *sql.DB, d dialect, m *metrics, log *slog.Logger) *sqlStore {
	return &sqlStore{db: db, d: d, m: m, log: log, health: Health{State: StateOK}}
}

func (s *sqlStore) Kind() string  { return s.d.kind }
func (s *sqlStore) Durable() bool { return true }

func (s *sqlStore) Health() Health {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.health
}

func (s *sqlStore) Close() error {
	err := s.db.Close()
	if s.onClose != nil {
		err = errors.Join(err, s.onClose())
	}
	return err
}

// do runs one operation under opTimeout, classifies its error, records the
// metrics and the health state.
func (s *sqlStore) do(ctx context.Context, op string, f func(ctx context.Context) error) error {
	start := time.Now()
	octx, cancel := context.WithTimeout(ctx, opTimeout)
	err := f(octx)
	cancel()
	err = s.classify(ctx, op, err)
	s.m.observe(ctx, op, start, err)
	var se *Error
	switch {
	case errors.As(err, &se):
		s.setHealth(Health{State: StateFailed, LastErrorCode: se.Code()})
	case err == nil || isOutcome(err):
		s.setHealth(Health{State: StateOK})
	}
	return err
}

func (s *sqlStore) setHealth(h Health) {
	s.mu.Lock()
	prev := s.health
	s.health = h
	s.mu.Unlock()
	if prev.State != h.State {
		if h.State == StateFailed {
			s.log.Error("store unavailable", "kind", s.d.kind, "code", h.LastErrorCode)
		} else {
			s.log.Info("store available again", "kind", s.d.kind)
		}
	}
}

// isOutcome reports the sentinel answers that are not failures.
func isOutcome(err error) bool {
	return errors.Is(err, ErrNotFound) || errors.Is(err, ErrExpired) || errors.Is(err, ErrTooLarge) || errors.Is(err, ErrConflict)
}

// classify keeps sentinels and the caller's own cancellation as they are and
// wraps everything else as a backend *Error.
func (s *sqlStore) classify(ctx context.Context, op string, err error) error {
	switch {
	case err == nil, isOutcome(err):
		return err
	case ctx.Err() != nil:
		return fmt.Errorf("store %s: %w", op, ctx.Err())
	default:
		return &Error{Op: op, Kind: s.d.kind, Err: err}
	}
}

func (s *sqlStore) tx(ctx context.Context, f func(tx *sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := f(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

func (s *sqlStore) Ping(ctx context.Context) error {
	return s.do(ctx, opPing, func(ctx context.Context) error {
		var one int
		return s.db.QueryRowContext(ctx, `SELECT 1`).Scan(&one)
	})
}

func (s *sqlStore) SchemaVersion(ctx context.Context) (int, error) {
	var v int
	err := s.do(ctx, opMigrate, func(ctx context.Context) error {
		var err error
		v, err = schemaVersion(ctx, s.db)
		return err
	})
	return v, err
}

func (s *sqlStore) PutResult(ctx context.Context, id, owner string, data []byte, expiresAt time.Time, maxTotal int64) error {
	size := int64(len(data))
	if size > maxTotal {
		return ErrTooLarge
	}
	return s.do(ctx, opPutResult, func(ctx context.Context) error {
		return s.tx(ctx, func(tx *sql.Tx) error {
			if s.d.lockResults != nil {
				if err := s.d.lockResults(ctx, tx); err != nil {
					return err
				}
			}
			var total int64
			if err := tx.QueryRowContext(ctx, `SELECT COALESCE(SUM(size), 0) FROM results`).Scan(&total); err != nil {
				return err
			}
			if total+size > maxTotal {
				if err := s.evict(ctx, tx, total+size-maxTotal); err != nil {
					return err
				}
			}
			_, err := tx.ExecContext(ctx, s.d.rebind(
				`INSERT INTO results (id, owner, size, created_at_ms, expires_at_ms, data) VALUES (?, ?, ?, ?, ?, ?)`),
				id, owner, size, time.Now().UnixMilli(), expiresAt.UnixMilli(), data)
			return err
		})
	})
}

// evict deletes the oldest results until at least need bytes are freed.
func (s *sqlStore) evict(ctx context.Context, tx *sql.Tx, need int64) error {
	rows, err := tx.QueryContext(ctx, `SELECT id, size FROM results ORDER BY created_at_ms, id`)
	if err != nil {
		return err
	}
	var ids []string
	for freed := int64(0); freed < need && rows.Next(); {
		var id string
		var size int64
		if err := rows.Scan(&id, &size); err != nil {
			_ = rows.Close()
			return err
		}
		ids = append(ids, id)
		freed += size
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return err
	}
	for _, id := range ids {
		if _, err := tx.ExecContext(ctx, s.d.rebind(`DELETE FROM results WHERE id = ?`), id); err != nil {
			return err
		}
	}
	return nil
}

func (s *sqlStore) ResultWindow(ctx context.Context, id, owner string, from, to int, now time.Time) ([]byte, int, error) {
	var window []byte
	var total int
	err := s.do(ctx, opResultWindow, func(ctx context.Context) error {
		from = max(0, from)
		to = max(from, to)
		var size, exp int64
		err := s.db.QueryRowContext(ctx, s.d.rebind(
			`SELECT size, expires_at_ms, substr(data, ?, ?) FROM results WHERE id = ? AND owner = ?`),
			from+1, to-from, id, owner).Scan(&size, &exp, &window)
		if errors.Is(err, sql.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return err
		}
		if now.UnixMilli() >= exp {
			window = nil
			return ErrExpired
		}
		total = int(size)
		return nil
	})
	if window == nil && err == nil {
		window = []byte{}
	}
	return window, total, err
}

func (s *sqlStore) SweepResults(ctx context.Context, now time.Time, limit int) (int, error) {
	var n int64
	err := s.do(ctx, opSweepResults, func(ctx context.Context) error {
		res, err := s.db.ExecContext(ctx, s.d.rebind(
			`DELETE FROM results WHERE id IN (SELECT id FROM results WHERE expires_at_ms <= ? LIMIT ?)`),
			now.UnixMilli(), limit)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		if err != nil {
			return err
		}
		// Expired OAuth flows and console sessions go with the same bounded job.
		if _, err = s.db.ExecContext(ctx, s.d.rebind(
			`DELETE FROM oauth_flows WHERE state IN (SELECT state FROM oauth_flows WHERE expires_at_ms <= ? LIMIT ?)`),
			now.UnixMilli(), limit); err != nil {
			return err
		}
		_, err = s.db.ExecContext(ctx, s.d.rebind(
			`DELETE FROM operator_sessions WHERE digest IN (SELECT digest FROM operator_sessions WHERE expires_at_ms <= ? LIMIT ?)`),
			now.UnixMilli(), limit)
		return err
	})
	return int(n), err
}

func (s *sqlStore) AppendActivity(ctx context.Context, batch []ActivityRecord) error {
	if len(batch) == 0 {
		return nil
	}
	return s.do(ctx, opAppendActiv, func(ctx context.Context) error {
		return s.tx(ctx, func(tx *sql.Tx) error {
			stmt, err := tx.PrepareContext(ctx, s.d.rebind(
				`INSERT INTO activity (occurred_at_ms, id, connector_id, outcome, actor, event) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`))
			if err != nil {
				return err
			}
			defer stmt.Close()
			for _, r := range batch {
				if _, err := stmt.ExecContext(ctx, r.OccurredAt.UnixMilli(), r.ID, r.ConnectorID, r.Outcome, r.Actor, r.JSON); err != nil {
					return err
				}
			}
			return nil
		})
	})
}

func (s *sqlStore) ListActivity(ctx context.Context, q ActivityQuery) ([]ActivityRecord, bool, error) {
	var out []ActivityRecord
	more := false
	err := s.do(ctx, opListActivity, func(ctx context.Context) error {
		var where []string
		var args []any
		if q.Before != nil {
			where = append(where, `(occurred_at_ms < ? OR (occurred_at_ms = ? AND id < ?))`)
			args = append(args, q.Before.OccurredAtMs, q.Before.OccurredAtMs, q.Before.ID)
		}
		for _, f := range []struct{ col, v string }{{"connector_id", q.ConnectorID}, {"outcome", q.Outcome}, {"actor", q.Actor}} {
			if f.v != "" {
				where = append(where, f.col+` = ?`)
				args = append(args, f.v)
			}
		}
		if !q.Since.IsZero() {
			where = append(where, `occurred_at_ms >= ?`)
			args = append(args, q.Since.UnixMilli())
		}
		if !q.Until.IsZero() {
			where = append(where, `occurred_at_ms < ?`)
			args = append(args, q.Until.UnixMilli())
		}
		query := `SELECT occurred_at_ms, id, connector_id, outcome, actor, event FROM activity`
		if len(where) > 0 {
			query += ` WHERE ` + strings.Join(where, ` AND `)
		}
		query += ` ORDER BY occurred_at_ms DESC, id DESC LIMIT ?`
		args = append(args, q.Limit+1)
		rows, err := s.db.QueryContext(ctx, s.d.rebind(query), args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		out = make([]ActivityRecord, 0, min(q.Limit, 256))
		for rows.Next() {
			if len(out) == q.Limit {
				more = true
				break
			}
			var r ActivityRecord
			var ms int64
			if err := rows.Scan(&ms, &r.ID, &r.ConnectorID, &r.Outcome, &r.Actor, &r.JSON); err != nil {
				return err
			}
			r.OccurredAt = time.UnixMilli(ms).UTC()
			out = append(out, r)
		}
		return rows.Err()
	})
	return out, more, err
}

func (s *sqlStore) PruneActivity(ctx context.Context, maxEvents int, olderThan time.Time) (int, error) {
	var n int64
	err := s.do(ctx, opPruneActivity, func(ctx context.Context) error {
		if !olderThan.IsZero() {
			res, err := s.db.ExecContext(ctx, s.d.rebind(`DELETE FROM activity WHERE occurred_at_ms < ?`), olderThan.UnixMilli())
			if err != nil {
				return err
			}
			k, _ := res.RowsAffected()
			n += k
		}
		if maxEvents > 0 {
			// The row at position maxEvents (newest first) and every older one go.
			var ms int64
			var id string
			err := s.db.QueryRowContext(ctx, s.d.rebind(
				`SELECT occurred_at_ms, id FROM activity ORDER BY occurred_at_ms DESC, id DESC LIMIT 1 OFFSET ?`), maxEvents).Scan(&ms, &id)
			if errors.Is(err, sql.ErrNoRows) {
				return nil
			}
			if err != nil {
				return err
			}
			res, err := s.db.ExecContext(ctx, s.d.rebind(
				`DELETE FROM activity WHERE occurred_at_ms < ? OR (occurred_at_ms = ? AND id <= ?)`), ms, ms, id)
			if err != nil {
				return err
			}
			k, _ := res.RowsAffected()
			n += k
		}
		return nil
	})
	return int(n), err
}

func (s *sqlStore) PutSecret(ctx context.Context, v SealedSecret) error {
	if v.UpdatedAt.IsZero() {
		v.UpdatedAt = time.Now()
	}
	return s.do(ctx, opPutSecret, func(ctx context.Context) error {
		_, err := s.db.ExecContext(ctx, s.d.rebind(
			`INSERT INTO secrets (kind, connector, name, key_id, sealed, updated_at_ms) VALUES (?, ?, ?, ?, ?, ?)
			 ON CONFLICT (kind, connector, name) DO UPDATE SET key_id = excluded.key_id, sealed = excluded.sealed, updated_at_ms = excluded.updated_at_ms`),
			v.Kind, v.Connector, v.Name, v.KeyID, v.Sealed, v.UpdatedAt.UnixMilli())
		return err
	})
}

func (s *sqlStore) GetSecret(ctx context.Context, k SecretKey) (SealedSecret, error) {
	v := SealedSecret{SecretKey: k}
	err := s.do(ctx, opGetSecret, func(ctx context.Context) error {
		var ms int64
		err := s.db.QueryRowContext(ctx, s.d.rebind(
			`SELECT key_id, sealed, updated_at_ms FROM secrets WHERE kind = ? AND connector = ? AND name = ?`),
			k.Kind, k.Connector, k.Name).Scan(&v.KeyID, &v.Sealed, &ms)
		if errors.Is(err, sql.ErrNoRows) {
			return ErrNotFound
		}
		v.UpdatedAt = time.UnixMilli(ms).UTC()
		return err
	})
	if err != nil {
		return SealedSecret{}, err
	}
	return v, nil
}

func (s *sqlStore) DeleteSecret(ctx context.Context, k SecretKey) (bool, error) {
	var n int64
	err := s.do(ctx, opDeleteSecret, func(ctx context.Context) error {
		res, err := s.db.ExecContext(ctx, s.d.rebind(
			`DELETE FROM secrets WHERE kind = ? AND connector = ? AND name = ?`), k.Kind, k.Connector, k.Name)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return n > 0, err
}

func (s *sqlStore) ListSecrets(ctx context.Context) ([]SealedSecret, error) {
	var out []SealedSecret
	err := s.do(ctx, opListSecrets, func(ctx context.Context) error {
		rows, err := s.db.QueryContext(ctx,
			`SELECT kind, connector, name, key_id, sealed, updated_at_ms FROM secrets ORDER BY kind, connector, name`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var v SealedSecret
			var ms int64
			if err := rows.Scan(&v.Kind, &v.Connector, &v.Name, &v.KeyID, &v.Sealed, &ms); err != nil {
				return err
			}
			v.UpdatedAt = time.UnixMilli(ms).UTC()
			out = append(out, v)
		}
		return rows.Err()
	})
	return out, err
}

func (s *sqlStore) ReplaceSecret(ctx context.Context, prev, next SealedSecret) (bool, error) {
	if next.UpdatedAt.IsZero() {
		next.UpdatedAt = time.Now()
	}
	var n int64
	err := s.do(ctx, opReplaceSecret, func(ctx context.Context) error {
		res, err := s.db.ExecContext(ctx, s.d.rebind(
			`UPDATE secrets SET key_id = ?, sealed = ?, updated_at_ms = ?
			 WHERE kind = ? AND connector = ? AND name = ? AND key_id = ? AND sealed = ?`),
			next.KeyID, next.Sealed, next.UpdatedAt.UnixMilli(),
			prev.Kind, prev.Connector, prev.Name, prev.KeyID, prev.Sealed)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return n > 0, err
}

func (s *sqlStore) PutOAuthFlow(ctx context.Context, f OAuthFlow) error {
	return s.do(ctx, opPutFlow, func(ctx context.Context) error {
		_, err := s.db.ExecContext(ctx, s.d.rebind(
			`INSERT INTO oauth_flows (state, connector, key_id, sealed, expires_at_ms) VALUES (?, ?, ?, ?, ?)`),
			f.State, f.Connector, f.KeyID, f.Sealed, f.ExpiresAt.UnixMilli())
		return err
	})
}

func (s *sqlStore) TakeOAuthFlow(ctx context.Context, state string, now time.Time) (OAuthFlow, error) {
	f := OAuthFlow{State: state}
	err := s.do(ctx, opTakeFlow, func(ctx context.Context) error {
		var ms int64
		err := s.db.QueryRowContext(ctx, s.d.rebind(
			`DELETE FROM oauth_flows WHERE state = ? RETURNING connector, key_id, sealed, expires_at_ms`), state).
			Scan(&f.Connector, &f.KeyID, &f.Sealed, &ms)
		if errors.Is(err, sql.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return err
		}
		f.ExpiresAt = time.UnixMilli(ms).UTC()
		if now.UnixMilli() >= ms {
			return ErrExpired
		}
		return nil
	})
	if err != nil {
		return OAuthFlow{}, err
	}
	return f, nil
}

func (s *sqlStore) AppendAudit(ctx context.Context, r AuditRecord) error {
	if r.OccurredAt.IsZero() {
		r.OccurredAt = time.Now()
	}
	if r.ID == "" {
		r.ID = NewID()
	}
	return s.do(ctx, opAppendAudit, func(ctx context.Context) error {
		_, err := s.db.ExecContext(ctx, s.d.rebind(
			`INSERT INTO audit (occurred_at_ms, id, actor, action, target, detail) VALUES (?, ?, ?, ?, ?, ?)`),
			r.OccurredAt.UnixMilli(), r.ID, r.Actor, r.Action, r.Target, r.Detail)
		return err
	})
}

func (s *sqlStore) ListAudit(ctx context.Context, limit int) ([]AuditRecord, error) {
	var out []AuditRecord
	err := s.do(ctx, opListAudit, func(ctx context.Context) error {
		rows, err := s.db.QueryContext(ctx, s.d.rebind(
			`SELECT occurred_at_ms, id, actor, action, target, detail FROM audit ORDER BY occurred_at_ms DESC, id DESC LIMIT ?`), limit)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var r AuditRecord
			var ms int64
			if err := rows.Scan(&ms, &r.ID, &r.Actor, &r.Action, &r.Target, &r.Detail); err != nil {
				return err
			}
			r.OccurredAt = time.UnixMilli(ms).UTC()
			out = append(out, r)
		}
		return rows.Err()
	})
	return out, err
}
