//go:build !slimchild

package childbin

var binary []byte

const stamp = ""
