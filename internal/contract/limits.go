package contract

import (
	"github.com/connecta-dev/connecta/internal/supervisor"
)

// Contract bounds, named as the contract names them (L4, L6, E1, R5, M5,
// docs/DECISIONS.md "Wire and limits").
const (
	// MaxHostPayloadBytes is L6's bound on a host call's serialized result
	// (and arguments, which the child checks), defined in package ipc.
	MaxHostPayloadBytes = supervisor.MaxHostResultBytes

	// MaxFrameMessageChars bounds a typed failure's message: JSON-serialized
	// UTF-16 units including the quotes and the … marker (E1).
	MaxFrameMessageChars = 2000
	// MaxFrameDetailsChars bounds the serialized error object (E1).
	MaxFrameDetailsChars = 3700
	// MaxRecordedFailures is how many failures E6 matching remembers.
	MaxRecordedFailures = 64
	// MinContainmentChars is the shortest failure message matched by
	// containment (E6).
	MinContainmentChars = 8

	// MaxPresentedLogChars caps the logs string (R5), UTF-16 units.
	MaxPresentedLogChars = 4000

	// MaxInventoryBytes bounds the connector inventory line of the
	// description (A2, L8), whole entries only; MaxTitleBytes one title.
	MaxInventoryBytes = 256
	MaxTitleBytes     = 120
)

// Fixed texts.
const (
	// FrameMark starts every typed failure frame; the per-run secret and a
	// colon follow, then the JSON error object (X11).
	FrameMark = "\x1econnecta-error:"
	// textFrameRefused replaces a frame that cannot be bounded; it is refused
	// whole, never sliced through its JSON.
	textFrameRefused = "Host failure exceeded the bridge error limit."
	// textEmptyError is the message of a failed program with an empty error (E5).
	textEmptyError = "Execution failed without an error message."
	// logsTruncatedFormat follows the first 4,000 characters of clipped logs.
	logsTruncatedFormat = "\n--- TRUNCATED (%d chars total) — filter/map/slice data inside your code and return only what you need ---"
	// secretRedacted replaces the run secret should it ever reach output.
	secretRedacted = "[redacted]"
)
