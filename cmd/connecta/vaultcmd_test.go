package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/connecta-dev/connecta/internal/store"
	"github.com/connecta-dev/connecta/internal/vault"
)

func runCLIStdin(stdin string, args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(args, nopCloser{bytes.NewBufferString(stdin)}, nopCloser{&out}, &errb)
	return code, out.String(), errb.String()
}

func vaultKey(b byte) string { return base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{b}, 32)) }

// writeStoreConfig writes a config with a SQLite store and the given vault
// section ("" for none).
func writeStoreConfig(t *testing.T, dir, url, vaultYAML string) string {
	t.Helper()
	p := filepath.Join(dir, fmt.Sprintf("c%d.yaml", len(vaultYAML)))
	body := "listen: 127.0.0.1:0\nstore: {url: \"" + url + "\"}\n" + vaultYAML +
		"connectors:\n  - id: demo\n    builtin: demo\n"
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func openVault(t *testing.T, url string, keys []vault.Key, active string) *vault.Vault {
	t.Helper()
	st, err := store.Open(context.Background(), url, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	v, err := vault.New(st, keys, active, nil)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestCLI_CredentialSetRotateResealDelete: credential set seals the value
// from stdin (never printed), reseal moves it to the new active key, delete
// removes it.
func TestCLI_CredentialSetRotateResealDelete(t *testing.T) {
	dir := t.TempDir()
	url := "sqlite:" + filepath.Join(dir, "state.db")
	k1 := "vault: {keys: [{id: k1, key: \"" + vaultKey(1) + "\"}], active: k1}\n"
	cfg1 := writeStoreConfig(t, dir, url, k1)
	code, out, errOut := runCLIStdin("hunter2-secret\n", "credential", "set", "demo", "api-key", "--config", cfg1)
	if code != 0 || strings.Contains(out+errOut, "hunter2") {
		t.Fatalf("set: exit %d\n%s\n%s", code, out, errOut)
	}
	v1 := openVault(t, url, []vault.Key{{ID: "k1", Key: bytes.Repeat([]byte{1}, 32)}}, "k1")
	if got, err := v1.Open(context.Background(), vault.KindCredential, "demo", "api-key"); err != nil || string(got) != "hunter2-secret" {
		t.Fatalf("stored value: %q, %v", got, err)
	}

	both := "vault: {keys: [{id: k1, key: \"" + vaultKey(1) + "\"}, {id: k2, key: \"" + vaultKey(2) + "\"}], active: k2}\n"
	cfg2 := writeStoreConfig(t, dir, url, both)
	if code, out, errOut := runCLI("vault", "reseal", "--config", cfg2); code != 0 || !strings.Contains(out, "1 resealed under k2") {
		t.Fatalf("reseal: exit %d\n%s\n%s", code, out, errOut)
	}
	v2 := openVault(t, url, []vault.Key{{ID: "k2", Key: bytes.Repeat([]byte{2}, 32)}}, "k2")
	if got, err := v2.Open(context.Background(), vault.KindCredential, "demo", "api-key"); err != nil || string(got) != "hunter2-secret" {
		t.Fatalf("after reseal, k2 alone: %q, %v", got, err)
	}
	if code, out, errOut := runCLI("credential", "delete", "demo", "api-key", "--config", cfg2); code != 0 {
		t.Fatalf("delete: exit %d\n%s\n%s", code, out, errOut)
	}
	if code, _, errOut := runCLI("credential", "delete", "demo", "api-key", "--config", cfg2); code != 1 || !strings.Contains(errOut, "no credential") {
		t.Fatalf("second delete: exit %d %s", code, errOut)
	}
	if code, _, errOut := runCLIStdin("x", "credential", "set", "nope", "api-key", "--config", cfg2); code != 1 || !strings.Contains(errOut, `no connector "nope"`) {
		t.Fatalf("unknown connector: exit %d %s", code, errOut)
	}
}

func TestCLI_StoreWritingCommandsRefuseMemoryAndMissingVault(t *testing.T) {
	dir := t.TempDir()
	k1 := "vault: {keys: [{id: k1, key: \"" + vaultKey(1) + "\"}], active: k1}\n"
	mem := writeStoreConfig(t, dir, "memory:", k1)
	for _, args := range [][]string{
		{"credential", "set", "demo", "x", "--config", mem},
		{"credential", "delete", "demo", "x", "--config", mem},
		{"vault", "reseal", "--config", mem},
	} {
		if code, _, errOut := runCLIStdin("v", args...); code != 1 || !strings.Contains(errOut, "memory:") {
			t.Errorf("%v: exit %d, stderr %q; want a refusal naming memory:", args, code, errOut)
		}
	}
	novault := writeStoreConfig(t, dir, "sqlite:"+filepath.Join(dir, "s.db"), "")
	for _, args := range [][]string{
		{"credential", "set", "demo", "x", "--config", novault},
		{"vault", "reseal", "--config", novault},
	} {
		if code, _, errOut := runCLIStdin("v", args...); code != 1 || !strings.Contains(errOut, "vault.keys") {
			t.Errorf("%v: exit %d, stderr %q; want a refusal naming vault.keys", args, code, errOut)
		}
	}
}

// TestDoctor_ChecksTheStore: doctor reports the store reachable, its schema
// current and a write-read round trip; an unreachable one is a failure.
func TestDoctor_ChecksTheStore(t *testing.T) {
	dir := t.TempDir()
	cfg := writeStoreConfig(t, dir, "sqlite:"+filepath.Join(dir, "state.db"), "")
	code, out, errOut := runCLI("doctor", "--config", cfg)
	want := fmt.Sprintf("store: ok (sqlite, schema %d of %d, write-read round trip", store.LatestSchema(), store.LatestSchema())
	if code != 0 || !strings.Contains(out, want) {
		t.Fatalf("doctor: exit %d\n%s\n%s", code, out, errOut)
	}
}
