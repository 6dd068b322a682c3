package store

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"strings"
	"time"
)

// CatalogKey names one persisted catalog: a connector and the actor it was
// loaded for. Actor "" is the connector's shared catalog; per-caller
// connectors keep one per actor.
type CatalogKey struct {
	Connector string
	Actor     string
}

// StoredCatalog is a connector's last successful listing: the tool
// definitions as served (a JSON array of the exact bytes), the catalog's
// fingerprint, when it was fetched, and the drift report of that load
// (JSON, opaque to the store).
type StoredCatalog struct {
	CatalogKey
	Tools       []byte
	Fingerprint string
	FetchedAt   time.Time
	Drift       []byte
}

// ToolApproval is an operator's approval of one tool definition: the tool's
// fingerprint and the definition it was computed from (for diffs).
type ToolApproval struct {
	CatalogKey
	Tool        string
	Fingerprint string
	Definition  []byte
	ApprovedAt  time.Time
	ApprovedBy  string
}

// Catalogs keeps persisted catalogs and tool approvals (package gateway).
type Catalogs interface {
	// PutCatalog writes c only if the stored row's fingerprint is still
	// prev ("" = no row yet): a compare-and-swap, so of two replicas that
	// loaded the same change only one records (and audits) it. It reports
	// whether it wrote.
	PutCatalog(ctx context.Context, c StoredCatalog, prev string) (bool, error)
	// GetCatalog is ErrNotFound when none is stored.
	GetCatalog(ctx context.Context, k CatalogKey) (StoredCatalog, error)
	// PutApprovals writes each approval; with overwrite false a tool that
	// already has one keeps it (the automatic first approval).
	PutApprovals(ctx context.Context, as []ToolApproval, overwrite bool) error
	// ListApprovals returns the approvals of one catalog, ordered by tool.
	ListApprovals(ctx context.Context, k CatalogKey) ([]ToolApproval, error)
}

func (s *memStore) PutCatalog(ctx context.Context, c StoredCatalog, prev string) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	old, ok := s.catalogs[c.CatalogKey]
	if (!ok && prev != "") || (ok && old.Fingerprint != prev) {
		return false, nil
	}
	c.Tools, c.Drift, c.FetchedAt = s.copyBytes(c.Tools), s.copyBytes(c.Drift), truncMs(c.FetchedAt)
	s.catalogs[c.CatalogKey] = c
	return true, nil
}

func (s *memStore) GetCatalog(ctx context.Context, k CatalogKey) (StoredCatalog, error) {
	if err := ctx.Err(); err != nil {
		return StoredCatalog{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.catalogs[k]
	if !ok {
		return StoredCatalog{}, ErrNotFound
	}
	c.Tools, c.Drift = s.copyBytes(c.Tools), s.copyBytes(c.Drift)
	return c, nil
}

type approvalKey struct {
	CatalogKey
	tool string
}

func (s *memStore) PutApprovals(ctx context.Context, as []ToolApproval, overwrite bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range as {
		k := approvalKey{a.CatalogKey, a.Tool}
		if _, ok := s.approvals[k]; ok && !overwrite {
			continue
		}
		a.Definition, a.ApprovedAt = s.copyBytes(a.Definition), truncMs(approvedAt(a.ApprovedAt))
		s.approvals[k] = a
	}
	return nil
}

func (s *memStore) ListApprovals(ctx context.Context, k CatalogKey) ([]ToolApproval, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []ToolApproval
	for ak, a := range s.approvals {
		if ak.CatalogKey == k {
			a.Definition = s.copyBytes(a.Definition)
			out = append(out, a)
		}
	}
	slices.SortFunc(out, func(a, b ToolApproval) int { return strings.Compare(a.Tool, b.Tool) })
	return out, nil
}

func approvedAt(t time.Time) time.Time {
	if t.IsZero() {
		return time.Now()
	}
	return t
}

func (s *sqlStore) PutCatalog(ctx context.Context, c StoredCatalog, prev string) (bool, error) {
	var n int64
	err := s.do(ctx, opPutCatalog, func(ctx context.Context) error {
		var res sql.Result
		var err error
		if prev == "" {
			res, err = s.db.ExecContext(ctx, s.d.rebind(
				`INSERT INTO catalogs (connector, actor, tools, fingerprint, fetched_at_ms, drift) VALUES (?, ?, ?, ?, ?, ?)
				 ON CONFLICT (connector, actor) DO NOTHING`),
				c.Connector, c.Actor, c.Tools, c.Fingerprint, c.FetchedAt.UnixMilli(), nonNil(c.Drift))
		} else {
			res, err = s.db.ExecContext(ctx, s.d.rebind(
				`UPDATE catalogs SET tools = ?, fingerprint = ?, fetched_at_ms = ?, drift = ?
				 WHERE connector = ? AND actor = ? AND fingerprint = ?`),
				c.Tools, c.Fingerprint, c.FetchedAt.UnixMilli(), nonNil(c.Drift), c.Connector, c.Actor, prev)
		}
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return n > 0, err
}

func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

func (s *sqlStore) GetCatalog(ctx context.Context, k CatalogKey) (StoredCatalog, error) {
	c := StoredCatalog{CatalogKey: k}
	err := s.do(ctx, opGetCatalog, func(ctx context.Context) error {
		var at int64
		err := s.db.QueryRowContext(ctx, s.d.rebind(
			`SELECT tools, fingerprint, fetched_at_ms, drift FROM catalogs WHERE connector = ? AND actor = ?`),
			k.Connector, k.Actor).Scan(&c.Tools, &c.Fingerprint, &at, &c.Drift)
		if errors.Is(err, sql.ErrNoRows) {
			return ErrNotFound
		}
		c.FetchedAt = time.UnixMilli(at).UTC()
		return err
	})
	if err != nil {
		return StoredCatalog{}, err
	}
	return c, nil
}

func (s *sqlStore) PutApprovals(ctx context.Context, as []ToolApproval, overwrite bool) error {
	if len(as) == 0 {
		return nil
	}
	conflict := `DO NOTHING`
	if overwrite {
		conflict = `DO UPDATE SET fingerprint = excluded.fingerprint, definition = excluded.definition,
			approved_at_ms = excluded.approved_at_ms, approved_by = excluded.approved_by`
	}
	q := s.d.rebind(`INSERT INTO catalog_approvals (connector, actor, tool, fingerprint, definition, approved_at_ms, approved_by)
		VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (connector, actor, tool) ` + conflict)
	return s.do(ctx, opPutApprovals, func(ctx context.Context) error {
		return s.tx(ctx, func(tx *sql.Tx) error {
			for _, a := range as {
				if _, err := tx.ExecContext(ctx, q, a.Connector, a.Actor, a.Tool, a.Fingerprint, nonNil(a.Definition),
					approvedAt(a.ApprovedAt).UnixMilli(), a.ApprovedBy); err != nil {
					return err
				}
			}
			return nil
		})
	})
}

func (s *sqlStore) ListApprovals(ctx context.Context, k CatalogKey) ([]ToolApproval, error) {
	var out []ToolApproval
	err := s.do(ctx, opListApprovals, func(ctx context.Context) error {
		rows, err := s.db.QueryContext(ctx, s.d.rebind(
			`SELECT tool, fingerprint, definition, approved_at_ms, approved_by FROM catalog_approvals
			 WHERE connector = ? AND actor = ? ORDER BY tool`), k.Connector, k.Actor)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			a := ToolApproval{CatalogKey: k}
			var at int64
			if err := rows.Scan(&a.Tool, &a.Fingerprint, &a.Definition, &at, &a.ApprovedBy); err != nil {
				return err
			}
			a.ApprovedAt = time.UnixMilli(at).UTC()
			out = append(out, a)
		}
		return rows.Err()
	})
	return out, err
}
