package guest

import (
	"context"
	"sort"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero"

	quickjswasm "github.com/connecta-dev/connecta/internal/quickjs.wasm"
)

// P2, X5: the module can import the shim's bridge and, from WASI, the clock
// plus the stdio functions wasi-libc links in (which answer EBADF). Nothing
// reaches files, the environment, arguments, randomness or the network.
func TestP2_ModuleImportsOnlyBridgeAndClock(t *testing.T) {
	ctx := context.Background()
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter())
	defer rt.Close(ctx)
	cm, err := rt.CompileModule(ctx, quickjswasm.Binary())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range cm.ImportedFunctions() {
		mod, name, _ := f.Import()
		got = append(got, mod+"."+name)
	}
	sort.Strings(got)
	want := "connecta.host_call connecta.host_log connecta.should_interrupt wasi_snapshot_preview1.clock_time_get wasi_snapshot_preview1.fd_close wasi_snapshot_preview1.fd_seek wasi_snapshot_preview1.fd_write"
	if strings.Join(got, " ") != want {
		t.Fatalf("imports %v\nwant %s", got, want)
	}
}
