// Package required is the one refusal of options a caller left zero whose
// values configuration owns (package config is the home of their
// defaults): every missing option named with its configuration key, in one
// error. It imports nothing of ours.
package required

import (
	"fmt"
	"strings"
)

// Field is one option: whether it is missing, and its name with its key,
// "Slots (executor.concurrency)". An alias of a plain struct, so a caller's
// table of them reads as rows ({o.Slots <= 0, "Slots (…)"}).
type Field = struct {
	Missing bool
	Name    string
}

// Check is nil when no field is missing, else "pkg: A, B required": the
// missing fields in order, each name after prefix ("Options."), then extra
// (names the caller checked itself) as they are.
func Check(pkg, prefix string, fields []Field, extra ...string) error {
	var missing []string
	for _, f := range fields {
		if f.Missing {
			missing = append(missing, prefix+f.Name)
		}
	}
	missing = append(missing, extra...)
	if len(missing) == 0 {
		return nil
	}
	return fmt.Errorf("%s: %s required", pkg, strings.Join(missing, ", "))
}
