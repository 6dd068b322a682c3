package guest_test

import (
	"context"
	"fmt"

	"github.com/connecta-dev/connecta/internal/guest"
	"github.com/connecta-dev/connecta/internal/ipc"
)

// quietHost answers no host calls and ignores the console.
type quietHost struct{}

func (quietHost) Call(_ context.Context, c guest.Call, settle func(guest.Reply)) {
	settle(guest.Reply{Err: "no host functions here"})
}
func (quietHost) Log(guest.LogEntry) {}

// Run one program in process. (In connecta a program always runs in a
// disposable sandbox child: some QuickJS builtins cannot be interrupted, and
// only a process kill stops them.) The engine takes the wire bounds from
// package ipc, their one definition.
func ExampleEngine_Run() {
	ctx := context.Background()
	e, err := guest.NewEngine(ctx, guest.EngineOptions{MaxArgBytes: ipc.MaxPayloadBytes, MaxResultChars: ipc.MaxResultChars})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer e.Close()
	out, err := e.Run(ctx, guest.Program{Code: "async () => [1, 2, 3].map((n) => n * n)"}, quietHost{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(string(out.Value))
	// Output: [1,4,9]
}
