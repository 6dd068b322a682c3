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
	{"wiring", []string{"internal/app"}},
	{"front doors", []string{"internal/server", "internal/console"}},
	{"access", []string{"internal/access"}},
	{"guest API, host side", []string{"internal/contract"}},
	{"gateway", []string{"internal/gateway", "internal/gateway/...", "internal/demo"}},
	{"pool", []string{"internal/supervisor"}},
	{"auth and state", []string{"internal/inbound", "internal/accesstoken", "internal/oauth", "internal/oauth/...", "internal/vault", "internal/store", "internal/store/...", "internal/config"}},
	{"child entry", []string{"internal/sandbox"}},
	{"engine and wire", []string{"internal/guest", "internal/ipc", "internal/quickjs.wasm"}},
	{"leaves", []string{"internal/jstext", "internal/actor", "internal/admission", "internal/caps", "internal/childbin", "internal/jcs", "internal/layers", "internal/privdir", "internal/required", "internal/secheader", "internal/gateway/schemaref", "internal/gateway/rawmcp", "internal/stdioshim", "deploy", "internal/telemetry"}},
}

// ChildOnly are the sandbox side's entry and engine, and who may import them.
var ChildOnly = map[string][]string{
	"internal/sandbox": {"cmd/sandbox-child", "cmd/connecta"},
	"internal/guest":   {"internal/sandbox"},
}

// ChildSide is everything of ours the child links (cmd/sandbox-child's
// deps_test.go holds the rest of its allowlist).
var ChildSide = []string{"internal/sandbox", "internal/guest", "internal/ipc", "internal/caps", "internal/jstext", "internal/quickjs.wasm"}
