package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"github.com/connecta-dev/connecta/internal/actor"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

type fixedCredential struct {
	value string
	err   error
}

func (f fixedCredential) Credential(context.Context, string, actor.ID) (string, error) {
	return f.value, f.err
}

// TestCredentialTransport: the operator-set value is sent in the slot's
// header with its scheme (or as is without one); with none set the request
// goes without it; a store failure is unavailable (component store) and
// sends nothing.
func TestCredentialTransport(t *testing.T) {
	var got http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got = r.Header.Clone() }))
	defer srv.Close()
	send := func(slot CredentialSlot, src CredentialSource) error {
		got = nil
		tr := &credentialTransport{base: http.DefaultTransport, id: "x", slot: slot, src: src}
		req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
		res, err := tr.RoundTrip(req)
		if err == nil {
			res.Body.Close()
		}
		return err
	}
	if err := send(CredentialSlot{Header: "Authorization", Scheme: "Bearer"}, fixedCredential{value: "k1"}); err != nil || got.Get("Authorization") != "Bearer k1" {
		t.Fatalf("bearer: %v %q", err, got.Get("Authorization"))
	}
	if err := send(CredentialSlot{Header: "X-Api-Key"}, fixedCredential{value: "k2"}); err != nil || got.Get("X-Api-Key") != "k2" {
		t.Fatalf("raw: %v %q", err, got.Get("X-Api-Key"))
	}
	if err := send(CredentialSlot{Header: "Authorization", Scheme: "Bearer"}, fixedCredential{err: ErrNoCredential}); err != nil || got.Get("Authorization") != "" {
		t.Fatalf("none set: %v %q", err, got.Get("Authorization"))
	}
	err := send(CredentialSlot{Header: "Authorization"}, fixedCredential{err: errors.New("db down")})
	var f *failure
	if !errors.As(err, &f) || f.code != CodeUnavailable || f.component != "store" || got != nil {
		t.Fatalf("store down: %v (sent: %v)", err, got != nil)
	}
}

// TestCredential_MissingIsOperatorConfig: with the slot empty a catalog
// load fails at once, auth_required with recovery operator_config, and
// authorize_connector names the console page.
func TestCredential_MissingIsOperatorConfig(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Error("a downstream was contacted without a credential")
		w.WriteHeader(http.StatusUnauthorized)
	}))
	defer srv.Close()
	g, err := New(context.Background(), Options{
		Connectors:  []ConnectorSpec{{ID: "keyed", URL: srv.URL + "/mcp", Credential: &CredentialSlot{Label: "API key", Header: "Authorization", Scheme: "Bearer"}}},
		Credentials: fixedCredential{err: ErrNoCredential},
		OperatorURL: "https://c.example/operator/credentials",
	})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	_, terr := g.Tools(context.Background(), "keyed")
	var ge *Error
	if !errors.As(terr, &ge) || ge.Code != CodeAuthRequired || errJSON(t, ge) == "" {
		t.Fatalf("tools: %v", terr)
	}
	if s := errJSON(t, ge); !strings.Contains(s, `"recovery":"operator_config"`) || !strings.Contains(s, "API key") {
		t.Fatalf("error: %s", s)
	}
	obj, aerr := g.Authorize(context.Background(), "keyed")
	if aerr != nil {
		t.Fatal(aerr)
	}
	b, _ := json.Marshal(obj)
	if s := string(b); !strings.Contains(s, `"operatorUrl":"https://c.example/operator/credentials"`) || !strings.Contains(s, `"recovery":"operator_config"`) || !strings.Contains(s, `"label":"API key"`) {
		t.Fatalf("authorize: %s", s)
	}
	if _, err := New(context.Background(), Options{Connectors: []ConnectorSpec{{ID: "k", URL: srv.URL, Credential: &CredentialSlot{Header: "Authorization"}}}}); err == nil {
		t.Fatal("a credential connector without a source was accepted")
	}
}
