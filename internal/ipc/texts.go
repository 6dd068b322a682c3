package ipc

import (
	"fmt"
	"time"
)

// The texts a run's end carries for cancellation, the CPU budget and the
// wall deadline (docs/sandbox.md §6). The child's engine writes them when it
// ends a run itself; the parent writes the same when it ends a child that
// did not stop in time, so one cause reads as one message whichever side
// ended the run.
const CancelledMessage = "Execution was cancelled."

// CPUBudgetMessage is the text of a run ended for its guest CPU budget.
func CPUBudgetMessage(budget time.Duration) string {
	return fmt.Sprintf("Execution exceeded the %dms guest CPU budget.", budget.Milliseconds())
}

// DeadlineMessage is the text of a run ended at its wall-clock deadline.
func DeadlineMessage(wall time.Duration) string {
	return fmt.Sprintf("Execution timed out after %dms.", wall.Milliseconds())
}
