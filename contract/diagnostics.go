package contract

import (
	"math"
	"strconv"
	"sync"
	"time"
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
	timing := newObject()
	for _, kv := range []struct {
		k string
		v float64
	}{
		{"totalMs", d.totalMs}, {"admissionMs", d.admissionMs}, {"setupMs", d.setupMs},
		{"executorWallMs", d.executorWallMs}, {"catalogMs", ms(catalog)}, {"connectorMs", ms(conn)},
	} {
		timing.key(kv.k)
		timing.b = appendMs(timing.b, kv.v)
	}
	ops := []byte{'['}
	for i, a := range d.ops {
		if i > 0 {
			ops = append(ops, ',')
		}
		o := newObject().str("operation", a.name).num("count", a.count).num("failures", a.failures)
		o.key("durationMs")
		o.b = appendMs(o.b, ms(a.duration))
		o.num("resultBytes", a.resultBytes)
		o.key("catalogMs")
		o.b = appendMs(o.b, ms(a.catalog))
		o.key("connectorMs")
		o.b = appendMs(o.b, ms(a.conn))
		ops = append(ops, o.bytes()...)
	}
	ops = append(ops, ']')
	out := newObject().raw("timing", timing.bytes()).raw("operations", ops)
	if emittedCount > 0 {
		out.raw("emitted", newObject().num("count", int64(emittedCount)).num("bytes", int64(emittedBytes)).bytes())
	}
	return out.bytes()
}
