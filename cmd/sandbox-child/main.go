// Command sandbox-child is the sandbox child entry as a standalone binary,
// for debugging and fuzzing the child side on its own. The supervisor
// re-executes its own binary (cmd/connecta) in production.
package main

import (
	"fmt"
	"os"

	"github.com/connecta-dev/connecta/sandbox"
)

func main() {
	sandbox.MaybeRunChild()
	fmt.Fprintln(os.Stderr, "sandbox-child: run by the supervisor only (argv carries the child marker)")
	os.Exit(2)
}
