// Command connecta is the MCP gateway: `serve` (default), `check`, `doctor`,
// `version`. The same binary is re-executed as the sandbox child, so the
// child check is the first statement of main.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/connecta-dev/connecta/sandbox"
	"github.com/connecta-dev/connecta/stdioshim"
)

// version is set at link time (-ldflags "-X main.version=…").
var version = "dev"

func main() {
	stdioshim.MaybeRun()
	sandbox.MaybeRunChild()
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

const usage = `usage: connecta [command] [flags]

commands:
  serve [--config FILE] [--listen HOST:PORT] [--stdio]   run the server (default)
  check --config FILE                                     validate a configuration
  doctor [--config FILE]                                  check config, connectors and the executor
  version                                                 print the version
`

// run dispatches a subcommand and returns the process exit code.
func run(args []string, stdin io.ReadCloser, stdout io.WriteCloser, stderr io.Writer) int {
	cmd := "serve"
	if len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-' {
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "serve":
		return cmdServe(args, stdin, stdout, stderr)
	case "check":
		return cmdCheck(args, stdout, stderr)
	case "doctor":
		return cmdDoctor(args, stdout, stderr)
	case "version":
		fmt.Fprintln(stdout, "connecta", buildVersion())
		return 0
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "connecta: unknown command %q\n\n%s", cmd, usage)
		return 2
	}
}

func newFlagSet(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

func cmdServe(args []string, stdin io.ReadCloser, stdout io.WriteCloser, stderr io.Writer) int {
	fs := newFlagSet("serve", stderr)
	configPath := fs.String("config", "", "configuration file (default: the embedded demo configuration)")
	listen := fs.String("listen", "", "HOST:PORT to listen on (overrides the file)")
	stdio := fs.Bool("stdio", false, "serve MCP over stdin/stdout instead of HTTP")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	log := newLogger(stderr)
	cfg, err := loadConfig(*configPath)
	if err != nil {
		fmt.Fprintln(stderr, "connecta:", err)
		return 1
	}
	if *listen != "" {
		if err := cfg.SetListen(*listen); err != nil {
			fmt.Fprintln(stderr, "connecta:", err)
			return 1
		}
	}
	for _, w := range cfg.Warnings() {
		log.Warn("configuration", "warning", w.String())
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := serve(ctx, cfg, serveOptions{stdio: *stdio, stdin: stdin, stdout: stdout, log: log}); err != nil {
		if errors.Is(err, context.Canceled) {
			return 0
		}
		log.Error("connecta stopped", "err", err)
		return 1
	}
	return 0
}
