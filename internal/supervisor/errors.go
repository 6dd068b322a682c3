package supervisor

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/connecta-dev/connecta/internal/ipc"
)

// Execution error codes (E2, L7). Admission failures and failures that end a
// started run for the caller's or the server's reasons are typed; a program
// that fails on its own is a ProgramError in the Result instead.
const (
	CodeOverloaded = "executor_overloaded"
	CodeCancelled  = "executor_cancelled"
	CodeClosed     = "executor_closed"
)

// Fixed texts.
const (
	msgQueueFull            = "Executor queue is full."
	msgClosed               = "Executor is shutting down."
	msgCancelledBefore      = "Execution was cancelled before admission."
	msgCancelledQueued      = "Execution was cancelled while queued."
	msgCancelledStarting    = "Execution was cancelled while the sandbox was starting."
	msgCancelled            = ipc.CancelledMessage
	msgCancelledBeforeStart = "Execution was cancelled before it started."
)

func msgAdmissionTimeout(d time.Duration) string {
	return fmt.Sprintf("Executor admission timed out after %dms.", d.Milliseconds())
}

// ExecError is a typed execution failure: admission (overloaded, cancelled,
// closed) or a started run ended by cancellation or shutdown. Logs holds the
// joined log prefix received before the end (≤ MaxLogChars UTF-16 units) and
// LogChars the full joined length; both are empty for admission failures.
type ExecError struct {
	Code         string
	Message      string
	Retryable    bool
	RetryAfterMs int64 // set for executor_overloaded
	Logs         string
	LogChars     int
	// Started reports that the program had been handed to a child (so, for
	// example, emitted blocks are discarded).
	Started bool
}

func (e *ExecError) Error() string { return e.Message }

// ErrorKind classifies an untyped program failure.
type ErrorKind string

// Kinds reported by the engine in the child (guest.ErrorKind values) and by
// the supervisor itself.
const (
	ErrThrown      ErrorKind = "thrown"
	ErrSyntax      ErrorKind = "syntax"
	ErrCPU         ErrorKind = "cpu"
	ErrDeadline    ErrorKind = "deadline" // the child's own deadline, or the parent's kill
	ErrOutOfMemory ErrorKind = "out_of_memory"
	ErrStall       ErrorKind = "stall"
	ErrResult      ErrorKind = "result"
	ErrInternal    ErrorKind = "internal"
	ErrCrash       ErrorKind = "crash"    // the child died (exit status and stderr tail in the message)
	ErrProtocol    ErrorKind = "protocol" // the child broke the protocol and was killed
	ErrTooLarge    ErrorKind = "too_large"
)

// ProgramError is an untyped failure of the run: the program's own, or the
// sandbox's (deadline kill, crash, protocol violation). Message may be empty
// (E5).
type ProgramError struct {
	Kind    ErrorKind
	Message string
}

func (e *ProgramError) Error() string { return e.Message }

// Result is one finished run.
type Result struct {
	Value json.RawMessage // R2-bounded JSON (truncated in the child); nil = undefined
	Err   *ProgramError   // nil on success
	// Logs is the presented prefix of the entries joined with "\n" (≤
	// MaxLogChars UTF-16 units); LogChars is the full joined length and
	// LogEntries the count, for the truncation marker.
	Logs          string
	LogChars      int
	LogEntries    int
	CPUTime       time.Duration
	PeakHeapBytes uint64
	HostCalls     int
	Wall          time.Duration // run sent → outcome
	// ChildCPU is the child's process CPU (all threads) from the run frame's
	// send to the outcome: what the parent's CPU watchdog measures.
	ChildCPU time.Duration
	// The phases before the run, as the parent timed them (for traces):
	// QueueWait is the admission wait (Acquire), ChildWait the wait for a
	// child (a warm spare taken at once, or one started for this run), and
	// Spare reports that a warm spare was ready when asked.
	QueueWait time.Duration
	ChildWait time.Duration
	Spare     bool
}
