package main

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/connecta-dev/connecta/internal/app"
	"github.com/connecta-dev/connecta/internal/config"
)

// TestState_NoStoreSectionWarnsEmbeddedDefaultDoesNot: a file without
// `store` runs on memory: and says so at WARN; the embedded demo does not.
func TestState_NoStoreSectionWarnsEmbeddedDefaultDoesNot(t *testing.T) {
	for _, tc := range []struct {
		name string
		load func() (*config.Config, error)
		warn bool
	}{
		{"file without store", func() (*config.Config, error) {
			return config.Parse("c.yaml", []byte("listen: 127.0.0.1:0\n"), resolver(""))
		}, true},
		{"embedded default", func() (*config.Config, error) { return config.Default(resolver("")) }, false},
	} {
		cfg, err := tc.load()
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		st, err := app.OpenState(context.Background(), cfg, slog.New(slog.NewTextHandler(&buf, nil)), nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		st.Close()
		warned := strings.Contains(buf.String(), "level=WARN") && strings.Contains(buf.String(), "memory:")
		if warned != tc.warn || st.Store().Kind() != "memory" {
			t.Errorf("%s: warned %v (want %v), kind %s\n%s", tc.name, warned, tc.warn, st.Store().Kind(), buf.String())
		}
	}
}

// TestServe_UnwritableSQLitePathRefusesToBoot: the store is opened before
// anything listens; a directory that does not exist names store.url.
func TestServe_UnwritableSQLitePathRefusesToBoot(t *testing.T) {
	cfg := writeStoreConfig(t, t.TempDir(), "sqlite:/nonexistent-connecta-dir/state.db", "")
	code, _, errOut := runCLI("serve", "--config", cfg)
	if code != 1 || !strings.Contains(errOut, "store.url") || !strings.Contains(errOut, "/nonexistent-connecta-dir") {
		t.Fatalf("exit %d, stderr %s", code, errOut)
	}
}
