// Command connecta-load is a load generator for a running connecta: N MCP
// clients (the official Go SDK over streamable HTTP) call execute_code or
// search_tools in a loop for a bounded time or count, then it prints p50,
// p95, p99 latency, throughput and error counts by code. It measures; it
// asserts nothing about timing.
//
//	connecta-load --url http://127.0.0.1:8787/mcp --clients 8 --duration 10s --program fivecall
//
// `connecta-load bench` is `make bench`: it serves bin/connecta itself and
// prints the whole-system table of docs/benchmarks.md (see bench.go).
//
// `connecta-load --free-port` prints a free loopback TCP port (used by
// `make load` to place the server).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

// tokenEnv supplies the bearer token without putting it on the command line.
const tokenEnv = "CONNECTA_LOAD_TOKEN"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run parses flags, runs the load and prints the report; it returns the exit
// code: 0 when every call succeeded, 1 when some failed (the report still
// printed), 2 on usage errors or when nothing could run.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "bench" {
		return runBench(ctx, args[1:], stdout, stderr)
	}
	fs := flag.NewFlagSet("connecta-load", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg Config
	fs.StringVar(&cfg.URL, "url", "http://127.0.0.1:8787/mcp", "connecta's MCP endpoint")
	// The environment is read after parsing: a flag default is printed by
	// the usage text, and the token must never be.
	fs.StringVar(&cfg.Token, "token", "", "bearer token (default $"+tokenEnv+"; none for the loopback default config)")
	fs.IntVar(&cfg.Clients, "clients", 8, fmt.Sprintf("concurrent MCP clients (1..%d)", MaxClients))
	fs.DurationVar(&cfg.Duration, "duration", 10*time.Second, "how long new calls start (≤ "+MaxDuration.String()+")")
	fs.IntVar(&cfg.Requests, "requests", 0, "stop after this many calls in total (0 = until --duration)")
	fs.StringVar(&cfg.Tool, "tool", ToolExecuteCode, "tool to call: execute_code or search_tools")
	program := fs.String("program", "1plus1", "execute_code program: 1plus1, fivecall, or file:PATH")
	fs.StringVar(&cfg.Query, "query", "search issues", "search_tools query")
	fs.DurationVar(&cfg.CallTimeout, "timeout", DefaultCallTimeout, "per-call client timeout")
	fs.DurationVar(&cfg.Wait, "wait", 0, "keep retrying the first connect this long (server still starting)")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	freePort := fs.Bool("free-port", false, "print a free loopback TCP port and exit")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "connecta-load: unexpected arguments %q\n", fs.Args())
		return 2
	}
	if cfg.Token == "" {
		cfg.Token = os.Getenv(tokenEnv)
	}
	if *freePort {
		port, err := pickFreePort()
		if err != nil {
			fmt.Fprintln(stderr, "connecta-load:", err)
			return 2
		}
		fmt.Fprintln(stdout, port)
		return 0
	}
	if cfg.Tool == ToolExecuteCode {
		code, err := loadProgram(*program)
		if err != nil {
			fmt.Fprintln(stderr, "connecta-load:", err)
			return 2
		}
		cfg.Code, cfg.ProgramName = code, *program
	} else {
		cfg.ProgramName = "query:" + cfg.Query
	}

	report, err := Run(ctx, cfg)
	if err != nil {
		fmt.Fprintln(stderr, "connecta-load:", err)
		return 2
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetEscapeHTML(false)
		err = enc.Encode(report)
	} else {
		err = report.WriteText(stdout)
	}
	if err != nil {
		fmt.Fprintln(stderr, "connecta-load:", err)
		return 2
	}
	if report.ErrorCount() > 0 {
		return 1
	}
	return 0
}

// loadProgram resolves --program.
func loadProgram(spec string) (string, error) {
	switch {
	case spec == "1plus1":
		return ProgramOnePlusOne, nil
	case spec == "fivecall":
		return ProgramFiveCall, nil
	case strings.HasPrefix(spec, "file:"):
		path := strings.TrimPrefix(spec, "file:")
		f, err := os.Open(path)
		if err != nil {
			return "", fmt.Errorf("--program: %w", err)
		}
		defer f.Close()
		b, err := io.ReadAll(io.LimitReader(f, MaxProgramBytes+1))
		if err != nil {
			return "", fmt.Errorf("--program %s: %w", path, err)
		}
		if len(b) > MaxProgramBytes {
			return "", fmt.Errorf("--program %s is over %d bytes", path, MaxProgramBytes)
		}
		return string(b), nil
	default:
		return "", fmt.Errorf("--program must be 1plus1, fivecall or file:PATH, not %q", spec)
	}
}

// pickFreePort asks the kernel for a free loopback port. Another process may
// take it before the caller binds it; for a benchmark that is acceptable.
func pickFreePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
