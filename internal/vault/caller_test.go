package vault_test

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/connecta-dev/connecta/internal/actor"
	"github.com/connecta-dev/connecta/internal/store"
	"github.com/connecta-dev/connecta/internal/vault"
)

// TestCallerValueBoundToItsActor: a per-caller value is sealed with its
// (connector, actor) pair in the associated data, so the same sealed bytes
// copied to another actor's row — or to the connector-wide row — do not
// open; under its own name it opens.
func TestCallerValueBoundToItsActor(t *testing.T) {
	ctx := context.Background()
	st := store.NewMemory()
	v, err := vault.New(st, []vault.Key{{ID: "k1", Key: bytes.Repeat([]byte{7}, vault.KeyBytes)}}, "k1", nil)
	if err != nil {
		t.Fatal(err)
	}
	alice, bob := actor.OIDCSubject("alice"), actor.OIDCSubject("bob")
	if err := v.Seal(ctx, vault.KindCredential, "docs", vault.CallerName("value", alice), []byte("alice-secret")); err != nil {
		t.Fatal(err)
	}
	row, err := st.GetSecret(ctx, store.SecretKey{Kind: vault.KindCredential, Connector: "docs", Name: vault.CallerName("value", alice)})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{vault.CallerName("value", bob), "value", vault.CallerName("value", actor.StaticToken("alice"))} {
		moved := row
		moved.Name = name
		if err := st.PutSecret(ctx, moved); err != nil {
			t.Fatal(err)
		}
		if _, err := v.Open(ctx, vault.KindCredential, "docs", name); !errors.Is(err, vault.ErrNotFound) {
			t.Fatalf("alice's value copied to %q opened: %v", name, err)
		}
	}
	got, err := v.Open(ctx, vault.KindCredential, "docs", vault.CallerName("value", alice))
	if err != nil || string(got) != "alice-secret" {
		t.Fatalf("alice's own: %q %v", got, err)
	}
	if name, key := vault.SplitCallerName(vault.CallerName("grant", alice)); name != "grant" || key != "oidc:alice" {
		t.Fatalf("split: %q %q", name, key)
	}
	if name, key := vault.SplitCallerName("grant"); name != "grant" || key != "" {
		t.Fatalf("split of a connector-wide name: %q %q", name, key)
	}
}
