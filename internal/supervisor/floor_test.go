package supervisor

import (
	"os/exec"
	"testing"
)

// SpawnFloor runs a program through the real spawn path and reaps it; a
// program that fails is reported, not measured.
func TestSpawnFloor_SpawnsThroughThePoolsPath(t *testing.T) {
	ok, err := exec.LookPath("true")
	if err != nil {
		t.Skip("no true(1)")
	}
	if _, wall, err := SpawnFloor(ok, 3); err != nil || wall <= 0 {
		t.Fatalf("SpawnFloor(true): wall %s, %v", wall, err)
	}
	bad, _ := exec.LookPath("false")
	if bad != "" {
		if _, _, err := SpawnFloor(bad, 1); err == nil {
			t.Fatal("SpawnFloor(false) measured a failing program")
		}
	}
}
