#!/usr/bin/env bash
# Configures and builds dpscope with a CMake preset (default: release). Usage: scripts/build.sh [PRESET]
set -euo pipefail
cd "$(dirname "$0")/.."
preset=${1:-release}
log=$(mktemp)
if ! cmake --preset "$preset" >"$log" 2>&1; then cat "$log"; exit 1; fi
grep "dpscope: " "$log" || true
rm -f "$log"
cmake --build --preset "$preset" -j "$(nproc)"
