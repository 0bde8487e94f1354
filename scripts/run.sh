#!/usr/bin/env bash
# The main job, in one command: install what is missing, build, train on simulated GPUs with
# tracing on, export the trace for Perfetto, and show it in dpscope-viz (on a display) or render
# screenshots of it (headless, under Xvfb). Everything lands in ./out and the paths are printed.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh release

bin=build/release/bin
out=${DPSCOPE_OUT:-out}
mkdir -p "$out"
trace="$out/quickstart.jsonl"

echo
echo "== Training a 2-64-64-3 MLP on a simulated H100 (spirals, 3 classes) =="
"$bin/dpscope" train --mode single --backend sim --preset h100-sxm --model 2-64-64-3 --loss ce \
  --dataset spirals:1536 --batch 64 --optim sgd --lr 0.1 --momentum 0.9 --epochs 4 --seed 0 \
  --trace "$trace" --save "$out/quickstart.safetensors"
"$bin/dpscope" trace export --chrome "$trace" "$out/quickstart.perfetto.json"
"$bin/dpscope" trace stats "$trace"

if [[ -x "$bin/dpscope-viz" ]]; then
  if [[ -n "${DISPLAY:-}${WAYLAND_DISPLAY:-}" ]]; then
    echo "Opening the visualizer (close its window to finish)..."
    "$bin/dpscope-viz" "$trace"
  elif command -v xvfb-run >/dev/null; then
    for pos in 0.1 0.5 1.0; do
      xvfb-run -a -s "-screen 0 1920x1080x24" "$bin/dpscope-viz" "$trace" \
        --screenshot "$out/quickstart-$pos.png" --seek "$pos" --size 1600x900
    done
    echo "No display: wrote screenshots $out/quickstart-{0.1,0.5,1.0}.png"
  fi
fi

echo
echo "Done. Files in $out/:"
echo "  trace:            $trace   (dpscope-viz $trace)"
echo "  Perfetto export:  $out/quickstart.perfetto.json   (open https://ui.perfetto.dev and drop the file)"
echo "  weights:          $out/quickstart.safetensors"
