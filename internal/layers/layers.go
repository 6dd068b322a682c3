// Package layers holds the repository's import rules as data, and its test
// holds the code to them: the layers below, top to bottom, say which of our
// packages may import which, and the test reads the real edges from
// `go list -json ./...` and refuses any that breaks a rule. The same test
// generates the package table in docs/DESIGN.md, so the doc shows the
// edges the compiler sees, not the ones someone remembered.
//
// The rules (only non-test imports count; tests may reach further, e.g. a
// contract test drives the real engine):
//
//   - Nothing imports up: a package imports only packages of its own layer
//     or of a lower one. Within a layer the compiler already refuses cycles.
//   - The sandbox side is the child's: sandbox and guest are imported only by
//     the two child entries (cmd/sandbox-child, and cmd/connecta's self-exec
//     fallback for a build without the slim child) and, for guest, by
//     sandbox. Everything the child links stays on that side (ChildSide).
//   - The leaves import nothing of ours.
//
// It imports nothing and exports only the tables.
package layers

// Layer is one layer: its name and the packages in it (paths below the
// module; a path ending in "/..." is that directory and everything below).
type Layer struct {
	Name     string
	Packages []string
}

// Layers are top to bottom. Every package of the module is in exactly one.
var Layers = []Layer{
	{"commands", []string{"cmd/..."}},
	{"test helpers", []string{"test/...", "deploy/container"}}, // deploy/container: the image tests
	{"wiring", []string{"app"}},
	{"front doors", []string{"server", "console"}},
	{"access", []string{"access"}},
	{"guest API, host side", []string{"contract"}},
	{"gateway", []string{"gateway", "gateway/...", "demo"}},
	{"pool", []string{"supervisor"}},
	{"auth and state", []string{"inbound", "accesstoken", "oauth", "oauth/...", "vault", "store", "store/...", "config"}},
	{"child entry", []string{"sandbox"}},
	{"engine and wire", []string{"guest", "ipc", "quickjs.wasm"}},
	{"leaves", []string{"jstext", "actor", "internal/...", "gateway/schemaref", "gateway/rawmcp", "stdioshim", "deploy", "telemetry"}},
}

// ChildOnly are the sandbox side's entry and engine, and who may import them.
var ChildOnly = map[string][]string{
	"sandbox": {"cmd/sandbox-child", "cmd/connecta"},
	"guest":   {"sandbox"},
}

// ChildSide is everything of ours the child links (cmd/sandbox-child's
// deps_test.go holds the rest of its allowlist).
var ChildSide = []string{"sandbox", "guest", "ipc", "internal/caps", "jstext", "quickjs.wasm"}
