#!/usr/bin/env bash
# One command (what .ci/run and the README call): install what is missing, build with warnings as
# errors and run the whole test suite (ctest); then the sanitizer runs, each building only the
# targets it needs (docs/reliability.md has the measured time):
#   asan: every runtime suite (tests/runtime/*: core ... trace, train), the hostile-input matrix
#         (tests/cli) and the fuzz corpus replays (tests/fuzz) under AddressSanitizer + UBSan,
#         -fno-sanitize-recover=all: any finding fails;
#   tsan: the comm, parallel and trace suites (rank threads, collectives, DDP, the trace reader's
#         reading and parsing threads) under ThreadSanitizer.
# DPSCOPE_SANITIZERS=0 skips the sanitizer runs (a quick local check).
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
launcher=()       # every preset: C++ through ccache when there is one
cuda_launcher=()  # the ci preset compiles CUDA too (the sanitizer presets do not)
if command -v ccache >/dev/null 2>&1; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  cuda_launcher=(-DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
fi
started=$SECONDS
stage() { echo "== test.sh: $1 ($((SECONDS - started)) s so far)"; }

scripts/install-deps.sh
cmake --preset ci "${launcher[@]}" "${cuda_launcher[@]}"
cmake --build --preset ci -j "$jobs"
stage "ci build done (CUDA compiled where nvcc + NCCL are found; its GPU tests skip without a GPU)"
ctest --preset ci -j "$jobs"
if [[ "${DPSCOPE_SANITIZERS:-1}" == 0 ]]; then
  stage "sanitizer runs skipped (DPSCOPE_SANITIZERS=0)"
  exit 0
fi

# Tests of binaries a sanitizer build does not make show up as <binary>_NOT_BUILT; the examples, the
# layering checks, the Python package's runs of PyTorch and the scripts' own tests (bash and Python;
# the commands they run are the suites' too) gain nothing from a sanitizer. They are left out of
# those runs.
not_built='(_NOT_BUILT$|^example_|^layering_check|^python_|^scripts_)'

stage "asan: runtime suites + hostile-input matrix + fuzz corpus replays"
asan_targets=(dpscope_cli cli_tests fuzz_replay_trace_reader fuzz_replay_io_npy fuzz_replay_io_safetensors
  fuzz_replay_checkpoint_metadata fuzz_replay_lesson_expression fuzz_replay_lesson_file)
for dir in tests/runtime/*/; do
  compgen -G "${dir}*.cpp" >/dev/null && asan_targets+=("$(basename "$dir")_tests")
done
cmake --preset asan "${launcher[@]}" >/dev/null
cmake --build --preset asan -j "$jobs" --target "${asan_targets[@]}"
ctest --preset asan -j "$jobs" -E "$not_built"

stage "tsan: comm + parallel + trace suites"
cmake --preset tsan "${launcher[@]}" >/dev/null
cmake --build --preset tsan -j "$jobs" --target comm_tests parallel_tests trace_tests
ctest --preset tsan -j "$jobs" -E "$not_built|^fuzz_replay_"
stage "done"
