// Package childbin carries the slim sandbox child (cmd/sandbox-child) inside
// bin/connecta. `make build` builds the child into this directory
// (sandbox-child and sandbox-child.sha256, generated, never committed) and
// the parent with the build tag slimchild, which embeds both; a build without
// the tag (go build, go run, go install) carries none, and the pool
// re-executes the whole binary instead (docs/DESIGN.md "The sandbox child
// binary").
package childbin

import "strings"

// Binary is the embedded child's bytes; nil in a build without it.
func Binary() []byte { return binary }

// SHA256 is the hex checksum `make build` stamped for Binary when it built
// it; "" in a build without it.
func SHA256() string {
	sum, _, _ := strings.Cut(stamp, " ")
	return strings.TrimSpace(sum)
}
