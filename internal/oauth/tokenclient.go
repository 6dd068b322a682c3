package oauth

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"
)

// Token requests (the code exchange, refresh, revocation) carry the client
// secret, the code and the refresh token to an endpoint the authorization
// server's metadata names. They follow no redirect — a 307 would re-POST the
// form wherever it points — and they dial no loopback, private or reserved
// address unless the connector's own URL is one (a test rig, a private
// deployment): metadata must not turn connecta into a probe of its own
// network. This is the go-sdk's discovery dialer idea (oauthex), applied to
// the requests x/oauth2 and this package make — including the one discovery
// fetch this package makes itself (a 2025-03-26 server's metadata document,
// which the SDK then validates without fetching it again).

// tokenClients are the two clients token requests use, built once.
type tokenClients struct {
	public *http.Client // dials public addresses only
	any    *http.Client // for a connector that is itself on a private address
}

func newTokenClients(base *http.Client) tokenClients {
	noRedirect := func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	rt := base.Transport
	if rt == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.DialContext = nil // ours to set: the default dialer is not a choice of the caller's
		rt = t
	}
	return tokenClients{
		public: &http.Client{Transport: publicOnly(rt), Timeout: base.Timeout, CheckRedirect: noRedirect},
		any:    &http.Client{Transport: rt, Timeout: base.Timeout, CheckRedirect: noRedirect},
	}
}

// publicOnly is rt dialing public addresses only. A transport that dials by
// itself, or goes through a proxy (the check would see the proxy's
// address), is used as it is: its owner has taken over where it connects.
func publicOnly(rt http.RoundTripper) http.RoundTripper {
	t, ok := rt.(*http.Transport)
	if !ok || t.DialContext != nil || t.DialTLSContext != nil || t.Proxy != nil && proxied(t) {
		return rt
	}
	t = t.Clone()
	t.DialContext = (&net.Dialer{
		Timeout:   30 * time.Second,
		KeepAlive: 30 * time.Second,
		Control: func(_, address string, _ syscall.RawConn) error {
			host, _, err := net.SplitHostPort(address)
			if err != nil {
				host = address
			}
			ip, err := netip.ParseAddr(host)
			if err != nil {
				return fmt.Errorf("non-IP address %q: %w", host, err)
			}
			if localAddr(ip) {
				return &localAddrError{addr: ip.String()}
			}
			return nil
		},
	}).DialContext
	return t
}

func proxied(t *http.Transport) bool {
	req, err := http.NewRequest(http.MethodPost, "https://token.example/", nil)
	if err != nil {
		return false
	}
	u, err := t.Proxy(req)
	return err == nil && u != nil
}

// inCGNAT reports 100.64.0.0/10 (RFC 6598), private in all but name; a
// function, not a parsed prefix, so the package does no init work (the
// sandbox child's init budget).
func inCGNAT(ip netip.Addr) bool {
	if !ip.Is4() {
		return false // As4 would panic
	}
	b := ip.As4()
	return b[0] == 100 && b[1]&0xC0 == 64
}

// localAddr is an address that is not on the public internet.
func localAddr(ip netip.Addr) bool {
	ip = ip.Unmap()
	return !ip.IsValid() || ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() ||
		ip.IsLinkLocalMulticast() || ip.IsMulticast() || ip.IsUnspecified() || inCGNAT(ip)
}

// tokenClient is the client for connector id's token requests: the public
// one, unless the connector's own URL names or resolves to a local address.
func (m *Manager) tokenClient(ctx context.Context, id string) *http.Client {
	if c := m.connector(id); c != nil && localTarget(ctx, c.URL) {
		return m.token.any
	}
	return m.token.public
}

// localTarget reports whether rawURL's host is local: localhost, a local
// IP literal, or a name that resolves to one. A name that does not resolve
// is not local (the strict answer).
func localTarget(ctx context.Context, rawURL string) bool {
	u, err := url.Parse(rawURL)
	if err != nil {
		return false
	}
	host := u.Hostname()
	if strings.EqualFold(host, "localhost") || strings.HasSuffix(strings.ToLower(host), ".localhost") {
		return true
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		return localAddr(ip)
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return false
	}
	for _, ip := range ips {
		if localAddr(ip) {
			return true
		}
	}
	return false
}

// localAddrError is a token request refused at the dial: the endpoint is on
// a local address and the connector is not. Not retryable: the metadata
// must change.
type localAddrError struct{ addr string }

func (e *localAddrError) Error() string {
	return "refusing a token request to the loopback, private or reserved address " + e.addr + " (the connector's own URL is public)"
}

// refusedLocal is the *Error for a token request refused by publicOnly
// (err holds a *localAddrError).
func refusedLocal(what, rawURL string, err error) *Error {
	return &Error{Code: CodeAuthRequired, Message: fmt.Sprintf("%s (%s) is on a loopback, private or reserved address while the connector is not, so connecta refused to send it the request", what, origin(rawURL)), err: err}
}
