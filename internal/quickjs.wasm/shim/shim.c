/*
 * connecta's QuickJS reactor shim: one JSRuntime + JSContext per wasm
 * instance, driven by the Go package guest.
 *
 * The host runs init and prepare once in a template instance and snapshots
 * its linear memory; each run starts from a copy of that snapshot, then
 * calls setup. (The only wasm global, __stack_pointer, is at its
 * initial value whenever no export is running, so memory is the whole state.)
 *
 * The shim is deliberately small. Policy that is easier to get right in
 * JavaScript (console formatting and caps, provider Proxies, R2 result
 * shaping, error texts) lives in a setup function the host supplies; the
 * shim hands that function a private bridge object and keeps the functions
 * it returns. Nothing here is reachable from guest code except through those
 * closures.
 *
 * Exports (scalars only):
 *   init(heap_limit i64, stack_limit i32) -> i32    0 ok, <0 failure
 *   prepare(src, len) -> i32                        run the setup function
 *   setup(heap_limit i64, stack_limit i32, cfg, cfglen, max_arg_bytes) -> i32
 *                                                   this run's limits and config
 *   prelude(src, len) -> i32                        a status
 *   run(src, len) -> i32                            a status
 *   settle(id, ok, ptr, len) -> i32                 a status
 *   output() -> i64                                 (ptr << 32 | len) of the
 *                                                   last status' text
 *   heap_peak() -> i64                              peak JS heap (bytes)
 *   malloc / free                                   libc, for host buffers
 *
 * Imports (module "connecta"):
 *   host_call(id, provider, fn, args, argslen)      start an async call
 *   host_log(level, ptr, len)                       one captured console entry
 *   should_interrupt() -> i32                       polled by QuickJS
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <malloc.h>

#include "quickjs.h"

/* Defined in quickjs.c but missing from quickjs.h in 2025-04-26. */
JS_BOOL JS_IsUncatchableError(JSContext *ctx, JSValueConst val);
/* Added by quickjs-wasi.patch. */
void JS_SeedRandom(JSContext *ctx, uint64_t seed);

#define IMPORT(name) __attribute__((import_module("connecta"), import_name(name)))
#define EXPORT(name) __attribute__((export_name(name)))

IMPORT("host_call") extern void host_call(uint32_t id, uint32_t provider, uint32_t fn,
                                          const char *args, uint32_t args_len);
IMPORT("host_log") extern void host_log(uint32_t level, const char *text, uint32_t len);
IMPORT("should_interrupt") extern int32_t should_interrupt(void);

/* Statuses shared with guest/abi.go. */
enum {
    ST_PENDING = 0,     /* the program's promise is pending */
    ST_VALUE = 1,       /* done; output = JSON text (R2-bounded) */
    ST_UNDEFINED = 2,   /* done; no result */
    ST_THROWN = 3,      /* output = error text */
    ST_SYNTAX = 4,      /* output = error text */
    ST_OOM = 5,         /* output = error text */
    ST_RESULT = 6,      /* result not JSON-serializable; output = error text */
    ST_INTERRUPTED = 7, /* uncatchable interrupt; the host knows why */
    ST_INTERNAL = 8,    /* shim failure; output = error text */
    ST_OK = 9,          /* setup/prelude succeeded */
};

/* Must match quickjs.c so the memory limit means the same thing. */
#define MALLOC_OVERHEAD 8
/* Head room granted once the program is over, so that describing an
   out-of-memory failure does not itself run out of memory. */
#define REPORT_RESERVE (1u << 20)

static JSRuntime *rt;
static JSContext *ctx;
static size_t heap_limit;
static size_t heap_peak;

static JSMallocState *malloc_state; /* the runtime's, seen by acct_malloc */

static int configured;
/* Closures returned by the setup function. */
static JSValue fn_configure = JS_UNDEFINED; /* (config) -> undefined */
static JSValue fn_dump = JS_UNDEFINED;     /* (value) -> string | undefined, throws */
static JSValue fn_describe = JS_UNDEFINED; /* (error) -> string */

static JSValue program = JS_UNDEFINED; /* the program's promise */
static uint32_t max_arg_bytes;

/* In-flight host calls, indexed by id - 1. ids are never reused. */
typedef struct {
    JSValue resolve, reject;
    int live;
} call_slot;
static call_slot *calls;
static uint32_t ncalls, capcalls;

static char *out_buf;
static uint32_t out_len;

/* ---- memory accounting (same rule as js_def_malloc, plus a peak) ---- */

/* QuickJS polls the interrupt handler every 10,000 interpreter ticks. A loop
   of a few ticks around an expensive builtin ("y".repeat(25e6)) would go
   minutes between polls, so the allocator polls too: at every large
   allocation and every POLL_ALLOC_COUNT small ones. When the host decides
   the run is over, should_interrupt does not return: the host traps the
   whole call (package guest), so nothing here can catch it. Builtins that
   neither allocate nor poll remain: the parent watches the child's CPU for
   those (package supervisor). */
#define POLL_ALLOC_BYTES (64u << 10)
#define POLL_ALLOC_COUNT 4096u
static uint32_t allocs_since_poll;

static int alloc_interrupted(size_t size)
{
    if (size < POLL_ALLOC_BYTES && ++allocs_since_poll < POLL_ALLOC_COUNT)
        return 0;
    allocs_since_poll = 0;
    return should_interrupt();
}

static void note_size(JSMallocState *s)
{
    malloc_state = s;
    if (s->malloc_size > heap_peak)
        heap_peak = s->malloc_size;
}

static void *acct_malloc(JSMallocState *s, size_t size)
{
    if (s->malloc_size + size > s->malloc_limit || alloc_interrupted(size))
        return NULL;
    void *p = malloc(size);
    if (!p)
        return NULL;
    s->malloc_count++;
    s->malloc_size += malloc_usable_size(p) + MALLOC_OVERHEAD;
    note_size(s);
    return p;
}

static void acct_free(JSMallocState *s, void *p)
{
    if (!p)
        return;
    s->malloc_count--;
    s->malloc_size -= malloc_usable_size(p) + MALLOC_OVERHEAD;
    free(p);
}

static void *acct_realloc(JSMallocState *s, void *p, size_t size)
{
    if (!p)
        return size ? acct_malloc(s, size) : NULL;
    size_t old = malloc_usable_size(p);
    if (size == 0) {
        acct_free(s, p);
        return NULL;
    }
    if (s->malloc_size + size - old > s->malloc_limit || alloc_interrupted(size))
        return NULL;
    void *q = realloc(p, size);
    if (!q)
        return NULL;
    s->malloc_size += malloc_usable_size(q) - old;
    note_size(s);
    return q;
}

static size_t acct_usable_size(const void *p)
{
    return malloc_usable_size((void *)p);
}

static const JSMallocFunctions acct_funcs = {
    acct_malloc, acct_free, acct_realloc, acct_usable_size,
};

/* ---- output ---- */

static void set_output(const char *s, size_t len)
{
    free(out_buf);
    out_buf = NULL;
    out_len = 0;
    if (!len)
        return;
    out_buf = malloc(len);
    if (!out_buf)
        return;
    memcpy(out_buf, s, len);
    out_len = (uint32_t)len;
}

static void set_output_cstr(const char *s)
{
    set_output(s, strlen(s));
}

/* Copies a JS string to the output; 0 on failure. */
static int set_output_value(JSValueConst str)
{
    size_t len;
    const char *s = JS_ToCStringLen(ctx, &len, str);
    if (!s)
        return 0;
    set_output(s, len);
    JS_FreeCString(ctx, s);
    return 1;
}

static void clear_exception(void)
{
    JSValue e = JS_GetException(ctx);
    JS_FreeValue(ctx, e);
}

/* ---- error classification ---- */

static int is_oom(JSValueConst e)
{
    if (!JS_IsError(ctx, e))
        return 0;
    JSValue m = JS_GetPropertyStr(ctx, e, "message");
    int r = 0;
    if (JS_IsString(m)) {
        const char *s = JS_ToCString(ctx, m);
        if (s) {
            r = strcmp(s, "out of memory") == 0;
            JS_FreeCString(ctx, s);
        }
    }
    JS_FreeValue(ctx, m);
    if (JS_HasException(ctx))
        clear_exception();
    return r;
}

/* Sets the output to the guest-visible text of `e` and returns a status.
   Consumes e. `kind` is the status for an ordinary exception. */
static int report_error(JSValue e, int kind)
{
    if (JS_IsUncatchableError(ctx, e)) {
        JS_FreeValue(ctx, e);
        set_output(NULL, 0);
        return ST_INTERRUPTED;
    }
    /* The program is over: give the reporting code a little head room. */
    JS_SetMemoryLimit(rt, heap_limit + REPORT_RESERVE);
    if (is_oom(e))
        kind = ST_OOM;
    JSValue text = JS_Call(ctx, fn_describe, JS_UNDEFINED, 1, (JSValueConst *)&e);
    JS_FreeValue(ctx, e);
    if (JS_IsException(text)) {
        JSValue e2 = JS_GetException(ctx);
        int uncatchable = JS_IsUncatchableError(ctx, e2);
        JS_FreeValue(ctx, e2);
        if (uncatchable) {
            set_output(NULL, 0);
            return ST_INTERRUPTED;
        }
        set_output_cstr(kind == ST_OOM ? "InternalError: out of memory"
                                       : "Uncaught exception (its text could not be read)");
        return kind;
    }
    if (!set_output_value(text)) {
        clear_exception();
        set_output_cstr("InternalError: out of memory");
        kind = ST_OOM;
    }
    JS_FreeValue(ctx, text);
    return kind;
}

static int report_exception(int kind)
{
    return report_error(JS_GetException(ctx), kind);
}

/* ---- the job loop ---- */

/* Runs pending jobs until the queue is empty. Returns ST_PENDING, or an
   error status when a job ended with an exception that escapes promises
   (an uncatchable interrupt, or a failure inside the job machinery). */
static int run_jobs(void)
{
    JSContext *c;
    for (;;) {
        int r = JS_ExecutePendingJob(rt, &c);
        if (r == 0)
            return ST_PENDING;
        if (r < 0)
            return report_exception(ST_THROWN);
    }
}

/* Reports the program's state after the job queue drained. */
static int program_state(void)
{
    switch (JS_PromiseState(ctx, program)) {
    case JS_PROMISE_PENDING:
        return ST_PENDING;
    case JS_PROMISE_FULFILLED: {
        JSValue v = JS_PromiseResult(ctx, program);
        JSValue text = JS_Call(ctx, fn_dump, JS_UNDEFINED, 1, (JSValueConst *)&v);
        JS_FreeValue(ctx, v);
        if (JS_IsException(text))
            return report_exception(ST_RESULT);
        if (JS_IsUndefined(text)) {
            set_output(NULL, 0);
            return ST_UNDEFINED;
        }
        int ok = set_output_value(text);
        JS_FreeValue(ctx, text);
        if (!ok)
            return report_exception(ST_RESULT);
        return ST_VALUE;
    }
    case JS_PROMISE_REJECTED:
        return report_error(JS_PromiseResult(ctx, program), ST_THROWN);
    default:
        set_output_cstr("the program did not produce a promise");
        return ST_INTERNAL;
    }
}

static int drive(void)
{
    int st = run_jobs();
    if (st != ST_PENDING)
        return st;
    return program_state();
}

/* ---- the private bridge ---- */

/* A plain Error made from the intrinsic constructor (never globalThis.Error,
   which the prelude may replace), with a non-enumerable message. */
static JSValue new_error(JSContext *c, const char *msg, size_t len)
{
    JSValue err = JS_NewError(c);
    if (JS_IsException(err))
        return err;
    JSValue m = JS_NewStringLen(c, msg, len);
    if (JS_IsException(m)) {
        JS_FreeValue(c, err);
        return m;
    }
    JS_DefinePropertyValueStr(c, err, "message", m, JS_PROP_WRITABLE | JS_PROP_CONFIGURABLE);
    return err;
}

/* bridge.call(providerIndex, fnIndex, argsJSON) -> Promise.
   Arguments over the L6 bound reject here; the host never sees them. */
static JSValue js_bridge_call(JSContext *c, JSValueConst this_val, int argc, JSValueConst *argv)
{
    uint32_t provider, fn;
    if (argc < 3 || JS_ToUint32(c, &provider, argv[0]) || JS_ToUint32(c, &fn, argv[1]))
        return JS_EXCEPTION;
    size_t len;
    const char *args = JS_ToCStringLen(c, &len, argv[2]);
    if (!args)
        return JS_EXCEPTION;

    JSValue funcs[2];
    JSValue promise = JS_NewPromiseCapability(c, funcs);
    if (JS_IsException(promise)) {
        JS_FreeCString(c, args);
        return promise;
    }
    if (len > max_arg_bytes) {
        char msg[160];
        int n = snprintf(msg, sizeof msg,
                         "Host call arguments are %zu UTF-8 bytes, over the %u-byte IPC limit.",
                         len, max_arg_bytes);
        JS_FreeCString(c, args);
        JSValue err = new_error(c, msg, (size_t)n);
        if (JS_IsException(err)) {
            JS_FreeValue(c, promise);
            JS_FreeValue(c, funcs[0]);
            JS_FreeValue(c, funcs[1]);
            return err;
        }
        JSValue r = JS_Call(c, funcs[1], JS_UNDEFINED, 1, (JSValueConst *)&err);
        JS_FreeValue(c, r);
        JS_FreeValue(c, err);
        JS_FreeValue(c, funcs[0]);
        JS_FreeValue(c, funcs[1]);
        return promise;
    }
    if (ncalls == capcalls) {
        uint32_t ncap = capcalls ? capcalls * 2 : 64;
        call_slot *n = js_realloc(c, calls, (size_t)ncap * sizeof(*n));
        if (!n) {
            JS_FreeCString(c, args);
            JS_FreeValue(c, promise);
            JS_FreeValue(c, funcs[0]);
            JS_FreeValue(c, funcs[1]);
            return JS_EXCEPTION;
        }
        calls = n;
        capcalls = ncap;
    }
    uint32_t id = ++ncalls;
    calls[id - 1].resolve = funcs[0];
    calls[id - 1].reject = funcs[1];
    calls[id - 1].live = 1;
    host_call(id, provider, fn, args, (uint32_t)len);
    JS_FreeCString(c, args);
    return promise;
}

/* bridge.log(level, text): one already-capped console entry. */
static JSValue js_bridge_log(JSContext *c, JSValueConst this_val, int argc, JSValueConst *argv)
{
    uint32_t level;
    if (argc < 2 || JS_ToUint32(c, &level, argv[0]))
        return JS_EXCEPTION;
    size_t len;
    const char *s = JS_ToCStringLen(c, &len, argv[1]);
    if (!s)
        return JS_EXCEPTION;
    host_log(level, s, (uint32_t)len);
    JS_FreeCString(c, s);
    return JS_UNDEFINED;
}

/* bridge.utf8Length(text) -> number of UTF-8 bytes. */
static JSValue js_bridge_utf8_length(JSContext *c, JSValueConst this_val, int argc, JSValueConst *argv)
{
    size_t len;
    if (argc < 1)
        return JS_NewInt32(c, 0);
    const char *s = JS_ToCStringLen(c, &len, argv[0]);
    if (!s)
        return JS_EXCEPTION;
    JS_FreeCString(c, s);
    return JS_NewInt64(c, (int64_t)len);
}

/* ---- exports ---- */

static int interrupt_handler(JSRuntime *r, void *opaque)
{
    (void)r;
    (void)opaque;
    return should_interrupt();
}

EXPORT("init") int32_t qjs_init(uint64_t heap, uint32_t stack)
{
    if (rt)
        return -1;
    rt = JS_NewRuntime2(&acct_funcs, NULL);
    if (!rt)
        return -2;
    heap_limit = (size_t)heap;
    JS_SetMemoryLimit(rt, heap_limit);
    JS_SetMaxStackSize(rt, stack);
    JS_SetInterruptHandler(rt, interrupt_handler, NULL);
    ctx = JS_NewContext(rt);
    if (!ctx)
        return -3;
    return 0;
}

/* NUL-terminated copy for JS_Eval; NULL on failure. */
static char *cstring(const char *src, uint32_t len)
{
    char *buf = malloc((size_t)len + 1);
    if (!buf)
        return NULL;
    memcpy(buf, src, len);
    buf[len] = 0;
    return buf;
}

static JSValue eval_source(const char *src, uint32_t len, const char *name, int flags)
{
    char *buf = cstring(src, len);
    if (!buf)
        return JS_ThrowOutOfMemory(ctx);
    JSValue v = JS_Eval(ctx, buf, len, name, flags);
    free(buf);
    return v;
}

static JSValue take_function(JSValueConst obj, const char *name)
{
    JSValue f = JS_GetPropertyStr(ctx, obj, name);
    if (!JS_IsFunction(ctx, f)) {
        JS_FreeValue(ctx, f);
        return JS_UNDEFINED;
    }
    return f;
}

/* prepare(src): src evaluates to the setup function, which is called with
   the private bridge and returns {configure, dump, describe}. Runs once, in
   the template instance the host snapshots. */
EXPORT("prepare") int32_t qjs_prepare(const char *src, uint32_t len)
{
    if (!ctx || !JS_IsUndefined(fn_configure))
        return ST_INTERNAL;
    JS_UpdateStackTop(rt);
    JSValue setup = eval_source(src, len, "<setup>", JS_EVAL_TYPE_GLOBAL | JS_EVAL_FLAG_STRICT);
    if (JS_IsException(setup))
        return report_exception(ST_INTERNAL);
    JSValue bridge = JS_NewObjectProto(ctx, JS_NULL);
    JS_SetPropertyStr(ctx, bridge, "call", JS_NewCFunction(ctx, js_bridge_call, "call", 3));
    JS_SetPropertyStr(ctx, bridge, "log", JS_NewCFunction(ctx, js_bridge_log, "log", 2));
    JS_SetPropertyStr(ctx, bridge, "utf8Length",
                      JS_NewCFunction(ctx, js_bridge_utf8_length, "utf8Length", 1));
    JSValue api = JS_Call(ctx, setup, JS_UNDEFINED, 1, (JSValueConst *)&bridge);
    JS_FreeValue(ctx, setup);
    JS_FreeValue(ctx, bridge);
    if (JS_IsException(api))
        return report_exception(ST_INTERNAL);
    fn_configure = take_function(api, "configure");
    fn_dump = take_function(api, "dump");
    fn_describe = take_function(api, "describe");
    JS_FreeValue(ctx, api);
    if (JS_IsUndefined(fn_configure) || JS_IsUndefined(fn_dump) || JS_IsUndefined(fn_describe)) {
        set_output_cstr("setup did not return configure, dump and describe");
        return ST_INTERNAL;
    }
    int st = run_jobs();
    JS_RunGC(rt);
    return st == ST_PENDING ? ST_OK : st;
}

/* This run's limits, and its Math.random seed (64 bits from the host's
   CSPRNG: the template's sequence must not repeat in every run, and the
   microsecond clock QuickJS seeds from is guessable). */
static void set_limits(uint64_t heap, uint32_t stack, uint64_t seed)
{
    heap_limit = (size_t)heap;
    JS_SetMemoryLimit(rt, heap_limit);
    JS_SetMaxStackSize(rt, stack);
    heap_peak = malloc_state ? malloc_state->malloc_size : 0;
    JS_SeedRandom(ctx, seed);
}

/* setup(heap, stack, cfg, arg_bytes, seed): this run's limits and
   Math.random seed, and its configuration (JSON: providers, console and
   result limits) applied by the configure closure. */
EXPORT("setup") int32_t qjs_setup(uint64_t heap, uint32_t stack, const char *cfg, uint32_t cfglen,
                                  uint32_t arg_bytes, uint64_t seed)
{
    if (JS_IsUndefined(fn_configure) || configured)
        return ST_INTERNAL;
    JS_UpdateStackTop(rt);
    set_limits(heap, stack, seed);
    max_arg_bytes = arg_bytes;
    char *cbuf = cstring(cfg, cfglen);
    JSValue config = cbuf ? JS_ParseJSON(ctx, cbuf, cfglen, "<config>") : JS_ThrowOutOfMemory(ctx);
    free(cbuf);
    if (JS_IsException(config))
        return report_exception(ST_INTERNAL);
    JSValue r = JS_Call(ctx, fn_configure, JS_UNDEFINED, 1, (JSValueConst *)&config);
    JS_FreeValue(ctx, config);
    if (JS_IsException(r))
        return report_exception(ST_INTERNAL);
    JS_FreeValue(ctx, r);
    configured = 1;
    int st = run_jobs();
    return st == ST_PENDING ? ST_OK : st;
}

/* prelude(src): trusted code, run as a global script before the program. */
EXPORT("prelude") int32_t qjs_prelude(const char *src, uint32_t len)
{
    if (!configured)
        return ST_INTERNAL;
    JS_UpdateStackTop(rt);
    JSValue v = eval_source(src, len, "<prelude>", JS_EVAL_TYPE_GLOBAL);
    if (JS_IsException(v))
        return report_exception(ST_THROWN);
    JS_FreeValue(ctx, v);
    int st = run_jobs();
    return st == ST_PENDING ? ST_OK : st;
}

/* run(src): src is an expression-statement whose value is the program's
   async function call (the host normalizes P1); the result is resolved into
   a promise the job loop watches. */
EXPORT("run") int32_t qjs_run(const char *src, uint32_t len)
{
    if (!configured || !JS_IsUndefined(program))
        return ST_INTERNAL;
    JS_UpdateStackTop(rt);
    JSValue fn = eval_source(src, len, "<program>", JS_EVAL_TYPE_GLOBAL | JS_EVAL_FLAG_COMPILE_ONLY);
    if (JS_IsException(fn))
        return report_exception(ST_SYNTAX);
    JSValue funcs[2];
    program = JS_NewPromiseCapability(ctx, funcs);
    if (JS_IsException(program)) {
        program = JS_UNDEFINED;
        JS_FreeValue(ctx, fn);
        return report_exception(ST_THROWN);
    }
    JSValue v = JS_EvalFunction(ctx, fn);
    int ok = !JS_IsException(v);
    if (!ok)
        v = JS_GetException(ctx);
    else if (JS_IsUncatchableError(ctx, v)) /* defensive: never a normal value */
        ok = 0;
    JSValue r = JS_Call(ctx, funcs[ok ? 0 : 1], JS_UNDEFINED, 1, (JSValueConst *)&v);
    JS_FreeValue(ctx, funcs[0]);
    JS_FreeValue(ctx, funcs[1]);
    if (!ok && JS_IsUncatchableError(ctx, v)) {
        JS_FreeValue(ctx, r);
        JS_FreeValue(ctx, v);
        set_output(NULL, 0);
        return ST_INTERRUPTED;
    }
    JS_FreeValue(ctx, v);
    if (JS_IsException(r))
        return report_exception(ST_THROWN);
    JS_FreeValue(ctx, r);
    return drive();
}

/* settle(id, ok, ptr, len): ok=1 resolves call `id` with the JSON value in
   ptr/len (empty = undefined); ok=0 rejects it with new Error(text). */
EXPORT("settle") int32_t qjs_settle(uint32_t id, uint32_t ok, const char *p, uint32_t len)
{
    if (id == 0 || id > ncalls || !calls[id - 1].live || JS_IsUndefined(program)) {
        set_output_cstr("settle of an unknown host call");
        return ST_INTERNAL;
    }
    JS_UpdateStackTop(rt);
    call_slot slot = calls[id - 1];
    calls[id - 1].live = 0;
    calls[id - 1].resolve = JS_UNDEFINED;
    calls[id - 1].reject = JS_UNDEFINED;

    JSValue arg;
    if (ok && len == 0) {
        arg = JS_UNDEFINED;
    } else if (ok) {
        char *buf = cstring(p, len);
        arg = buf ? JS_ParseJSON(ctx, buf, len, "<host>") : JS_ThrowOutOfMemory(ctx);
        free(buf);
        if (JS_IsException(arg)) {
            ok = 0;
            JSValue e = JS_GetException(ctx);
            if (JS_IsUncatchableError(ctx, e)) {
                JS_FreeValue(ctx, e);
                JS_FreeValue(ctx, slot.resolve);
                JS_FreeValue(ctx, slot.reject);
                set_output(NULL, 0);
                return ST_INTERRUPTED;
            }
            JS_FreeValue(ctx, e);
            static const char bad[] = "Invalid host result: not JSON.";
            arg = new_error(ctx, bad, sizeof bad - 1);
        }
    } else {
        arg = new_error(ctx, p, len);
    }
    if (JS_IsException(arg)) {
        JS_FreeValue(ctx, slot.resolve);
        JS_FreeValue(ctx, slot.reject);
        return report_exception(ST_THROWN);
    }
    JSValue r = JS_Call(ctx, ok ? slot.resolve : slot.reject, JS_UNDEFINED, 1, (JSValueConst *)&arg);
    JS_FreeValue(ctx, arg);
    JS_FreeValue(ctx, slot.resolve);
    JS_FreeValue(ctx, slot.reject);
    if (JS_IsException(r))
        return report_exception(ST_THROWN);
    JS_FreeValue(ctx, r);
    return drive();
}

EXPORT("output") uint64_t qjs_output(void)
{
    return ((uint64_t)(uintptr_t)out_buf << 32) | out_len;
}

EXPORT("heap_peak") uint64_t qjs_heap_peak(void)
{
    return heap_peak;
}
