#!/usr/bin/env bash
# move-internal.sh: move the packages that are not an API under internal/
# (docs/DESIGN.md "What is importable"), rewrite every path that names them,
# regenerate docs/DESIGN.md's import table and build. Re-runnable and
# idempotent: run it again after merging a branch written on the old paths
# and it moves what arrived there; on a moved tree it changes nothing.
# tools/move-internal.go says what it rewrites. -n: list the moves only.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
if [[ -n $(git status --porcelain) ]]; then
	echo "move-internal: warning: the work tree is not clean; the move's changes will mix with yours" >&2
fi
go run tools/move-internal.go "$@"
[[ ${1:-} == -n ]] && exit 0
# the generated import table (and the layer rules' check) on the new paths
go test -count=1 ./internal/layers -update
gofmt -l $(git ls-files -c -o --exclude-standard '*.go' | grep -v '^third_party/') | sed 's/^/gofmt needed: /' >&2
go build ./...
echo "move-internal: done; review git status, then go vet ./... and the tests"
