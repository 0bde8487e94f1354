#!/usr/bin/env bash
# Configures and builds dpscope with a CMake preset (default: release), all targets or the ones named.
# Usage: scripts/build.sh [PRESET] [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/.."
preset=${1:-release}
shift $(( $# > 0 ? 1 : 0 ))
log=$(mktemp)
if ! cmake --preset "$preset" >"$log" 2>&1; then cat "$log"; exit 1; fi
grep "dpscope: " "$log" || true
rm -f "$log"
targets=()
for t in "$@"; do targets+=(--target "$t"); done
cmake --build --preset "$preset" -j "$(nproc)" "${targets[@]}"
