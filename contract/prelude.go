package contract

import "strings"

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
//   - locks globalThis.Error to a constructor that decodes only frames
//     bearing the secret and otherwise builds a native Error.
//
// The frame prefix is the argument of the outer arrow function, so no
// reachable function's source text contains the secret, and no raw
// rejection (the only object holding a frame) ever reaches guest code.
const preludeSource = `((prefix) => {
"use strict";
const G = globalThis;
const NativeError = G.Error;
const NativePromise = G.Promise;
const ProxyCtor = G.Proxy;
const apply = G.Reflect.apply;
const construct = G.Reflect.construct;
const ownKeys = G.Reflect.ownKeys;
const defineProperty = G.Object.defineProperty;
const defineProperties = G.Object.defineProperties;
const getOwn = G.Object.getOwnPropertyDescriptor;
const setPrototypeOf = G.Object.setPrototypeOf;
const freeze = G.Object.freeze;
const isArray = G.Array.isArray;
const parse = G.JSON.parse;
const uncurry = G.Function.prototype.bind.bind(G.Function.prototype.call);
const startsWith = uncurry(G.String.prototype.startsWith);
const slice = uncurry(G.String.prototype.slice);
const then = uncurry(NativePromise.prototype.then);
const prefixLength = prefix.length;
const raw = G.connecta;
const HIDDEN = "Host failure could not be decoded.";

const plain = (message) => new NativeError(message);
const rejected = (reason) => new NativePromise((resolve, reject) => { reject(reason); });

const deepFreeze = (value, depth) => {
  if (value === null || typeof value !== "object" || depth > 64) return;
  freeze(value);
  const keys = ownKeys(value);
  for (let i = 0; i < keys.length; i++) {
    const d = getOwn(value, keys[i]);
    if (d !== undefined) deepFreeze(d.value, depth + 1);
  }
};

const own = (object, key) => {
  const d = getOwn(object, key);
  return d === undefined ? undefined : d.value;
};

// typed builds the guest's Error from a frame body, or the hidden error
// when the body is not a well-formed error object.
const typed = (body, newTarget, options) => {
  let details;
  try { details = parse(body); } catch (_) { return plain(HIDDEN); }
  if (details === null || typeof details !== "object" || isArray(details)) return plain(HIDDEN);
  const code = own(details, "code");
  const message = own(details, "message");
  const retryable = own(details, "retryable");
  if (typeof code !== "string" || typeof message !== "string" || typeof retryable !== "boolean") return plain(HIDDEN);
  deepFreeze(details, 0);
  const err = options === undefined
    ? construct(NativeError, [message], newTarget)
    : construct(NativeError, [message, options], newTarget);
  defineProperties(err, {
    __proto__: null,
    code: { __proto__: null, value: code, enumerable: true },
    retryable: { __proto__: null, value: retryable, enumerable: true },
    details: { __proto__: null, value: details, enumerable: true },
  });
  return err;
};

// decode maps one raw rejection reason to what the guest may see.
const decode = (reason) => {
  if (reason === null || typeof reason !== "object") return reason;
  let message;
  try { message = own(reason, "message"); } catch (_) { return reason; }
  if (typeof message !== "string" || !startsWith(message, prefix)) return reason;
  return typed(slice(message, prefixLength), NativeError, undefined);
};

const onRejected = (reason) => { throw decode(reason); };

const wrap = (name) => {
  const fn = raw[name];
  return freeze((...args) => {
    let promise;
    try { promise = apply(fn, raw, args); } catch (e) { return rejected(decode(e)); }
    if (promise === null || typeof promise !== "object") return promise;
    try { defineProperty(promise, "constructor", { __proto__: null, value: undefined }); } catch (_) {}
    return then(promise, undefined, onRejected);
  });
};

const fns = { __proto__: null };
const names = ["search", "describe", "call", "emit"];
for (let i = 0; i < names.length; i++) fns[names[i]] = wrap(names[i]);
const unknown = (name) => freeze((...args) => rejected(plain("Unknown function connecta." + name)));

const namespace = new ProxyCtor(freeze({ __proto__: null }), freeze({
  __proto__: null,
  get: (target, key) => {
    if (typeof key !== "string") return undefined;
    const f = fns[key];
    return f !== undefined ? f : unknown(key);
  },
}));
defineProperty(G, "connecta", { __proto__: null, value: namespace, writable: false, enumerable: false, configurable: false });

const ConnectaError = function Error(message, options) {
  const newTarget = new.target === undefined ? ConnectaError : new.target;
  if (typeof message === "string" && startsWith(message, prefix)) {
    return typed(slice(message, prefixLength), newTarget, options);
  }
  return options === undefined
    ? construct(NativeError, [message], newTarget)
    : construct(NativeError, [message, options], newTarget);
};
defineProperty(ConnectaError, "prototype", { __proto__: null, value: NativeError.prototype, writable: false, enumerable: false, configurable: false });
setPrototypeOf(ConnectaError, NativeError);
freeze(ConnectaError);
defineProperty(G, "Error", { __proto__: null, value: ConnectaError, writable: false, enumerable: false, configurable: false });
})(`

// Prelude returns the trusted prelude for one run, bound to its secret.
func Prelude(secret string) string {
	var b strings.Builder
	b.Grow(len(preludeSource) + 80)
	b.WriteString(preludeSource)
	b.Write(jsString(framePrefix(secret)))
	b.WriteString(");\n")
	return b.String()
}
