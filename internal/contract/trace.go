package contract

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/connecta-dev/connecta/internal/gateway"
	"github.com/connecta-dev/connecta/internal/supervisor"
)

// Spans of an execution (docs/DESIGN.md "Traces"). Every attribute
// is a code, a count, a duration or an address: never the program, its
// arguments, results or logs.

// execErrorCode is the executor's code for err (executor_overloaded, …).
func execErrorCode(err error) string {
	var ee *supervisor.ExecError
	if errors.As(err, &ee) {
		return ee.Code
	}
	return "executor_error"
}

// endWithError ends span as failed with a code, not a message.
func endWithError(span trace.Span, code string) {
	span.SetAttributes(attribute.String("connecta.outcome", code))
	span.SetStatus(codes.Error, code)
	span.End()
}

// killedBy is the kind of a program error that is a kill (a budget, the
// deadline, a crash), "" for the program's own failure.
func killedBy(kind supervisor.ErrorKind) string {
	switch kind {
	case supervisor.ErrCPU, supervisor.ErrDeadline, supervisor.ErrOutOfMemory, supervisor.ErrStall,
		supervisor.ErrCrash, supervisor.ErrProtocol:
		return string(kind)
	}
	return ""
}

func msAttr(key string, d time.Duration) attribute.KeyValue {
	return attribute.Float64(key, float64(d.Microseconds())/1000)
}

// endExecution ends the execution span with the phases the parent timed
// from the IPC frames it already receives (the child exports nothing): the
// wait for a child (connecta.child.spawn: a warm spare or one started for
// this run) and the run itself (connecta.program), as spans with their
// measured times, and the CPU used and kill reason as attributes.
func (s *Service) endExecution(ctx context.Context, span trace.Span, start time.Time, res *supervisor.Result, err error) {
	if !span.IsRecording() {
		span.End()
		return
	}
	if err != nil {
		endWithError(span, execErrorCode(err))
		return
	}
	source := "spawn"
	if res.Spare {
		source = "spare"
	}
	childReady := start.Add(res.ChildWait)
	_, child := s.tracer.Start(ctx, "connecta.child.spawn", trace.WithTimestamp(start),
		trace.WithAttributes(attribute.String("connecta.child.source", source)))
	child.End(trace.WithTimestamp(childReady))
	_, prog := s.tracer.Start(ctx, "connecta.program", trace.WithTimestamp(childReady))
	prog.End(trace.WithTimestamp(childReady.Add(res.Wall)))

	span.SetAttributes(
		msAttr("connecta.execution.queue_wait_ms", res.QueueWait),
		attribute.String("connecta.child.source", source),
		msAttr("connecta.execution.child_wait_ms", res.ChildWait),
		msAttr("connecta.execution.run_ms", res.Wall),
		msAttr("connecta.execution.guest_cpu_ms", res.CPUTime),
		msAttr("connecta.execution.child_cpu_ms", res.ChildCPU),
		attribute.Int("connecta.execution.host_calls", res.HostCalls),
		attribute.Int64("connecta.execution.peak_heap_bytes", int64(res.PeakHeapBytes)),
	)
	if res.Err == nil {
		span.SetAttributes(attribute.String("connecta.outcome", "ok"))
		span.End()
		return
	}
	if kill := killedBy(res.Err.Kind); kill != "" {
		span.SetAttributes(attribute.String("connecta.execution.kill_reason", kill))
	}
	endWithError(span, "program_"+string(res.Err.Kind))
}

// hostCallOutcome records a host call's resolution on its span.
func hostCallOutcome(span trace.Span, address string, attempts int, gerr *gateway.Error) {
	if !span.IsRecording() {
		return
	}
	if address != "" {
		span.SetAttributes(attribute.String("connecta.address", address))
	}
	span.SetAttributes(attribute.Int("connecta.attempts", attempts))
	if gerr != nil {
		span.SetAttributes(attribute.String("connecta.outcome", string(gerr.Code)))
		span.SetStatus(codes.Error, string(gerr.Code))
		return
	}
	span.SetAttributes(attribute.String("connecta.outcome", "ok"))
}
