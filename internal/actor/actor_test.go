package actor

import (
	"regexp"
	"strings"
	"testing"
)

// The hand-written shape check is the pinned regexp, and every valid actor's
// display form parses back to it (so the display form is one actor).
func TestStaticNameShapeIsThePinnedPattern(t *testing.T) {
	pinned := regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)
	for _, s := range []string{"", "a", "laptop", "ci.runner-1_x", strings.Repeat("a", 64), strings.Repeat("a", 65), "a b", "oidc:x", "token:x", "é", "a\x00", "-", "."} {
		if got, want := staticNameShape(s), pinned.MatchString(s); got != want {
			t.Errorf("%q: shape %v, pattern %v", s, got, want)
		}
	}
	for _, reserved := range []string{"local", "stdio"} {
		if ValidStaticName(reserved) == nil {
			t.Errorf("%q accepted", reserved)
		}
	}
}

func FuzzDisplayFormIsOneActor(f *testing.F) {
	for _, s := range []string{"laptop", "token:abc", "oidc:sub|1", "local", "stdio", "token:", "a:b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, ok := Parse(s)
		if !ok {
			return
		}
		if a.String() != s {
			t.Fatalf("%q parsed to %+v, which reads %q", s, a, a.String())
		}
		b, ok := Parse(a.String())
		if !ok || b != a || b.Key() != a.Key() {
			t.Fatalf("%q: %+v then %+v", s, a, b)
		}
	})
}

// TestFromKeyIsKeysInverse: every actor's storage key reads back as it.
func TestFromKeyIsKeysInverse(t *testing.T) {
	for _, a := range []ID{StaticToken("laptop"), IssuedToken("t1"), OIDCSubject("a:b/c"), LocalUser, StdioClient} {
		if got, ok := FromKey(a.Key()); !ok || got != a {
			t.Fatalf("FromKey(%q) = %v %v, want %v", a.Key(), got, ok, a)
		}
	}
	for _, bad := range []string{"", "static:", "oidc", "nope:x", "local:x"} {
		if _, ok := FromKey(bad); ok {
			t.Fatalf("FromKey(%q) accepted", bad)
		}
	}
}

// FuzzFromKey: a stored key reads back as at most one actor, whose key is
// the input (the vault row names per-caller values by it).
func FuzzFromKey(f *testing.F) {
	for _, s := range []string{"static:laptop", "issued:t1", "oidc:a:b", "local:", "x", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, key string) {
		if a, ok := FromKey(key); ok && a.Key() != key {
			t.Fatalf("FromKey(%q) = %v, whose key is %q", key, a, a.Key())
		}
	})
}
