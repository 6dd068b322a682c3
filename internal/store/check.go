package store

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"time"
)

// CheckReport is what `connecta doctor` says about the store.
type CheckReport struct {
	Kind      string
	Schema    int // applied
	Latest    int // this binary's
	RoundTrip time.Duration
}

func (r CheckReport) String() string {
	return fmt.Sprintf("%s, schema %d of %d, write-read round trip %s", r.Kind, r.Schema, r.Latest, r.RoundTrip.Round(time.Microsecond))
}

// Check proves the store works: it answers, its schema is this binary's,
// and a value written comes back (a short-lived stash row, swept later; it
// evicts nothing).
func Check(ctx context.Context, st Store) (CheckReport, error) {
	r := CheckReport{Kind: st.Kind(), Latest: LatestSchema()}
	if err := st.Ping(ctx); err != nil {
		return r, fmt.Errorf("not reachable: %w", err)
	}
	if st.Durable() {
		v, err := st.SchemaVersion(ctx)
		if err != nil {
			return r, err
		}
		r.Schema = v
		if v != r.Latest {
			return r, fmt.Errorf("schema %d, this binary's is %d", v, r.Latest)
		}
	} else {
		r.Schema = r.Latest // memory: has no schema to fall behind
	}
	start := time.Now()
	id, want := "doctor-"+NewID(), []byte("connecta doctor "+NewID())
	if err := st.PutResult(ctx, id, "doctor", want, time.Now().Add(time.Minute), math.MaxInt64); err != nil {
		return r, fmt.Errorf("write: %w", err)
	}
	got, _, err := st.ResultWindow(ctx, id, "doctor", 0, len(want), time.Now())
	if err != nil {
		return r, fmt.Errorf("read back: %w", err)
	}
	if !bytes.Equal(got, want) {
		return r, fmt.Errorf("read back %d bytes that differ from the %d written", len(got), len(want))
	}
	r.RoundTrip = time.Since(start)
	return r, nil
}
