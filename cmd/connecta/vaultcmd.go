package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"github.com/connecta-dev/connecta/internal/actor"
	"io"
	"log/slog"
	"os/user"
	"strings"
	"time"

	"github.com/connecta-dev/connecta/internal/app"
	"github.com/connecta-dev/connecta/internal/config"
	"github.com/connecta-dev/connecta/internal/store"
	"github.com/connecta-dev/connecta/internal/vault"
)

// maxCredentialBytes bounds a credential read from standard input: the
// vault's one bound, which the console applies too.
const maxCredentialBytes = vault.MaxCredentialBytes

// cliTimeout bounds one store-writing command, boot retry included.
const cliTimeout = 2 * time.Minute

// openWritableStore loads the config and opens its store for a command
// that writes it; memory: is refused (it would write into a store no server
// shares, then vanish). refuse (nil: none) sees the configuration and the
// positional arguments before the store is opened: a command refused for
// its configuration or its arguments creates no file (a sqlite: store is
// created by opening it). It prints its own message and returns the exit
// code, 0 to go on.
func openWritableStore(ctx context.Context, name string, args []string, stdout, stderr io.Writer, refuse func(cfg *config.Config, pos []string) int) (cfg *config.Config, st store.Store, v *vault.Vault, rest []string, code int) {
	fs := newFlagSet(name, stdout, stderr)
	configPath := fs.String("config", "", "configuration file (its store and vault)")
	credentialsDir := fs.String("credentials-dir", "", credentialsDirUsage)
	var pos []string
	// Positional arguments may come before or after the flags.
	for len(args) > 0 {
		if args[0] != "" && args[0][0] != '-' {
			pos, args = append(pos, args[0]), args[1:]
			continue
		}
		if c, done := fs.parseSome(args); done {
			return nil, nil, nil, nil, c
		}
		if len(fs.Args()) == len(args) { // "-" alone: an argument, not a flag
			pos, args = append(pos, args[0]), args[1:]
			continue
		}
		args = fs.Args()
	}
	if *configPath == "" {
		fmt.Fprintf(stderr, "connecta %s: --config FILE is required\n", name)
		return nil, nil, nil, nil, 2
	}
	cfg, err := loadConfig(*configPath, *credentialsDir)
	if err != nil {
		printRefusals(stderr, err)
		return nil, nil, nil, nil, 1
	}
	url := cfg.Store.URL.Reveal()
	if kind, _ := store.Scheme(url); kind == "memory" {
		fmt.Fprintf(stderr, "connecta %s: the store of %s is memory:, which lives only inside a running server; set store.url to sqlite:PATH or postgres://… to write it from the command line\n", name, *configPath)
		return nil, nil, nil, nil, 1
	}
	if refuse != nil {
		if code := refuse(cfg, pos); code != 0 {
			return nil, nil, nil, nil, code
		}
	}
	st, err = store.Open(ctx, url, store.Options{Logger: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		fmt.Fprintf(stderr, "connecta %s: %v\n", name, err)
		return nil, nil, nil, nil, 1
	}
	v, err = app.NewVault(cfg, st, slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err != nil {
		_ = st.Close()
		fmt.Fprintf(stderr, "connecta %s: %v\n", name, err)
		return nil, nil, nil, nil, 1
	}
	return cfg, st, v, pos, 0
}

// parseSome parses flags up to the first positional argument, leaving the
// rest in fs.Args().
func (fs *flagSet) parseSome(args []string) (int, bool) {
	err := fs.Parse(args)
	if err == nil {
		return 0, false
	}
	if errors.Is(err, flag.ErrHelp) {
		fs.printUsage(fs.stdout)
		return 0, true
	}
	fmt.Fprintf(fs.stderr, "connecta %s: %v\n\n", fs.Name(), err)
	fs.printUsage(fs.stderr)
	return 2, true
}

// cliActor names who ran a command, for the audit trail.
func cliActor() string {
	if u, err := user.Current(); err == nil {
		return "cli:" + u.Username
	}
	return "cli"
}

// cmdVault is `connecta vault reseal --config FILE`: every sealed value not
// under vault.active is re-sealed under it.
func cmdVault(args []string, stdout, stderr io.Writer) int {
	c, _ := findCommand("vault")
	help := fmt.Sprintf("usage: connecta %s\n\n%s.\n", c.synopsis, c.summary)
	if _, code, ok := verbOf(args, []string{"reseal"}, help, usageLine("vault"), stdout, stderr); !ok {
		return code
	}
	ctx, cancel := context.WithTimeout(context.Background(), cliTimeout)
	defer cancel()
	_, st, v, _, code := openWritableStore(ctx, "vault", args[1:], stdout, stderr, func(cfg *config.Config, pos []string) int {
		if len(pos) > 0 {
			fmt.Fprintf(stderr, "connecta vault reseal: unexpected argument %q\n", pos[0])
			return 2
		}
		if len(cfg.Vault.Keys) == 0 {
			fmt.Fprintf(stderr, "connecta vault reseal: %v\n", vault.ErrNotConfigured)
			return 1
		}
		return 0
	})
	if st == nil {
		return code
	}
	defer st.Close()
	r, err := v.Reseal(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "connecta vault reseal: %v\n", err)
		return 1
	}
	_ = st.AppendAudit(ctx, store.AuditRecord{Actor: cliActor(), Action: "vault.reseal", Target: "vault",
		Detail: fmt.Sprintf("resealed %d under %s", r.Resealed, v.ActiveKeyID())})
	fmt.Fprintf(stdout, "vault reseal: %d resealed under %s, %d already current, %d unreadable (left as they are), %d changed meanwhile\n",
		r.Resealed, v.ActiveKeyID(), r.Current, r.Unreadable, r.Raced)
	if r.Unreadable > 0 {
		return 1
	}
	return 0
}

// cmdCredential is `connecta credential set|delete CONNECTOR NAME --config
// FILE`; set reads the value from standard input (one trailing newline is
// dropped) and never echoes it.
func cmdCredential(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	usage := usageLine("credential") + "   (set reads the value from standard input)"
	verb, code, ok := verbOf(args, []string{"set", "delete"}, usage+"\n", usage, stdout, stderr)
	if !ok {
		return code
	}
	rest, who, code := actorFlag("credential "+verb, args[1:], stderr)
	if code != 0 {
		return code
	}
	ctx, cancel := context.WithTimeout(context.Background(), cliTimeout)
	defer cancel()
	_, st, v, pos, code := openWritableStore(ctx, "credential", rest, stdout, stderr, func(cfg *config.Config, pos []string) int {
		if len(pos) != 2 {
			fmt.Fprintln(stderr, usage)
			return 2
		}
		if cfg.Connector(pos[0]) == nil {
			fmt.Fprintf(stderr, "connecta credential %s: no connector %q in %s\n", verb, pos[0], cfg.File)
			return 1
		}
		if pos[1] == "" || len(pos[1]) > 128 || strings.Contains(pos[1], vault.CallerSeparator) {
			fmt.Fprintf(stderr, "connecta credential %s: NAME must be 1-128 bytes without %q\n", verb, vault.CallerSeparator)
			return 2
		}
		c := cfg.Connector(pos[0])
		perCaller := c.Credential != nil && c.Credential.Per == config.PerCaller
		switch {
		case !who.IsZero() && !perCaller:
			fmt.Fprintf(stderr, "connecta credential %s: connector %q keeps one credential for everyone (credential.per is not caller), so --actor does not apply\n", verb, pos[0])
			return 2
		case who.IsZero() && perCaller:
			fmt.Fprintf(stderr, "connecta credential %s: connector %q keeps each caller's own credential (credential.per: caller): name whose with --actor ACTOR (laptop, token:<id>, oidc:<sub>)\n", verb, pos[0])
			return 2
		}
		if verb == "set" && len(cfg.Vault.Keys) == 0 {
			fmt.Fprintf(stderr, "connecta credential set: %v\n", vault.ErrNotConfigured)
			return 1
		}
		return 0
	})
	if st == nil {
		return code
	}
	defer st.Close()
	connector, name := pos[0], pos[1]
	stored, target := vault.CallerName(name, who), "connector:"+connector
	if !who.IsZero() {
		target += " actor:" + who.String() // whose credential: the audit names the actor it belongs to
	}
	shown := connector + "/" + name
	if !who.IsZero() {
		shown += " of " + who.String()
	}
	switch verb {
	case "set":
		if !v.Configured() {
			fmt.Fprintf(stderr, "connecta credential set: %v\n", vault.ErrNotConfigured)
			return 1
		}
		value, err := io.ReadAll(io.LimitReader(stdin, maxCredentialBytes+1))
		if err != nil {
			fmt.Fprintf(stderr, "connecta credential set: reading standard input: %v\n", err)
			return 1
		}
		value = bytes.TrimSuffix(bytes.TrimSuffix(value, []byte("\n")), []byte("\r"))
		switch {
		case len(value) > maxCredentialBytes:
			fmt.Fprintf(stderr, "connecta credential set: the value is over %d bytes\n", maxCredentialBytes)
			return 1
		case len(value) == 0:
			fmt.Fprintln(stderr, "connecta credential set: the value on standard input is empty")
			return 1
		}
		err = v.Seal(ctx, vault.KindCredential, connector, stored, value)
		clear(value)
		if err != nil {
			fmt.Fprintf(stderr, "connecta credential set: %v\n", err)
			return 1
		}
		_ = st.AppendAudit(ctx, store.AuditRecord{Actor: cliActor(), Action: "credential.set", Target: target, Detail: name})
		fmt.Fprintf(stdout, "credential %s set (sealed under %s)\n", shown, v.ActiveKeyID())
	case "delete":
		ok, err := v.Delete(ctx, vault.KindCredential, connector, stored)
		if err != nil {
			fmt.Fprintf(stderr, "connecta credential delete: %v\n", err)
			return 1
		}
		if !ok {
			fmt.Fprintf(stderr, "connecta credential delete: no credential %s\n", shown)
			return 1
		}
		_ = st.AppendAudit(ctx, store.AuditRecord{Actor: cliActor(), Action: "credential.delete", Target: target, Detail: name})
		fmt.Fprintf(stdout, "credential %s deleted\n", shown)
	}
	return 0
}

// actorFlag takes `--actor ACTOR` (or `--actor=ACTOR`) out of args: the
// actor written as activity writes it (laptop, token:<id>, oidc:<sub>),
// read with actor.Parse (local and stdio too: a loopback or --stdio
// server's one caller is an actor). Absent: the zero ID (the connector's
// one value).
func actorFlag(cmd string, args []string, stderr io.Writer) (rest []string, who actor.ID, code int) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		var val string
		switch {
		case a == "--actor" || a == "-actor":
			if i+1 >= len(args) {
				fmt.Fprintf(stderr, "connecta %s: --actor needs a value (laptop, token:<id>, oidc:<sub>)\n", cmd)
				return nil, actor.ID{}, 2
			}
			val = args[i+1]
			i++
		case strings.HasPrefix(a, "--actor=") || strings.HasPrefix(a, "-actor="):
			_, val, _ = strings.Cut(a, "=")
		default:
			rest = append(rest, a)
			continue
		}
		id, ok := actor.Parse(val)
		if !ok {
			fmt.Fprintf(stderr, "connecta %s: --actor %q is not an actor as activity writes it (a token name such as laptop, token:<id> or oidc:<sub>)\n", cmd, val)
			return nil, actor.ID{}, 2
		}
		who = id
	}
	return rest, who, 0
}
