package config

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// auth.oidc and accessTokens decode as docs/DECISIONS.md pins them, and an OIDC-only
// or accessTokens-only deployment may listen beyond loopback.
func TestInboundAuth_Decoded(t *testing.T) {
	cfg, err := Parse("c.yaml", []byte(`listen: 0.0.0.0:8787
publicUrl: https://connecta.example.com/
auth:
  oidc:
    issuer: https://id.example.com
    clientId: connecta-console
    clientSecret: "${env:TRACKER_KEY}"
    callers: {emails: [Alice@Example.com, bob@example.com]}
    operators: {claim: {name: groups, value: connecta-operators}}
accessTokens: {maxActive: 5}
`), testResolver())
	if err != nil {
		t.Fatal(err)
	}
	o := cfg.Auth.OIDC
	want := &OIDC{Issuer: "https://id.example.com", Audience: "https://connecta.example.com/mcp", ClientID: "connecta-console",
		ClientSecret: NewSecret(testSecrets["TRACKER_KEY"]), SessionTTL: 8 * time.Hour,
		Callers:   Rule{Emails: []string{"alice@example.com", "bob@example.com"}},
		Operators: &Rule{Claim: &ClaimRule{Name: "groups", Value: "connecta-operators"}}, Line: o.Line}
	if !reflect.DeepEqual(o, want) || o.ClientSecret.Reveal() != testSecrets["TRACKER_KEY"] {
		t.Errorf("auth.oidc\n got %+v\nwant %+v", o, want)
	}
	if cfg.AccessTokens != (AccessTokens{Enabled: true, MaxActive: 5}) || !cfg.AuthRequired() {
		t.Errorf("accessTokens %+v", cfg.AccessTokens)
	}
	only, err := Parse("c.yaml", []byte("listen: 0.0.0.0:8787\naccessTokens: {}\n"), testResolver())
	if err != nil || only.AccessTokens.MaxActive != DefaultAccessTokensMaxActive {
		t.Fatalf("accessTokens alone beyond loopback: %v %+v", err, only.AccessTokens)
	}
	none, err := Parse("c.yaml", []byte("listen: 127.0.0.1:1\n"), testResolver())
	if err != nil || none.Auth.OIDC != nil || none.AccessTokens.Enabled || none.AuthRequired() {
		t.Fatalf("no inbound auth: %v", err)
	}
	if err := only.SetListen("0.0.0.0:1"); err != nil {
		t.Error(err)
	}
}

func TestInboundAuth_Refusals(t *testing.T) {
	const pub = "publicUrl: https://c.example.com\n"
	for _, tc := range []struct{ src, want string }{
		{"auth: {oidc: {issuer: https://id.example.com, callers: {any: true}}}", "auth.oidc: needs publicUrl"},
		{pub + "auth: {oidc: {issuer: https://id.example.com}}", "auth.oidc.callers: is required"},
		{pub + "auth: {oidc: {callers: {any: true}}}", "auth.oidc.issuer: is required"},
		{pub + "auth: {oidc: {issuer: http://id.example.com, callers: {any: true}}}", "must be https://"},
		{pub + "auth: {oidc: {issuer: https://id.example.com, audience: https://other/mcp, callers: {any: true}}}", "auth.oidc.audience: \"https://other/mcp\" must be {publicUrl}/mcp"},
		{pub + "auth: {oidc: {issuer: https://id.example.com, callers: {any: true}, operators: {any: true}}}", "auth.oidc.operators.any: is for callers only"},
		{pub + "auth: {oidc: {issuer: https://id.example.com, callers: {any: false}}}", "must be true when given"},
		{pub + "auth: {oidc: {issuer: https://id.example.com, callers: {any: true, emails: [a@b]}}}", "needs exactly one of"},
		{pub + "auth: {oidc: {issuer: https://id.example.com, callers: {emails: [nobody]}}}", "is not an email address"},
		{pub + "auth: {oidc: {issuer: https://id.example.com, callers: {claim: {name: groups}}}}", "auth.oidc.callers.claim.value: is required"},
		{pub + "auth: {oidc: {issuer: https://id.example.com, callers: {any: true}, clientId: x, clientSecret: literal}}", "use a secret reference"},
		{pub + "auth: {oidc: {issuer: https://id.example.com, callers: {any: true}, clientSecret: \"${env:TRACKER_KEY}\"}}", "needs clientId"},
		{pub + "auth: {oidc: {issuer: https://id.example.com, callers: {any: true}, sessionTtlMs: 5}}", "auth.oidc.sessionTtlMs: 5 is out of range"},
		{"accessTokens: {maxActive: 0}", "accessTokens.maxActive: 0 is out of range [1, 1000]"},
		{"accessTokens: {max: 3}", "accessTokens.max: unknown key"},
		{"listen: 0.0.0.0:1\n", "no inbound auth is configured"},
	} {
		_, err := Parse("c.yaml", []byte(tc.src), testResolver())
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s:\n got %v\nwant …%s…", tc.src, err, tc.want)
		}
	}
	// A loopback issuer may be http:// (tests, a local provider).
	if _, err := Parse("c.yaml", []byte(pub+"auth: {oidc: {issuer: \"http://127.0.0.1:9\", callers: {any: true}}}"), testResolver()); err != nil {
		t.Error(err)
	}
}
