package contract

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/connecta-dev/connecta/internal/actor"
	"sync/atomic"
	"time"

	"github.com/connecta-dev/connecta/internal/gateway"
	"github.com/connecta-dev/connecta/internal/gateway/discovery"
	"github.com/connecta-dev/connecta/internal/jstext"
	"github.com/connecta-dev/connecta/internal/supervisor"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// host is one execution's provider: the supervisor calls it for every
// connecta.* host call, each on its own goroutine, with a context that ends
// when the run does (L1, L2).
type host struct {
	svc    *Service
	scope  *gateway.Scope
	framer *framer
	emit   *emitCollector
	diag   *diagnostics

	requestID, actor string
	hostCalls        atomic.Int64
	// view is what the program reaches: its execute_code request's view,
	// kept for the whole run (a reload does not change a running program).
	view *gateway.View
	who  actor.ID // the execution's caller (per-caller connectors)

	notify Notifier // nil: the caller asked for nothing while it runs
	secret string   // the run's frame secret, redacted from what streams
}

// Log streams each console entry the child accepted to the caller, when it
// asked for log messages, as they happen; the result's logs still come from
// the presented prefix (R5). The child's truncation markers are not the
// program's text and never reach here (the supervisor holds them back by
// the log frame's Marker flag; the result's logs still show them).
func (h *host) Log(level, text string) {
	if h.notify == nil {
		return
	}
	h.notify.ConsoleEntry(level, redact(text, h.secret))
}

// Call dispatches one host call. A typed failure returns its authenticated
// frame as the error text; L6 and X8 failures return plain text.
func (h *host) Call(ctx context.Context, provider, function string, args json.RawMessage) (json.RawMessage, error) {
	if provider != ProviderName {
		return nil, fmt.Errorf("Unknown function %s.%s", provider, function)
	}
	switch function {
	case "emit": // M7: no host-call budget
		if e := h.emit.add(args); e != nil {
			return nil, h.reject(e)
		}
		return nil, nil
	case opSearch, opDescribe, opCall:
	default:
		return nil, fmt.Errorf("Unknown function %s.%s", provider, function)
	}
	if h.view != nil {
		ctx = gateway.WithView(ctx, h.view)
	}
	if !h.who.IsZero() { // per-caller connectors: the execution's actor's own grant
		ctx = gateway.WithActor(ctx, h.who)
	}
	ctx, span := h.svc.tracer.Start(ctx, "connecta.host_call", trace.WithAttributes(attribute.String("connecta.host.function", function)))
	defer span.End()
	start := time.Now()
	// L4: spent on entry, before any resolution, never refunded; the refusal
	// reaches no connector and records no activity (V1).
	if n := h.hostCalls.Add(1); n > int64(h.svc.opts.MaxHostCalls) {
		h.diag.record(function, true, 0, 0, 0, 0)
		e := gateway.Errorf(gateway.CodeBudgetExceeded, false,
			"execute_code host-call budget exceeded (%d calls maximum)", h.svc.opts.MaxHostCalls)
		hostCallOutcome(span, "", 0, e)
		return nil, h.reject(e)
	}
	list, gerr := argList(args)
	if gerr != nil {
		h.diag.record(function, true, time.Since(start), 0, 0, 0)
		hostCallOutcome(span, "", 0, gerr)
		return nil, h.reject(gerr)
	}
	switch function {
	case opCall:
		return h.call(ctx, span, list, start)
	default:
		value, err := h.discover(ctx, function, list, start)
		if err != nil {
			span.SetStatus(codes.Error, "error")
		}
		return value, err
	}
}

// downstreamProgress turns a call's downstream progress into progress of
// the execution, without its text; nil when nobody listens.
func (h *host) downstreamProgress() func(gateway.Progress) {
	if h.notify == nil {
		return nil
	}
	return func(gateway.Progress) { h.notify.Progress() }
}

func (h *host) reject(e *gateway.Error) error { return errors.New(h.framer.reject(e)) }

// argList splits the guest's argument array.
func argList(args json.RawMessage) ([]json.RawMessage, *gateway.Error) {
	var list []json.RawMessage
	if len(args) == 0 {
		return nil, nil
	}
	if err := json.Unmarshal(args, &list); err != nil {
		return nil, gateway.Errorf(gateway.CodeInvalidArgs, false, "arguments must be JSON values")
	}
	return list, nil
}

func (h *host) call(ctx context.Context, span trace.Span, list []json.RawMessage, start time.Time) (json.RawMessage, error) {
	var address string
	if len(list) == 0 || json.Unmarshal(list[0], &address) != nil {
		h.diag.record(opCall, true, time.Since(start), 0, 0, 0)
		e := gateway.Errorf(gateway.CodeInvalidArgs, false,
			`connecta.call takes an address string and an arguments object, e.g. connecta.call("ci.get_run", { runId: 42 }).`)
		hostCallOutcome(span, "", 0, e)
		return nil, h.reject(e)
	}
	var callArgs json.RawMessage
	if len(list) > 1 && string(list[1]) != "null" {
		callArgs = list[1]
	}
	res, gerr := h.svc.opts.Gateway.Invoke(ctx, h.scope, gateway.CallRequest{
		Address:   address,
		Args:      callArgs,
		Front:     gateway.FrontDoorProgram,
		Source:    ToolName,
		Timeout:   h.svc.opts.HostCallTimeout,
		RequestID: h.requestID,
		Actor:     h.actor,
		Progress:  h.downstreamProgress(),
	})
	var catalog, conn time.Duration
	attempts := 0
	if res != nil {
		catalog, conn, attempts = res.CatalogTime, res.ConnectorTime, res.Attempts
	}
	// The address only once it resolved to a tool: an unknown one is the
	// program's text, not a name the catalog knows.
	resolved := ""
	if res != nil && res.Tool != nil {
		resolved = res.Tool.Address()
	}
	hostCallOutcome(span, resolved, attempts, gerr)
	if gerr != nil {
		h.diag.record(opCall, true, time.Since(start), catalog, conn, 0)
		return nil, h.reject(gerr)
	}
	value := res.Value
	if len(value) == 0 {
		value = json.RawMessage("null")
	}
	if len(value) > MaxHostPayloadBytes {
		h.diag.record(opCall, true, time.Since(start), catalog, conn, 0)
		return nil, overBound("connecta.call(" + jstext.Quote(jstext.Clamp(address, jstext.MaxAddressBytes)) + ")")
	}
	h.diag.record(opCall, false, time.Since(start), catalog, conn, len(value))
	return value, nil
}

// overBound is L6's untyped over-bound result text naming what the program
// called.
func overBound(label string) error { return supervisor.HostResultTooLarge(label) }

func (h *host) discover(ctx context.Context, function string, list []json.RawMessage, start time.Time) (json.RawMessage, error) {
	opts := json.RawMessage("{}")
	if len(list) > 0 && string(list[0]) != "null" {
		opts = list[0]
	}
	ctx, cancel := context.WithTimeout(ctx, h.svc.opts.HostCallTimeout)
	defer cancel()
	d := h.svc.opts.Discovery
	ctx, span := h.svc.tracer.Start(ctx, "connecta.discovery", trace.WithAttributes(attribute.String("connecta.discovery.operation", function)))
	defer span.End()
	var page json.RawMessage
	var gerr *gateway.Error // the concrete type throughout: no typed nil in an error
	if function == opSearch {
		var p discovery.SearchParams
		if p, gerr = discovery.DecodeSearchArgs(opts); gerr == nil {
			page, gerr = d.Search(ctx, gateway.FrontDoorProgram, p)
		}
	} else {
		var p discovery.DescribeParams
		if p, gerr = discovery.DecodeDescribeArgs(opts); gerr == nil {
			page, gerr = d.Describe(ctx, gateway.FrontDoorProgram, p)
		}
	}
	elapsed := time.Since(start)
	if gerr != nil {
		span.SetAttributes(attribute.String("connecta.outcome", string(gerr.Code)))
		span.SetStatus(codes.Error, string(gerr.Code))
		h.diag.record(function, true, elapsed, elapsed, 0, 0) // discovery time is catalog time (R7)
		return nil, h.reject(gerr)
	}
	if len(page) > MaxHostPayloadBytes {
		h.diag.record(function, true, elapsed, elapsed, 0, 0)
		return nil, overBound("connecta." + function)
	}
	h.diag.record(function, false, elapsed, elapsed, 0, len(page))
	return page, nil
}
