package ipc

import (
	"strconv"
)

// The child is the same binary re-executed with this argv (the environment is
// empty, so everything the child needs travels here):
//
//	<exe> ChildMarker ArgvVersion <mode> <parentPID> <compiledKey|-> <memoryLimitBytes> <cpuLimitSeconds> <snapshot|->
//
// and the IPC pipes as fd ChildInFD (parent → child) and ChildOutFD (child →
// parent). What the child trusts arrives as descriptors, never as paths:
// the compiled module in ChildCodeFD and the post-initialization snapshot in
// ChildSnapshotFD, sealed memfds for a serving child (when the argv says they
// are there), writable ones the warm-up child fills.
const (
	ChildMarker     = "__connecta_sandbox_child__"
	ArgvVersion     = "3"
	ChildInFD       = 3
	ChildOutFD      = 4
	ChildCodeFD     = 5
	ChildSnapshotFD = 6
)

// Child modes.
const (
	ModeServe = "serve" // load the engine, harden, send ready, run one program
	ModeWarm  = "warm"  // compile into ChildCodeFD, snapshot into ChildSnapshotFD, exit 0
)

// ChildArgs is what the parent tells a child on its command line.
type ChildArgs struct {
	Mode      string
	ParentPID int
	// CompiledKey is the hex compilation-cache key of the module's compiled
	// code in ChildCodeFD; empty = none there (a serving child compiles in
	// memory; the warm-up compiles and fills it).
	CompiledKey      string
	MemoryLimitBytes uint64 // wasm linear memory cap; 0 = engine default
	CPULimitSeconds  uint64 // RLIMIT_CPU backstop; 0 = none
	// Snapshot: ChildSnapshotFD holds the post-initialization snapshot
	// (serve mode); false = initialize afresh.
	Snapshot bool
}

// Argv renders the arguments after the executable path.
func (a ChildArgs) Argv() []string {
	key := a.CompiledKey
	if key == "" {
		key = "-"
	}
	snap := "-"
	if a.Snapshot {
		snap = "fd"
	}
	return []string{ChildMarker, ArgvVersion, a.Mode, strconv.Itoa(a.ParentPID), key,
		strconv.FormatUint(a.MemoryLimitBytes, 10), strconv.FormatUint(a.CPULimitSeconds, 10), snap}
}

// ParseChildArgs recognises a child's os.Args. ok is false when the process
// is not a sandbox child (argv[1] is not the marker); a marked argv that does
// not parse is reported as an error so the child can refuse to run.
func ParseChildArgs(args []string) (a ChildArgs, ok bool, err error) {
	if len(args) < 2 || args[1] != ChildMarker {
		return a, false, nil
	}
	if len(args) != 9 || args[2] != ArgvVersion {
		return a, true, errBadArgv
	}
	a.Mode = args[3]
	if a.Mode != ModeServe && a.Mode != ModeWarm {
		return a, true, errBadArgv
	}
	pid, err1 := strconv.Atoi(args[4])
	a.ParentPID = pid
	if args[5] != "-" {
		a.CompiledKey = args[5]
	}
	switch args[8] {
	case "fd":
		a.Snapshot = true
	case "-":
	default:
		return a, true, errBadArgv
	}
	var err2, err3 error
	a.MemoryLimitBytes, err2 = strconv.ParseUint(args[6], 10, 64)
	a.CPULimitSeconds, err3 = strconv.ParseUint(args[7], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return a, true, errBadArgv
	}
	return a, true, nil
}

var errBadArgv = errorString("ipc: malformed sandbox child arguments")

type errorString string

func (e errorString) Error() string { return string(e) }
