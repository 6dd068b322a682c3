package config

import (
	"strings"
	"testing"
)

// auth.oidc.scopes defaults to none and takes scope tokens only.
func TestOIDCScopes_DefaultNoneTokensOnly(t *testing.T) {
	base := "publicUrl: https://gw.example.com\nauth:\n  oidc:\n    issuer: https://id.example.com\n    callers: {any: true}\n"
	cfg, err := Parse("c.yaml", []byte(base), testResolver())
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Auth.OIDC.Scopes != nil {
		t.Fatalf("default scopes %v", cfg.Auth.OIDC.Scopes)
	}
	cfg, err = Parse("c.yaml", []byte(base+"    scopes: [mcp, offline_access]\n"), testResolver())
	if err != nil || strings.Join(cfg.Auth.OIDC.Scopes, " ") != "mcp offline_access" {
		t.Fatalf("scopes %v, %v", cfg, err)
	}
	_, err = Parse("c.yaml", []byte(base+"    scopes: [\"two words\"]\n"), testResolver())
	if err == nil || !strings.Contains(err.Error(), "c.yaml:6") || !strings.Contains(err.Error(), "auth.oidc.scopes") || !strings.Contains(err.Error(), "is not a scope token") {
		t.Fatalf("got %v", err)
	}
}
