#!/usr/bin/env bash
# derive-wazero.sh OUT: the wazero tree the build uses, derived from the
# pristine release. It downloads github.com/tetratelabs/wazero@$WAZERO_VERSION
# through the Go module proxy, refuses it unless its h1: sum is $WAZERO_SUM,
# copies it without dot-files and without the tests and testdata of the
# packages the patch leaves alone (none of them is built), and applies
# third_party/wazero.patch. OUT must not exist.
#
# The packages in $WAZERO_TESTED (the Makefile's: the ones the patch
# touches, and the file cache its store stands in for) keep their *_test.go
# files, their testdata directories and every file their tests embed, from
# any package (go list names them), so `make test-wazero` runs wazero's own
# tests of the patched code.
set -euo pipefail
out=${1:?usage: derive-wazero.sh OUT}
: "${WAZERO_VERSION:?}" "${WAZERO_SUM:?}" "${WAZERO_TESTED:?}"
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
read -r -a tested <<<"$WAZERO_TESTED"
# the tested packages' directories, then every file their tests embed
# shellcheck disable=SC2016
keep=$(cd "$dir" && GOWORK=off GOFLAGS=-mod=mod go list -test -deps -f '{{if .Module}}{{if eq .Module.Path "github.com/tetratelabs/wazero"}}{{$d := .Dir}}{{range .EmbedFiles}}{{$d}}/{{.}}
{{end}}{{range .TestEmbedFiles}}{{$d}}/{{.}}
{{end}}{{range .XTestEmbedFiles}}{{$d}}/{{.}}
{{end}}{{end}}{{end}}' "${tested[@]}")
dirs=$(cd "$dir" && GOWORK=off GOFLAGS=-mod=mod go list -f '{{.Dir}}' "${tested[@]}")
mkdir -p "$out"
(cd "$dir" && find . -type f ! -name '*_test.go' ! -path '*/testdata/*' ! -path './.*' ! -name '.*' -print0 |
	xargs -0 cp --parents -t "$out")
for d in $dirs; do
	rel=.${d#"$dir"}
	(cd "$dir" && find "$rel" -maxdepth 1 -type f -name '*_test.go' -print0 | xargs -0 -r cp --parents -t "$out")
	[ ! -d "$dir/$rel/testdata" ] || (cd "$dir" && cp -r --parents "$rel/testdata" "$out")
done
printf '%s\n' "$keep" | sed -n "s|^$dir/|./|p" | sort -u | (cd "$dir" && xargs -r cp --parents -t "$out")
chmod -R u+w "$out"
patch -s -p1 -d "$out" --no-backup-if-mismatch <"$here/wazero.patch"
