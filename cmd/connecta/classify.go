package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/connecta-dev/connecta/internal/app"
	"github.com/connecta-dev/connecta/internal/config"
	"github.com/connecta-dev/connecta/internal/gateway"
)

// checkListTimeout bounds the catalog listing `check` does to verify
// classifications.
const checkListTimeout = 10 * time.Second

// classificationWarnings names every readOnly / approvalRequired entry of c
// that its downstream does not list: such an entry classifies nothing (a
// typo, or a tool of another version) and fails silently otherwise.
func classificationWarnings(cfg *config.Config, c config.Connector, index int, tools []gateway.Tool) []config.Warning {
	listed := make(map[string]bool, len(tools))
	names := make([]string, 0, len(tools))
	for _, t := range tools {
		listed[t.Name] = true
		names = append(names, t.Name)
	}
	sort.Strings(names)
	shown := strings.Join(names, ", ")
	if len(names) > 12 {
		shown = strings.Join(names[:12], ", ") + fmt.Sprintf(", … (%d in all)", len(names))
	}
	var out []config.Warning
	for _, list := range []struct {
		key   string
		names []string
	}{{"readOnly", c.ReadOnly}, {"approvalRequired", c.ApprovalRequired}} {
		for _, n := range list.names {
			if listed[n] {
				continue
			}
			out = append(out, config.Warning{
				File: cfg.File, Line: c.Line, Field: fmt.Sprintf("connectors[%d].%s", index, list.key),
				Message: fmt.Sprintf("%q is not a tool connector %q lists, so it classifies nothing (it lists: %s)", n, c.ID, shown),
			})
		}
	}
	return out
}

// checkClassifications lists the catalog of every connector that
// classifies tools (calling none) and warns about names it does not list.
// A connector that cannot be listed is reported as a note: check validates
// the file, the downstream may simply not be up yet.
func checkClassifications(ctx context.Context, cfg *config.Config, w io.Writer) {
	var idx []int
	for i, c := range cfg.Connectors {
		if len(c.ReadOnly)+len(c.ApprovalRequired) > 0 {
			idx = append(idx, i)
		}
	}
	if len(idx) == 0 {
		return
	}
	g, err := gateway.New(ctx, gateway.Options{
		Connectors: app.ConnectorSpecs(cfg),
		Logger:     slog.New(slog.DiscardHandler),
		Version:    buildVersion(),
	})
	if err != nil {
		fmt.Fprintf(w, "note: classifications not verified: %v\n", err)
		return
	}
	defer g.Close()
	lines := make([][]string, len(idx))
	var wg sync.WaitGroup
	for k, i := range idx {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := cfg.Connectors[i]
			lctx, cancel := context.WithTimeout(ctx, checkListTimeout)
			defer cancel()
			tools, err := g.Tools(lctx, c.ID)
			if err != nil {
				lines[k] = []string{fmt.Sprintf("note: connector %s: readOnly/approvalRequired not verified: its tools could not be listed (%s)", c.ID, err.Error())}
				return
			}
			for _, warn := range classificationWarnings(cfg, c, i, tools) {
				lines[k] = append(lines[k], "warning: "+warn.String())
			}
		}()
	}
	wg.Wait()
	for _, l := range lines {
		for _, s := range l {
			fmt.Fprintln(w, s)
		}
	}
}

// accessGlobWarnings names each access rule glob that matches no tool of
// its rule's connectors today (allowed — catalogs change — but likely a
// typo). A rule's glob is judged only when every catalog it could match
// loaded.
func accessGlobWarnings(cfg *config.Config, listings map[string][]gateway.Tool) []config.Warning {
	if cfg.Access == nil {
		return nil
	}
	var out []config.Warning
	for i, r := range cfg.Access.Rules {
		ids := r.Connectors
		if r.AllConnectors {
			ids = nil
			for _, c := range cfg.Connectors {
				ids = append(ids, c.ID)
			}
		}
		for k, g := range r.Tools {
			matched, judged := false, true
			for _, id := range ids {
				tools, ok := listings[id]
				if !ok {
					judged = false
					break
				}
				for _, t := range tools {
					if gateway.GlobMatch(g, t.Address()) {
						matched = true
					}
				}
			}
			if judged && !matched {
				out = append(out, config.Warning{File: cfg.File, Line: r.Line, Field: fmt.Sprintf("access[%d].tools[%d]", i, k),
					Message: fmt.Sprintf("%q matches no tool its connectors list today, so the rule reaches nothing through it (allowed: catalogs change)", g)})
			}
		}
	}
	return out
}
