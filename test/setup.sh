#!/usr/bin/env bash
# test/setup.sh — install the real parts the test suites drive, once, so that
# `make test` on a fresh machine runs them instead of skipping them:
#   PostgreSQL, Chromium and Prometheus from Debian (when root with apt-get), and the
#   pinned npm packages (server-everything, the TypeScript MCP client,
#   oidc-provider) when node >= 20 is present.
# A part that cannot be installed here is reported; its tests then skip
# visibly (CI sets CONNECTA_REQUIRE_* so that there they fail instead).
set -uo pipefail
cd "$(dirname "$0")/.."

apt_need=()
compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || apt_need+=(postgresql)
command -v chromium >/dev/null || apt_need+=(chromium)
command -v prometheus >/dev/null || apt_need+=(prometheus)
if ((${#apt_need[@]})); then
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
		echo "setup: installing ${apt_need[*]} (apt-get)"
		{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${apt_need[@]}"; } >/dev/null ||
			echo "setup: apt-get could not install ${apt_need[*]}: their tests will skip" >&2
	else
		echo "setup: ${apt_need[*]} missing and not installable here (needs root and apt-get): their tests will skip" >&2
	fi
fi

if ! command -v node >/dev/null || ! node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 20 ? 0 : 1)'; then
	echo "setup: node >= 20 not found: the server-everything, TypeScript-client and OAuth tests will skip" >&2
	exit 0
fi
for dir in test/everything/testdata test/tsclient/testdata test/oidc/testdata; do
	[ -d "$dir/node_modules" ] && continue
	echo "setup: npm ci in $dir"
	npm ci --prefix "$dir" --no-audit --no-fund >/dev/null || echo "setup: npm ci failed in $dir: its tests will skip" >&2
done
exit 0
