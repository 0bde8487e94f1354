#!/usr/bin/env bash
# One command: install what is missing, build with warnings as errors, run the whole test suite (ctest).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake --preset ci
cmake --build --preset ci -j "$(nproc)"
ctest --preset ci -j "$(nproc)"
