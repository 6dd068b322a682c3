package oauth_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/connecta-dev/connecta/internal/oauth"
	"github.com/connecta-dev/connecta/internal/oauth/oauthstore"
	"github.com/connecta-dev/connecta/internal/store"
	"github.com/connecta-dev/connecta/internal/vault"
	oidctest "github.com/connecta-dev/connecta/test/oidc"
	"github.com/connecta-dev/connecta/test/pgtest"
)

// replicaStore is one replica's view of a shared PostgreSQL store: its own
// connections, the same vault keys, advisory locks on its own handle.
func replicaStore(t *testing.T, url string, key []byte) oauth.Store {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, url, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	v, err := vault.New(st, []vault.Key{{ID: "k1", Key: key}}, "k1", nil)
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return oauthstore.NewVaultStore(v, st, oauthstore.NewPostgresLocks(db))
}

// TestReplicasShareFlowAndGrant: a flow started on replica A completes with
// the callback on replica B (PostgreSQL store, sealed by the vault); both
// replicas then use the same grant, and when the access token expires under
// concurrent calls on both, exactly one refresh happens.
func TestReplicasShareFlowAndGrant(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	cluster := pgtest.Start(t)
	url := cluster.Database(t)
	key := make([]byte, vault.KeyBytes)
	_, _ = rand.Read(key)

	p := oidctest.StartAuthServer(t, oidctest.Options{})
	rs := oidctest.NewProtectedServer(t, p)
	b := newRigFor(t, p, rs, replicaStore(t, url, key))
	a := newRigWithPublic(t, p, rs, replicaStore(t, url, key), b.public)
	a.clk = b.clk

	st, gerr := a.m.Authorize(ctx, "tracker", false, oauth.Caller{Actor: "laptop"})
	if gerr != nil {
		t.Fatal(gerr)
	}
	// B sees A's pending flow: the same link.
	if again, _ := b.m.Authorize(ctx, "tracker", false, oauth.Caller{}); again.Status != oauth.StatusPending || again.AuthorizationURL != st.AuthorizationURL {
		t.Fatalf("replica B: %+v, want pending with A's URL", again)
	}
	status, page := b.deliver(t, ctx, st.AuthorizationURL, true) // lands on B
	if status != http.StatusOK {
		t.Fatalf("callback on B: %d %s", status, page)
	}
	for name, r := range map[string]*rig{"A": a, "B": b} {
		if got, err := r.whoami(ctx); err != nil || !strings.Contains(got, "subject=alice") {
			t.Fatalf("replica %s: %q %v", name, got, err)
		}
	}

	// Expire the access token, then call concurrently on both replicas.
	okBefore := a.refreshes("ok") + b.refreshes("ok")
	b.clk.advance(5 * time.Minute) // past the access token's default lifetime
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := 0; i < 8; i++ {
		r := a
		if i%2 == 1 {
			r = b
		}
		wg.Go(func() {
			if _, err := r.whoami(ctx); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n := a.refreshes("ok") + b.refreshes("ok") - okBefore; n != 1 {
		t.Fatalf("refreshes across replicas = %v, want exactly 1", n)
	}
	if f := a.refreshes("failed") + b.refreshes("failed") + a.refreshes("invalid_grant") + b.refreshes("invalid_grant"); f != 0 {
		t.Fatalf("failed refreshes = %v", f)
	}
}

// TestWithoutVaultFlowRefused: no vault keys means no flow can be kept; the
// answer names vault.keys.
func TestWithoutVaultFlowRefused(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	st := store.NewMemory()
	v, err := vault.New(st, nil, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	r := newRig(t, oidctest.Options{}, oauthstore.NewVaultStore(v, st, nil))
	_, gerr := r.m.Authorize(ctx, "tracker", false, oauth.Caller{})
	if gerr == nil || gerr.Code != oauth.CodeUnavailable || !strings.Contains(gerr.Message, "vault.keys") {
		t.Fatalf("Authorize without a vault: %v", gerr)
	}
}
