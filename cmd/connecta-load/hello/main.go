// Command hello is the floor of "a fresh process": a static Go program that
// prints nothing and exits. `make bench` builds it with bin/connecta's flags (bin/hello)
// and spawns it through the supervisor's own spawn path.
package main

func main() {}
