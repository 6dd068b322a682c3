package contract

import (
	"encoding/json"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/connecta-dev/connecta/internal/jstext"
)

// Operation names (R8: fixed names only). emit is not an operation: it
// spends no host-call budget and has its own aggregate (M10).
const (
	opSearch   = "search"
	opDescribe = "describe"
	opCall     = "call"
)

// diagnostics collects one opted-in request's measurements (R6–R8):
// numbers and fixed names only, never addresses, arguments, results, code,
// credentials, logs or raw errors.
type diagnostics struct {
	mu  sync.Mutex
	ops []*opAggregate // first-use order

	totalMs, admissionMs, setupMs, executorWallMs float64
}

type opAggregate struct {
	name                    string
	count, failures         int64
	resultBytes             int64
	duration, catalog, conn time.Duration
}

// record adds one operation outcome. A nil diagnostics records nothing, so
// the ordinary path pays nothing (R6).
func (d *diagnostics) record(op string, failed bool, duration, catalog, connector time.Duration, resultBytes int) {
	if d == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	var a *opAggregate
	for _, x := range d.ops {
		if x.name == op {
			a = x
		}
	}
	if a == nil {
		a = &opAggregate{name: op}
		d.ops = append(d.ops, a)
	}
	a.count++
	if failed {
		a.failures++
	} else {
		a.resultBytes += int64(resultBytes)
	}
	a.duration += duration
	a.catalog += catalog
	a.conn += connector
}

// ms renders a duration in milliseconds with microsecond resolution.
func ms(d time.Duration) float64 { return math.Round(float64(d.Microseconds())) / 1000 }

func appendMs(b []byte, v float64) []byte { return strconv.AppendFloat(b, v, 'f', -1, 64) }

// json writes {timing, operations, emitted?}; emitted only when something
// was emitted (M10).
func (d *diagnostics) json(emittedCount, emittedBytes int) []byte {
	d.mu.Lock()
	defer d.mu.Unlock()
	var catalog, conn time.Duration
	for _, a := range d.ops {
		catalog += a.catalog
		conn += a.conn
	}
	// Milliseconds are written as JavaScript writes numbers (appendMs).
	msv := func(v float64) json.RawMessage { return appendMs(nil, v) }
	timing := jstext.Object{
		{Key: "totalMs", Value: msv(d.totalMs)}, {Key: "admissionMs", Value: msv(d.admissionMs)}, {Key: "setupMs", Value: msv(d.setupMs)},
		{Key: "executorWallMs", Value: msv(d.executorWallMs)}, {Key: "catalogMs", Value: msv(ms(catalog))}, {Key: "connectorMs", Value: msv(ms(conn))},
	}
	ops := make([]jstext.Object, 0, len(d.ops))
	for _, a := range d.ops {
		ops = append(ops, jstext.Object{
			{Key: "operation", Value: a.name}, {Key: "count", Value: a.count}, {Key: "failures", Value: a.failures},
			{Key: "durationMs", Value: msv(ms(a.duration))}, {Key: "resultBytes", Value: a.resultBytes},
			{Key: "catalogMs", Value: msv(ms(a.catalog))}, {Key: "connectorMs", Value: msv(ms(a.conn))},
		})
	}
	out := jstext.Object{{Key: "timing", Value: timing}, {Key: "operations", Value: ops}}
	if emittedCount > 0 {
		out = append(out, jstext.Field{Key: "emitted", Value: jstext.Object{{Key: "count", Value: emittedCount}, {Key: "bytes", Value: emittedBytes}}})
	}
	return objectJSON(out)
}
