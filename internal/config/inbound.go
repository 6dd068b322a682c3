package config

import (
	"net/url"
	"reflect"
	"strings"
	"time"
)

// OIDC is `auth.oidc`: connecta as an OAuth-protected MCP resource whose
// authorization server is an OpenID Connect provider, and the provider the
// console signs operators in with.
type OIDC struct {
	Issuer string // the provider's issuer URL, exactly as its tokens carry it
	// Audience is {publicUrl}/mcp: the resource of the protected resource
	// metadata and the `aud` every access token must carry.
	Audience     string
	ClientID     string // the console's client ("" when no console sign-in)
	ClientSecret Secret // resolved from a secret reference; zero when unset
	SessionTTL   time.Duration
	// Callers: who may call at all (required; {any: true} admits every
	// account of the issuer). Operators: whose access-token claims make them
	// operators (nil: no OIDC caller is one).
	Callers   Rule
	Operators *Rule
	// Scopes (auth.oidc.scopes) are what a client should ask the provider
	// for: scopes_supported in the protected resource metadata and scope=
	// in the 401 challenge; none by default, and then neither is sent.
	Scopes []string
	Line   int
}

// Rule is one `callers` or `operators` rule: exactly one of Any, Emails or
// Claim is set. Emails match the token's `email` only when `email_verified`
// is true; a Claim matches a string claim equal to Value or an array claim
// containing it.
type Rule struct {
	Any    bool
	Emails []string // lower-cased
	Claim  *ClaimRule
}

// ClaimRule names a claim and the value it must hold.
type ClaimRule struct {
	Name, Value string
}

// AccessTokens is `accessTokens`: operator-issued bearer tokens.
type AccessTokens struct {
	Enabled   bool // the key is present
	MaxActive int  // unrevoked tokens at most
}

// Inbound-auth defaults (docs/DECISIONS.md, "New configuration keys").
const (
	DefaultOIDCSessionTTL        = 8 * time.Hour
	DefaultAccessTokensMaxActive = 100
	MaxAccessTokensMaxActive     = 1000
	maxRuleEntries               = 1000
	maxOIDCSessionTTLMs          = 30 * 86_400_000
	minOIDCSessionTTLMs          = 60_000
)

// AuthRequired reports whether any inbound auth is configured: then every
// request needs credentials and the server may listen beyond loopback.
func (c *Config) AuthRequired() bool {
	return len(c.Auth.Tokens) > 0 || c.Auth.OIDC != nil || c.AccessTokens.Enabled
}

// oidc decodes auth.oidc. publicUrl is checked by the caller once the whole
// file is read.
func (d *decoder) oidc(fs *oidcShape, at section[oidcShape], c *Config) {
	n := at.val
	o := &OIDC{SessionTTL: DefaultOIDCSessionTTL, Line: n.Line}
	if s, ok := d.required(n, fs.Issuer, " (the provider's issuer URL)"); ok {
		e := fs.Issuer
		if msg := checkHTTPURL(s); msg != "" {
			d.fail(e.val, e.path, "%s", msg)
		} else if u, _ := url.Parse(s); u.Scheme != "https" && !isLoopbackHost(u.Hostname()) {
			d.fail(e.val, e.path, "%q must be https:// (http:// only for a loopback provider)", clip(s))
		} else {
			o.Issuer = s
		}
	}
	if e := fs.Audience; e.given() {
		if s, ok := d.str(e.val, e.path); ok {
			o.Audience = s // compared with {publicUrl}/mcp in checkOIDC
		}
	}
	o.ClientID = d.clientID(fs.ClientID)
	if segs, ok := d.clientSecretRef(fs.ClientSecret, fs.ClientID); ok {
		e := fs.ClientSecret
		value, missing := d.r.resolve(segs, d.baseDir)
		for _, m := range missing {
			d.fail(e.val, e.path, "cannot resolve %s: %s", m.raw, m.reason)
		}
		if len(missing) == 0 {
			o.ClientSecret = NewSecret(value)
		}
	}
	if e := fs.SessionTTL; e.given() {
		if v, ok := d.integer(e.val, e.path, minOIDCSessionTTLMs, maxOIDCSessionTTLMs); ok {
			o.SessionTTL = time.Duration(v) * time.Millisecond
		}
	}
	if e := fs.Callers; !e.given() {
		d.fail(n, e.path, "is required: who may call connecta ({any: true} admits every account of the issuer; or {emails: [...]}, or {claim: {name, value}})")
	} else if r, ok := d.rule(e, true); ok {
		o.Callers = r
	}
	if e := fs.Operators; e.given() {
		if r, ok := d.rule(e, false); ok {
			o.Operators = &r
		}
	}
	if e := fs.Scopes; e.given() {
		o.Scopes, _ = d.scopeList(e.val, e.path)
	}
	c.Auth.OIDC = o
}

// rule decodes one callers/operators rule.
func (d *decoder) rule(s section[ruleShape], anyAllowed bool) (Rule, bool) {
	fs, ok := s.in(d)
	if !ok {
		return Rule{}, false
	}
	n, path := s.val, s.path
	if e := fs.Any; e.given() && !anyAllowed {
		d.fail(e.key, e.path, "is for callers only: name operators by emails or claim")
		return Rule{}, false
	}
	if givenOf(fs.Emails, fs.Claim.field, fs.Any) != 1 {
		keys := keysOf(reflect.TypeFor[ruleShape]())
		if !anyAllowed {
			keys = keys[:len(keys)-1] // any, the last key, is for callers only
		}
		d.fail(n, path, "needs exactly one of %s", strings.Join(keys, ", "))
		return Rule{}, false
	}
	var r Rule
	if e := fs.Any; e.given() {
		v, ok := d.boolean(e.val, e.path)
		if !ok {
			return r, false
		}
		if !v {
			d.fail(e.val, e.path, "must be true when given (to admit only some accounts use emails or claim)")
			return r, false
		}
		r.Any = true
	}
	if e := fs.Emails; e.given() {
		list, ok := d.strList(e.val, e.path)
		if !ok {
			return r, false
		}
		if len(list) == 0 || len(list) > maxRuleEntries {
			d.fail(e.val, e.path, "must list 1 to %d addresses", maxRuleEntries)
			return r, false
		}
		for _, s := range list {
			at := strings.LastIndexByte(s, '@')
			if at <= 0 || at == len(s)-1 || hasControl(s) || strings.ContainsAny(s, " \t") {
				d.fail(e.val, e.path, "%q is not an email address", clip(s))
				return r, false
			}
			r.Emails = append(r.Emails, strings.ToLower(s))
		}
	}
	if fs.Claim.given() {
		cf, ok := fs.Claim.in(d)
		if !ok {
			return r, false
		}
		var cr ClaimRule
		for _, k := range []struct {
			f   field
			dst *string
		}{{cf.Name, &cr.Name}, {cf.Value, &cr.Value}} {
			ce := k.f
			if !ce.given() {
				d.fail(fs.Claim.val, ce.path, "is required")
				return r, false
			}
			s, ok := d.str(ce.val, ce.path)
			if !ok {
				return r, false
			}
			if s == "" || hasControl(s) {
				d.fail(ce.val, ce.path, "must be a non-empty string")
				return r, false
			}
			*k.dst = s
		}
		r.Claim = &cr
	}
	return r, true
}

// accessTokens decodes `accessTokens: {maxActive}`.
func (d *decoder) accessTokens(s section[accessTokensShape], c *Config) {
	c.AccessTokens = AccessTokens{Enabled: true, MaxActive: DefaultAccessTokensMaxActive}
	if fs, ok := s.in(d); ok {
		d.integers(numField{fs.MaxActive, 1, MaxAccessTokensMaxActive, intInto(&c.AccessTokens.MaxActive)})
	}
}

// checkOIDC applies the rules that need the whole file: auth.oidc requires
// publicUrl, and its audience is {publicUrl}/mcp.
func (d *decoder) checkOIDC(c *Config, at section[oidcShape], fs *oidcShape) {
	o := c.Auth.OIDC
	if o == nil {
		return
	}
	if c.PublicURL == "" {
		d.fail(at.key, at.path, "needs publicUrl: the protected resource is {publicUrl}/mcp, and clients find its metadata there")
		return
	}
	want := strings.TrimRight(c.PublicURL, "/") + "/mcp"
	if o.Audience != "" && o.Audience != want {
		d.fail(at.key, fs.Audience.path, "%q must be {publicUrl}/mcp (%s), the resource clients request tokens for", clip(o.Audience), clip(want))
		return
	}
	o.Audience = want
}

// clientID decodes an OAuth clientId (downstream oauth and auth.oidc alike):
// a plain, non-empty identifier, never a secret reference.
func (d *decoder) clientID(e field) string {
	if !e.given() {
		return ""
	}
	s, ok := d.str(e.val, e.path)
	if !ok {
		return ""
	}
	if s == "" || hasControl(s) || strings.Contains(s, "${") {
		d.fail(e.val, e.path, "must be a plain, non-empty client identifier")
		return ""
	}
	return s
}

// clientSecretRef decodes an OAuth clientSecret up to its resolution, which
// differs by owner (a connector's unresolved reference fails at use, the
// server's refuses to boot): it needs clientId and must be a secret
// reference, never a literal.
func (d *decoder) clientSecretRef(e, clientID field) ([]segment, bool) {
	if !e.given() {
		return nil, false
	}
	if !clientID.given() {
		d.fail(e.key, e.path, "needs clientId")
		return nil, false
	}
	raw, ok := d.str(e.val, e.path)
	if !ok {
		return nil, false
	}
	segs, err := parseTemplate(raw)
	switch {
	case err != nil:
		d.fail(e.val, e.path, "%s", err)
		return nil, false
	case !hasReference(segs):
		d.fail(e.val, e.path, "is a credential: use a secret reference such as \"${credential:NAME}\"")
		return nil, false
	}
	return segs, true
}
