package accesstoken_test

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/connecta-dev/connecta/internal/accesstoken"
	"github.com/connecta-dev/connecta/internal/store"
)

func backends(t *testing.T) map[string]store.Store {
	sq, err := store.Open(context.Background(), "sqlite:"+filepath.Join(t.TempDir(), "s.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sq.Close() })
	return map[string]store.Store{"memory": store.NewMemory(), "sqlite": sq}
}

// The secret is shown once and only its digest is stored; a token is found
// by its secret until revoked; rename keeps the id; every change is audited.
func TestIssuedTokens_Lifecycle(t *testing.T) {
	for kind, st := range backends(t) {
		t.Run(kind, func(t *testing.T) {
			ctx := context.Background()
			m, err := accesstoken.New(accesstoken.Options{Store: st, MaxActive: 2})
			if err != nil {
				t.Fatal(err)
			}
			secret, tok, err := m.Create(ctx, "  Alice's   laptop ", "cli:alice")
			if err != nil {
				t.Fatal(err)
			}
			if !accesstoken.LooksLikeSecret(secret) || len(secret) != 47 || tok.Name != "Alice's laptop" || tok.Actor() != "token:"+tok.ID {
				t.Fatalf("create: %q %+v", secret, tok)
			}
			recs, _ := st.ListTokens(ctx)
			if len(recs) != 1 || recs[0].Digest != accesstoken.Digest(secret) || strings.Contains(recs[0].Digest, secret[4:]) {
				t.Fatalf("stored %+v", recs)
			}
			got, err := m.Authenticate(ctx, secret)
			if err != nil || got.ID != tok.ID {
				t.Fatalf("authenticate: %+v %v", got, err)
			}
			if _, err := m.Rename(ctx, tok.ID, "old laptop", "cli:alice"); err != nil {
				t.Fatal(err)
			}
			if names, _ := m.Names(ctx); names[tok.Actor()] != "old laptop" {
				t.Fatalf("names %v", names)
			}
			if _, _, err := m.Create(ctx, "second", "cli:alice"); err != nil {
				t.Fatal(err)
			}
			if _, _, err := m.Create(ctx, "third", "cli:alice"); !errors.Is(err, accesstoken.ErrLimit) {
				t.Fatalf("over maxActive: %v", err)
			}
			rv, err := m.Revoke(ctx, tok.ID, "cli:bob")
			if err != nil || !rv.Revoked() || rv.RevokedBy != "cli:bob" {
				t.Fatalf("revoke: %+v %v", rv, err)
			}
			if _, err := m.Revoke(ctx, tok.ID, "cli:bob"); err != nil {
				t.Fatalf("revoke twice: %v", err)
			}
			if _, err := m.Authenticate(ctx, secret); !errors.Is(err, accesstoken.ErrRevoked) {
				t.Fatalf("revoked: %v", err)
			}
			if _, _, err := m.Create(ctx, "third", "cli:alice"); err != nil {
				t.Fatalf("a revoked token frees its slot: %v", err)
			}
			audit, _ := st.ListAudit(ctx, 10)
			var actions []string
			for _, a := range audit {
				actions = append(actions, a.Action+" "+a.Actor)
				if strings.Contains(a.Detail, secret) {
					t.Fatal("secret in audit")
				}
			}
			slices.Sort(actions) // records of one millisecond may list in any order
			if strings.Join(actions, ",") != "token.create cli:alice,token.create cli:alice,token.create cli:alice,token.rename cli:alice,token.revoke cli:bob" {
				t.Errorf("audit %q", actions)
			}
		})
	}
}

func TestIssuedTokens_BadInput(t *testing.T) {
	ctx := context.Background()
	m, _ := accesstoken.New(accesstoken.Options{Store: store.NewMemory()})
	for _, s := range []string{"", "cta_", "cta_short", "Bearer x", "cta_" + strings.Repeat("a", 42) + "!", strings.Repeat("a", 47)} {
		if _, err := m.Authenticate(ctx, s); !errors.Is(err, accesstoken.ErrUnknown) {
			t.Errorf("%q: %v", s, err)
		}
	}
	if _, err := m.Authenticate(ctx, "cta_"+strings.Repeat("A", 43)); !errors.Is(err, accesstoken.ErrUnknown) {
		t.Errorf("well-formed unknown: %v", err)
	}
	for _, n := range []string{"", "   ", strings.Repeat("é", 81), "a\x00b"} {
		if _, _, err := m.Create(ctx, n, "x"); !errors.Is(err, accesstoken.ErrInvalidName) {
			t.Errorf("name %q: %v", n, err)
		}
	}
	if _, err := m.Rename(ctx, "nope", "x", "y"); !errors.Is(err, accesstoken.ErrNotFound) {
		t.Errorf("rename unknown: %v", err)
	}
	if _, err := m.Revoke(ctx, "nope", "y"); !errors.Is(err, accesstoken.ErrNotFound) {
		t.Errorf("revoke unknown: %v", err)
	}
}
