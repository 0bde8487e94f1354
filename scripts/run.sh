#!/usr/bin/env bash
# The main job, in one command: install what is missing, build, and run lesson 1 on a simulated
# GPU: its trace, a Perfetto export, and the lesson in dpscope-viz (on a display) or its handout
# with a screenshot of every chapter (headless, under Xvfb). Everything lands in ./out/lesson-01
# and the paths are printed. Only what lesson 1 needs is installed and built (the test suite,
# MPI and CUDA are scripts/test.sh's); each stage prints one line, its full log goes to
# out/logs/ and is printed only when the stage fails.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${DPSCOPE_OUT:-out}
export DPSCOPE_LOG_DIR="$out/logs"
mkdir -p "$DPSCOPE_LOG_DIR"
started=$SECONDS

# run_stage NAME LOG COMMAND...: one line for the stage, its output in LOG (the tail on failure).
run_stage() {
  local name=$1 log=$2
  shift 2
  local t0=$SECONDS
  printf '== %s ... ' "$name"
  if "$@" >"$log" 2>&1; then
    echo "done ($((SECONDS - t0)) s; log: $log)"
  else
    echo "FAILED"
    tail -n 40 "$log" >&2
    echo "dpscope: error: $name failed (the whole log: $log)" >&2
    exit 1
  fi
}

# The installer prints its own one or two lines (what it installs, how long it took).
scripts/install-deps.sh --lesson
# The CUDA code lengthens the build (docs/gpu.md has the measured time) and is of no use without a
# GPU: only where `nvidia-smi -L` lists one does the quick start build it (scripts/test.sh, what CI
# runs, always does). Said explicitly both ways, since CMake keeps the last choice in its cache.
# The test suite is configured only where GoogleTest is installed (the quick start does not
# install it; scripts/test.sh does), so that build/release keeps its tests on a developer's machine.
tests=OFF
[[ $(dpkg-query -W -f='${Status}' libgtest-dev 2>/dev/null || true) == "install ok installed" ]] && tests=ON
cmake_args=(-DDPSCOPE_BUILD_TESTS=$tests)
if nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
  cmake_args+=(-DDPSCOPE_WITH_CUDA=ON)
  command -v ccache >/dev/null && cmake_args+=(-DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
else
  cmake_args+=(-DDPSCOPE_WITH_CUDA=OFF)
fi
command -v ccache >/dev/null && cmake_args+=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
run_stage "build dpscope and dpscope-viz ($(nproc) cores)" "$DPSCOPE_LOG_DIR/build.log" \
  scripts/build.sh release "${cmake_args[@]}" dpscope_cli dpscope_viz

bin=build/release/bin
lesson_out="$out/lesson-01"
mkdir -p "$lesson_out"
trace="$lesson_out/01-one-gpu.trace.jsonl"

echo
echo "== Lesson 1: one GPU — forward, backward, the optimizer step, memory (simulated H100) =="
if [[ -n "${DISPLAY:-}${WAYLAND_DISPLAY:-}" && -x "$bin/dpscope-viz" ]]; then
  # Runs the scenario, prints the chapters and the answers, and opens dpscope-viz on its trace.
  "$bin/dpscope" lesson run 01 --out "$lesson_out"
  shots=""
else
  # No display: the handout instead: the page with every chapter's narration and answers, and a
  # picture of every chapter drawn by dpscope-viz under Xvfb.
  "$bin/dpscope" lesson handout 01 "$lesson_out"
  shots=$(ls "$lesson_out"/01-one-gpu-chapter-*.png 2>/dev/null | tr '\n' ' ')
fi
run_stage "Perfetto export" "$DPSCOPE_LOG_DIR/export.log" \
  "$bin/dpscope" trace export --chrome "$trace" "$lesson_out/01-one-gpu.perfetto.json"
"$bin/dpscope" trace stats "$trace"

echo
echo "Done in $((SECONDS - started)) s. Files in $lesson_out/:"
echo "  trace:            $trace   (dpscope-viz $trace)"
echo "  Perfetto export:  $lesson_out/01-one-gpu.perfetto.json   (open https://ui.perfetto.dev and drop the file)"
if [[ -n $shots ]]; then
  echo "  handout:          $lesson_out/01-one-gpu.md"
  echo "  screenshots:      $shots"
fi
echo "Next: $bin/dpscope lesson list   (the course: lessons/README.md), e.g. $bin/dpscope lesson run 04 for DDP"
