// Engine setup. The shim calls this function once, with its private bridge,
// in the template instance whose memory every run starts from: it defines
// console and returns the closures the shim keeps. configure(config) then
// runs in each run, before the prelude and the program, to apply the run's
// limits and define the provider globals; dump shapes the result (R2) and
// describe gives an error's text. Everything they use is captured here, so
// later changes to globals or prototypes by the prelude or the program
// cannot reach or redirect them.
(function (bridge) {
	"use strict";
	const call = bridge.call, log = bridge.log, utf8Length = bridge.utf8Length;
	const uncurry = Function.prototype.bind.bind(Function.prototype.call);
	const stringify = JSON.stringify;
	const StringCtor = String;
	const Err = Error;
	const InternalErr = InternalError;
	const TypeErr = TypeError;
	const ProxyCtor = Proxy;
	const freeze = Object.freeze;
	const create = Object.create;
	const defineProperty = Object.defineProperty;
	const getOwnDescriptor = Object.getOwnPropertyDescriptor;
	const promiseReject = Promise.reject.bind(Promise);
	const strSlice = uncurry(String.prototype.slice);
	const charCodeAt = uncurry(String.prototype.charCodeAt);
	const isArray = Array.isArray;
	const mathFloor = Math.floor;

	let limits = {maxResultChars: 24000, maxLogEntries: 0, maxLogEntryChars: 0, maxLogChars: 0};
	const HINT = "filter/map/slice data inside execute_code and return only what you need";

	// A prefix of at most n UTF-16 units that does not end in half a pair.
	function cut(s, n) {
		if (s.length <= n) return s;
		if (n > 0) {
			const c = charCodeAt(s, n - 1);
			if (c >= 0xd800 && c <= 0xdbff) n--;
		}
		return strSlice(s, 0, n < 0 ? 0 : n);
	}

	function messageOf(e) {
		try {
			return describe(e);
		} catch (_) {
			return "";
		}
	}

	// Guest-visible text of a thrown value (docs/sandbox.md §6): error-like
	// values give "<name>: <message>" unless the name is Error; strings are
	// themselves; anything else is its JSON.
	function describe(e) {
		if (typeof e === "string") return e;
		if (e === undefined) return "";
		if (e !== null && (typeof e === "object" || typeof e === "function")) {
			let message;
			try {
				message = e.message;
			} catch (_) {
				message = undefined;
			}
			if (typeof message === "string") {
				let name;
				try {
					name = e.name;
				} catch (_) {
					name = undefined;
				}
				name = typeof name === "string" && name !== "" ? name : "Error";
				const text = name === "Error" ? message : name + ": " + message;
				if (name === "SyntaxError") {
					// The parser's position in the program's own source, for
					// the host to map back to the caller's code; JSON.parse,
					// Function and thrown SyntaxErrors have no such own fileName.
					const file = getOwnDescriptor(e, "fileName");
					if (file && file.value === "<program>") return text + "\n<program>:" + e.lineNumber + ":" + e.columnNumber;
				}
				return text;
			}
		}
		let text;
		try {
			text = stringify(e);
		} catch (_) {
			text = undefined;
		}
		if (text === undefined) {
			try {
				text = StringCtor(e);
			} catch (_) {
				text = "Uncaught exception (its text could not be read)";
			}
		}
		return text;
	}

	// The program's result as R2-bounded JSON text (P3, R2, X9), or
	// undefined when there is none.
	function dump(v) {
		if (v === undefined) return undefined;
		let text;
		try {
			text = stringify(v);
		} catch (e) {
			if (e instanceof InternalErr) throw e; // out of memory, stack overflow
			if (e instanceof TypeErr && e.message === "circular reference") {
				// X9: a cyclic value becomes its string form ("[object Object]").
				let s;
				try {
					s = StringCtor(v);
				} catch (e2) {
					if (e2 instanceof InternalErr) throw e2;
					throw new Err("result is not JSON-serializable: " + messageOf(e2));
				}
				text = stringify(s);
			} else {
				throw new Err("result is not JSON-serializable: " + messageOf(e));
			}
		}
		if (text === undefined) return undefined; // functions, symbols
		const max = limits.maxResultChars;
		if (text.length <= max) return text;
		const total = text.length;
		const envelope = (preview) => stringify({ truncated: true, preview, totalChars: total, hint: HINT });
		let budget = max - envelope("").length;
		for (let i = 0; i < 8 && budget > 0; i++) {
			const out = envelope(cut(text, budget));
			if (out.length <= max) return out;
			budget = mathFloor((budget * max) / out.length) - 8;
		}
		return envelope("");
	}

	// ---- console (R5, X4) ----
	// The markers come from the host (internal/guest/api.go) with the limits.
	let ENTRY_MARKER = "", COUNT_MARKER = "", SIZE_MARKER = "", MAX_WEIGHT = 0;
	// A count or size marker is logged with this bit on its level, so the
	// host tells it from a program's entry with the same text (run.go).
	const MARKER = 8;
	const weight = (s) => utf8Length(stringify(stringify(s)));
	let entries = 0, chars = 0, weightUsed = 0, stopped = false;

	function format(args) {
		let text = "";
		for (let i = 0; i < args.length; i++) {
			const a = args[i];
			let s;
			if (typeof a === "string") {
				s = a;
			} else {
				try {
					s = stringify(a);
				} catch (e) {
					if (e instanceof InternalErr) throw e;
					s = undefined;
				}
				if (s === undefined) s = stringOf(a);
			}
			text = i === 0 ? s : text + " " + s;
			// Bound the work: nothing past the entry cap is ever kept.
			if (text.length > limits.maxLogEntryChars + 1) break;
		}
		return text;
	}

	function stringOf(a) {
		try {
			return StringCtor(a);
		} catch (e) {
			if (e instanceof InternalErr) throw e;
			return "[unprintable value]";
		}
	}

	function capture(level, args) {
		if (stopped) return;
		if (entries >= limits.maxLogEntries) {
			stopped = true;
			log(level | MARKER, COUNT_MARKER);
			return;
		}
		let text = format(args);
		if (text.length > limits.maxLogEntryChars) text = cut(text, limits.maxLogEntryChars) + ENTRY_MARKER;
		const w = weight(text);
		if (chars + text.length > limits.maxLogChars || weightUsed + w > MAX_WEIGHT) {
			stopped = true;
			log(level | MARKER, SIZE_MARKER);
			return;
		}
		entries++;
		chars += text.length;
		weightUsed += w;
		log(level, text);
	}

	const levels = ["log", "info", "warn", "error", "debug"];
	const consoleObject = {};
	for (let i = 0; i < levels.length; i++) {
		const level = i;
		consoleObject[levels[i]] = function (...args) {
			capture(level, args);
		};
	}
	defineProperty(globalThis, "console", { value: consoleObject, writable: true, configurable: true, enumerable: false });

	// ---- providers (X8) ----
	function invoke(provider, fn, args) {
		let json;
		try {
			json = stringify(args);
		} catch (e) {
			if (e instanceof InternalErr) throw e;
			return promiseReject(new Err("Host call arguments are not JSON-serializable: " + messageOf(e)));
		}
		return call(provider, fn, json);
	}

	function configure(config) {
		limits = config.limits;
		ENTRY_MARKER = limits.entryMarker;
		COUNT_MARKER = limits.countMarker;
		SIZE_MARKER = limits.sizeMarker;
		MAX_WEIGHT = limits.maxLogWeight - weight(SIZE_MARKER);
		const providers = config.providers;
		if (!isArray(providers)) throw new TypeErr("providers must be an array");
		for (let p = 0; p < providers.length; p++) {
			const name = providers[p].name;
			const own = create(null);
			const fns = providers[p].functions;
			for (let f = 0; f < fns.length; f++) {
				const index = f;
				own[fns[f]] = (...args) => invoke(p, index, args);
			}
			const unknown = create(null);
			const target = freeze(create(null));
			const handler = freeze({
				get(_, key) {
					if (typeof key !== "string") return undefined;
					const fn = own[key];
					if (fn !== undefined) return fn;
					let u = unknown[key];
					if (u === undefined) {
						const text = "Unknown function " + name + "." + key;
						u = () => promiseReject(new Err(text));
						unknown[key] = u;
					}
					return u;
				},
				set() {
					return false;
				},
				defineProperty() {
					return false;
				},
				deleteProperty() {
					return false;
				},
			});
			defineProperty(globalThis, name, {
				value: new ProxyCtor(target, handler),
				writable: true,
				configurable: true,
				enumerable: false,
			});
		}
	}

	return { configure, dump, describe };
})
