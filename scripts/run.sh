#!/usr/bin/env bash
# The main job, in one command: install what is missing, build, train on simulated GPUs with
# tracing on, export the trace for Perfetto, and show it in dpscope-viz (on a display) or render
# screenshots of it (headless, under Xvfb). Everything lands in ./out and the paths are printed.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
# The CUDA code lengthens the build (docs/gpu.md has the measured time) and is of no use without a
# GPU: only where `nvidia-smi -L` lists one does the quick start build it (scripts/test.sh, what CI
# runs, always does). Said explicitly both ways, since CMake keeps the last choice in its cache.
cmake_args=()
if nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
  cmake_args+=(-DDPSCOPE_WITH_CUDA=ON)
  command -v ccache >/dev/null && cmake_args+=(-DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
else
  cmake_args+=(-DDPSCOPE_WITH_CUDA=OFF)
fi
command -v ccache >/dev/null && cmake_args+=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
scripts/build.sh release "${cmake_args[@]}" dpscope_cli dpscope_viz

bin=build/release/bin
out=${DPSCOPE_OUT:-out}
mkdir -p "$out"
trace="$out/quickstart.jsonl"

echo
echo "== DistributedDataParallel on 4 simulated H100s: MLP 2-256-256-256-3 on spirals, 32 samples per rank =="
"$bin/dpscope" train --mode ddp --devices 4 --backend sim --preset h100-sxm --model 2-256-256-256-3 --loss ce \
  --dataset spirals:2048 --batch 32 --optim sgd --lr 0.05 --momentum 0.9 --epochs 2 --seed 0 \
  --bucket-mb 0.25 --first-bucket-mb 0.1 --trace "$trace" --save "$out/quickstart.safetensors"
"$bin/dpscope" trace export --chrome "$trace" "$out/quickstart.perfetto.json"
"$bin/dpscope" trace stats "$trace"

if [[ -x "$bin/dpscope-viz" ]]; then
  if [[ -n "${DISPLAY:-}${WAYLAND_DISPLAY:-}" ]]; then
    echo "Opening the visualizer (close its window to finish)..."
    "$bin/dpscope-viz" "$trace"
  elif command -v xvfb-run >/dev/null; then
    for pos in step:0 step:3 1.0; do
      xvfb-run -a -s "-screen 0 1920x1080x24" "$bin/dpscope-viz" "$trace" \
        --screenshot "$out/quickstart-${pos/:/-}.png" --seek "$pos" --size 1600x900
    done
    echo "No display: wrote screenshots $out/quickstart-step-0.png, quickstart-step-3.png, quickstart-1.0.png"
  fi
fi

echo
echo "Done. Files in $out/:"
echo "  trace:            $trace   (dpscope-viz $trace)"
echo "  Perfetto export:  $out/quickstart.perfetto.json   (open https://ui.perfetto.dev and drop the file)"
echo "  weights:          $out/quickstart.safetensors"
