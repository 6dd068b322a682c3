#!/usr/bin/env bash
# steps.sh — run deploy/README.md's steps as written, from the repository
# root, except those that need systemd as PID 1 (systemctl). CI runs them
# literally on a fresh machine (.ci/run). With ROOT=DIR, every path under
# /usr/local, /etc and /var moves under DIR (the installed configuration and unit
# edited to match, as the README's "then edit" would), so the steps can be
# tried on a machine that is not yours to change.
set -euo pipefail
cd "$(dirname "$0")/.."
steps=$(awk '/^```sh$/ { inside = 1; next } /^```$/ { if (inside) exit } inside' deploy/README.md)
[ -n "$steps" ] || { echo "steps.sh: no sh block in deploy/README.md" >&2; exit 1; }
root=${ROOT:-}
if [ -n "$root" ]; then
	# What every machine already has.
	mkdir -p "$root/usr/local/bin" "$root/usr/local/lib" "$root/etc/systemd/system" "$root/var/lib"
	root=$(cd "$root" && pwd)
	export PATH="$root/usr/local/bin:$PATH"
fi
relocate() { sed -E -e "s#(^|[][ =:,])/(usr/local|etc/|var/)#\1$root/\2#g"; }
while IFS= read -r step; do
	[ -n "$step" ] || continue
	case "$step" in
	systemctl*) echo "skipped (needs systemd as PID 1): $step"; continue ;;
	esac
	cmd=$step
	[ -z "$root" ] || cmd=$(printf '%s\n' "$step" | relocate)
	echo "+ $cmd"
	case "$step" in
	"connecta check "* | "connecta doctor "*)
		# The example must pass cleanly: a warning (say, a readOnly name
		# the connector does not list) or a note fails the steps.
		out=$(bash -euo pipefail -c "$cmd" 2>&1) || { printf '%s\n' "$out"; exit 1; }
		printf '%s\n' "$out"
		if printf '%s\n' "$out" | grep -E '^(warning|note):' >/dev/null; then
			echo "steps.sh: '$step' passed with warnings" >&2
			exit 1
		fi ;;
	*) bash -euo pipefail -c "$cmd" ;;
	esac
	if [ -n "$root" ]; then
		case "$step" in
		*"/etc/connecta/connecta.yaml" | *"/etc/systemd/system/connecta.service")
			case "$step" in install*)
				f=${cmd##* }
				relocate < "$f" > "$f.tmp" && mv "$f.tmp" "$f" ;;
			esac ;;
		esac
	fi
done <<< "$steps"
echo "steps.sh: every step that does not need systemd as PID 1 passed"
