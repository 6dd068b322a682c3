package main

import (
	"log/slog"
	"strings"

	"github.com/connecta-dev/connecta/internal/app"
)

// reloadSource is where SIGHUP re-reads the configuration from, with the
// command line's overrides.
type reloadSource struct {
	path   string // "" = the embedded default
	listen string // --listen, re-applied so it never reads as a change
	// credentialsDir is --credentials-dir ("" = $CREDENTIALS_DIRECTORY).
	credentialsDir string
	stdio          bool // --stdio: access rules are refused (one caller)
}

// reload applies SIGHUP: re-read and validate the file; an invalid one
// keeps the running configuration and says why. Otherwise auth, connectors,
// execute.* and requests.* take effect for new work at once (work in flight
// finishes on what it started with); other changed keys are logged as
// needing a restart.
func reload(a *app.App, src reloadSource, log *slog.Logger) {
	log.Info("reloading configuration", "file", src.path)
	next, err := loadConfig(src.path, src.credentialsDir)
	if err == nil && src.listen != "" {
		err = next.SetListen(src.listen)
	}
	if err == nil && src.stdio {
		err = stdioAccessRefusal(next)
	}
	if err != nil {
		log.Error("configuration reload refused; the running configuration stays", "reason", refusalText(err))
		return
	}
	for _, w := range next.Warnings() {
		log.Warn("configuration", "warning", w.String())
	}
	a.Reload(next, log)
}

// refusalText is a config refusal on one line (every entry, file:line).
func refusalText(err error) string {
	var b strings.Builder
	printRefusals(&b, err)
	return strings.TrimSpace(strings.ReplaceAll(strings.TrimSpace(b.String()), "\n", "; "))
}
