package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sys/unix"

	"github.com/connecta-dev/connecta/internal/telemetry"
	"go.opentelemetry.io/otel/trace"
)

// DefaultConnectRetry is how long Open keeps retrying an unreachable
// PostgreSQL at boot before refusing (docs/DECISIONS.md, "New configuration keys").
const DefaultConnectRetry = 30 * time.Second

// Options configure Open.
type Options struct {
	// ConnectRetry bounds the boot-time retry of an unreachable PostgreSQL;
	// 0 means DefaultConnectRetry, a negative value means one attempt.
	ConnectRetry time.Duration
	// Logger receives the retries and migration steps; nil discards.
	Logger *slog.Logger
	// Registerer receives the store metrics; nil registers nothing.
	Registerer prometheus.Registerer
	// Now is the clock (tests); nil means time.Now.
	Now func() time.Time
	// Tracer receives a connecta.store span for each operation over
	// StoreSpanThreshold made on behalf of a traced request; nil: none.
	Tracer trace.TracerProvider
}

// ConfigError is a store URL that cannot work; Open returns it before
// touching anything. Its text never contains the URL's password.
type ConfigError struct {
	URL string // redacted
	Msg string
}

func (e *ConfigError) Error() string { return fmt.Sprintf("store.url %q: %s", e.URL, e.Msg) }

// Redact returns rawURL with any password replaced, for messages.
func Redact(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil || u.User == nil {
		if i := strings.Index(rawURL, "@"); i >= 0 && strings.Contains(rawURL, "://") {
			return rawURL[:strings.Index(rawURL, "://")+3] + "…@" + rawURL[i+1:]
		}
		return rawURL
	}
	if _, has := u.User.Password(); has {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	return u.String()
}

// Scheme checks rawURL's form without opening anything and returns the
// backend kind ("memory", "sqlite", "postgres").
func Scheme(rawURL string) (string, error) {
	switch {
	case rawURL == "memory:":
		return "memory", nil
	case strings.HasPrefix(rawURL, "sqlite:"):
		if strings.TrimPrefix(rawURL, "sqlite:") == "" {
			return "", &ConfigError{URL: rawURL, Msg: "sqlite: needs a file path (sqlite:/var/lib/connecta/state.db)"}
		}
		return "sqlite", nil
	case strings.HasPrefix(rawURL, "postgres://"), strings.HasPrefix(rawURL, "postgresql://"):
		if _, err := url.Parse(rawURL); err != nil {
			return "", &ConfigError{URL: Redact(rawURL), Msg: "is not a valid URL"}
		}
		return "postgres", nil
	default:
		return "", &ConfigError{URL: Redact(rawURL), Msg: "unknown scheme: use memory:, sqlite:PATH or postgres://…"}
	}
}

// Verify checks, without opening or creating anything, what can be known of
// rawURL before Open: its form and, for sqlite:, that the file's directory
// exists and is writable and that an existing file is readable and
// writable (connecta check; Open repeats the directory check by writing).
// A problem is a *ConfigError.
func Verify(rawURL string) error {
	kind, err := Scheme(rawURL)
	if err != nil || kind != "sqlite" {
		return err
	}
	path := sqlitePath(rawURL)
	fail := func(format string, a ...any) error { return &ConfigError{URL: rawURL, Msg: fmt.Sprintf(format, a...)} }
	dir := filepath.Dir(path)
	st, err := os.Stat(dir)
	switch {
	case err != nil:
		return fail("directory %s: %v", dir, errors.Unwrap(err))
	case !st.IsDir():
		return fail("%s is not a directory", dir)
	}
	if err := unix.Access(dir, unix.W_OK|unix.X_OK); err != nil {
		return fail("directory %s is not writable: %v", dir, err)
	}
	if st, err := os.Stat(path); err == nil {
		if st.IsDir() {
			return fail("%s is a directory", path)
		}
		if err := unix.Access(path, unix.R_OK|unix.W_OK); err != nil {
			return fail("%s is not writable: %v", path, err)
		}
	}
	return nil
}

func sqlitePath(rawURL string) string {
	return strings.TrimPrefix(strings.TrimPrefix(rawURL, "sqlite:"), "//") // sqlite:///abs/path
}

// Open opens the store rawURL names and brings its schema up to date. An
// unknown scheme or an unwritable SQLite path is a *ConfigError; a schema
// newer than this binary is ErrSchemaTooNew; PostgreSQL unreachable is
// retried with backoff for ConnectRetry, then refused.
func Open(ctx context.Context, rawURL string, opts Options) (Store, error) {
	kind, err := Scheme(rawURL)
	if err != nil {
		return nil, err
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.ConnectRetry == 0 {
		opts.ConnectRetry = DefaultConnectRetry
	}
	m := newMetrics(opts.Registerer)
	if opts.Tracer != nil {
		m.tracer = telemetry.Tracer(opts.Tracer)
	}
	switch kind {
	case "memory":
		return newMemory(opts.Now, m), nil
	case "sqlite":
		path := sqlitePath(rawURL)
		if err := checkWritableDir(path); err != nil {
			return nil, &ConfigError{URL: rawURL, Msg: err.Error()}
		}
		return openSQLite(ctx, path, opts, m)
	default:
		return openPostgres(ctx, rawURL, opts, m)
	}
}

// checkWritableDir refuses early, with a clear message, a path whose
// directory does not exist or cannot be written (SQLite's own error is
// "unable to open database file").
func checkWritableDir(path string) error {
	dir := filepath.Dir(path)
	st, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("directory %s: %w", dir, errors.Unwrap(err))
	}
	if !st.IsDir() {
		return fmt.Errorf("%s is not a directory", dir)
	}
	f, err := os.CreateTemp(dir, ".connecta-write-check-*")
	if err != nil {
		return fmt.Errorf("directory %s is not writable: %v", dir, errors.Unwrap(err))
	}
	name := f.Name()
	_ = f.Close()
	_ = os.Remove(name)
	if st, err := os.Stat(path); err == nil {
		if st.IsDir() {
			return fmt.Errorf("%s is a directory", path)
		}
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			return fmt.Errorf("%s is not writable: %v", path, errors.Unwrap(err))
		}
		_ = f.Close()
	}
	return nil
}
