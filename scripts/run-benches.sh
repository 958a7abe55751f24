#!/usr/bin/env bash
# Runs every built benchmark (executables named bench_* under the build dir) one after another.
set -euo pipefail
build=${1:-build}
found=0
while IFS= read -r b; do
  found=1
  echo "== $(basename "$b")"
  "$b"
done < <(find "$build/bench" -maxdepth 2 -type f -name 'bench_*' -perm -u+x | sort)
[ "$found" = 1 ] || echo "no benchmarks built yet"
