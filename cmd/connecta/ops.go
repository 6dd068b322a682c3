package main

import (
	"context"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lmittmann/tint"
	"golang.org/x/sys/unix"
)

// newLogger logs to w (always stderr: in --stdio mode stdout is the MCP
// channel): tint on a terminal, JSON otherwise (journald). Payload-free by
// construction: callers log ids, codes and durations, never values.
func newLogger(w io.Writer) *slog.Logger {
	level := slog.LevelInfo
	if os.Getenv("CONNECTA_DEBUG") != "" {
		level = slog.LevelDebug
	}
	if f, ok := w.(*os.File); ok && isTerminal(f) {
		return slog.New(tint.NewTextHandler(w, &tint.Options{Level: level, TimeFormat: time.TimeOnly}))
	}
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level}))
}

func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// notifier speaks sd_notify (READY=1, STOPPING=1, WATCHDOG=1) when systemd
// set NOTIFY_SOCKET: one unixgram datagram per state, no dependency.
type notifier struct {
	socket string
	log    *slog.Logger
	done   chan struct{}
	wg     sync.WaitGroup
	once   sync.Once
}

func newNotifier(log *slog.Logger) *notifier {
	return &notifier{socket: os.Getenv("NOTIFY_SOCKET"), log: log, done: make(chan struct{})}
}

func (n *notifier) send(state string) {
	if n.socket == "" {
		return
	}
	addr := n.socket
	if addr[0] == '@' { // abstract namespace
		addr = "\x00" + addr[1:]
	}
	conn, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: addr, Net: "unixgram"})
	if err != nil {
		n.log.Warn("sd_notify", "err", err)
		return
	}
	defer conn.Close()
	if _, err := conn.Write([]byte(state)); err != nil {
		n.log.Warn("sd_notify", "err", err)
	}
}

// ready says READY=1 and starts the watchdog pings at half WATCHDOG_USEC.
// Each ping is sent only while alive (nil: always) answers true within the
// interval: a server whose loops are dead stops pinging and systemd
// restarts it.
func (n *notifier) ready(alive func(ctx context.Context) (bool, string)) {
	n.send("READY=1")
	usec, err := strconv.ParseInt(os.Getenv("WATCHDOG_USEC"), 10, 64)
	if n.socket == "" || err != nil || usec <= 0 {
		return
	}
	if pid := os.Getenv("WATCHDOG_PID"); pid != "" && pid != strconv.Itoa(os.Getpid()) {
		return
	}
	interval := time.Duration(usec) * time.Microsecond / 2
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		withheld := false
		for {
			select {
			case <-n.done:
				return
			case <-t.C:
			}
			ok, why := true, ""
			if alive != nil {
				ctx, cancel := context.WithTimeout(context.Background(), interval)
				ok, why = alive(ctx)
				cancel()
			}
			if !ok {
				if !withheld {
					n.log.Error("watchdog ping withheld", "reason", why)
				}
				withheld = true
				continue
			}
			if withheld {
				n.log.Info("watchdog pings resumed")
			}
			withheld = false
			n.send("WATCHDOG=1")
		}
	}()
}

// acceptWatch wraps the HTTP listener so the watchdog can tell a live accept
// loop (blocked in Accept, or back from it recently) from one that ended.
type acceptWatch struct {
	net.Listener
	waiting atomic.Int32 // goroutines inside Accept
	last    atomic.Int64 // unix nanos of the last return from Accept
	ended   atomic.Bool  // Serve returned
}

func (l *acceptWatch) Accept() (net.Conn, error) {
	l.waiting.Add(1)
	c, err := l.Listener.Accept()
	l.waiting.Add(-1)
	l.last.Store(time.Now().UnixNano())
	return c, err
}

// alive: the loop is in Accept, or returned from it within d (handing a
// connection over, or backing off after a transient error).
func (l *acceptWatch) alive(d time.Duration) bool {
	if l.ended.Load() {
		return false
	}
	return l.waiting.Load() > 0 || time.Since(time.Unix(0, l.last.Load())) < d
}

func (n *notifier) stopping() {
	n.send("STOPPING=1")
	n.stop()
}

// stop ends the watchdog goroutine.
func (n *notifier) stop() {
	n.once.Do(func() { close(n.done) })
	n.wg.Wait()
}
