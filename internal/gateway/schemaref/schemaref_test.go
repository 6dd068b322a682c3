package schemaref

import (
	"slices"
	"testing"
)

func TestResolve_RFC3986AndFragments(t *testing.T) {
	for _, tc := range []struct{ base, ref, uri, frag string }{
		{RootBase, "#/$defs/a", RootBase, "/$defs/a"},
		{RootBase, "#", RootBase, ""},
		{RootBase, "other.json", "https://root.connecta.invalid/other.json", ""},
		{"http://x.invalid/a/b.json", "../c.json#foo", "http://x.invalid/c.json", "foo"},
		{"urn:uuid:deadbeef", "#/$defs/x", "urn:uuid:deadbeef", "/$defs/x"},
		{RootBase, "#/$defs/a%20b", RootBase, "/$defs/a b"},
	} {
		uri, frag, ok := Resolve(tc.base, tc.ref)
		if !ok || uri != tc.uri || frag != tc.frag {
			t.Errorf("Resolve(%q, %q) = %q %q %v, want %q %q", tc.base, tc.ref, uri, frag, ok, tc.uri, tc.frag)
		}
	}
}

func TestTokens_Unescape(t *testing.T) {
	if got := Tokens("/a~1b/c~0d/0"); !slices.Equal(got, []string{"a/b", "c~d", "0"}) {
		t.Fatalf("got %q", got)
	}
	if Tokens("") != nil || !IsPointer("") || !IsPointer("/x") || IsPointer("name") {
		t.Fatal("empty pointer / anchor")
	}
	if Escape("a/b~") != "a~1b~0" {
		t.Fatal("escape")
	}
	for tok, want := range map[string]bool{"0": true, "12": true, "01": false, "": false, "-1": false, "x": false} {
		if _, ok := Index(tok); ok != want {
			t.Errorf("Index(%q) ok = %v", tok, ok)
		}
	}
}

func FuzzResolve(f *testing.F) {
	for _, s := range []string{"#/$defs/a", "other.json#x", "urn:uuid:1#/a", "%zz", "http://[::1]:80/a#/b~1c", ""} {
		f.Add(RootBase, s)
		f.Add("urn:uuid:deadbeef", s)
	}
	f.Fuzz(func(t *testing.T, base, ref string) {
		_, frag, ok := Resolve(base, ref)
		if !ok || !IsPointer(frag) {
			return
		}
		for _, tok := range Tokens(frag) {
			_, _ = Index(tok)
			if got := Tokens("/" + Escape(tok)); len(got) != 1 || got[0] != tok {
				t.Fatalf("token %q does not survive Escape: %q", tok, got)
			}
		}
	})
}
