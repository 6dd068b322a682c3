package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// ms is t in Unix milliseconds, NULL when zero.
func ms(t time.Time) sql.NullInt64 {
	if t.IsZero() {
		return sql.NullInt64{}
	}
	return sql.NullInt64{Int64: t.UnixMilli(), Valid: true}
}

func fromMs(v sql.NullInt64) time.Time {
	if !v.Valid {
		return time.Time{}
	}
	return time.UnixMilli(v.Int64).UTC()
}

func truncMs(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.UTC().Truncate(time.Millisecond)
}

// isUniqueViolation recognises both dialects' duplicate-key errors.
func isUniqueViolation(err error) bool {
	if err == nil {
		return false
	}
	s := err.Error()
	return strings.Contains(s, "UNIQUE constraint failed") || strings.Contains(s, "SQLSTATE 23505") ||
		strings.Contains(s, "duplicate key value")
}

const tokenColumns = `id, digest, name, created_by, created_at_ms, expires_at_ms, revoked_at_ms, revoked_by, connectors`

// connectorsColumn is a narrowing as stored: a JSON array, NULL when nil.
func connectorsColumn(ids []string) sql.NullString {
	if ids == nil {
		return sql.NullString{}
	}
	b, _ := json.Marshal(ids) // a []string always marshals
	return sql.NullString{String: string(b), Valid: true}
}

func connectorsFromColumn(v sql.NullString) ([]string, error) {
	if !v.Valid {
		return nil, nil
	}
	out := []string{}
	if err := json.Unmarshal([]byte(v.String), &out); err != nil {
		return nil, fmt.Errorf("access token connectors: %w", err)
	}
	return out, nil
}

func scanToken(row interface{ Scan(...any) error }) (AccessToken, error) {
	var t AccessToken
	var created int64
	var exp, rev sql.NullInt64
	var by, conns sql.NullString
	if err := row.Scan(&t.ID, &t.Digest, &t.Name, &t.CreatedBy, &created, &exp, &rev, &by, &conns); err != nil {
		return AccessToken{}, err
	}
	t.CreatedAt, t.ExpiresAt, t.RevokedAt, t.RevokedBy = time.UnixMilli(created).UTC(), fromMs(exp), fromMs(rev), by.String
	var err error
	t.Connectors, err = connectorsFromColumn(conns)
	return t, err
}

func (s *sqlStore) PutToken(ctx context.Context, t AccessToken) error {
	if t.CreatedAt.IsZero() {
		t.CreatedAt = time.Now()
	}
	return s.do(ctx, opPutToken, func(ctx context.Context) error {
		_, err := s.db.ExecContext(ctx, s.d.rebind(`INSERT INTO access_tokens (`+tokenColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`),
			t.ID, t.Digest, t.Name, t.CreatedBy, t.CreatedAt.UnixMilli(), ms(t.ExpiresAt), ms(t.RevokedAt),
			sql.NullString{String: t.RevokedBy, Valid: t.RevokedBy != ""}, connectorsColumn(t.Connectors))
		if isUniqueViolation(err) {
			return ErrConflict
		}
		return err
	})
}

func (s *sqlStore) TokenByDigest(ctx context.Context, digest string) (AccessToken, error) {
	var t AccessToken
	err := s.do(ctx, opGetToken, func(ctx context.Context) error {
		var err error
		t, err = scanToken(s.db.QueryRowContext(ctx, s.d.rebind(`SELECT `+tokenColumns+` FROM access_tokens WHERE digest = ?`), digest))
		if errors.Is(err, sql.ErrNoRows) {
			return ErrNotFound
		}
		return err
	})
	return t, err
}

func (s *sqlStore) ListTokens(ctx context.Context) ([]AccessToken, error) {
	var out []AccessToken
	err := s.do(ctx, opListTokens, func(ctx context.Context) error {
		rows, err := s.db.QueryContext(ctx, `SELECT `+tokenColumns+` FROM access_tokens ORDER BY created_at_ms DESC, id DESC`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			t, err := scanToken(rows)
			if err != nil {
				return err
			}
			out = append(out, t)
		}
		return rows.Err()
	})
	return out, err
}

func (s *sqlStore) RevokeToken(ctx context.Context, id, by string, at time.Time) (bool, error) {
	var n int64
	err := s.do(ctx, opRevokeToken, func(ctx context.Context) error {
		res, err := s.db.ExecContext(ctx, s.d.rebind(
			`UPDATE access_tokens SET revoked_at_ms = ?, revoked_by = ? WHERE id = ? AND revoked_at_ms IS NULL`), at.UnixMilli(), by, id)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return n > 0, err
}

func (s *sqlStore) RenameToken(ctx context.Context, id, name string) (bool, error) {
	var n int64
	err := s.do(ctx, opRenameToken, func(ctx context.Context) error {
		res, err := s.db.ExecContext(ctx, s.d.rebind(`UPDATE access_tokens SET name = ? WHERE id = ?`), name, id)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return n > 0, err
}

func (s *sqlStore) PutSession(ctx context.Context, v OperatorSession) error {
	if v.CreatedAt.IsZero() {
		v.CreatedAt = time.Now()
	}
	return s.do(ctx, opPutSession, func(ctx context.Context) error {
		_, err := s.db.ExecContext(ctx, s.d.rebind(
			`INSERT INTO operator_sessions (digest, subject, email, csrf_digest, created_at_ms, expires_at_ms, caller_only, claims) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`),
			v.Digest, v.Subject, v.Email, v.CSRFDigest, v.CreatedAt.UnixMilli(), v.ExpiresAt.UnixMilli(), boolInt(v.CallerOnly), v.Claims)
		if isUniqueViolation(err) {
			return ErrConflict
		}
		return err
	})
}

func (s *sqlStore) GetSession(ctx context.Context, digest string, now time.Time) (OperatorSession, error) {
	v := OperatorSession{Digest: digest}
	err := s.do(ctx, opGetSession, func(ctx context.Context) error {
		var created, exp, callerOnly int64
		err := s.db.QueryRowContext(ctx, s.d.rebind(
			`SELECT subject, email, csrf_digest, created_at_ms, expires_at_ms, caller_only, claims FROM operator_sessions WHERE digest = ?`), digest).
			Scan(&v.Subject, &v.Email, &v.CSRFDigest, &created, &exp, &callerOnly, &v.Claims)
		v.CallerOnly = callerOnly != 0
		if errors.Is(err, sql.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return err
		}
		v.CreatedAt, v.ExpiresAt = time.UnixMilli(created).UTC(), time.UnixMilli(exp).UTC()
		if now.UnixMilli() >= exp {
			return ErrExpired
		}
		return nil
	})
	if err != nil {
		return OperatorSession{}, err
	}
	return v, nil
}

func (s *sqlStore) DeleteSession(ctx context.Context, digest string) (bool, error) {
	var n int64
	err := s.do(ctx, opDeleteSession, func(ctx context.Context) error {
		res, err := s.db.ExecContext(ctx, s.d.rebind(`DELETE FROM operator_sessions WHERE digest = ?`), digest)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return n > 0, err
}

// memory:

func (s *memStore) PutToken(ctx context.Context, t AccessToken) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, x := range s.tokens {
		if x.ID == t.ID || x.Digest == t.Digest {
			return ErrConflict
		}
	}
	if t.CreatedAt.IsZero() {
		t.CreatedAt = s.now()
	}
	t.CreatedAt, t.ExpiresAt, t.RevokedAt = truncMs(t.CreatedAt), truncMs(t.ExpiresAt), truncMs(t.RevokedAt)
	t.Connectors = slices.Clone(t.Connectors)
	s.tokens = append(s.tokens, t)
	return nil
}

func (s *memStore) TokenByDigest(ctx context.Context, digest string) (AccessToken, error) {
	if err := ctx.Err(); err != nil {
		return AccessToken{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range s.tokens {
		if t.Digest == digest {
			return t, nil
		}
	}
	return AccessToken{}, ErrNotFound
}

func (s *memStore) ListTokens(ctx context.Context) ([]AccessToken, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := slices.Clone(s.tokens)
	slices.SortFunc(out, func(a, b AccessToken) int {
		if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(b.ID, a.ID)
	})
	return out, nil
}

func (s *memStore) RevokeToken(ctx context.Context, id, by string, at time.Time) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, t := range s.tokens {
		if t.ID == id && t.RevokedAt.IsZero() {
			s.tokens[i].RevokedAt, s.tokens[i].RevokedBy = truncMs(at), by
			return true, nil
		}
	}
	return false, nil
}

func (s *memStore) RenameToken(ctx context.Context, id, name string) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, t := range s.tokens {
		if t.ID == id {
			s.tokens[i].Name = name
			return true, nil
		}
	}
	return false, nil
}

func (s *memStore) PutSession(ctx context.Context, v OperatorSession) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	for k, x := range s.sessions { // bounded like a sweep
		if !now.Before(x.ExpiresAt) {
			delete(s.sessions, k)
		}
	}
	if _, dup := s.sessions[v.Digest]; dup {
		return ErrConflict
	}
	if v.CreatedAt.IsZero() {
		v.CreatedAt = now
	}
	v.CreatedAt, v.ExpiresAt = truncMs(v.CreatedAt), truncMs(v.ExpiresAt)
	s.sessions[v.Digest] = v
	return nil
}

func (s *memStore) GetSession(ctx context.Context, digest string, now time.Time) (OperatorSession, error) {
	if err := ctx.Err(); err != nil {
		return OperatorSession{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.sessions[digest]
	if !ok {
		return OperatorSession{}, ErrNotFound
	}
	if !now.Before(v.ExpiresAt) {
		return OperatorSession{}, ErrExpired
	}
	return v, nil
}

func (s *memStore) DeleteSession(ctx context.Context, digest string) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.sessions[digest]
	delete(s.sessions, digest)
	return ok, nil
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
