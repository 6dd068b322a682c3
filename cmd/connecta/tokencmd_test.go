package main

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// `connecta token create NAME --connectors a,b` narrows the token, stored
// with it and shown by `token list`; an unknown or repeated id, an empty
// list, or the flag on another verb is refused before anything is written.
func TestTokenCreate_ConnectorsNarrowsAndListShowsIt(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "c.yaml")
	yaml := "store: {url: \"sqlite:" + filepath.Join(dir, "state.db") + "\"}\naccessTokens: {}\nconnectors:\n  - {id: tracker, builtin: demo}\n  - {id: docs, builtin: demo}\n"
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"token", "create", "x", "--connectors", "tracker,nope", "--config", path},
		{"token", "create", "x", "--connectors", "tracker,tracker", "--config", path},
		{"token", "create", "x", "--connectors", ",", "--config", path},
		{"token", "list", "--connectors", "tracker", "--config", path},
	} {
		if code, _, errs := runCLI(args...); code != 2 {
			t.Errorf("%v: exit %d, want 2 (%s)", args, code, errs)
		}
	}
	if code, out, errs := runCLI("token", "create", "agent", "--connectors=docs, tracker", "--config", path); code != 0 || !strings.Contains(errs, "created") || strings.Count(strings.TrimSpace(out), "\n") != 0 {
		t.Fatalf("create: %d %s %s", code, out, errs)
	}
	if code, _, errs := runCLI("token", "create", "wide", "--config", path); code != 0 {
		t.Fatalf("create without narrowing: %d %s", code, errs)
	}
	code, out, errs := runCLI("token", "list", "--config", path)
	if code != 0 || !strings.Contains(out, "CONNECTORS") || !strings.Contains(out, "docs,tracker") || !strings.Contains(out, "all (access rules)") {
		t.Fatalf("list: %d\n%s%s", code, out, errs)
	}
}

// access on a --stdio server refuses to boot: one caller, nothing to tell
// apart (file:line: field).
func TestServeStdio_AccessRefused(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "c.yaml")
	t.Setenv("CONNECTA_TEST_ACCESS_TOKEN", "access-token-0123456789abcdef")
	yaml := "auth:\n  tokens: [{name: ci, token: \"${env:CONNECTA_TEST_ACCESS_TOKEN}\"}]\nconnectors:\n  - {id: tracker, builtin: demo}\naccess:\n  - callers: {tokens: [ci]}\n    connectors: [tracker]\n"
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, errs := runCLI("serve", "--stdio", "--config", path)
	if code == 0 || !strings.Contains(errs, path+":5: access: is refused with --stdio") {
		t.Fatalf("exit %d: %s", code, errs)
	}
}

// doctor names an access glob that matches no tool its connectors list
// today (allowed at boot: catalogs change) and stays quiet on one that does.
func TestDoctor_AccessGlobMatchingNoTool(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "c.yaml")
	t.Setenv("CONNECTA_TEST_ACCESS_TOKEN", "access-token-0123456789abcdef")
	yaml := "auth:\n  tokens: [{name: ci, token: \"${env:CONNECTA_TEST_ACCESS_TOKEN}\"}]\nexecutor: {spares: 0}\nconnectors:\n  - {id: tracker, builtin: demo}\n" +
		"access:\n  - callers: {tokens: [ci]}\n    connectors: [tracker]\n    tools: [\"tracker.list_*\", \"tracker.lst_*\"]\n"
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	_, out, errs := runCLI("doctor", "--config", path)
	if !strings.Contains(out, `access[0].tools[1]: "tracker.lst_*" matches no tool`) || strings.Contains(out, "access[0].tools[0]") {
		t.Fatalf("doctor:\n%s\n%s", out, errs)
	}
}

// A SIGHUP that adds access rules to a --stdio server is refused, and the
// running configuration stays.
func TestServeStdio_ReloadAddingAccessRefused(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "c.yaml")
	t.Setenv("CONNECTA_TEST_ACCESS_TOKEN", "access-token-0123456789abcdef")
	base := "auth:\n  tokens: [{name: ci, token: \"${env:CONNECTA_TEST_ACCESS_TOKEN}\"}]\nconnectors:\n  - {id: tracker, builtin: demo}\n"
	if err := os.WriteFile(path, []byte(base), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := loadConfig(path, "")
	if err != nil {
		t.Fatal(err)
	}
	var logs strings.Builder
	log := slog.New(slog.NewTextHandler(&logs, nil))
	a, err := build(context.Background(), cfg, log, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := os.WriteFile(path, []byte(base+"access:\n  - callers: {tokens: [ci]}\n    connectors: [tracker]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	reload(a, reloadSource{path: path, stdio: true}, log)
	if !strings.Contains(logs.String(), "configuration reload refused") || !strings.Contains(logs.String(), "is refused with --stdio") {
		t.Fatalf("logs:\n%s", logs.String())
	}
}
