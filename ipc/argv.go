package ipc

import (
	"strconv"
)

// The child is the same binary re-executed with this argv (the environment is
// empty, so everything the child needs travels here):
//
//	<exe> ChildMarker ArgvVersion <mode> <parentPID> <cacheDir|-> <memoryLimitBytes> <cpuLimitSeconds> <snapshot|->
//
// and the IPC pipes as fd ChildInFD (parent → child) and ChildOutFD (child → parent).
const (
	ChildMarker = "__connecta_sandbox_child__"
	ArgvVersion = "2"
	ChildInFD   = 3
	ChildOutFD  = 4
)

// Child modes.
const (
	ModeServe = "serve" // load the engine, harden, send ready, run one program
	ModeWarm  = "warm"  // compile into the cache directory, prune stale versions, exit 0
)

// ChildArgs is what the parent tells a child on its command line.
type ChildArgs struct {
	Mode             string
	ParentPID        int
	CacheDir         string // empty = compile in memory
	MemoryLimitBytes uint64 // wasm linear memory cap; 0 = engine default
	CPULimitSeconds  uint64 // RLIMIT_CPU backstop; 0 = none
	// Snapshot names the post-initialization snapshot the warm-up wrote in
	// CacheDir and the parent's checksum of it, "<file name>:<sha256 hex>";
	// empty = initialize afresh.
	Snapshot string
}

// Argv renders the arguments after the executable path.
func (a ChildArgs) Argv() []string {
	dir := a.CacheDir
	if dir == "" {
		dir = "-"
	}
	snap := a.Snapshot
	if snap == "" {
		snap = "-"
	}
	return []string{ChildMarker, ArgvVersion, a.Mode, strconv.Itoa(a.ParentPID), dir,
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
		a.CacheDir = args[5]
	}
	if args[8] != "-" {
		a.Snapshot = args[8]
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
