//go:build slimchild

package childbin

import _ "embed"

//go:embed sandbox-child
var binary []byte

// stamp is sha256sum's line for sandbox-child, written by the same make step.
//
//go:embed sandbox-child.sha256
var stamp string
