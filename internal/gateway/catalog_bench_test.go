package gateway

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/connecta-dev/connecta/internal/store"
)

// BenchmarkCatalog_TenThousandTools: a 10,000-tool catalog (about 2.3 MB of
// definitions) on SQLite under quarantine. "persist" is one load from the
// downstream: list, fingerprint, store and approve (the first catalog);
// "reload" is a restarted process serving it from the store (read, decode,
// fingerprint, read the approvals, build the view).
func BenchmarkCatalog_TenThousandTools(b *testing.B) {
	m := newMutableServer()
	desc := strings.Repeat("Returns the records of one kind. ", 5)
	for i := range 10_000 {
		m.put(fmt.Sprintf("tool_%05d", i), desc, `{"type":"object","properties":{"id":{"type":"string"},"limit":{"type":"integer"}}}`, ro)
	}
	spec := m.spec("big", PinQuarantine)
	open := func(b *testing.B, path string) (*Gateway, store.Store) {
		st, err := store.Open(context.Background(), "sqlite:"+path, store.Options{ConnectRetry: -1})
		if err != nil {
			b.Fatal(err)
		}
		g, err := New(context.Background(), Options{Connectors: []ConnectorSpec{spec}, Store: st, CatalogTTL: time.Hour})
		if err != nil {
			b.Fatal(err)
		}
		return g, st
	}
	load := func(b *testing.B, g *Gateway) {
		tools, err := g.Tools(context.Background(), "big")
		if err != nil || len(tools) != 10_000 {
			b.Fatalf("%d tools, %v", len(tools), err)
		}
	}
	b.Run("persist", func(b *testing.B) {
		for range b.N {
			b.StopTimer()
			g, st := open(b, filepath.Join(b.TempDir(), "s.db"))
			b.StartTimer()
			load(b, g)
			b.StopTimer()
			_ = g.Close()
			_ = st.Close()
			b.StartTimer()
		}
	})
	b.Run("reload", func(b *testing.B) {
		path := filepath.Join(b.TempDir(), "s.db")
		g, st := open(b, path)
		load(b, g)
		_ = g.Close()
		_ = st.Close()
		m.lists.Store(0)
		for range b.N {
			b.StopTimer()
			g, st := open(b, path)
			b.StartTimer()
			load(b, g)
			b.StopTimer()
			if n := m.lists.Load(); n != 0 {
				b.Fatalf("the reload listed the downstream (%d)", n)
			}
			_ = g.Close()
			_ = st.Close()
			b.StartTimer()
		}
	})
}
