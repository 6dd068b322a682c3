package config

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/connecta-dev/connecta/internal/jstext"
)

// redacted is what every rendering of a Secret shows.
const redacted = "[redacted]"

// Secret is a resolved credential. Printing, formatting, JSON, text and slog
// renderings show "[redacted]"; only Reveal returns the value.
type Secret struct {
	value string
}

// NewSecret wraps a value (for callers that build configuration in code).
func NewSecret(value string) Secret { return Secret{value: value} }

// Reveal returns the secret value. Call it only where the value is used
// (an HTTP header, a child's environment, a constant-time comparison).
func (s Secret) Reveal() string { return s.value }

// IsZero reports whether the secret is empty (e.g. unresolved).
func (s Secret) IsZero() bool { return s.value == "" }

func (Secret) String() string   { return redacted }
func (Secret) GoString() string { return redacted }

// Format covers every verb (%v, %+v, %#v, %s, %q, %x, …).
func (Secret) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, redacted) }

func (Secret) MarshalJSON() ([]byte, error) { return []byte(`"` + redacted + `"`), nil }
func (Secret) MarshalText() ([]byte, error) { return []byte(redacted), nil }
func (Secret) LogValue() slog.Value         { return slog.StringValue(redacted) }

// Resolver says how secret references are resolved. The package itself reads
// no environment: the caller decides what "${env:…}" and "${credential:…}"
// mean (in production: os.LookupEnv and $CREDENTIALS_DIRECTORY).
type Resolver struct {
	// LookupEnv resolves ${env:NAME}; nil means no variable is set.
	LookupEnv func(name string) (string, bool)
	// CredentialsDir is systemd's $CREDENTIALS_DIRECTORY; ${credential:NAME}
	// reads CredentialsDir/NAME. "" means no credentials are available.
	CredentialsDir string
	// ReadFile reads the config file, guideFile and ${file:…}/${credential:…};
	// nil means os.ReadFile.
	ReadFile func(path string) ([]byte, error)
}

// errTooLarge reports a file over its bound.
var errTooLarge = errors.New("file too large")

// readFile reads at most limit bytes of path; a longer file is errTooLarge
// (with os.ReadFile's default, without reading the rest into memory).
func (r Resolver) readFile(path string, limit int64) ([]byte, error) {
	var data []byte
	var err error
	if r.ReadFile != nil {
		data, err = r.ReadFile(path)
	} else {
		data, err = readLimited(path, limit)
	}
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%w: more than %d bytes", errTooLarge, limit)
	}
	return data, nil
}

func readLimited(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, limit+1))
}

// Reference kinds.
const (
	refEnv        = "env"
	refFile       = "file"
	refCredential = "credential"
)

// validEnvName reports ^[A-Za-z_][A-Za-z0-9_]*$.
func validEnvName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || c >= '0' && c <= '9' && i > 0) {
			return false
		}
	}
	return true
}

// segment is a piece of a templated value: literal text or one reference.
type segment struct {
	literal string
	kind    string // "" for literal
	arg     string
	raw     string // the reference as written
}

// parseTemplate splits s into literal text and ${kind:arg} references.
// "$${" is a literal "${". Syntax errors are refusals.
func parseTemplate(s string) ([]segment, error) {
	var segs []segment
	var lit strings.Builder
	for i := 0; i < len(s); {
		if strings.HasPrefix(s[i:], "$${") {
			lit.WriteString("${")
			i += 3
			continue
		}
		if !strings.HasPrefix(s[i:], "${") {
			lit.WriteByte(s[i])
			i++
			continue
		}
		end := strings.IndexByte(s[i:], '}')
		if end < 0 {
			return nil, errors.New(`unterminated secret reference "${" (write "$${" for a literal "${")`)
		}
		raw := s[i : i+end+1]
		body := raw[2 : len(raw)-1]
		kind, arg, ok := strings.Cut(body, ":")
		if !ok {
			return nil, fmt.Errorf("secret reference %s must be ${env:NAME}, ${file:PATH} or ${credential:NAME}", clip(raw))
		}
		switch kind {
		case refEnv:
			if !validEnvName(arg) {
				return nil, fmt.Errorf("secret reference %s: %q is not an environment variable name", clip(raw), clip(arg))
			}
		case refFile:
			if arg == "" {
				return nil, fmt.Errorf("secret reference %s: empty path", clip(raw))
			}
		case refCredential:
			if arg == "" || arg == "." || arg == ".." || strings.ContainsAny(arg, "/\x00") {
				return nil, fmt.Errorf("secret reference %s: %q is not a credential name", clip(raw), clip(arg))
			}
		default:
			return nil, fmt.Errorf("secret reference %s: unknown kind %q (use env, file or credential)", clip(raw), clip(kind))
		}
		if lit.Len() > 0 {
			segs = append(segs, segment{literal: lit.String()})
			lit.Reset()
		}
		segs = append(segs, segment{kind: kind, arg: arg, raw: raw})
		i += end + 1
	}
	if lit.Len() > 0 {
		segs = append(segs, segment{literal: lit.String()})
	}
	return segs, nil
}

// hasReference reports whether a parsed template contains a reference.
func hasReference(segs []segment) bool {
	for _, s := range segs {
		if s.kind != "" {
			return true
		}
	}
	return false
}

// unresolved is one reference that did not resolve.
type unresolved struct {
	raw    string
	reason string
}

// resolve expands every reference of segs. On failure it returns the
// references that did not resolve (and no value).
func (r Resolver) resolve(segs []segment, baseDir string) (string, []unresolved) {
	v, _, missing := r.resolveParts(segs, baseDir)
	return v, missing
}

// resolveParts is resolve that also returns what each reference resolved to
// (the secret values, for redaction).
func (r Resolver) resolveParts(segs []segment, baseDir string) (string, []string, []unresolved) {
	var b strings.Builder
	var missing []unresolved
	var parts []string
	for _, s := range segs {
		if s.kind == "" {
			b.WriteString(s.literal)
			continue
		}
		v, reason := r.resolveOne(s, baseDir)
		if reason != "" {
			missing = append(missing, unresolved{raw: s.raw, reason: reason})
			continue
		}
		b.WriteString(v)
		parts = append(parts, v)
	}
	if missing != nil {
		return "", nil, missing
	}
	return b.String(), parts, nil
}

func (r Resolver) resolveOne(s segment, baseDir string) (value, reason string) {
	switch s.kind {
	case refEnv:
		if r.LookupEnv == nil {
			return "", fmt.Sprintf("environment variable %s is not set", s.arg)
		}
		v, ok := r.LookupEnv(s.arg)
		if !ok {
			return "", fmt.Sprintf("environment variable %s is not set", s.arg)
		}
		if v == "" {
			return "", fmt.Sprintf("environment variable %s is empty", s.arg)
		}
		return v, ""
	case refFile:
		p := s.arg
		if !filepath.IsAbs(p) {
			p = filepath.Join(baseDir, p)
		}
		return r.secretFile(p)
	case refCredential:
		if r.CredentialsDir == "" {
			return "", fmt.Sprintf("credential %s: CREDENTIALS_DIRECTORY is not set (use LoadCredential= in the systemd unit, or --credentials-dir DIR with check and doctor)", s.arg)
		}
		return r.secretFile(filepath.Join(r.CredentialsDir, s.arg))
	}
	return "", "unknown reference kind"
}

// secretFile reads a secret file; trailing line breaks are dropped (files
// written by editors and `echo` end with one).
func (r Resolver) secretFile(path string) (value, reason string) {
	data, err := r.readFile(path, MaxSecretBytes)
	if err != nil {
		return "", fmt.Sprintf("cannot read %s: %s", path, errReason(err))
	}
	v := strings.TrimRight(string(data), "\r\n")
	if v == "" {
		return "", fmt.Sprintf("%s is empty", path)
	}
	if !utf8.ValidString(v) {
		return "", fmt.Sprintf("%s is not valid UTF-8", path)
	}
	return v, ""
}

// errReason describes a file error without repeating the path.
func errReason(err error) string {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// hasControl reports C0 controls (tab allowed) and DEL.
func hasControl(s string) bool {
	for _, c := range s {
		if (c < 0x20 && c != '\t') || c == 0x7f {
			return true
		}
	}
	return false
}

// clip shortens a user-supplied value for a message.
func clip(s string) string { return jstext.Clamp(s, maxShownValueLen) }
