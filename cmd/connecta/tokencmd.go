package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/connecta-dev/connecta/internal/accesstoken"
	"github.com/connecta-dev/connecta/internal/app"
	"github.com/connecta-dev/connecta/internal/config"
)

// verbOf reads the verb a command's first argument names: ok when it is
// one of verbs; otherwise it prints help to stdout for -h or --help (exit
// 0) or the usage line to stderr (exit 2) and returns that code.
func verbOf(args, verbs []string, help, usage string, stdout, stderr io.Writer) (verb string, code int, ok bool) {
	switch {
	case len(args) > 0 && slices.Contains(verbs, args[0]):
		return args[0], 0, true
	case len(args) > 0 && (args[0] == "-h" || args[0] == "--help"):
		fmt.Fprint(stdout, help)
		return "", 0, false
	default:
		fmt.Fprintln(stderr, usage)
		return "", 2, false
	}
}

// cmdToken is `connecta token create NAME | list | rename ID NAME | revoke
// ID --config FILE`: operator-issued access tokens, for deployments without
// the console. The secret is printed once, by create; every change is an
// audit record with actor cli:<user>. The config must have accessTokens and
// a durable store.
func cmdToken(args []string, stdout, stderr io.Writer) int {
	c, _ := findCommand("token")
	help := fmt.Sprintf("usage: connecta %s\n\n%s.\nThe secret is shown once, by create; only its SHA-256 digest is stored.\n", c.synopsis, c.summary)
	verb, code, ok := verbOf(args, []string{"create", "list", "rename", "revoke"}, help, usageLine("token"), stdout, stderr)
	if !ok {
		return code
	}
	n := map[string]int{"create": 1, "list": 0, "rename": 2, "revoke": 1}[verb] // positional arguments
	rest, narrow, given, ok := connectorsFlag(args[1:])
	if !ok || (given && verb != "create") {
		fmt.Fprintln(stderr, usageLine("token"))
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), cliTimeout)
	defer cancel()
	cfg, st, _, pos, code := openWritableStore(ctx, "token", rest, stdout, stderr, func(cfg *config.Config, pos []string) int {
		if len(pos) != n {
			fmt.Fprintln(stderr, usageLine("token"))
			return 2
		}
		if !cfg.AccessTokens.Enabled {
			fmt.Fprintf(stderr, "connecta token: %s has no accessTokens section; add `accessTokens: {maxActive: 100}` to issue tokens\n", cfg.File)
			return 1
		}
		if given {
			if msg := checkNarrowing(cfg, narrow); msg != "" {
				fmt.Fprintf(stderr, "connecta token create: --connectors: %s\n", msg)
				return 2
			}
		}
		if verb == "create" || verb == "rename" {
			if _, err := accesstoken.NormalizeName(pos[n-1]); err != nil {
				fmt.Fprintf(stderr, "connecta token %s: %v\n", verb, err)
				return 2
			}
		}
		return 0
	})
	if st == nil {
		return code
	}
	defer st.Close()
	m, err := app.NewAccessTokens(cfg, st, slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err != nil {
		fmt.Fprintf(stderr, "connecta token: %v\n", err)
		return 1
	}
	who := cliActor()
	switch verb {
	case "create":
		secret, t, err := m.CreateNarrowed(ctx, pos[0], who, narrow)
		if err != nil {
			fmt.Fprintf(stderr, "connecta token create: %v\n", err)
			return 1
		}
		// The secret alone on stdout, so $(connecta token create x) is it.
		fmt.Fprintf(stderr, "token %s (%q) created; its secret, shown only now, is on standard output\n", t.ID, t.Name)
		fmt.Fprintln(stdout, secret)
	case "list":
		list, err := m.List(ctx)
		if err != nil {
			fmt.Fprintf(stderr, "connecta token list: %v\n", err)
			return 1
		}
		tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tNAME\tCREATED\tCREATED BY\tREVOKED\tCONNECTORS")
		for _, t := range list {
			revoked := "-"
			if t.Revoked() {
				revoked = t.RevokedAt.Format(time.RFC3339) + " by " + t.RevokedBy
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", t.ID, t.Name, t.CreatedAt.Format(time.RFC3339), t.CreatedBy, revoked, narrowingText(t.Connectors))
		}
		_ = tw.Flush()
	case "rename":
		t, err := m.Rename(ctx, pos[0], pos[1], who)
		if err != nil {
			fmt.Fprintf(stderr, "connecta token rename: %v\n", err)
			return 1
		}
		fmt.Fprintf(stdout, "token %s renamed to %q\n", t.ID, t.Name)
	case "revoke":
		t, err := m.Revoke(ctx, pos[0], who)
		if err != nil {
			fmt.Fprintf(stderr, "connecta token revoke: %v\n", err)
			return 1
		}
		fmt.Fprintf(stdout, "token %s (%q) revoked\n", t.ID, t.Name)
	}
	return 0
}

// connectorsFlag takes --connectors LIST (or --connectors=LIST) out of args:
// the comma-separated ids an issued token is narrowed to.
func connectorsFlag(args []string) (rest, ids []string, given, ok bool) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		var v string
		switch {
		case a == "--connectors" || a == "-connectors":
			if i+1 >= len(args) {
				return nil, nil, false, false
			}
			i++
			v = args[i]
		case strings.HasPrefix(a, "--connectors=") || strings.HasPrefix(a, "-connectors="):
			_, v, _ = strings.Cut(a, "=")
		default:
			rest = append(rest, a)
			continue
		}
		if given {
			return nil, nil, false, false
		}
		given = true
		ids = []string{}
		for _, id := range strings.Split(v, ",") {
			if id = strings.TrimSpace(id); id != "" {
				ids = append(ids, id)
			}
		}
	}
	return rest, ids, given, true
}

// checkNarrowing refuses a narrowing that names no connector, repeats one
// or names one the configuration does not have.
func checkNarrowing(cfg *config.Config, ids []string) string {
	if len(ids) == 0 {
		return "name at least one connector id (comma-separated)"
	}
	seen := map[string]bool{}
	for _, id := range ids {
		if seen[id] {
			return fmt.Sprintf("%q is named twice", id)
		}
		seen[id] = true
		if cfg.Connector(id) == nil {
			return fmt.Sprintf("%q is not a connector of %s", id, cfg.File)
		}
	}
	return ""
}

// narrowingText is how a token's narrowing is shown: the ids, or "all
// (access rules)" when it is not narrowed.
func narrowingText(ids []string) string {
	if ids == nil {
		return "all (access rules)"
	}
	return strings.Join(ids, ",")
}
