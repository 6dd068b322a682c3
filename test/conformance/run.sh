#!/usr/bin/env bash
# test/conformance/run.sh — the official MCP conformance suite's server
# scenarios against a live connecta (bin/connecta, the demo connector, a
# SQLite store in a temporary directory), compared with expected-failures.yaml
# by the suite itself: an unexpected failure or a stale entry fails the run.
# Then every client scenario, one at a time (sse-retry times reconnections),
# with connecta as the client (driver/: connecta built as `connecta serve`
# builds it, the scenario's server as an HTTP connector, authorize_connector
# and a scripted sign-in for the auth/ ones), each compared with the same
# file's client list; a listed name the suite no longer has fails the run.
# Needs node >= 22 and `make conformance-setup`. Without them the run is
# skipped, unless CONNECTA_REQUIRE_CONFORMANCE=1 (CI), when it fails.
set -euo pipefail
cd "$(dirname "$0")"
skip() {
	if [ "${CONNECTA_REQUIRE_CONFORMANCE:-}" = 1 ]; then
		echo "conformance: $1 (CONNECTA_REQUIRE_CONFORMANCE=1)" >&2
		exit 1
	fi
	echo "conformance: SKIPPED: $1" >&2
	exit 0
}
command -v node >/dev/null || skip "node is not installed"
node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 22 ? 0 : 1)' ||
	skip "the suite needs node >= 22; this is node $(node --version)"
[ -x node_modules/.bin/conformance ] || skip "the suite is not installed: run 'make conformance-setup'"
bin=../../bin/connecta
[ -x "$bin" ] || { echo "conformance: $bin is missing: run 'make build'" >&2; exit 1; }
driver=../../bin/conformance-driver
[ -x "$driver" ] || { echo "conformance: $driver is missing: run 'make conformance'" >&2; exit 1; }

tmp=$(mktemp -d)
pid=
trap 'if [ -n "$pid" ]; then kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; fi; rm -rf "$tmp"' EXIT
port=$(node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')
cat >"$tmp/connecta.yaml" <<YAML
listen: 127.0.0.1:$port
store:
  url: "sqlite:$tmp/state.db"
connectors:
  - {id: demo, builtin: demo}
YAML
"$bin" serve --config "$tmp/connecta.yaml" >"$tmp/connecta.log" 2>&1 &
pid=$!
for _ in $(seq 100); do
	node -e 'fetch(process.argv[1]).then(r=>process.exit(r.ok?0:1),()=>process.exit(1))' "http://127.0.0.1:$port/health" && break
	kill -0 "$pid" 2>/dev/null || { cat "$tmp/connecta.log" >&2; echo "conformance: connecta exited" >&2; exit 1; }
	sleep 0.1
done
node_modules/.bin/conformance server --url "http://127.0.0.1:$port/mcp" --suite all \
	--expected-failures expected-failures.yaml -o "$tmp/results"

scenarios=$(node_modules/.bin/conformance list | sed -n '/^Client scenarios/,$p' | sed -n 's/^  - \([^ ]*\).*/\1/p')
[ -n "$scenarios" ] || { echo "conformance: the suite lists no client scenarios" >&2; exit 1; }
node -e '
const listed = require("yaml").parse(require("fs").readFileSync("expected-failures.yaml", "utf8")).client ?? [];
const known = new Set(process.argv[1].split("\n"));
const unknown = listed.filter((s) => !known.has(s));
if (unknown.length) { console.error("conformance: expected-failures.yaml lists unknown client scenarios: " + unknown.join(", ")); process.exit(1); }
' "$scenarios"
failed=
for scenario in $scenarios; do
	log="$tmp/client-${scenario//\//_}.log"
	if node_modules/.bin/conformance client --command "$driver" --scenario "$scenario" \
		--expected-failures expected-failures.yaml -o "$tmp/results" >"$log" 2>&1; then
		if grep -q 'Expected failures (in baseline)' "$log"; then
			echo "client scenario $scenario: fails as listed"
		else
			echo "client scenario $scenario: passes"
		fi
	else
		cat "$log"
		echo "client scenario $scenario: FAILED (unexpected failure or stale expectation)" >&2
		failed="$failed $scenario"
	fi
done
[ -z "$failed" ] || { echo "conformance: client scenarios failed:$failed" >&2; exit 1; }
