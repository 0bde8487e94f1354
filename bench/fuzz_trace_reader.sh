#!/usr/bin/env bash
# Fuzzes the trace reader (and the Chrome export and stats behind it) only; kept for muscle memory.
#   bench/fuzz_trace_reader.sh [SECONDS=60]      same as: bench/fuzz_all.sh SECONDS trace_reader
set -euo pipefail
exec "$(dirname "$0")/fuzz_all.sh" "${1:-60}" trace_reader
