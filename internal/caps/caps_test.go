package caps

import (
	"os"
	"runtime"
	"testing"
)

// DropForExec leaves the calling thread's effective and permitted sets (it
// may still need them to fork into namespaces) and empties the sets an exec
// would take capabilities from.
func TestDropForExec_EmptiesBoundingInheritableAmbientOnly(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root: an unprivileged thread has nothing to drop")
	}
	type result struct {
		before, after Sets
		err           error
	}
	done := make(chan result)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
		var r result
		r.before, _ = Read("/proc/thread-self/status")
		r.err = DropForExec()
		r.after, _ = Read("/proc/thread-self/status")
		done <- r
	}()
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.after.Bnd != 0 || r.after.Inh != 0 || r.after.Amb != 0 {
		t.Fatalf("after: %+v", r.after)
	}
	if r.after.Eff != r.before.Eff || r.after.Prm != r.before.Prm {
		t.Fatalf("effective/permitted changed: %+v → %+v", r.before, r.after)
	}
	// The test's own thread is untouched.
	if s, _ := Read("/proc/thread-self/status"); s.Bnd == 0 {
		t.Fatal("the drop reached another thread")
	}
}
