package gateway

import (
	"encoding/base64"
	"net/http"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"
)

// redactor is the one home of secret redaction: every text a downstream
// writes that connecta passes on — an error the model reads (e.message in a
// program, call_tool's error), a stdio server's stderr tail for the
// operator — goes through Redact, which replaces each secret connecta sends
// that connector with redactedMark. The secrets are the resolved config
// references (headers, env) and every credential-bearing header value
// actually sent (the vault credential, an OAuth access token after each
// refresh), in each form a server may echo: as sent, without its scheme
// ("Bearer "), base64 (standard and URL, padded or not) and, for Basic, the
// decoded "user:secret" and its secret.
type redactor struct {
	mu       sync.Mutex
	fixed    []string // config secrets, never forgotten
	sent     []string // header values seen, newest last, at most maxSentSecrets
	replacer *strings.Replacer
	longest  int // longest form, for the stderr tail's window
}

// maxSentSecrets bounds the header values a connector remembers: an access
// token rotated long ago is no longer in any answer.
const maxSentSecrets = 8

// minSecretBytes: shorter values are not redacted (every "abc" in a message
// would go); no credential is that short.
const minSecretBytes = 4

// redactedMark replaces a secret.
const redactedMark = "[redacted]"

func newRedactor(secrets []string) *redactor {
	r := &redactor{fixed: slices.Clone(secrets)}
	r.rebuildLocked()
	return r
}

// sentHeader is a request header whose value is a credential.
func sentHeader(name string) bool {
	switch http.CanonicalHeaderKey(name) {
	case "Authorization", "Proxy-Authorization", "Cookie":
		return true
	}
	return false
}

// observe remembers credential values as they are sent.
func (r *redactor) observe(values ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	changed := false
	for _, v := range values {
		if len(v) < minSecretBytes || slices.Contains(r.sent, v) || slices.Contains(r.fixed, v) {
			continue
		}
		r.sent = append(r.sent, v)
		if len(r.sent) > maxSentSecrets {
			r.sent = r.sent[1:]
		}
		changed = true
	}
	if changed {
		r.rebuildLocked()
	}
}

func (r *redactor) rebuildLocked() {
	var forms []string
	for _, v := range slices.Concat(r.fixed, r.sent) {
		forms = append(forms, secretForms(v)...)
	}
	slices.SortFunc(forms, func(a, b string) int { return len(b) - len(a) }) // longest first
	forms = slices.Compact(forms)
	r.longest = 0
	args := make([]string, 0, 2*len(forms))
	for _, f := range forms {
		args = append(args, f, redactedMark)
		r.longest = max(r.longest, len(f))
	}
	r.replacer = strings.NewReplacer(args...)
}

// secretForms is v in every form it may come back in.
func secretForms(v string) []string {
	if len(v) < minSecretBytes {
		return nil
	}
	bases := []string{v}
	if scheme, rest, ok := strings.Cut(v, " "); ok && len(rest) >= minSecretBytes && !strings.Contains(scheme, "=") {
		bases = append(bases, rest) // "Bearer t" → t
		v = rest
	}
	// A Basic credential (or a secret that is one, base64): "user:secret".
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding} {
		if raw, err := enc.DecodeString(v); err == nil && utf8.Valid(raw) {
			if _, pass, ok := strings.Cut(string(raw), ":"); ok {
				bases = append(bases, string(raw))
				if len(pass) >= minSecretBytes {
					bases = append(bases, pass)
				}
			}
			break
		}
	}
	var out []string
	for _, b := range bases {
		out = append(out, b)
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
			out = append(out, enc.EncodeToString([]byte(b)))
		}
	}
	return out
}

// Redact replaces every secret form in s.
func (r *redactor) Redact(s string) string {
	r.mu.Lock()
	rep := r.replacer
	r.mu.Unlock()
	return rep.Replace(s)
}

// redactError is e with its message redacted (a copy when it changes).
func (r *redactor) redactError(e *Error) *Error {
	if e == nil || r == nil {
		return e
	}
	if m := r.Redact(e.Message); m != e.Message {
		c := *e
		c.Message = m
		return &c
	}
	return e
}

// observingTransport records the credential headers of every request as it
// leaves for the downstream: it sits below the OAuth and credential
// transports, so it sees the values they set.
type observingTransport struct {
	base http.RoundTripper
	red  *redactor
	also string // the connector's credential header, when it has one
}

func (t *observingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	for name, vs := range req.Header {
		if sentHeader(name) || (t.also != "" && strings.EqualFold(name, t.also)) {
			t.red.observe(vs...)
		}
	}
	return t.base.RoundTrip(req)
}
