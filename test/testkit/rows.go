package testkit

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
)

// RowsOutsideVault is every row of a SQLite store but its sealed secrets,
// as text (one line a row, each value %s-formatted so stored bytes read as
// text): what a test searches for a secret that must live only sealed.
func RowsOutsideVault(t testing.TB, ctx context.Context, db *sql.DB) string {
	t.Helper()
	rows, err := db.QueryContext(ctx, `SELECT name FROM sqlite_master WHERE type = 'table' AND name <> 'secrets'`)
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var n string
		_ = rows.Scan(&n)
		tables = append(tables, n)
	}
	rows.Close()
	var b strings.Builder
	for _, n := range tables {
		r, err := db.QueryContext(ctx, `SELECT * FROM "`+n+`"`)
		if err != nil {
			t.Fatal(err)
		}
		cols, _ := r.Columns()
		vals, ptrs := make([]any, len(cols)), make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		for r.Next() {
			_ = r.Scan(ptrs...)
			for _, v := range vals {
				fmt.Fprintf(&b, "%s\t", v)
			}
			b.WriteByte('\n')
		}
		r.Close()
	}
	return b.String()
}
