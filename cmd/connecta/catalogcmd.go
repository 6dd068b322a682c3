package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode"

	"github.com/connecta-dev/connecta/internal/config"
	"github.com/connecta-dev/connecta/internal/gateway"
)

const catalogUsage = "usage: connecta catalog diff|approve CONNECTOR [TOOL…] --config FILE [--credentials-dir DIR]   (diff: what is not approved, field by field; approve: no TOOL approves every pending one)"

// cmdCatalog is `connecta catalog diff CONNECTOR` (what the connector's
// stored catalog lists that is not approved, field by field) and `connecta
// catalog approve CONNECTOR [TOOL…]` (approve those tools as listed; no
// names: every pending one). Both read the store the servers share, so
// memory: is refused; servers pick an approval up within
// gateway.ApprovalRecheck.
func cmdCatalog(args []string, stdout, stderr io.Writer) int {
	verb, code, ok := verbOf(args, []string{"diff", "approve"}, catalogUsage+"\n", catalogUsage, stdout, stderr)
	if !ok {
		return code
	}
	ctx, cancel := context.WithTimeout(context.Background(), cliTimeout)
	defer cancel()
	// Refused before the store is opened, so a refusal creates no file.
	cfg, st, _, pos, code := openWritableStore(ctx, "catalog", args[1:], stdout, stderr, func(cfg *config.Config, pos []string) int {
		if len(pos) < 1 || (verb == "diff" && len(pos) != 1) {
			fmt.Fprintln(stderr, catalogUsage)
			return 2
		}
		if cfg.Connector(pos[0]) == nil {
			fmt.Fprintf(stderr, "connecta catalog %s: no connector %q in %s\n", verb, pos[0], cfg.File)
			return 1
		}
		return 0
	})
	if st == nil {
		return code
	}
	defer st.Close()
	connector := pos[0]
	cc := cfg.Connector(connector)
	diff, err := gateway.DiffCatalog(ctx, st, connector)
	if errors.Is(err, gateway.ErrNoCatalog) {
		fmt.Fprintf(stderr, "connecta catalog %s: %s: %v (a server stores it at its first load)\n", verb, connector, err)
		return 1
	}
	if err != nil {
		fmt.Fprintf(stderr, "connecta catalog %s: %v\n", verb, err)
		return 1
	}
	if verb == "diff" {
		printDiff(stdout, diff, cfg.CatalogPin(cc))
		return 0
	}
	done, err := gateway.ApproveTools(ctx, st, connector, pos[1:], cliActor())
	if err != nil {
		fmt.Fprintf(stderr, "connecta catalog approve: %v\n", err)
		return 1
	}
	if len(done) == 0 {
		fmt.Fprintf(stdout, "%s: nothing to approve (every named tool is approved as listed)\n", connector)
		return 0
	}
	for i := range done {
		done[i] = printable(done[i])
	}
	fmt.Fprintf(stdout, "%s: approved %s\n", connector, strings.Join(done, ", "))
	return 0
}

// printDiff writes a diff for a person: each pending tool, and for a
// changed one each field with its approved and current value.
func printDiff(w io.Writer, d gateway.CatalogDiff, pin string) {
	fmt.Fprintf(w, "connector %s (catalog.pin: %s): %d tools listed at %s, %d approved, %d pending\n",
		d.Connector, pin, d.Tools, d.FetchedAt.Format("2006-01-02T15:04:05Z07:00"), d.Approved, len(d.Pending))
	for _, t := range d.Pending {
		fmt.Fprintf(w, "\n%s %s\n", t.Status, printable(t.Tool))
		for _, f := range t.Fields {
			if t.Status == "new" {
				fmt.Fprintf(w, "  %s: %s\n", f.Field, f.Current)
				continue
			}
			fmt.Fprintf(w, "  %s\n    approved: %s\n    current:  %s\n", f.Field, orAbsent(f.Approved), orAbsent(f.Current))
		}
	}
	for _, t := range d.Unserved {
		fmt.Fprintf(w, "\nunserved %s (stays approved; callable again if it returns unchanged)\n", printable(t.Tool))
	}
	if len(d.Pending) > 0 {
		fmt.Fprintf(w, "\napprove with: connecta catalog approve %s [TOOL…] --config FILE\n", d.Connector)
	}
}

// printable quotes a downstream-authored name that holds control
// characters, so a tool name cannot drive the operator's terminal (field
// values are canonical JSON, where they are escaped already).
func printable(s string) string {
	if strings.IndexFunc(s, func(r rune) bool { return unicode.IsControl(r) }) >= 0 {
		return strconv.Quote(s)
	}
	return s
}

func orAbsent(s string) string {
	if s == "" {
		return "(absent)"
	}
	return s
}
