#!/usr/bin/env bash
# derive-wazero.sh OUT: the wazero tree the build uses, derived from the
# pristine release. It downloads github.com/tetratelabs/wazero@$WAZERO_VERSION
# through the Go module proxy, refuses it unless its h1: sum is $WAZERO_SUM,
# copies it without tests, testdata and dot-files (none of them is built),
# and applies third_party/wazero.patch. OUT must not exist.
set -euo pipefail
out=${1:?usage: derive-wazero.sh OUT}
: "${WAZERO_VERSION:?}" "${WAZERO_SUM:?}"
here=$(cd "$(dirname "$0")" && pwd)
[ ! -e "$out" ] || { echo "derive-wazero: $out exists" >&2; exit 1; }

# Outside any module, so no replace directive redirects the download.
json=$(cd / && GOFLAGS=-mod=mod GO111MODULE=on go mod download -json "github.com/tetratelabs/wazero@$WAZERO_VERSION")
dir=$(printf '%s\n' "$json" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
sum=$(printf '%s\n' "$json" | sed -n 's/^[[:space:]]*"Sum": "\(.*\)",$/\1/p')
if [ "$sum" != "$WAZERO_SUM" ]; then
	echo "derive-wazero: wazero $WAZERO_VERSION has sum $sum, the Makefile pins $WAZERO_SUM" >&2
	exit 1
fi
mkdir -p "$out"
(cd "$dir" && find . -type f ! -name '*_test.go' ! -path '*/testdata/*' ! -path './.*' ! -name '.*' -print0 |
	xargs -0 cp --parents -t "$out")
chmod -R u+w "$out"
patch -s -p1 -d "$out" --no-backup-if-mismatch <"$here/wazero.patch"
