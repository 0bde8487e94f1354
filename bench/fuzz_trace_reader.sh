#!/usr/bin/env bash
# Fuzzes the trace reader (and the Chrome export and stats behind it) with libFuzzer, ASan and UBSan.
#
#   bench/fuzz_trace_reader.sh [SECONDS=60] [BUILD_DIR=build-fuzz]
#
# Needs clang >= 15 with its libFuzzer runtime (libstdc++'s <source_location> needs clang 15's
# __builtin_source_location); on Debian 12: apt-get install clang-16 libclang-rt-16-dev.
# The corpus grows in BUILD_DIR/fuzz-corpus/trace_reader; crashes are written to BUILD_DIR/fuzz-crashes/
# and the script exits non-zero. Re-run one with: BUILD_DIR/trace_reader_fuzz CRASH_FILE
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
seconds=${1:-60}
build=${2:-$root/build-fuzz}
jobs=${JOBS:-2}

cxx=""
for candidate in clang++-19 clang++-18 clang++-17 clang++-16 clang++-15 clang++; do
  command -v "$candidate" >/dev/null 2>&1 || continue
  major=$("$candidate" -dumpversion | cut -d. -f1)
  if [ "$major" -ge 15 ]; then cxx=$candidate; break; fi
done
if [ -z "$cxx" ]; then
  echo "fuzz_trace_reader: needs clang >= 15 with libFuzzer (apt-get install clang-16 libclang-rt-16-dev)" >&2
  exit 1
fi
cc=${cxx/clang++/clang}
echo "fuzz_trace_reader: $cxx, ${seconds} s, build in $build"

# The library is built with coverage instrumentation so libFuzzer can steer into the parser.
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx" \
  -DCMAKE_CXX_FLAGS="-fsanitize=fuzzer-no-link" -DDPSCOPE_SANITIZE=address,undefined \
  -DDPSCOPE_BUILD_VISUALIZER=OFF -DDPSCOPE_WITH_CUDA=OFF -DDPSCOPE_WITH_MPI=OFF >/dev/null

if grep -q "add_subdirectory(fuzz)" "$root/tests/CMakeLists.txt"; then
  cmake --build "$build" --target trace_reader_fuzz -j"$jobs"
  fuzzer=$(find "$build" -name trace_reader_fuzz -type f -perm -u+x | head -n1)
else
  # tests/fuzz is not wired into the build yet: compile the target by hand against the library.
  cmake --build "$build" --target dpscope -j"$jobs"
  fuzzer=$build/trace_reader_fuzz
  "$cxx" -std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined -I"$root/runtime/include" \
    "$root/tests/fuzz/trace_reader_fuzz.cpp" "$build/runtime/libdpscope.a" \
    -lfmt -lsimdjson -ltomlplusplus -lopenblas -lpthread -o "$fuzzer"
fi

corpus=$build/fuzz-corpus/trace_reader
crashes=$build/fuzz-crashes
mkdir -p "$corpus" "$crashes"
# Seed: a small trace with every event type (the fuzzer mutates it into everything else).
cat >"$corpus/seed.jsonl" <<'TRACE'
{"type":"header","format":"dpscope-trace","version":"1.0","clock":"simulated","run":{"mode":"ddp"},"devices":[{"id":0,"name":"sim:0","kind":"sim","hardware":"NVIDIA H100 SXM5 80GB","memory_bytes":80000000000,"peak_flops":67000000000000,"mem_bandwidth":3350000000000},{"id":1,"name":"host","kind":"host","hardware":"","memory_bytes":0,"peak_flops":0,"mem_bandwidth":0},{"id":2,"name":"sim:1","kind":"sim","hardware":"NVIDIA H100 SXM5 80GB","memory_bytes":80000000000,"peak_flops":67000000000000,"mem_bandwidth":3350000000000}],"links":[{"src":0,"dst":1,"kind":"pcie5","bandwidth":64000000000,"latency_ns":1000}],"params":[{"index":0,"name":"0.weight","shape":[512,784],"bytes":1605632}],"buckets":[{"id":0,"params":[0],"bytes":1605632}]}
{"type":"samples","ts":0,"rank":1,"dev":2,"step":0,"phase":"data","indices":[32,33,34,35]}
{"type":"transfer","ts":0,"rank":0,"dev":0,"step":0,"phase":"data","name":"copy H2D","stream":"copy","dur":2638,"src":1,"dst":0,"bytes":102400,"flow":1}
{"type":"span","ts":3000,"rank":0,"dev":0,"step":0,"phase":"forward","name":"forward 0.Linear","cat":"compute","stream":"compute","dur":4035,"args":{"flops":102760448,"bytes":1874944}}
{"type":"instant","ts":91000,"rank":1,"dev":2,"step":0,"phase":"backward","name":"grad_ready","args":{"param":0}}
{"type":"transfer","ts":80000,"rank":0,"dev":0,"step":0,"phase":"backward","name":"ring reduce-scatter","stream":"comm","dur":1200,"src":0,"dst":2,"bytes":65536,"flow":17,"coll":4,"algo":"ring","algo_step":1,"chunk":0}
{"type":"values","ts":99000,"rank":0,"dev":0,"step":0,"phase":"backward","name":"grad","param":0,"when":"before_reduce","values":[0.01,-0.2,null],"norm":1.27}
{"type":"buckets","ts":0,"rank":0,"dev":0,"step":1,"phase":"backward","reason":"rebuilt","buckets":[{"id":0,"params":[0],"bytes":1605632}]}
{"type":"counter","ts":12000,"rank":0,"dev":0,"step":0,"phase":"forward","name":"memory","values":{"parameters":2132008,"capacity":80000000000}}
{"type":"counter","ts":50000,"rank":0,"dev":0,"step":0,"phase":"optimizer","name":"loss","values":{"loss":null}}
TRACE

"$fuzzer" "$corpus" -dict="$root/tests/fuzz/trace_reader.dict" -max_total_time="$seconds" -max_len=8192 \
  -artifact_prefix="$crashes/" -print_final_stats=1
