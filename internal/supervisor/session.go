package supervisor

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sync"
	"time"

	"github.com/connecta-dev/connecta/internal/ipc"
	"github.com/connecta-dev/connecta/internal/jstext"
	"github.com/connecta-dev/connecta/internal/telemetry"
)

// Run runs job in a fresh child and releases the lease. A program's own
// failure, a deadline kill, a crash and a protocol violation are a Result
// with Err set (untyped); cancellation of ctx and shutdown are *ExecError
// (executor_cancelled, executor_closed) carrying the logs received so far.
// Run returns only after every Host.Call it started has returned: their
// context is cancelled when the run ends, before the child is killed.
func (l *Lease) Run(ctx context.Context, job Job, host Host) (*Result, error) {
	if l.used.Swap(true) || l.released.Load() {
		return nil, errLeaseUsed
	}
	defer l.Release()
	p := l.p
	limits := job.Limits.or(p.opts.Limits)
	frame, err := ipc.Encode(&ipc.Message{Type: ipc.TypeRun, Run: runOf(job, limits)})
	if err != nil {
		if errors.Is(err, ipc.ErrFrameTooLarge) {
			p.m.executions.WithLabelValues(outcomeError).Inc()
			return &Result{Err: &ProgramError{Kind: ErrTooLarge,
				Message: fmt.Sprintf("The program is too large to send to the sandbox: its serialized form exceeds the %d-byte IPC limit.", ipc.MaxFrameBytes)}}, nil
		}
		return nil, fmt.Errorf("supervisor: encoding the program: %w", err)
	}
	if !p.enter() {
		return nil, &ExecError{Code: CodeClosed, Message: msgClosed}
	}
	defer p.wg.Done()
	takeStart := time.Now()
	c, spare, err := p.takeChild(ctx)
	childWait := time.Since(takeStart)
	if errors.Is(err, errNoChild) {
		p.m.executions.WithLabelValues(outcomeError).Inc()
		return &Result{Err: &ProgramError{Kind: ErrCrash,
			Message: fmt.Sprintf("The sandbox did not become ready within %dms.", p.opts.ReadyTimeout.Milliseconds())}}, nil
	}
	if err != nil {
		return nil, err
	}
	s := &session{p: p, c: c, host: host, limits: limits}
	res, err := s.run(ctx, frame)
	if res != nil {
		res.QueueWait, res.ChildWait, res.Spare = l.waited, childWait, spare
	}
	return res, err
}

// randomSeed is a run's Math.random seed: 64 bits of the parent's CSPRNG,
// so no run's sequence follows from the clock or from another run's.
func randomSeed() uint64 {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return binary.LittleEndian.Uint64(b[:])
}

func runOf(job Job, limits Limits) *ipc.Run {
	r := &ipc.Run{
		Code:    job.Code,
		Prelude: job.Prelude,
		Seed:    randomSeed(),
		Limits: ipc.Limits{
			HeapBytes:  limits.HeapBytes,
			StackBytes: limits.StackBytes,
			CPUTimeNs:  int64(limits.CPUTime),
			WallNs:     int64(limits.Wall),
		},
	}
	for _, pr := range job.Providers {
		r.Providers = append(r.Providers, ipc.Provider{Name: pr.Name, Functions: pr.Functions})
	}
	return r
}

// session is one run in one child.
type session struct {
	p      *Pool
	c      *child
	host   Host
	limits Limits

	logs      ipc.LogPrefix
	logFrames int
	inflight  map[uint32]struct{}
	calls     sync.WaitGroup
}

func (s *session) run(ctx context.Context, frame []byte) (*Result, error) {
	p, c := s.p, s.c
	p.m.busy.Inc()
	defer p.m.busy.Dec()
	start := time.Now()

	callCtx, cancelCalls := context.WithCancel(ctx)
	defer func() {
		cancelCalls()
		s.calls.Wait()
	}()
	s.inflight = make(map[uint32]struct{})

	// The CPU budget binds from here, whatever the engine does (cpuWatch).
	cpu := newCPUWatch(c.pid, s.limits.CPUTime)
	var cpuCheck <-chan time.Time
	var recheck func(time.Duration)
	_, next := cpu.check(c)
	if next > 0 { // 0: the clock cannot be read; the engine and RLIMIT_CPU remain
		cpuTimer := time.NewTimer(next)
		defer cpuTimer.Stop()
		cpuCheck = cpuTimer.C
		recheck = func(d time.Duration) { cpuTimer.Reset(d) }
	}
	// Writes to the child never happen on this goroutine: a child that stops
	// reading must not stop us from noticing the deadline.
	sendErr := make(chan error, 1)
	go func() { sendErr <- c.w.WriteFrame(frame) }()

	wallLimit := s.limits.Wall + p.opts.KillGrace
	wall := time.NewTimer(wallLimit)
	defer wall.Stop()

	fail := func(kind ErrorKind, outcome, msg string) (*Result, error) {
		p.m.executions.WithLabelValues(outcome).Inc()
		p.m.duration.Observe(time.Since(start).Seconds())
		return &Result{Err: &ProgramError{Kind: kind, Message: msg}, Logs: s.logs.String(),
			LogChars: s.logs.Chars(), LogEntries: s.logs.Entries(), Wall: time.Since(start),
			ChildCPU: cpu.last}, nil
	}
	typed := func(code, msg, outcome string) (*Result, error) {
		p.m.executions.WithLabelValues(outcome).Inc()
		p.m.duration.Observe(time.Since(start).Seconds())
		return nil, &ExecError{Code: code, Message: msg, Logs: s.logs.String(), LogChars: s.logs.Chars(), Started: true}
	}
	violation := func(what string) (*Result, error) {
		cancelCalls()
		c.kill(killProtocol, p.m)
		p.retire(c, false)
		p.log.WarnContext(ctx, "sandbox protocol violation; child killed", "what", what)
		return fail(ErrProtocol, outcomeProtocol, "Sandbox protocol violation ("+what+"); the sandbox was terminated.")
	}

	for {
		select {
		case in := <-c.in:
			if in.err != nil {
				return s.broken(in.err, cancelCalls, fail, violation)
			}
			m := in.m
			switch m.Type {
			case ipc.TypeCall:
				if _, dup := s.inflight[m.ID]; dup {
					return violation("duplicate call id")
				}
				s.inflight[m.ID] = struct{}{}
				s.calls.Add(1)
				go s.call(callCtx, m)
			case ipc.TypeLog:
				s.logFrames++
				s.logs.Add(m.Text)
				if s.logFrames > maxLogFramesPerRun || s.logs.Chars() > maxLogCharsPerRun {
					return violation("log flood")
				}
				if !m.Marker {
					s.host.Log(m.Level, m.Text)
				}
			case ipc.TypeDone:
				cancelCalls() // a call still pending when the run ends fails cancelled
				childCPU := cpu.used(c)
				p.retire(c, true)
				res, err := s.done(ctx, m.Done, start)
				res.ChildCPU = childCPU
				return res, err
			default:
				return violation("unexpected " + m.Type + " frame")
			}
		case <-sendErr:
			// A failed send means the child is gone or broken; its stream
			// says how. Either way stop watching the send.
			sendErr = nil
		case <-cpuCheck:
			over, next := cpu.check(c)
			if !over {
				recheck(next)
				continue
			}
			// A builtin that never polls the engine's interrupt handler: the
			// answer is the engine's own, never a wall-clock timeout.
			cancelCalls()
			s.terminate(killCPUBudget)
			p.log.WarnContext(ctx, "execution over budget", "budget", string(ErrCPU), "cpuMs", cpu.last.Milliseconds(), "wallMs", time.Since(start).Milliseconds())
			return fail(ErrCPU, outcomeError, ipc.CPUBudgetMessage(s.limits.CPUTime))
		case <-wall.C:
			cancelCalls()
			s.terminate(killDeadline)
			return fail(ErrDeadline, outcomeDeadline, ipc.DeadlineMessage(s.limits.Wall))
		case <-ctx.Done():
			cancelCalls() // in-flight host calls first, then the kill (L1, L2, X3)
			s.terminate(killCancel)
			p.log.InfoContext(ctx, "execution cancelled", "wallMs", time.Since(start).Milliseconds())
			return typed(CodeCancelled, msgCancelled, outcomeCancelled)
		case <-p.closing:
			cancelCalls()
			s.terminate(killShutdown)
			return typed(CodeClosed, msgClosed, outcomeClosed)
		}
	}
}

// terminate kills the child and keeps the log frames it wrote before it
// died: they may still sit in the pipe or in c.in, since the select that
// noticed the deadline, the cancellation or the shutdown does not prefer
// them. The kill closes the child's end, so the stream ends promptly;
// exitGrace bounds the wait regardless. Then the child is retired.
func (s *session) terminate(reason string) {
	p, c := s.p, s.c
	c.kill(reason, p.m)
	defer p.retire(c, false)
	t := time.NewTimer(exitGrace)
	defer t.Stop()
	for {
		select {
		case in, ok := <-c.in:
			if !ok || in.err != nil {
				return
			}
			if in.m.Type == ipc.TypeLog && s.logFrames < maxLogFramesPerRun && s.logs.Chars() <= maxLogCharsPerRun {
				s.logFrames++
				s.logs.Add(in.m.Text)
				if !in.m.Marker {
					s.host.Log(in.m.Level, in.m.Text)
				}
			}
		case <-t.C:
			return
		}
	}
}

// broken handles the end of the child's stream before done: a clean EOF is
// a crash (report its exit status and stderr), anything else a violation.
func (s *session) broken(err error, cancelCalls func(),
	fail func(ErrorKind, string, string) (*Result, error),
	violation func(string) (*Result, error)) (*Result, error) {
	p, c := s.p, s.c
	switch {
	case errors.Is(err, io.EOF):
	case errors.Is(err, ipc.ErrFrameTooLarge):
		return violation("oversized frame")
	case errors.Is(err, io.ErrUnexpectedEOF):
		// died mid-frame: a crash
	default:
		return violation("malformed frame")
	}
	cancelCalls()
	p.retire(c, false)
	t := time.NewTimer(exitGrace)
	select {
	case <-c.exited:
		t.Stop()
	case <-t.C:
		c.kill(killProtocol, p.m) // closed its output but lives on
		<-c.exited
	}
	p.m.crashes.WithLabelValues("run").Inc()
	return fail(ErrCrash, outcomeCrash, c.crashReport())
}

func (s *session) done(ctx context.Context, d *ipc.Done, start time.Time) (*Result, error) {
	p := s.p
	res := &Result{
		Value:         d.Value,
		Logs:          jstext.Prefix(d.LogPrefix, MaxLogChars),
		LogChars:      d.LogChars,
		LogEntries:    d.LogEntries,
		CPUTime:       time.Duration(d.CPUTimeNs),
		PeakHeapBytes: d.PeakHeapBytes,
		HostCalls:     d.HostCalls,
		Wall:          time.Since(start),
	}
	outcome := outcomeOK
	if d.Err != nil {
		res.Err = &ProgramError{Kind: ErrorKind(d.Err.Kind), Message: jstext.Prefix(d.Err.Message, ipc.MaxErrorChars)}
		outcome = outcomeError
		if res.Err.Kind == ErrDeadline {
			outcome = outcomeDeadline
		}
	}
	if res.Err != nil && (res.Err.Kind == ErrCPU || res.Err.Kind == ErrOutOfMemory) {
		// A budget the operator sets bound this program (payload-free).
		p.log.WarnContext(ctx, "execution over budget", "budget", string(res.Err.Kind),
			"cpuMs", res.CPUTime.Milliseconds(), "peakHeapBytes", res.PeakHeapBytes, "wallMs", res.Wall.Milliseconds())
	}
	p.m.executions.WithLabelValues(outcome).Inc()
	telemetry.Observe(ctx, p.m.duration, res.Wall.Seconds()) // exemplar: the trace id
	p.m.guestCPU.Observe(res.CPUTime.Seconds())
	p.m.guestHeap.Observe(float64(res.PeakHeapBytes))
	return res, nil
}

// callHost runs the host function; a panic in it fails this call only
// instead of taking the whole server down with an unrecovered goroutine.
func (s *session) callHost(ctx context.Context, m *ipc.Message) (v json.RawMessage, err error) {
	defer func() {
		if r := recover(); r != nil {
			s.p.opts.Logger.ErrorContext(ctx, "host call panicked", "provider", m.Provider, "function", m.Function, "panic", fmt.Sprint(r))
			v, err = nil, errHostPanic
		}
	}()
	return s.host.Call(ctx, m.Provider, m.Function, m.Args)
}

// errHostPanic is the guest-visible text of a host function that panicked.
var errHostPanic = errors.New("Host call failed.")

// call runs one host call on its own goroutine and replies exactly once
// (unless the run is over: then the child is gone or going, and the guest
// settles its own pending calls).
func (s *session) call(ctx context.Context, m *ipc.Message) {
	defer s.calls.Done()
	if ctx.Err() != nil {
		return // the run is ending (L2: no further host call is admitted)
	}
	reply := &ipc.Message{Type: ipc.TypeReply, ID: m.ID}
	label := m.Provider + "." + m.Function
	if len(m.Args) > ipc.MaxPayloadBytes {
		// The guest refuses these first; this is the backstop (L6: no address).
		reply.Err = "Host call arguments exceeded the IPC limit."
	} else {
		v, err := s.callHost(ctx, m)
		switch {
		case err != nil:
			reply.Err = err.Error()
			if reply.Err == "" {
				reply.Err = "Host call failed."
			}
		case len(v) > MaxHostResultBytes:
			reply.Err = ipc.ResultTooLarge(label)
		case len(v) > 0 && !json.Valid(v):
			// Spliced into the frame verbatim: it must be JSON.
			reply.Err = fmt.Sprintf("Host result from %s could not be serialized.", label)
		default:
			reply.OK, reply.Value = true, v
		}
	}
	if ctx.Err() != nil {
		return
	}
	err := s.c.w.Write(reply)
	if err != nil && (errors.Is(err, ipc.ErrFrameTooLarge) || !isWriteErr(err)) {
		// An unsendable reply still settles the call (0.24.4 fix): too large,
		// or a value that is not JSON.
		small := &ipc.Message{Type: ipc.TypeReply, ID: m.ID, Err: "Host failure exceeded the bridge error limit."}
		if reply.OK {
			small.Err = fmt.Sprintf("Host result from %s could not be serialized.", label)
		}
		_ = s.c.w.Write(small)
	}
}

// isWriteErr tells a failed pipe write (the child is gone) from an encoding
// refusal.
func isWriteErr(err error) bool {
	var pe *fs.PathError
	return errors.As(err, &pe) || errors.Is(err, os.ErrClosed)
}
