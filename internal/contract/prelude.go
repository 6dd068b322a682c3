package contract

import (
	"strings"

	"github.com/connecta-dev/connecta/internal/jstext"
)

// preludeSource is the trusted prelude (X11, E1, S8). It runs after the
// engine defines the raw `connecta` provider and before the program, and:
//
//   - captures every intrinsic it needs before guest code exists, and calls
//     them only in forms guest tampering cannot reach (uncurried/bound copies,
//     null-prototype descriptors, own `constructor: undefined` on the raw
//     promise so neither `then` nor `await` asks the guest for a species);
//   - takes the raw provider off globalThis and installs a frozen Proxy with
//     the same X8 surface whose four functions turn a rejection that starts
//     with the per-run frame prefix into a thrown Error with enumerable
//     `code`, `retryable` and `details` and the human message;
//   - locks globalThis.Error (non-writable, non-configurable) to a
//     constructor whose prototype is Error.prototype and that always builds
//     a native Error: only the wrappers decode frames, so nothing the guest
//     constructs can be typed.
//
// The frame prefix is the argument of the outer arrow function, so no
// reachable function's source text contains the secret, and no raw
// rejection (the only object holding a frame) ever reaches guest code.
const preludeSource = `((prefix) => {
"use strict";
const G = globalThis, NativeError = G.Error, NativePromise = G.Promise;
const { apply, construct, ownKeys } = G.Reflect;
const { defineProperty, defineProperties, getOwnPropertyDescriptor: getOwn, setPrototypeOf, freeze } = G.Object;
const isArray = G.Array.isArray, parse = G.JSON.parse;
const uncurry = G.Function.prototype.bind.bind(G.Function.prototype.call);
const startsWith = uncurry(G.String.prototype.startsWith), slice = uncurry(G.String.prototype.slice);
const then = uncurry(NativePromise.prototype.then);
const raw = G.connecta, n = prefix.length;
const plain = (m) => new NativeError(m);
const rejected = (e) => new NativePromise((_, reject) => reject(e));
const own = (o, k) => { const d = getOwn(o, k); return d === undefined ? undefined : d.value; };
const deepFreeze = (v, depth) => {
  if (v === null || typeof v !== "object" || depth > 64) return;
  freeze(v);
  const keys = ownKeys(v);
  for (let i = 0; i < keys.length; i++) deepFreeze(own(v, keys[i]), depth + 1);
};
// typed builds the guest's Error from a frame body; anything but a
// well-formed error object is hidden.
const typed = (body) => {
  let d;
  try { d = parse(body); } catch (_) { d = null; }
  const code = d !== null && typeof d === "object" && !isArray(d) ? own(d, "code") : undefined;
  const message = code === undefined ? undefined : own(d, "message"), retryable = code === undefined ? undefined : own(d, "retryable");
  if (typeof code !== "string" || typeof message !== "string" || typeof retryable !== "boolean") return plain("Host failure could not be decoded.");
  deepFreeze(d, 0);
  const err = new NativeError(message);
  defineProperties(err, { __proto__: null,
    code: { __proto__: null, value: code, enumerable: true },
    retryable: { __proto__: null, value: retryable, enumerable: true },
    details: { __proto__: null, value: d, enumerable: true } });
  return err;
};
// decode maps a raw rejection reason to what the guest may see.
const decode = (r) => {
  if (r === null || typeof r !== "object") return r;
  let m;
  try { m = own(r, "message"); } catch (_) { return r; }
  return typeof m === "string" && startsWith(m, prefix) ? typed(slice(m, n)) : r;
};
const onRejected = (r) => { throw decode(r); };
const fns = { __proto__: null };
for (const name of ["search", "describe", "call", "emit"]) {
  const fn = raw[name];
  fns[name] = freeze((...args) => {
    let p;
    try { p = apply(fn, raw, args); } catch (e) { return rejected(decode(e)); }
    if (p === null || typeof p !== "object") return p;
    try { defineProperty(p, "constructor", { __proto__: null, value: undefined }); } catch (_) {}
    return then(p, undefined, onRejected);
  });
}
defineProperty(G, "connecta", { __proto__: null, value: new G.Proxy(freeze({ __proto__: null }), freeze({ __proto__: null,
  get: (_, key) => typeof key !== "string" ? undefined
    : fns[key] || freeze(() => rejected(plain("Unknown function connecta." + key))) })),
  writable: false, enumerable: false, configurable: false });
const ConnectaError = function Error(message, options) {
  return construct(NativeError, options === undefined ? [message] : [message, options], new.target === undefined ? ConnectaError : new.target);
};
defineProperty(ConnectaError, "prototype", { __proto__: null, value: NativeError.prototype, writable: false });
setPrototypeOf(ConnectaError, NativeError);
defineProperty(G, "Error", { __proto__: null, value: freeze(ConnectaError), writable: false, enumerable: false, configurable: false });
})(`

// Prelude returns the trusted prelude for one run, bound to its secret.
func Prelude(secret string) string {
	var b strings.Builder
	b.Grow(len(preludeSource) + 80)
	b.WriteString(preludeSource)
	b.WriteString(jstext.Quote(framePrefix(secret)))
	b.WriteString(");\n")
	return b.String()
}
