package store_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/connecta-dev/connecta/internal/store"
)

// BenchmarkAppendActivity appends one event at a time to a history that
// already holds 100,000 (the default activity.maxEvents).
func BenchmarkAppendActivity(b *testing.B) {
	for _, kind := range []string{"memory", "sqlite"} {
		b.Run(kind, func(b *testing.B) {
			url := "memory:"
			if kind == "sqlite" {
				url = "sqlite:" + filepath.Join(b.TempDir(), "s.db")
			}
			s, err := store.Open(context.Background(), url, store.Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			ctx := context.Background()
			base := time.Now()
			batch := make([]store.ActivityRecord, 0, 1000)
			for i := range 100_000 {
				batch = append(batch, store.ActivityRecord{ID: fmt.Sprintf("%016x", i), OccurredAt: base.Add(time.Duration(i) * time.Millisecond),
					ConnectorID: "demo", Outcome: "success", Actor: "a", JSON: []byte(`{"id":"x"}`)})
				if len(batch) == cap(batch) {
					if err := s.AppendActivity(ctx, batch); err != nil {
						b.Fatal(err)
					}
					batch = batch[:0]
				}
			}
			b.ResetTimer()
			for i := range b.N {
				r := store.ActivityRecord{ID: fmt.Sprintf("b%015x", i), OccurredAt: base.Add(time.Duration(100_000+i) * time.Millisecond),
					ConnectorID: "demo", Outcome: "success", Actor: "a", JSON: []byte(`{"id":"x"}`)}
				if err := s.AppendActivity(ctx, []store.ActivityRecord{r}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
