package telemetry

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// queueProcessor is a batching span processor whose only promise to the
// caller is not to wait: OnEnd puts the span into a bounded channel or, when
// it is full, drops and counts it. One goroutine (started here, ended by
// Shutdown) sends batches of up to batchSize, or what arrived within delay,
// to the exporter; a batch the exporter refuses is dropped and counted too.
// The SDK's BatchSpanProcessor drops silently; the counter is why this one
// exists.
type queueProcessor struct {
	exp       sdktrace.SpanExporter
	queue     chan sdktrace.ReadOnlySpan
	batchSize int
	delay     time.Duration
	dropped   prometheus.Counter

	flush     chan chan struct{}
	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

func newQueueProcessor(exp sdktrace.SpanExporter, size, batchSize int, delay time.Duration, dropped prometheus.Counter) *queueProcessor {
	q := &queueProcessor{
		exp: exp, queue: make(chan sdktrace.ReadOnlySpan, size), batchSize: batchSize, delay: delay, dropped: dropped,
		flush: make(chan chan struct{}), stop: make(chan struct{}), done: make(chan struct{}),
	}
	go q.loop()
	return q
}

func (q *queueProcessor) OnStart(context.Context, sdktrace.ReadWriteSpan) {}

func (q *queueProcessor) OnEnd(s sdktrace.ReadOnlySpan) {
	if !s.SpanContext().IsSampled() {
		return
	}
	select {
	case <-q.stop:
		q.dropped.Inc()
		return
	default:
	}
	select {
	case q.queue <- s:
	default:
		q.dropped.Inc()
	}
}

func (q *queueProcessor) loop() {
	defer close(q.done)
	batch := make([]sdktrace.ReadOnlySpan, 0, q.batchSize)
	timer := time.NewTimer(q.delay)
	defer timer.Stop()
	send := func() {
		if len(batch) == 0 {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), ExportTimeout)
		if err := q.exp.ExportSpans(ctx, batch); err != nil {
			q.dropped.Add(float64(len(batch)))
		}
		cancel()
		clear(batch)
		batch = batch[:0]
	}
	add := func(s sdktrace.ReadOnlySpan) {
		batch = append(batch, s)
		if len(batch) == q.batchSize {
			send()
		}
	}
	drain := func() {
		for {
			select {
			case s := <-q.queue:
				add(s)
			default:
				send()
				return
			}
		}
	}
	for {
		select {
		case s := <-q.queue:
			add(s)
		case <-timer.C:
			send()
			timer.Reset(q.delay)
		case ack := <-q.flush:
			drain()
			close(ack)
		case <-q.stop:
			drain()
			return
		}
	}
}

// ForceFlush exports what is queued now.
func (q *queueProcessor) ForceFlush(ctx context.Context) error {
	ack := make(chan struct{})
	select {
	case q.flush <- ack:
	case <-q.done:
		return errQueueClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-ack:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Shutdown exports what is queued and stops the exporter.
func (q *queueProcessor) Shutdown(ctx context.Context) error {
	q.closeOnce.Do(func() { close(q.stop) })
	select {
	case <-q.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	return q.exp.Shutdown(ctx)
}
