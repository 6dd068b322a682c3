// Command sandbox-child is the production sandbox child: a slim binary that
// links only the sandbox side (sandbox, guest, ipc, jstext, the engine,
// wazero, x/sys, the seccomp library; deps_test.go holds it to that). `make
// build` embeds it in bin/connecta, whose pool executes it from a sealed
// memfd (docs/DESIGN.md "The sandbox child binary"); run on its own it only
// says it is not meant to be.
package main

import (
	"fmt"
	"os"

	"github.com/connecta-dev/connecta/internal/sandbox"
)

func main() {
	sandbox.MaybeRunChild()
	fmt.Fprintln(os.Stderr, "sandbox-child: run by the supervisor only (argv carries the child marker)")
	os.Exit(2)
}
