package guest

import (
	"context"
	"fmt"
	"time"

	"github.com/tetratelabs/wazero/api"
)

// WASI errno values (wasi_snapshot_preview1).
const (
	wasiErrnoSuccess = 0
	wasiErrnoBadf    = 8
	wasiErrnoFault   = 21
	wasiErrnoInval   = 28
)

// WASI clock ids.
const (
	wasiClockRealtime  = 0
	wasiClockMonotonic = 1
)

var (
	i32 = api.ValueTypeI32
	i64 = api.ValueTypeI64
)

// instantiateHostModules defines what the guest can import: the shim's
// bridge ("connecta") and, from WASI, real wall and monotonic clocks only.
// The stdio functions wasi-libc links in answer EBADF; there is no
// filesystem, environment, argument, randomness or network import (P2, X5).
func (e *Engine) instantiateHostModules(ctx context.Context) error {
	_, err := e.rt.NewHostModuleBuilder("connecta").
		NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(func(ctx context.Context, _ api.Module, stack []uint64) {
		if r := runOf(ctx); r != nil {
			r.hostCall(api.DecodeU32(stack[0]), api.DecodeU32(stack[1]), api.DecodeU32(stack[2]),
				api.DecodeU32(stack[3]), api.DecodeU32(stack[4]))
		}
	}), []api.ValueType{i32, i32, i32, i32, i32}, nil).Export("host_call").
		NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(func(ctx context.Context, _ api.Module, stack []uint64) {
		if r := runOf(ctx); r != nil {
			r.hostLog(api.DecodeU32(stack[0]), api.DecodeU32(stack[1]), api.DecodeU32(stack[2]))
		}
	}), []api.ValueType{i32, i32, i32}, nil).Export("host_log").
		NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(func(ctx context.Context, _ api.Module, stack []uint64) {
		stack[0] = 0
		if r := runOf(ctx); r != nil && r.shouldInterrupt() {
			// Trap instead of answering yes: the panic unwinds the whole
			// guest call, so nothing in the guest can catch, swallow or
			// outlive it (run.trap reports r.tripped). QuickJS's own
			// "uncatchable" interrupt is not enough: a failed allocation
			// while it decorates that error (the allocator refuses once
			// tripped) replaces it with a catchable out of memory.
			panic(errInterrupted)
		}
	}), nil, []api.ValueType{i32}).Export("should_interrupt").
		Instantiate(ctx)
	if err != nil {
		return fmt.Errorf("guest: host module: %w", err)
	}

	epoch := e.epoch
	_, err = e.rt.NewHostModuleBuilder("wasi_snapshot_preview1").
		NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(func(_ context.Context, m api.Module, stack []uint64) {
		var now uint64
		switch api.DecodeU32(stack[0]) {
		case wasiClockRealtime:
			now = uint64(time.Now().UnixNano())
		case wasiClockMonotonic:
			now = uint64(time.Since(epoch).Nanoseconds())
		default:
			stack[0] = wasiErrnoInval
			return
		}
		if !m.Memory().WriteUint64Le(api.DecodeU32(stack[2]), now) {
			stack[0] = wasiErrnoFault
			return
		}
		stack[0] = wasiErrnoSuccess
	}), []api.ValueType{i32, i64, i32}, []api.ValueType{i32}).Export("clock_time_get").
		NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(func(_ context.Context, _ api.Module, stack []uint64) {
		stack[0] = wasiErrnoBadf
	}), []api.ValueType{i32, i32, i32, i32}, []api.ValueType{i32}).Export("fd_write").
		NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(func(_ context.Context, _ api.Module, stack []uint64) {
		stack[0] = wasiErrnoBadf
	}), []api.ValueType{i32, i64, i32, i32}, []api.ValueType{i32}).Export("fd_seek").
		NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(func(_ context.Context, _ api.Module, stack []uint64) {
		stack[0] = wasiErrnoBadf
	}), []api.ValueType{i32}, []api.ValueType{i32}).Export("fd_close").
		Instantiate(ctx)
	if err != nil {
		return fmt.Errorf("guest: wasi module: %w", err)
	}
	return nil
}
