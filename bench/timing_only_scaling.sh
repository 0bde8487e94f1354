#!/usr/bin/env bash
# Timing-only DDP at scale (docs/scaling.md): one training step of a model on 1 to 1,024 simulated
# GPUs, side by side in one run — the host's wall time to simulate it (goal: a 1-billion-parameter
# model on 1,024 GPUs in under 10 s) and what the simulation says (step time, scaling efficiency).
#
# Usage: bench/timing_only_scaling.sh [DPSCOPE_BIN] [MODEL] [BATCH]
#   DPSCOPE_BIN  the dpscope command (default build/ci/bin/dpscope, else build/release/bin/dpscope)
#   MODEL        --model (default: 16 layers of 8192 and a 1024 head, 1.015 billion parameters)
#   BATCH        --batch per GPU (default 16)
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-}
if [[ -z "$bin" ]]; then
  bin=build/ci/bin/dpscope
  [[ -x "$bin" ]] || bin=build/release/bin/dpscope
fi
[[ -x "$bin" ]] || { echo "timing_only_scaling: no dpscope at $bin (build first)" >&2; exit 2; }
model=${2:-$(printf '8192-%.0s' {1..16})1024}
batch=${3:-16}
printf '%-6s %-12s %10s %14s %14s %11s\n' GPUs preset "wall s" "step ms" "1-GPU ms" efficiency
for preset in h100-sxm a100-sxm; do
  for gpus in 1 8 64 1024; do
    start=$(date +%s.%N)
    out=$("$bin" train --mode ddp --timing-only --devices "$gpus" --preset "$preset" --model "$model" \
      --batch "$batch" --steps 2 --optim adam)
    end=$(date +%s.%N)
    line=$(grep '^step .* on one GPU' <<<"$out")
    step=$(sed -E 's/^step ([0-9.]+) ms.*/\1/' <<<"$line")
    one=$(sed -E 's/.* vs ([0-9.]+) ms on one GPU.*/\1/' <<<"$line")
    eff=$(grep '^scaling efficiency' <<<"$out" | sed -E 's/^scaling efficiency ([0-9.]+%).*/\1/')
    printf '%-6s %-12s %10.3f %14s %14s %11s\n' "$gpus" "$preset" "$(awk -v a="$start" -v b="$end" 'BEGIN { print b - a }')" "$step" "$one" "$eff"
  done
done
