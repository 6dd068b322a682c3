package required

import "testing"

func TestCheck_NamesEveryMissingFieldInOrderThenExtra(t *testing.T) {
	if err := Check("pkg", "Options.", []Field{{false, "A (a.key)"}}); err != nil {
		t.Fatalf("nothing missing: %v", err)
	}
	err := Check("pkg", "Options.", []Field{{true, "A (a.key)"}, {false, "B"}, {true, "C (c.key)"}}, "D (d.key)")
	if want := "pkg: Options.A (a.key), Options.C (c.key), D (d.key) required"; err == nil || err.Error() != want {
		t.Fatalf("got %v, want %q", err, want)
	}
	if err := Check("pkg", "", nil, "E"); err == nil || err.Error() != "pkg: E required" {
		t.Fatalf("extra only: %v", err)
	}
}
