#!/usr/bin/env bash
# Fuzzes every reader with libFuzzer + ASan + UBSan: the trace reader (with Chrome export and stats),
# .npy, safetensors and checkpoint files, lesson files and lesson answer expressions
# (tests/fuzz/*_fuzz.cpp), each for SECONDS.
#
#   bench/fuzz_all.sh [SECONDS=60] [TARGET...]        # default: every target
#
# Debian 12's clang 14 cannot compile libstdc++'s <source_location> (dpscope's errors use it), so this
# installs clang-16 and its libFuzzer runtime from Debian's own packages when they are missing. Each
# target starts from its checked-in corpus (tests/fuzz/corpus/<target>, which the normal suite also
# replays) and grows a working copy in build-fuzz/fuzz-corpus/<target>; crashes go to
# build-fuzz/fuzz-crashes/ and make the script exit non-zero. Prints one summary line per target:
# executions, exec/s, coverage (edges), features, corpus size, crashes. Results: docs/benchmarks.md.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
seconds=${1:-60}
shift || true
targets=("$@")
if ((${#targets[@]} == 0)); then
  targets=(trace_reader io_npy io_safetensors checkpoint_metadata lesson_expression lesson_file)
fi
build=${BUILD_DIR:-$root/build-fuzz}
jobs=${JOBS:-2}

if ! command -v clang++-16 >/dev/null 2>&1 || ! compgen -G "/usr/lib/llvm-16/lib/clang/16*/lib/linux/libclang_rt.fuzzer-x86_64.a" >/dev/null; then
  echo "fuzz_all: installing clang-16 and libclang-rt-16-dev (Debian 12 packages)"
  sudo=""
  [[ $(id -u) -ne 0 ]] && sudo=sudo
  $sudo apt-get install -y clang-16 libclang-rt-16-dev >/dev/null
fi

cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER=clang-16 -DCMAKE_CXX_COMPILER=clang++-16 \
  -DCMAKE_CXX_FLAGS="-fsanitize=fuzzer-no-link -fno-sanitize-recover=all" -DDPSCOPE_SANITIZE=address,undefined \
  -DDPSCOPE_BUILD_VISUALIZER=OFF -DDPSCOPE_WITH_CUDA=OFF -DDPSCOPE_WITH_MPI=OFF >/dev/null
cmake --build "$build" -j"$jobs" --target "${targets[@]/%/_fuzz}"

crashes=$build/fuzz-crashes
mkdir -p "$crashes"
summary=()
failed=0
for t in "${targets[@]}"; do
  corpus=$build/fuzz-corpus/$t
  mkdir -p "$corpus"
  cp -n "$root/tests/fuzz/corpus/$t/"* "$corpus/" 2>/dev/null || true
  dict=()
  case $t in
    trace_reader) dict=(-dict="$root/tests/fuzz/trace_reader.dict") ;;
    io_safetensors | checkpoint_metadata) dict=(-dict="$root/tests/fuzz/io_safetensors.dict") ;;
    lesson_expression | lesson_file) dict=(-dict="$root/tests/fuzz/lesson.dict") ;;
  esac
  log=$build/fuzz-$t.log
  echo "fuzz_all: $t for ${seconds} s"
  status=0
  "$build/tests/fuzz/${t}_fuzz" "$corpus" "${dict[@]}" -max_total_time="$seconds" -max_len=8192 -timeout=10 \
    -rss_limit_mb=4096 -artifact_prefix="$crashes/$t-" -print_final_stats=1 >"$log" 2>&1 || status=$?
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
  rate=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
  last=$(grep -E '^#[0-9]+' "$log" | tail -n1)
  cov=$(grep -o 'cov: [0-9]*' <<<"$last" | grep -o '[0-9]*' || echo "?")
  ft=$(grep -o 'ft: [0-9]*' <<<"$last" | grep -o '[0-9]*' || echo "?")
  files=$(find "$corpus" -type f | wc -l)
  found=$(find "$crashes" -name "$t-*" -type f | wc -l)
  ((status != 0 || found != 0)) && failed=1
  summary+=("$(printf '%-20s %10s execs %8s exec/s  cov %5s  ft %6s  corpus %5s  crashes %s' "$t" "$execs" "$rate" \
    "$cov" "$ft" "$files" "$found")")
done
printf '%s\n' "${summary[@]}"
if ((failed)); then
  echo "fuzz_all: FAILED: see $crashes and $build/fuzz-*.log" >&2
  exit 1
fi
