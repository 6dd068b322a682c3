package supervisor

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"syscall"
	"time"
)

// command is the path every child executes and its ExtraFiles after files
// (childExe.command), or the floor program SpawnFloor measures.
func (p *Pool) command(files []*os.File) (string, []*os.File) {
	if p.opts.floorExe != "" {
		return p.opts.floorExe, files
	}
	return p.exe.command(files)
}

// SpawnFloor measures the floor under every child for `make bench`: it starts
// the program at path n times, one after another, through the pool's own
// spawn path (the same pipes, descriptors, empty environment, process group,
// death signal and forking thread; no namespaces, as by default) and waits
// for each to exit. It returns the reaped children's CPU (user + system, from
// getrusage(RUSAGE_CHILDREN)) and the wall time, each per spawn. The calling
// process must reap no other child meanwhile. The program is given the
// child's arguments and must simply exit: a static hello-world built like
// the real binary is the intended one.
func SpawnFloor(path string, n int) (cpu, wall time.Duration, err error) {
	if n < 1 {
		return 0, 0, fmt.Errorf("supervisor: SpawnFloor needs n ≥ 1, not %d", n)
	}
	opts := Options{floorExe: path, DisableCache: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}.normalized()
	m, err := newMetrics(nil)
	if err != nil {
		return 0, 0, err
	}
	p := &Pool{opts: opts, log: opts.Logger, m: m, forks: make(chan func()), forkerDone: make(chan struct{})}
	go p.forker()
	defer func() {
		p.wg.Wait()
		close(p.forks)
		<-p.forkerDone
	}()
	before, err := childrenCPU()
	if err != nil {
		return 0, 0, err
	}
	start := time.Now()
	for range n {
		c, err := p.spawn("floor")
		if err != nil {
			return 0, 0, err
		}
		c.closeInput()
		for range c.in { // the reader ends at EOF, when the program has exited
		}
		<-c.exited
		if st := c.exitStatus(); st != "code 0" {
			return 0, 0, fmt.Errorf("supervisor: %s exited with %s", path, st)
		}
	}
	wall = time.Since(start)
	after, err := childrenCPU()
	if err != nil {
		return 0, 0, err
	}
	return (after - before) / time.Duration(n), wall / time.Duration(n), nil
}

func childrenCPU() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru); err != nil {
		return 0, fmt.Errorf("supervisor: getrusage: %w", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}
