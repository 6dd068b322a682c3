package testkit

import (
	"os"
	"testing"
)

// Golden fails the test where got differs from the file at path, showing
// both; with update (a test binary's -update flag) it writes got to path
// instead.
func Golden(t testing.TB, path string, got []byte, update bool) {
	t.Helper()
	if update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test with -update)", err)
	}
	if string(got) != string(want) {
		t.Fatalf("%s differs (go test -update rewrites it):\n got:\n%s\nwant:\n%s", path, got, want)
	}
}
