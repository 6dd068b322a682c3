// Command connecta is the MCP gateway: `serve` (default), `check`, `doctor`,
// `version`, `help`. `make build` carries the slim sandbox child inside
// (internal/childbin); a build without it (go build, go run) re-executes this
// binary as the child instead, so the child check is the first statement of
// main.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/connecta-dev/connecta/internal/sandbox"
	"github.com/connecta-dev/connecta/internal/stdioshim"
)

func main() {
	stdioshim.MaybeRun()
	sandbox.MaybeRunChild()
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// command is one subcommand: its synopsis (after "connecta "), one line of
// summary for the command list, and its entry point.
type command struct {
	name, synopsis, summary string
	run                     func(args []string, stdin io.ReadCloser, stdout io.WriteCloser, stderr io.Writer) int
}

func commands() []command {
	return []command{
		{"serve", "serve [--config FILE] [--credentials-dir DIR] [--listen HOST:PORT | --stdio]", "run the server (the default command)", cmdServe},
		{"check", "check --config FILE [--credentials-dir DIR]", "validate a configuration file",
			func(a []string, _ io.ReadCloser, o io.WriteCloser, e io.Writer) int { return cmdCheck(a, o, e) }},
		{"doctor", "doctor [--config FILE] [--credentials-dir DIR]", "check the configuration, every connector, the store and the executor",
			func(a []string, _ io.ReadCloser, o io.WriteCloser, e io.Writer) int { return cmdDoctor(a, o, e) }},
		{"oauth", "oauth revoke CONNECTOR [--actor ACTOR] --config FILE [--credentials-dir DIR]", "revoke a connector's downstream OAuth grant",
			func(a []string, _ io.ReadCloser, o io.WriteCloser, e io.Writer) int { return cmdOAuth(a, o, e) }},
		{"vault", "vault reseal --config FILE [--credentials-dir DIR]", "re-seal every stored secret under vault.active",
			func(a []string, _ io.ReadCloser, o io.WriteCloser, e io.Writer) int { return cmdVault(a, o, e) }},
		{"credential", "credential set|delete CONNECTOR NAME [--actor ACTOR] --config FILE [--credentials-dir DIR]", "set (value on stdin) or delete a connector credential in the vault",
			func(a []string, i io.ReadCloser, o io.WriteCloser, e io.Writer) int { return cmdCredential(a, i, o, e) }},
		{"catalog", "catalog diff|approve CONNECTOR [TOOL…] --config FILE [--credentials-dir DIR]", "show a connector's unapproved tool changes, or approve them",
			func(a []string, _ io.ReadCloser, o io.WriteCloser, e io.Writer) int { return cmdCatalog(a, o, e) }},
		{"token", "token create NAME [--connectors ID,ID…] | list | rename ID NAME | revoke ID --config FILE [--credentials-dir DIR]", "issue, list, rename or revoke operator-issued access tokens",
			func(a []string, _ io.ReadCloser, o io.WriteCloser, e io.Writer) int { return cmdToken(a, o, e) }},
		{"init", "init [DIR]", "write a starter deployment into a new directory (default " + defaultInitDir + ")",
			func(a []string, _ io.ReadCloser, o io.WriteCloser, e io.Writer) int { return cmdInit(a, o, e) }},
		{"version", "version", "print the version",
			func(a []string, _ io.ReadCloser, o io.WriteCloser, e io.Writer) int { return cmdVersion(a, o, e) }},
		{"help", "help [command]", "show help for connecta or one command", nil},
	}
}

func findCommand(name string) (command, bool) {
	for _, c := range commands() {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

// usageLine is a command's one-line usage, from its synopsis (the one home
// of a command's flags in prose).
func usageLine(name string) string {
	c, _ := findCommand(name)
	return "usage: connecta " + c.synopsis
}

func usage() string {
	var b strings.Builder
	b.WriteString("usage: connecta [command] [flags]\n\ncommands:\n")
	for _, c := range commands() {
		fmt.Fprintf(&b, "  %-58s %s\n", c.synopsis, c.summary)
	}
	b.WriteString("\nRun 'connecta help <command>' or 'connecta <command> --help' for a command's flags.\n" +
		"'connecta --version' is 'connecta version'.\n")
	return b.String()
}

// run dispatches a subcommand and returns the process exit code.
func run(args []string, stdin io.ReadCloser, stdout io.WriteCloser, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case "-h", "-help", "--help":
			fmt.Fprint(stdout, usage())
			return 0
		case "-version", "--version":
			return cmdVersion(args[1:], stdout, stderr)
		}
	}
	name := "serve"
	if len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-' {
		name, args = args[0], args[1:]
	}
	if name == "help" {
		return cmdHelp(args, stdin, stdout, stderr)
	}
	c, ok := findCommand(name)
	if !ok {
		fmt.Fprintf(stderr, "connecta: unknown command %q\n\n%s", name, usage())
		return 2
	}
	return c.run(args, stdin, stdout, stderr)
}

// cmdHelp is `connecta help [command]`: the command list, or one command's
// flags (the same text as `connecta <command> --help`).
func cmdHelp(args []string, stdin io.ReadCloser, stdout io.WriteCloser, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "help" {
		fmt.Fprint(stdout, usage())
		return 0
	}
	c, ok := findCommand(args[0])
	if !ok {
		fmt.Fprintf(stderr, "connecta help: unknown command %q\n\n%s", args[0], usage())
		return 2
	}
	return c.run([]string{"--help"}, stdin, stdout, stderr)
}

func cmdVersion(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("version", stdout, stderr)
	if code, done := fs.parse(args); done {
		return code
	}
	fmt.Fprintln(stdout, readVersion().String())
	return 0
}

// flagSet is a subcommand's flags: -h/--help prints the command's usage on
// stdout and exits 0; a bad flag prints the error and the usage on stderr
// and exits 2.
type flagSet struct {
	*flag.FlagSet
	stdout, stderr io.Writer
}

func newFlagSet(name string, stdout, stderr io.Writer) *flagSet {
	fs := &flagSet{FlagSet: flag.NewFlagSet(name, flag.ContinueOnError), stdout: stdout, stderr: stderr}
	fs.SetOutput(io.Discard)
	return fs
}

func (fs *flagSet) printUsage(w io.Writer) {
	c, _ := findCommand(fs.Name())
	fmt.Fprintf(w, "usage: connecta %s\n\n%s.\n", c.synopsis, strings.ToUpper(c.summary[:1])+c.summary[1:])
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	if n > 0 {
		fmt.Fprint(w, "\nflags:\n")
		fs.SetOutput(w)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
	}
	fmt.Fprint(w, "  -h, --help\n    \tshow this help\n")
}

// parse parses args; done means the command must return code now.
func (fs *flagSet) parse(args []string) (code int, done bool) {
	err := fs.Parse(args)
	switch {
	case err == nil:
		if fs.NArg() > 0 {
			fmt.Fprintf(fs.stderr, "connecta %s: unexpected argument %q\n\n", fs.Name(), fs.Arg(0))
			fs.printUsage(fs.stderr)
			return 2, true
		}
		return 0, false
	case errors.Is(err, flag.ErrHelp):
		fs.printUsage(fs.stdout)
		return 0, true
	default:
		fmt.Fprintf(fs.stderr, "connecta %s: %v\n\n", fs.Name(), err)
		fs.printUsage(fs.stderr)
		return 2, true
	}
}

func cmdServe(args []string, stdin io.ReadCloser, stdout io.WriteCloser, stderr io.Writer) int {
	fs := newFlagSet("serve", stdout, stderr)
	configPath := fs.String("config", "", "configuration file (default: the embedded demo configuration)")
	listen := fs.String("listen", "", "HOST:PORT to listen on (overrides the file)")
	stdio := fs.Bool("stdio", false, "serve MCP over stdin/stdout instead of HTTP")
	credentialsDir := fs.String("credentials-dir", "", credentialsDirUsage)
	if code, done := fs.parse(args); done {
		return code
	}
	if *stdio && *listen != "" {
		fmt.Fprintln(stderr, "connecta serve: --listen and --stdio exclude each other: --stdio serves MCP on stdin/stdout and listens nowhere")
		return 2
	}
	log := newLogger(stderr)
	// SIGHUP reloads (docs/DECISIONS.md); caught from the start so an early one
	// never kills the process.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	cfg, err := loadConfig(*configPath, *credentialsDir)
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
	if err := serve(ctx, cfg, serveOptions{stdio: *stdio, stdin: stdin, stdout: stdout, log: log,
		reload: hup, source: reloadSource{path: *configPath, listen: *listen, credentialsDir: *credentialsDir, stdio: *stdio}}); err != nil {
		if errors.Is(err, context.Canceled) {
			return 0
		}
		log.Error("connecta stopped", "err", err)
		return 1
	}
	return 0
}
