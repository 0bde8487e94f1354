#!/usr/bin/env bash
# Configures and builds dpscope with a CMake preset (default: release), all targets or the ones named.
# Arguments starting with -D go to the configure step (scripts/run.sh passes -DDPSCOPE_WITH_CUDA=OFF
# on a machine without a GPU, and ccache launchers); the others name targets.
# Usage: scripts/build.sh [PRESET] [-DVAR=VALUE...] [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/.."
preset=${1:-release}
shift $(( $# > 0 ? 1 : 0 ))
cmake_args=()
targets=()
for a in "$@"; do
  if [[ $a == -D* ]]; then cmake_args+=("$a"); else targets+=(--target "$a"); fi
done
log=$(mktemp)
if ! cmake --preset "$preset" "${cmake_args[@]}" >"$log" 2>&1; then cat "$log"; exit 1; fi
grep "dpscope: " "$log" || true
rm -f "$log"
cmake --build --preset "$preset" -j "$(nproc)" "${targets[@]}"
