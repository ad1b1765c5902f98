#!/usr/bin/env bash
# Regenerates deepcopy code, the typed client and CRD YAML and fails, printing the diff, when
# the result differs from what is in the tree. The tree is left as it was.
set -euo pipefail
cd "$(dirname "$0")/.."

generated() { git ls-files --cached --others --exclude-standard -- 'apis/**/zz_generated.*.go' 'apis/telemetry/client/**' 'deploy/crds/*.yaml'; }

snap=$(mktemp -d)
trap 'rm -rf "$snap"' EXIT
generated | while read -r f; do mkdir -p "$snap/before/$(dirname "$f")"; cp "$f" "$snap/before/$f"; done
mkdir -p "$snap/before"

make --no-print-directory -s generate manifests

mkdir -p "$snap/after"
generated | while read -r f; do mkdir -p "$snap/after/$(dirname "$f")"; cp "$f" "$snap/after/$f"; done

if ! diff -ruN "$snap/before" "$snap/after"; then
	# Put the tree back as it was: drop what generation added, restore the rest.
	(cd "$snap/after" && find . -type f) | while read -r f; do rm -f "$f"; done
	(cd "$snap/before" && find . -type f) | while read -r f; do cp "$snap/before/$f" "$f"; done
	echo >&2
	echo "generated files are stale: run 'make generate manifests' and commit the result" >&2
	exit 1
fi
echo "generated files are up to date"
