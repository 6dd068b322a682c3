package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/connecta-dev/connecta/internal/actor"
	"github.com/connecta-dev/connecta/internal/store"
)

// callerCredentials is a CredentialSource holding values per (connector,
// actor key); it counts the reads made without an actor.
type callerCredentials struct {
	mu        sync.Mutex
	values    map[string]string
	anonymous atomic.Int64
}

func (c *callerCredentials) Credential(_ context.Context, id string, who actor.ID) (string, error) {
	if who.IsZero() {
		c.anonymous.Add(1)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.values[id+"/"+who.Key()]
	if !ok {
		return "", ErrNoCredential
	}
	return v, nil
}

func (c *callerCredentials) set(id string, who actor.ID, v string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if v == "" {
		delete(c.values, id+"/"+who.Key())
		return
	}
	c.values[id+"/"+who.Key()] = v
}

// keyedDownstream is a go-sdk HTTP server that refuses requests without an
// X-Key, answers whoami with the key it received, and lists one extra tool
// named after the key (so each caller's catalog is its own); it counts the
// tools/list requests it answers.
func keyedDownstream(t *testing.T) (string, *atomic.Int64) {
	t.Helper()
	var lists atomic.Int64
	handler := mcp.NewStreamableHTTPHandler(func(r *http.Request) *mcp.Server {
		key := r.Header.Get("X-Key")
		s := mcp.NewServer(&mcp.Implementation{Name: "keyed", Version: "1"}, nil)
		ro := &mcp.ToolAnnotations{ReadOnlyHint: true}
		s.AddTool(&mcp.Tool{Name: "whoami", InputSchema: json.RawMessage(`{"type":"object"}`), Annotations: ro},
			func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{Content: text("key=" + req.Extra.Header.Get("X-Key"))}, nil
			})
		s.AddTool(&mcp.Tool{Name: "only_" + key, InputSchema: json.RawMessage(`{"type":"object"}`), Annotations: ro},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{Content: text("ok")}, nil
			})
		return s
	}, &mcp.StreamableHTTPOptions{Stateless: true})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Key") == "" {
			w.Header().Set("WWW-Authenticate", `Bearer`)
			http.Error(w, "no key", http.StatusUnauthorized)
			return
		}
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			if bytes.Contains(body, []byte(`"method":"tools/list"`)) {
				lists.Add(1)
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		handler.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/mcp", &lists
}

// TestPerCaller_EachActorsOwnCredentialAndCatalog: on a `credential.per:
// caller` connector every call carries the calling actor's own value; each
// actor's catalog is listed with its own credential, kept under (connector,
// actor) in the store, and never shows to another; an actor without a value
// gets auth_required (recovery "credential") while the others keep working;
// removing one actor's value ends only that actor's access.
func TestPerCaller_EachActorsOwnCredentialAndCatalog(t *testing.T) {
	url, _ := keyedDownstream(t)
	creds := &callerCredentials{values: map[string]string{}}
	laptop, ci, nobody := actor.StaticToken("laptop"), actor.StaticToken("ci"), actor.OIDCSubject("carol")
	creds.set("k", laptop, "laptop-key")
	creds.set("k", ci, "ci-key")
	st := store.NewMemory()
	g, err := New(context.Background(), Options{
		Connectors:  []ConnectorSpec{{ID: "k", URL: url, PerCaller: true, Credential: &CredentialSlot{Label: "API key", Header: "X-Key"}}},
		Credentials: creds,
		Store:       st,
		CallTimeout: 10 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	call := func(who actor.ID, address string) (string, *Error) {
		ctx := WithActor(context.Background(), who)
		scope := g.NewScope()
		defer scope.Close()
		res, gerr := g.Invoke(ctx, scope, CallRequest{Address: address, Front: FrontDoorProgram, Source: "execute_code", RequestID: "r", Actor: who.String()})
		if gerr != nil {
			return "", gerr
		}
		return string(res.Value), nil
	}
	tools := func(who actor.ID) ([]string, error) {
		ts, err := g.Tools(WithActor(context.Background(), who), "k")
		var names []string
		for _, t := range ts {
			names = append(names, t.Name)
		}
		return names, err
	}
	for who, want := range map[actor.ID]string{laptop: "key=laptop-key", ci: "key=ci-key"} {
		if got, gerr := call(who, "k.whoami"); gerr != nil || got != `"`+want+`"` {
			t.Fatalf("%s: %s %v", who, got, gerr)
		}
		names, err := tools(who)
		if err != nil || strings.Join(names, ",") != "only_"+strings.TrimPrefix(want, "key=")+",whoami" && strings.Join(names, ",") != "whoami,only_"+strings.TrimPrefix(want, "key=") {
			t.Fatalf("%s's catalog: %v %v", who, names, err)
		}
	}
	// The connector's health hears its callers' calls.
	if h := g.Health()[0]; h.LastSuccess.IsZero() || h.ConsecutiveFailures != 0 {
		t.Fatalf("health after the callers' calls: %+v", h)
	}
	// laptop's own tool does not exist for ci.
	if _, gerr := call(ci, "k.only_laptop-key"); gerr == nil || gerr.Code != CodeUnknownTool {
		t.Fatalf("ci calling laptop's tool: %v", gerr)
	}
	// Catalogs are stored per (connector, actor), none under the connector alone.
	for _, who := range []actor.ID{laptop, ci} {
		if _, err := st.GetCatalog(context.Background(), store.CatalogKey{Connector: "k", Actor: who.Key()}); err != nil {
			t.Fatalf("no stored catalog for %s: %v", who, err)
		}
	}
	if _, err := st.GetCatalog(context.Background(), store.CatalogKey{Connector: "k"}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a shared catalog was stored for a per-caller connector: %v", err)
	}
	// carol has none: auth_required, recovery credential, for her alone.
	_, gerr := call(nobody, "k.whoami")
	if gerr == nil || gerr.Code != CodeAuthRequired || !strings.Contains(errJSON(t, gerr), `"recovery":"credential"`) || !strings.Contains(gerr.Message, "/me") {
		t.Fatalf("carol: %v", gerr)
	}
	if got, gerr := call(laptop, "k.whoami"); gerr != nil || got != `"key=laptop-key"` {
		t.Fatalf("laptop after carol: %s %v", got, gerr)
	}
	if h := g.Health()[0]; h.ConsecutiveFailures != 0 || h.LastErrorCode != "" {
		t.Fatalf("one caller's auth_required counted against the connector: %+v", h)
	}
	// No actor at all (a health probe): nobody's value is read or sent.
	if _, err := g.Tools(context.Background(), "k"); err == nil {
		t.Fatal("a catalog was listed without an actor")
	}
	if n := creds.anonymous.Load(); n != 0 {
		t.Fatalf("%d credential reads without an actor", n)
	}
	obj, aerr := g.Authorize(context.Background(), "k")
	if b, _ := json.Marshal(obj); aerr != nil || !strings.Contains(string(b), `"recovery":"credential"`) || !strings.Contains(string(b), "--actor") {
		t.Fatalf("authorize: %s %v", b, aerr)
	}
	// Removing ci's value ends ci's calls only.
	creds.set("k", ci, "")
	if _, gerr := call(ci, "k.whoami"); gerr == nil || gerr.Code != CodeAuthRequired {
		t.Fatalf("ci after removal: %v", gerr)
	}
	if got, gerr := call(laptop, "k.whoami"); gerr != nil || got != `"key=laptop-key"` {
		t.Fatalf("laptop after ci's removal: %s %v", got, gerr)
	}
}

// TestPerCaller_IdleChildrenAreEvicted: a per-caller connector keeps at most
// MaxCallerChildren children and closes one idle for CallerChildIdle; a
// child a call holds is never closed under it, and an evicted actor's next
// call works again from the stored catalog (no tools/list), unless a grant
// changed after that copy was stored.
func TestPerCaller_IdleChildrenAreEvicted(t *testing.T) {
	url, lists := keyedDownstream(t)
	creds := &callerCredentials{values: map[string]string{}}
	clk := newClock()
	g, err := New(context.Background(), Options{
		Connectors:  []ConnectorSpec{{ID: "k", URL: url, PerCaller: true, Credential: &CredentialSlot{Header: "X-Key"}}},
		Credentials: creds,
		Store:       store.NewMemory(),
		CallTimeout: 10 * time.Second,
		CatalogTTL:  2 * CallerChildIdle,
		Now:         clk.Now,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	c := g.lookup("k")
	children := func() int {
		c.mu.Lock()
		defer c.mu.Unlock()
		return len(c.callers)
	}
	actorN := func(i int) actor.ID { return actor.OIDCSubject(fmt.Sprintf("sub-%d", i)) }
	ctxOf := func(i int) context.Context { return WithActor(context.Background(), actorN(i)) }

	// The bound: one more actor than MaxCallerChildren evicts the least
	// recently used idle child, and not the one held by a call.
	_, held := c.forCaller(ctxOf(0))
	for i := 1; i <= MaxCallerChildren; i++ {
		clk.Advance(time.Millisecond)
		_, h := c.forCaller(ctxOf(i))
		h.release()
	}
	if n := children(); n != MaxCallerChildren {
		t.Fatalf("%d children, want %d", n, MaxCallerChildren)
	}
	c.mu.Lock()
	_, kept0 := c.callers[actorN(0)]
	_, kept1 := c.callers[actorN(1)]
	c.mu.Unlock()
	if !kept0 || kept1 {
		t.Fatalf("held sub-0 kept %v (want true), least recently used sub-1 kept %v (want false)", kept0, kept1)
	}
	// Idle for CallerChildIdle: closed at the next sweep, except the held one.
	clk.Advance(CallerChildIdle)
	_, h := c.forCaller(ctxOf(0))
	h.release()
	if n := children(); n != 1 {
		t.Fatalf("%d children after the idle period, want the held one", n)
	}
	held.release()

	// An evicted actor comes back through the stored catalog.
	creds.set("k", actorN(5000), "key-5000")
	call := func() *Error {
		scope := g.NewScope()
		defer scope.Close()
		_, gerr := g.Invoke(WithActor(context.Background(), actorN(5000)), scope, CallRequest{Address: "k.whoami", Front: FrontDoorProgram, Source: "execute_code", RequestID: "r"})
		return gerr
	}
	if gerr := call(); gerr != nil {
		t.Fatal(gerr)
	}
	clk.Advance(CallerChildIdle)
	_, h = c.forCaller(ctxOf(1)) // a sweep evicts 5000's child
	h.release()
	c.mu.Lock()
	_, still := c.callers[actorN(5000)]
	c.mu.Unlock()
	if still {
		t.Fatal("sub-5000's idle child was not evicted")
	}
	// Within the TTL the rebuilt child adopts the stored catalog: no
	// tools/list.
	before := lists.Load()
	if gerr := call(); gerr != nil {
		t.Fatal(gerr)
	}
	if n := lists.Load() - before; n != 0 {
		t.Fatalf("the rebuilt child listed %d times; the stored catalog was fresh", n)
	}
	// A grant change after that copy was stored: the rebuilt child lists anew.
	c.mu.Lock()
	evicted := c.evictLocked(clk.Now(), 0)
	c.mu.Unlock()
	for _, cc := range evicted {
		cc.close()
	}
	clk.Advance(time.Millisecond)
	g.InvalidateCatalog("k")
	before = lists.Load()
	if gerr := call(); gerr != nil {
		t.Fatal(gerr)
	}
	if n := lists.Load() - before; n != 1 {
		t.Fatalf("after a grant change the rebuilt child listed %d times, want 1: it adopted a copy stored before the change", n)
	}
}

// TestPerCaller_RefusedWithSharedSession: the gateway refuses a per-caller
// spec that shares one session (config refuses it first, with file:line).
func TestPerCaller_RefusedWithSharedSession(t *testing.T) {
	_, err := New(context.Background(), Options{
		Connectors:  []ConnectorSpec{{ID: "k", URL: "http://127.0.0.1:9/mcp", PerCaller: true, SharedSession: true, Credential: &CredentialSlot{Header: "X-Key"}}},
		Credentials: &callerCredentials{},
	})
	if err == nil || !strings.Contains(err.Error(), "sharedSession") {
		t.Fatalf("New: %v", err)
	}
}

// BenchmarkForCaller is the per-call cost of choosing a per-caller
// connector's child for an actor that already has one.
func BenchmarkForCaller(b *testing.B) {
	g, err := New(context.Background(), Options{
		Connectors:  []ConnectorSpec{{ID: "k", URL: "http://127.0.0.1:9/mcp", PerCaller: true, Credential: &CredentialSlot{Header: "X-Key"}}},
		Credentials: &callerCredentials{values: map[string]string{}},
	})
	if err != nil {
		b.Fatal(err)
	}
	defer g.Close()
	c := g.lookup("k")
	ctxs := make([]context.Context, 1000)
	for i := range ctxs {
		ctxs[i] = WithActor(context.Background(), actor.OIDCSubject(fmt.Sprintf("00u%04dabcd-1234-5678-9abc-def012345678", i))) // a UUID-sized sub
		_, hold := c.forCaller(ctxs[i])
		hold.release()
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		cc, hold := c.forCaller(ctxs[i%len(ctxs)])
		if cc == c {
			b.Fatal("no child")
		}
		hold.release()
	}
}
