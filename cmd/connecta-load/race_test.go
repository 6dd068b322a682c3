//go:build race

package main

// raceEnabled: under the race detector the executor's children (this test
// binary, instrumented) run programs far too slowly for a load run.
const raceEnabled = true
