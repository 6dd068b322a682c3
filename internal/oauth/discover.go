package oauth

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2"
)

// maxMetadataBytes bounds a metadata document read here (the SDK's bound).
const maxMetadataBytes = 1 << 20

// discovered is what a flow needs to know about a downstream.
type discovered struct {
	resource string // the resource indicator: the metadata's resource
	asm      *oauthex.AuthServerMeta
	scopes   []string // challenge's, else the metadata's scopes_supported
}

// probeBody is an MCP initialize request: what a client would send first,
// so a protected server answers it with its 401 challenge.
const probeBody = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"connecta","version":"oauth-discovery"}}}`

// discover runs the MCP authorization discovery for c: the unauthenticated
// request's challenge, the protected resource metadata (RFC 9728), the
// authorization server metadata (RFC 8414 / OIDC discovery).
func (m *Manager) discover(ctx context.Context, c *Connector) (*discovered, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.URL, strings.NewReader(probeBody))
	if err != nil {
		return nil, authRequired("connector %q: url %q is not usable: %v", c.ID, origin(c.URL), err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	res, err := m.http.Do(req)
	if err != nil {
		return nil, reachFailed("the downstream", c.URL, err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 64<<10))
	res.Body.Close()
	var challenges []oauthex.Challenge
	if res.StatusCode == http.StatusUnauthorized || res.StatusCode == http.StatusForbidden {
		challenges, _ = oauthex.ParseWWWAuthenticate(res.Header.Values("WWW-Authenticate"))
	}

	prm, legacy, err := m.resourceMetadata(ctx, c.URL, challenges)
	if err != nil {
		return nil, err
	}
	issuer := prm.AuthorizationServers[0]
	var asm *oauthex.AuthServerMeta
	if legacy {
		asm, err = m.legacyAuthServer(ctx, c.ID, issuer)
	} else {
		asm, err = auth.GetAuthServerMetadata(ctx, issuer, m.http)
	}
	if err != nil {
		if uerr := m.unreachable(ctx, "the authorization server", issuer); uerr != nil {
			return nil, uerr
		}
		return nil, authRequired("the authorization server metadata of %s was refused: %s", origin(issuer), clip(err.Error()))
	}
	if asm == nil {
		return nil, authRequired("the authorization server %s publishes no metadata (RFC 8414 or OpenID Connect discovery)", clip(issuer))
	}
	if !slices.Contains(asm.CodeChallengeMethodsSupported, "S256") {
		return nil, authRequired("the authorization server %s does not support PKCE with S256, which connecta requires", clip(asm.Issuer))
	}
	if asm.AuthorizationEndpoint == "" || asm.TokenEndpoint == "" {
		return nil, authRequired("the authorization server %s names no authorization or token endpoint", clip(asm.Issuer))
	}
	d := &discovered{resource: prm.Resource, asm: asm}
	for _, ch := range challenges {
		if ch.Scheme == "bearer" && ch.Params["scope"] != "" {
			d.scopes = strings.Fields(ch.Params["scope"])
			break
		}
	}
	if len(d.scopes) == 0 {
		d.scopes = prm.ScopesSupported
	}
	return d, nil
}

// resourceMetadata tries, in the MCP specification's order, the challenge's
// resource_metadata URL, the path-inserted well-known URL and the root one;
// the SDK checks each document's resource against the one asked for, so a
// document naming another resource is refused. legacy reports a 2025-03-26
// server (no document anywhere, none named): its authorization server is
// the MCP server's origin.
func (m *Manager) resourceMetadata(ctx context.Context, mcpURL string, challenges []oauthex.Challenge) (prm *oauthex.ProtectedResourceMetadata, legacy bool, err error) {
	type candidate struct{ url, resource string }
	var cands []candidate
	named := false // the challenge named a document
	for _, ch := range challenges {
		if u := ch.Params["resource_metadata"]; u != "" {
			cands = append(cands, candidate{u, mcpURL})
			named = true
			break
		}
	}
	if u, err := url.Parse(mcpURL); err == nil {
		wk := *u
		wk.RawQuery, wk.Fragment = "", ""
		wk.Path = "/.well-known/oauth-protected-resource/" + strings.TrimLeft(u.Path, "/")
		cands = append(cands, candidate{wk.String(), mcpURL})
		wk.Path = "/.well-known/oauth-protected-resource"
		cands = append(cands, candidate{wk.String(), u.Scheme + "://" + u.Host})
	}
	var first error
	for _, c := range cands {
		prm, err := oauthex.GetProtectedResourceMetadata(ctx, c.url, c.resource, m.http)
		if err != nil {
			if first == nil {
				first = err
			}
			continue
		}
		if len(prm.AuthorizationServers) == 0 {
			return nil, false, authRequired("the downstream's protected resource metadata names no authorization server")
		}
		return prm, false, nil
	}
	if err := m.unreachable(ctx, "the downstream", mcpURL); err != nil {
		return nil, false, err
	}
	if !named {
		// No challenge named a document and none is at the well-known
		// URLs: a 2025-03-26 server, whose authorization server is at the
		// MCP server's origin (that revision's "authorization base URL").
		if o := origin(mcpURL); o != "" {
			return &oauthex.ProtectedResourceMetadata{Resource: mcpURL, AuthorizationServers: []string{o}}, true, nil
		}
	}
	msg := "the downstream did not answer with usable protected resource metadata (RFC 9728), so it cannot be authorized with OAuth"
	if first != nil {
		msg += ": " + clip(first.Error())
	}
	return nil, false, authRequired("%s", msg)
}

// legacyAuthServer is the authorization server of a 2025-03-26 downstream,
// whose "authorization base URL" is base (the MCP server's origin): the
// RFC 8414 document at base, or, when base publishes none, that revision's
// default endpoints base/authorize, base/token and base/register with PKCE
// S256 (which it requires of every client).
//
// The revision names no issuer, only where the document is, so the
// document's own issuer is taken — on the MCP server's own origin only (a
// server may mount its authorization endpoints under a path); an issuer on
// another origin is refused. The document is fetched once, here; the SDK
// then checks that same document against its issuer as any other (PKCE,
// endpoint schemes), reading it from memory.
func (m *Manager) legacyAuthServer(ctx context.Context, id, base string) (*oauthex.AuthServerMeta, error) {
	metaURL := base + "/.well-known/oauth-authorization-server"
	doc, err := m.fetchDocument(ctx, id, metaURL)
	if err != nil {
		return nil, err
	}
	if doc == nil {
		return &oauthex.AuthServerMeta{
			Issuer: base, AuthorizationEndpoint: base + "/authorize", TokenEndpoint: base + "/token",
			RegistrationEndpoint: base + "/register", ResponseTypesSupported: []string{"code"},
			CodeChallengeMethodsSupported: []string{"S256"},
		}, nil
	}
	var head struct {
		Issuer string `json:"issuer"`
	}
	if err := json.Unmarshal(doc.body, &head); err != nil || head.Issuer == "" {
		return nil, fmt.Errorf("%s is not an authorization server metadata document", metaURL)
	}
	if origin(head.Issuer) != base {
		return nil, fmt.Errorf("the metadata at %s names the issuer %q, which is not on the MCP server's origin", metaURL, clip(head.Issuer))
	}
	return oauthex.GetAuthServerMeta(ctx, metaURL, head.Issuer, &http.Client{Transport: doc})
}

// document is a metadata document fetched once; as a RoundTripper it
// answers a GET of its own URL with the same response, and nothing else,
// so that the SDK validates what was fetched without fetching it again.
type document struct {
	url         string
	contentType string
	body        []byte
}

func (d *document) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodGet || req.URL.String() != d.url {
		return nil, fmt.Errorf("oauth: only %s was fetched, not %s %s", d.url, req.Method, req.URL.Redacted())
	}
	return &http.Response{
		Status: "200 OK", StatusCode: http.StatusOK, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{"Content-Type": {d.contentType}}, Body: io.NopCloser(bytes.NewReader(d.body)),
		ContentLength: int64(len(d.body)), Request: req,
	}, nil
}

// fetchDocument GETs the metadata document at metaURL with the token
// requests' client (no redirects; no local address unless the connector
// is on one): nil when the server answers 4xx (it has none).
func (m *Manager) fetchDocument(ctx context.Context, id, metaURL string) (*document, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, metaURL, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	res, err := m.tokenClient(ctx, id).Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	if res.StatusCode >= 400 && res.StatusCode < 500 {
		return nil, nil
	}
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s answered HTTP %d", metaURL, res.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(res.Body, maxMetadataBytes))
	if err != nil {
		return nil, err
	}
	return &document{url: metaURL, contentType: res.Header.Get("Content-Type"), body: body}, nil
}

// unreachable tells a server that is down from one that answered badly:
// the SDK's discovery errors do not keep their types, so a failed fetch is
// followed by one plain request to the same origin.
func (m *Manager) unreachable(ctx context.Context, what, rawURL string) error {
	o := origin(rawURL)
	if o == "" {
		return nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodHead, o+"/", nil)
	if err != nil {
		return nil
	}
	res, err := m.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return &Error{Code: CodeUnavailable, Host: o, Message: what + " did not answer in time (" + o + ")", err: err}
		}
		return reachFailed(what, rawURL, err)
	}
	res.Body.Close()
	return nil
}

// client is the identity a flow uses at the authorization server.
type client struct {
	Issuer    string           `json:"issuer"`
	Redirect  string           `json:"redirect"`
	ID        string           `json:"clientId"`
	Secret    string           `json:"clientSecret,omitempty"`
	AuthStyle oauth2.AuthStyle `json:"authStyle"`
	Kind      string           `json:"kind"` // configured, metadata_document, registered
}

// identify picks the client identity in the pinned order: the configured
// client, a client ID metadata document (when the server supports them and
// publicUrl is HTTPS, as the document's URL must be), dynamic registration
// (reused from the store while issuer and redirect URI are unchanged).
func (m *Manager) identify(ctx context.Context, c *Connector, asm *oauthex.AuthServerMeta) (*client, error) {
	redirect := m.RedirectURL(c.ID)
	if c.ClientID != "" {
		cl := &client{Issuer: asm.Issuer, Redirect: redirect, ID: c.ClientID, Secret: c.ClientSecret, Kind: "configured", AuthStyle: oauth2.AuthStyleInParams}
		if c.ClientSecret != "" {
			cl.AuthStyle = tokenAuthStyle(asm.TokenEndpointAuthMethodsSupported)
		}
		return cl, nil
	}
	if asm.ClientIDMetadataDocumentSupported && strings.HasPrefix(m.opts.PublicURL, "https://") {
		return &client{Issuer: asm.Issuer, Redirect: redirect, ID: m.ClientMetadataURL(), Kind: "metadata_document", AuthStyle: oauth2.AuthStyleInParams}, nil
	}
	if asm.RegistrationEndpoint == "" {
		return nil, authRequired("the authorization server %s supports neither client ID metadata documents (with an https publicUrl) nor dynamic registration; the operator must register a client and set connectors[%s].oauth.clientId", clip(asm.Issuer), c.ID)
	}
	var prev client
	if ok, err := m.load(ctx, c.ID, "client", &prev); err != nil {
		return nil, err
	} else if ok && prev.Issuer == asm.Issuer && prev.Redirect == redirect && prev.ID != "" {
		return &prev, nil
	}
	reg, err := oauthex.RegisterClient(ctx, asm.RegistrationEndpoint, m.registrationMetadata(redirect), m.http)
	if err != nil {
		var rerr *oauthex.ClientRegistrationError
		if errors.As(err, &rerr) {
			return nil, authRequired("the authorization server refused the dynamic registration: %s", clip(rerr.Error()))
		}
		if uerr := m.unreachable(ctx, "the authorization server", asm.RegistrationEndpoint); uerr != nil {
			return nil, uerr
		}
		return nil, authRequired("the dynamic registration failed: %s", clip(err.Error()))
	}
	cl := &client{Issuer: asm.Issuer, Redirect: redirect, ID: reg.ClientID, Secret: reg.ClientSecret, Kind: "registered",
		AuthStyle: oauth2.AuthStyleInParams}
	if reg.ClientSecret != "" && reg.TokenEndpointAuthMethod == "client_secret_basic" {
		cl.AuthStyle = oauth2.AuthStyleInHeader
	}
	if err := m.save(ctx, c.ID, "client", cl); err != nil {
		return nil, err
	}
	return cl, nil
}

// registrationMetadata is what connecta registers as (RFC 7591): a public
// client using the authorization code with refresh tokens.
func (m *Manager) registrationMetadata(redirect string) *oauthex.ClientRegistrationMetadata {
	return &oauthex.ClientRegistrationMetadata{
		RedirectURIs:            []string{redirect},
		TokenEndpointAuthMethod: "none",
		GrantTypes:              []string{"authorization_code", "refresh_token"},
		ResponseTypes:           []string{"code"},
		ClientName:              ClientName,
		ClientURI:               m.opts.PublicURL,
	}
}

// tokenAuthStyle prefers client_secret_post, then client_secret_basic (the
// OAuth 2.1 order), and lets x/oauth2 detect otherwise.
func tokenAuthStyle(supported []string) oauth2.AuthStyle {
	switch {
	case slices.Contains(supported, "client_secret_post"):
		return oauth2.AuthStyleInParams
	case slices.Contains(supported, "client_secret_basic"):
		return oauth2.AuthStyleInHeader
	default:
		return oauth2.AuthStyleAutoDetect
	}
}
