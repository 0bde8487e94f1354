#!/usr/bin/env bash
# gpu-check.sh: turns time on a machine with an NVIDIA GPU into one verification run of dpscope
# (docs/gpu.md). Used by people with a GPU machine at hand; tests/scripts/gpu_check_test.sh checks
# the parts that need no GPU. Two modes:
#
#   scripts/gpu-check.sh --prepare [--deps DIR]
#       On a Debian 12 machine with network: downloads (apt-get download, no install) the Debian
#       packages the runtime, CLI and test build needs into DIR (default .gpu-deps, git-ignored),
#       prints their size and the folder to carry to the GPU machine.
#
#   scripts/gpu-check.sh [--deps DIR] [--build-dir DIR] [--stages LIST] OUT_DIR
#       On the GPU machine (CMake, nvcc, NCCL and python3 with PyTorch, but no -dev packages and no
#       network): unpacks the carried packages into a private prefix, builds with CUDA for sm_90
#       and warnings as errors, runs the whole test suite, the GPU benchmarks and a measured DDP run
#       with a trace, and writes OUT_DIR/report.md (drawn by scripts/gpu_report.py from the stages'
#       logs and ctest's JUnit file). Every stage runs even when an earlier one failed;
#       the report says which failed. Exit 0: all passed; 1: a stage failed; 2: no GPU here (one
#       line, nothing written); 64: bad usage.
#
# Why no `set -e`: a failing stage must not end the run, so every stage's status is checked by hand.
set -uo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
self="scripts/gpu-check.sh"

# CMake package (the find_package name in cmake/DpscopeFeatures.cmake and tests/CMakeLists.txt) ->
# the Debian 12 packages that provide it, headers and shared libraries both. Threads and the CUDA
# toolkit come with the GPU machine. The visualizer's GL stack is left out on purpose: with Xvfb
# and Mesa it is about 35 MB of .debs before their X11 dependencies (docs/gpu.md).
cmake_packages=(
  "fmt: libfmt-dev libfmt9"
  "nlohmann_json: nlohmann-json3-dev"
  "simdjson: libsimdjson-dev libsimdjson14"
  "tomlplusplus: libtomlplusplus-dev libtomlplusplus3"
  "CLI11: libcli11-dev"
  "BLAS: libopenblas-dev libopenblas-pthread-dev libopenblas0 libopenblas0-pthread libgfortran5 libquadmath0"
  "GTest: libgtest-dev libgmock-dev"
  "zstd: libzstd-dev libzstd1"
)
# Dependencies of those packages that need not travel: what every glibc-based Linux with a C++
# compiler has, and GoogleTest's sources (libgtest-dev's static libraries are what the build links).
base_system=(libc6 libgcc-s1 libstdc++6 gcc-12-base googletest)
all_stages="gpu deps configure build tests bench-copy bench-allreduce bench-mlp bench-calibrate ddp nccl-processes viz"

usage() {
  cat <<EOF
Usage:
  $self --prepare [--deps DIR]
      On a Debian 12 machine with network: download the Debian packages the GPU machine lacks
      into DIR (default .gpu-deps), print their size and the path to carry there.
  $self [--deps DIR] [--build-dir DIR] [--stages LIST] OUT_DIR
      On a machine with an NVIDIA GPU: unpack DIR's packages into a private prefix, build dpscope
      with CUDA (sm_\${DPSCOPE_CUDA_ARCH:-90}), run every test, the GPU benchmarks and a measured DDP
      run, and write OUT_DIR/report.md (plus gpu-check.log and the trace ddp-cuda.jsonl).
  $self --print-packages
      Print the CMake package -> Debian packages table --prepare downloads.

Options:
  --deps DIR       the downloaded .deb files (default: .gpu-deps in the repository)
  --build-dir DIR  the build folder, kept between runs (default: build/gpu-check)
  --tests REGEX    the tests stage runs only the ctest tests matching REGEX (default: all)
  --stages LIST    comma-separated stages to run (default: all), in this order:
                   $all_stages
                   (split a long run in two: --stages gpu,deps,configure,build then the rest)

Exit status: 0 every stage passed; 1 a stage failed (the report names it);
2 no NVIDIA GPU on this machine (one line, nothing written); 64 bad usage.
Environment: DPSCOPE_NVIDIA_SMI (default nvidia-smi) is the command asked for the GPUs;
DPSCOPE_SOURCE names the source in the report when the folder is a snapshot without git history;
DPSCOPE_CUDA_ARCH (default 90) the CUDA architecture to build; DPSCOPE_RUN_TIMEOUT (default 300)
the seconds each benchmark or training command may run before it is stopped (ctest's own per-test
limits bound the tests).
EOF
}

die_usage() {
  echo "gpu-check: $1 (see $self --help)" >&2
  exit 64
}

deb_list() {
  local line
  for line in "${cmake_packages[@]}"; do printf '%s\n' "${line#*: }"; done | tr ' ' '\n' | sort -u
}

# ---------------------------------------------------------------------------------------------
# --prepare: runs where apt works; downloads only, installs nothing.
prepare() {
  local deps=$1
  command -v apt-get >/dev/null || { echo "gpu-check --prepare: needs apt-get (a Debian 12 machine)" >&2; return 1; }
  mkdir -p "$deps" || return 1
  local abs
  abs=$(cd "$deps" && pwd)
  mapfile -t debs < <(deb_list)
  echo "gpu-check --prepare: downloading ${#debs[@]} packages into $abs"
  rm -f "$abs"/*.deb
  # apt-get download writes into the current directory; run it in a subshell there.
  if ! (cd "$abs" && apt-get download -q "${debs[@]}" 2>&1 | sed '/^W: Download is performed unsandboxed/d'); then
    echo "gpu-check --prepare: apt-get download failed (network? run apt-get update first)" >&2
    return 1
  fi
  # Every dependency of a downloaded package must be downloaded too, or be in base_system.
  local f dep missing=()
  for f in "$abs"/*.deb; do
    while read -r dep; do
      [[ -z "$dep" ]] && continue
      if ! printf '%s\n' "${debs[@]}" "${base_system[@]}" | grep -qx "$dep"; then missing+=("$dep (of $(basename "$f"))"); fi
    done < <(dpkg-deb -f "$f" Depends | tr ',' '\n' | sed -E 's/\|.*//; s/\(.*\)//; s/:any//; s/^ +| +$//g')
  done
  if ((${#missing[@]})); then
    echo "gpu-check --prepare: dependencies not downloaded and not in a base system: ${missing[*]}" >&2
    return 1
  fi
  local rel=${abs#"$repo"/}
  echo "gpu-check --prepare: $(find "$abs" -name '*.deb' | wc -l) packages, $(du -sh "$abs" | cut -f1) in $abs"
  echo "carry this path to the GPU machine: $rel   (it must stay git-ignored; the repository comes along)"
  if [[ $rel == .gpu-deps ]]; then
    echo "then run there: $self OUT_DIR"
  else
    echo "then run there: $self --deps $rel OUT_DIR"
  fi
}

# ---------------------------------------------------------------------------------------------
# The run on the GPU machine. Each stage_* function prints to the stage log and returns 0 or not.

# The number of GPUs `nvidia-smi -L` lists; prints why not on stderr when there are none.
gpu_count() {
  local smi=${DPSCOPE_NVIDIA_SMI:-nvidia-smi} listing
  if ! command -v "${smi%% *}" >/dev/null; then
    echo "${smi%% *} not found" >&2
    echo 0
    return
  fi
  if ! listing=$($smi -L 2>&1); then
    echo "${listing:-failed with no output}" | head -n 1 >&2
    echo 0
    return
  fi
  grep -c '^GPU [0-9]' <<<"$listing"
}

stage_gpu() {
  ${DPSCOPE_NVIDIA_SMI:-nvidia-smi} || return 1
  echo
  command -v nvcc >/dev/null && nvcc --version | tail -n 2
  cmake --version | head -n 1
  "${CXX:-c++}" --version | head -n 1
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)' || true
  return 0
}

# Unpacks the carried .debs into $prefix (never /) and points their files at it.
stage_deps() {
  shopt -s nullglob
  local debs=("$deps"/*.deb)
  shopt -u nullglob
  if ((${#debs[@]} == 0)); then
    echo "no .deb files in $deps: run '$self --prepare' on a machine with network and carry that folder"
    return 1
  fi
  rm -rf "$prefix" && mkdir -p "$prefix" || return 1
  local d
  for d in "${debs[@]}"; do
    if command -v dpkg-deb >/dev/null; then
      dpkg-deb -x "$d" "$prefix" || { echo "dpkg-deb -x failed on $d"; return 1; }
    else  # a .deb is an ar archive holding data.tar.*; tar recognises its compression
      local tmp
      tmp=$(mktemp -d) || return 1
      if ! (cd "$tmp" && ar x "$d" && tar -xf data.tar.* -C "$prefix"); then
        echo "could not unpack $d (no dpkg-deb; ar + tar failed)"
        rm -rf "$tmp"
        return 1
      fi
      rm -rf "$tmp"
    fi
  done
  # Debian's CMake package configs locate themselves relative to their own file, so they work in
  # the prefix as they are; a few plain files name /usr outright: rewrite those to the prefix.
  find "$prefix" -name '*.pc' -exec sed -i "s#^prefix=/usr#prefix=$prefix/usr#" {} +
  find "$prefix" -name '*Config.cmake' -exec sed -i -E "/^SET\(/ s#([ (])/usr/#\1$prefix/usr/#g" {} +
  echo "unpacked ${#debs[@]} packages into $prefix ($(du -sh "$prefix" | cut -f1))"
}

# nccl.h and libnccl outside the places CMake looks by default (PyTorch's pip wheels carry one).
find_nccl() {
  local inc lib sp
  for inc in /usr/local/cuda/include /usr/include /usr/local/include; do
    [[ -f $inc/nccl.h ]] && return 0  # CMake finds it by itself
  done
  for sp in $(python3 -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null); do
    inc=$(find "$sp/nvidia" -maxdepth 4 -name nccl.h -path '*include*' 2>/dev/null | head -n 1)
    [[ -n $inc ]] || continue
    inc=$(dirname "$inc")
    lib=$(find "$(dirname "$inc")/lib" -maxdepth 1 -name 'libnccl.so*' 2>/dev/null | sort | head -n 1)
    [[ -n $lib ]] || continue
    nccl_args=(-DDPSCOPE_NCCL_INCLUDE="$inc" -DDPSCOPE_NCCL_LIB="$lib")
    extra_libdirs+=":$(dirname "$lib")"
    echo "NCCL from $inc and $lib"
    return 0
  done
  echo "nccl.h not found in /usr/local/cuda/include, /usr/include or python's nvidia packages"
}

stage_configure() {
  local generator=()
  command -v ninja >/dev/null && generator=(-G Ninja)
  nccl_args=()
  find_nccl
  local log_configure="$logs/configure.cmake.txt"
  cmake -S "$repo" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DDPSCOPE_WERROR=ON \
    -DCMAKE_CUDA_ARCHITECTURES="${DPSCOPE_CUDA_ARCH:-90}" -DDPSCOPE_WITH_MPI=OFF \
    -DCMAKE_PREFIX_PATH="$prefix/usr" \
    -DCMAKE_LIBRARY_PATH="$libdir;$libdir/openblas-pthread" \
    -DCMAKE_INCLUDE_PATH="$prefix/usr/include;$prefix/usr/include/x86_64-linux-gnu/openblas-pthread" \
    -DCMAKE_EXE_LINKER_FLAGS="-Wl,-rpath-link,$libdir:$libdir/openblas-pthread" \
    "${nccl_args[@]}" 2>&1 | tee "$log_configure"
  local rc=${PIPESTATUS[0]}
  ((rc == 0)) || return "$rc"
  if ! grep -q "dpscope: ✓ CUDA + NCCL" "$log_configure"; then
    echo "configured WITHOUT CUDA: $(grep 'dpscope: ✗ CUDA' "$log_configure")"
    return 1
  fi
}

# A compiler newer than Debian 12's may warn where ours does not, and with warnings as errors the
# whole run would end here: then the stage fails (the report shows why) but builds again without
# -Werror, so that the tests and benchmarks still run on the GPU.
stage_build() {
  local keep_going=(-k)
  [[ -f $build/build.ninja ]] && keep_going=(-k 0)
  cmake --build "$build" -j "$(nproc)" -- "${keep_going[@]}" && return 0
  echo
  echo "gpu-check: the build with warnings as errors failed (above); building again with DPSCOPE_WERROR=OFF"
  echo "so that the stages after this one can run. This stage stays FAILED."
  cmake -S "$repo" -B "$build" -DDPSCOPE_WERROR=OFF >/dev/null &&
    cmake --build "$build" -j "$(nproc)" -- "${keep_going[@]}"
  return 1
}

stage_tests() {
  [[ -f $build/CTestTestfile.cmake ]] || { echo "no test list in $build: configure failed"; return 1; }
  # The report counts from the JUnit file; the text stays in the log for a reader.
  ctest --test-dir "$build" -j "$(nproc)" --output-on-failure --timeout 600 ${tests_regex:+-R "$tests_regex"} \
    --output-junit "$logs/tests.junit.xml" 2>&1 | tee "$logs/tests.ctest.txt"
  return "${PIPESTATUS[0]}"
}

# Runs a benchmark or training command under a time limit (DPSCOPE_RUN_TIMEOUT seconds, default
# 300): a hang in code under test must cost one stage, not the report of the whole run.
limited() {
  local limit=${DPSCOPE_RUN_TIMEOUT:-300} rc
  timeout -k 10 "$limit" "$@"
  rc=$?
  if ((rc == 124 || rc == 137)); then echo "gpu-check: '${*:1:3} ...' ran past $limit s and was stopped"; fi
  return "$rc"
}

need_bin() {
  [[ -x $bin/$1 ]] && return 0
  echo "$bin/$1 was not built (see the build stage)"
  return 1
}

stage_bench_copy() {
  need_bin gpu_copy_bench || return 1
  limited "$bin/gpu_copy_bench" 2>&1 | tee "$logs/bench-copy.out.txt"
  return "${PIPESTATUS[0]}"
}

# Our ring all-reduce on 4 logical GPUs (cuda backend) against the device's copy rate, which the
# copy benchmark measured (its "bench-value d2d_copy_gbps" line).
stage_bench_allreduce() {
  need_bin dpscope || return 1
  limited "$bin/dpscope" bench all_reduce --backend cuda --devices 4 --algo ring -b 1M -e 256M -f 4 -n 20 -w 5 2>&1 |
    tee "$logs/bench-allreduce.out.txt"
  local rc=${PIPESTATUS[0]}
  ((rc == 0)) || return "$rc"
  # Its largest size against the copy rate (scripts/gpu_report.py); #wrong other than 0 fails.
  python3 "$repo/scripts/gpu_report.py" allreduce-rows "$logs/bench-allreduce.out.txt" "$logs/bench-copy.out.txt"
}

stage_bench_mlp() {
  need_bin gpu_mlp_step_bench || return 1
  local batch rc=0
  for batch in 128 4096; do
    limited python3 "$repo/bench/torch_mlp_step.py" --device cuda --batch "$batch" \
      --dpscope-bin "$bin/gpu_mlp_step_bench" || rc=1
  done
  return "$rc"
}

stage_bench_calibrate() {
  need_bin gpu_calibrate || return 1
  limited "$bin/gpu_calibrate" 2>&1 | tee "$logs/bench-calibrate.out.txt"
  return "${PIPESTATUS[0]}"
}

# The same DDP run on 4 logical GPUs (cuda backend, measured) and on 4 simulated ones.
ddp_args=(--mode ddp --devices 4 --model 784-512-512-10 --dataset blobs:8192:784:10 --batch 128 --steps 20
  --optim sgd --lr 0.01 --momentum 0.9 --seed 0)
stage_ddp() {
  need_bin dpscope || return 1
  local rc=0
  rm -f "$out/ddp-cuda.jsonl"
  limited "$bin/dpscope" train "${ddp_args[@]}" --device cuda --backend cuda --trace "$out/ddp-cuda.jsonl" || rc=1
  if [[ -f $out/ddp-cuda.jsonl ]]; then
    "$bin/dpscope" trace stats "$out/ddp-cuda.jsonl" 2>&1 | tee "$logs/ddp.stats.txt" || rc=1
  else
    echo "no trace written"
    rc=1
  fi
  echo
  echo "-- the same run on 4 simulated GPUs (preset ${DPSCOPE_SIM_PRESET:-h100-sxm}), for comparison:"
  limited "$bin/dpscope" train "${ddp_args[@]}" --device sim --backend sim --preset "${DPSCOPE_SIM_PRESET:-h100-sxm}" \
    --trace "$logs/ddp.sim.jsonl" >/dev/null 2>&1 &&
    "$bin/dpscope" trace stats "$logs/ddp.sim.jsonl" 2>&1 | tee "$logs/ddp.sim-stats.txt"
  return "$rc"
}

# NCCL across processes: `dpscope launch` starts one `dpscope train --backend nccl` per GPU (the
# ncclUniqueId through the launcher's TCPStore); each rank writes its own trace.
nccl_ranks() { local n=$gpus; ((n > 4)) && n=4; echo "$n"; }
stage_nccl_processes() {
  need_bin dpscope || return 1
  local n rc=0 args=()
  n=$(nccl_ranks)
  for a in "${ddp_args[@]}"; do args+=("$a"); done
  args[3]=$n  # the value of --devices
  rm -rf "$out/ddp-nccl"
  limited "$bin/dpscope" launch --nproc "$n" --master-port "${DPSCOPE_MASTER_PORT:-29533}" -- "$bin/dpscope" train \
    "${args[@]}" --device cuda --backend nccl --trace "$out/ddp-nccl" || rc=1
  if [[ -f $out/ddp-nccl/rank-0.jsonl ]]; then
    "$bin/dpscope" trace stats "$out/ddp-nccl/rank-0.jsonl" 2>&1 | tee "$logs/nccl-processes.stats.txt" || rc=1
  else
    echo "no rank-0 trace written"
    rc=1
  fi
  return "$rc"
}

# A screenshot of the measured trace, only where the visualizer could be built and Xvfb exists.
stage_viz() {
  if [[ ! -x $bin/dpscope-viz ]]; then
    echo "SKIP: dpscope-viz was not built (no GL stack on this machine; docs/gpu.md)"
    return 0
  fi
  command -v xvfb-run >/dev/null || { echo "SKIP: xvfb-run is not installed"; return 0; }
  [[ -f $out/ddp-cuda.jsonl ]] || { echo "SKIP: no measured trace to show (see the ddp stage)"; return 0; }
  limited xvfb-run -a -s "-screen 0 1920x1080x24" "$bin/dpscope-viz" "$out/ddp-cuda.jsonl" \
    --screenshot "$out/ddp-cuda.png" --seek 1.0 --size 1600x900
}

# Runs one stage with its output in its own log (and appended to gpu-check.log); records the result.
declare -A result seconds note
run_stage() {
  local name=$1 fn=$2 t0=$SECONDS rc
  if [[ ",$stages," != *",$name,"* ]]; then
    result[$name]="not run"
    note[$name]="not in --stages"
    return
  fi
  echo "== gpu-check: $name"
  rm -f "$logs/$name".*  # this stage's files from an earlier run in the same build folder
  {
    echo "==================== $name ($(date -u +%H:%M:%S))"
  } >>"$log"
  "$fn" >"$logs/$name.log" 2>&1
  rc=$?
  cat "$logs/$name.log" >>"$log"
  seconds[$name]=$((SECONDS - t0))
  if ((rc == 0)); then
    result[$name]="passed"
    note[$name]=$(grep -m1 '^SKIP: ' "$logs/$name.log" | sed 's/^SKIP: /skipped: /')
  else
    result[$name]="FAILED"
    # ctest's count of failures; else the first line that says what went wrong (not a test's
    # start or result line: test names say "Error" too), else the last line.
    local why
    why=$(grep -m1 -E 'tests? failed out of' "$logs/$name.log" ||
      grep -vE '^\s*(Start +[0-9]+:|[0-9]+/[0-9]+ Test +#)' "$logs/$name.log" |
      grep -m1 -iE 'error|fail|was stopped|not built|not found' ||
      grep -v '^\s*$' "$logs/$name.log" | tail -n 1)
    note[$name]="exit $rc: $(cut -c1-160 <<<"$why")"
  fi
  echo "   ${result[$name]} (${seconds[$name]} s) ${note[$name]}"
}

# ---------------------------------------------------------------------------------------------
# The report: scripts/gpu_report.py draws it from the stages' logs, ctest's JUnit file and the
# facts of the run, which this writes to $logs/run.tsv (tab-separated: meta KEY VALUE, stage ...).

# The commit, and whether the files differ from it (a copied working tree may carry an older .git).
source_description() {
  local commit top
  # A snapshot (git archive) says where it came from; git would answer for an enclosing checkout.
  if [[ -n ${DPSCOPE_SOURCE:-} ]]; then echo "$DPSCOPE_SOURCE (given by DPSCOPE_SOURCE)"; return; fi
  top=$(git -C "$repo" rev-parse --show-toplevel 2>/dev/null)
  [[ $top == "$repo" ]] || { echo "a copy without git history (set DPSCOPE_SOURCE to name it)"; return; }
  commit=$(git -C "$repo" rev-parse --short HEAD 2>/dev/null) || { echo "a copy without git history"; return; }
  if [[ -n $(git -C "$repo" status --porcelain --untracked-files=no 2>/dev/null | head -n 1) ]]; then
    echo "$commit with uncommitted changes (the files are not that commit's)"
  else
    echo "$commit"
  fi
}

write_run_facts() {
  local s
  one_line() { tr '\t\n' '  ' <<<"$1" | sed 's/ *$//'; }
  meta() { printf 'meta\t%s\t%s\n' "$1" "$(one_line "$2")"; }
  meta started "$started"
  meta finished "$(date -u '+%Y-%m-%d %H:%M:%S UTC')"
  meta host "$(uname -n)"
  meta gpu "$(${DPSCOPE_NVIDIA_SMI:-nvidia-smi} --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null | head -n 3 | paste -sd ';')"
  meta source "$(source_description)"
  meta build "$build"
  meta cuda_arch "${DPSCOPE_CUDA_ARCH:-90}"
  meta log "$log"
  meta jobs "$(nproc)"
  meta ddp_command "dpscope train ${ddp_args[*]} --device cuda --backend cuda --trace ddp-cuda.jsonl"
  meta nccl_ranks "$(nccl_ranks)"
  meta sim_preset "${DPSCOPE_SIM_PRESET:-h100-sxm}"
  for s in $all_stages; do
    printf 'stage\t%s\t%s\t%s\t%s\n' "$s" "${result[$s]}" "${seconds[$s]:--}" "$(one_line "${note[$s]}")"
  done
}

# ---------------------------------------------------------------------------------------------
mode=run
deps="$repo/.gpu-deps"
build="$repo/build/gpu-check"
stages=${all_stages// /,}
tests_regex=""
out=""
while (($#)); do
  case $1 in
    -h | --help) usage; exit 0 ;;
    --prepare) mode=prepare ;;
    --print-packages) printf '%s\n' "${cmake_packages[@]}"; exit 0 ;;
    --deps) (($# >= 2)) || die_usage "--deps needs a folder"; deps=$2; shift ;;
    --build-dir) (($# >= 2)) || die_usage "--build-dir needs a folder"; build=$2; shift ;;
    --stages) (($# >= 2)) || die_usage "--stages needs a list"; stages=$2; shift ;;
    --tests) (($# >= 2)) || die_usage "--tests needs a regular expression"; tests_regex=$2; shift ;;
    -*) die_usage "unknown option '$1'" ;;
    *) [[ -z $out ]] || die_usage "one OUT_DIR only, got '$out' and '$1'"; out=$1 ;;
  esac
  shift
done

if [[ $mode == prepare ]]; then
  [[ -z $out ]] || die_usage "--prepare takes no OUT_DIR"
  prepare "$deps"
  exit $?
fi
[[ -n $out ]] || die_usage "give OUT_DIR (the folder the report goes to), or --prepare"
for s in ${stages//,/ }; do
  [[ " $all_stages " == *" $s "* ]] || die_usage "unknown stage '$s' (stages: $all_stages)"
done

gpus=$(gpu_count 2>/tmp/gpu-check-why.$$)
why=$(cat /tmp/gpu-check-why.$$ 2>/dev/null)
rm -f /tmp/gpu-check-why.$$
if ((gpus == 0)); then
  echo "gpu-check: no NVIDIA GPU on this machine (${DPSCOPE_NVIDIA_SMI:-nvidia-smi} -L: ${why:-lists no GPU}); run it on a machine with one, see docs/gpu.md" >&2
  exit 2
fi

mkdir -p "$out" "$build" || exit 1
out=$(cd "$out" && pwd)
build=$(cd "$build" && pwd)
[[ -d $deps ]] && deps=$(cd "$deps" && pwd)
prefix="$build/deps-prefix"
libdir="$prefix/usr/lib/x86_64-linux-gnu"
bin="$build/bin"
logs="$build/gpu-check-logs"
log="$out/gpu-check.log"
mkdir -p "$logs" && : >"$log"
extra_libdirs=""
nccl_args=()
[[ -d /usr/local/cuda/bin && ":$PATH:" != *":/usr/local/cuda/bin:"* ]] && export PATH="$PATH:/usr/local/cuda/bin"
# The carried libraries (libgfortran for OpenBLAS, say) are found at run time through this path.
export LD_LIBRARY_PATH="$libdir:$libdir/openblas-pthread${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
started=$(date -u '+%Y-%m-%d %H:%M:%S UTC')
echo "gpu-check: $gpus GPU(s); building in $build; report in $out/report.md"

run_stage gpu stage_gpu
run_stage deps stage_deps
run_stage configure stage_configure
[[ -n $extra_libdirs ]] && export LD_LIBRARY_PATH="$LD_LIBRARY_PATH$extra_libdirs"
run_stage build stage_build
run_stage tests stage_tests
run_stage bench-copy stage_bench_copy
run_stage bench-allreduce stage_bench_allreduce
run_stage bench-mlp stage_bench_mlp
run_stage bench-calibrate stage_bench_calibrate
run_stage ddp stage_ddp
run_stage nccl-processes stage_nccl_processes
run_stage viz stage_viz

write_run_facts >"$logs/run.tsv"
if ! python3 "$repo/scripts/gpu_report.py" report --run "$logs/run.tsv" --logs "$logs" --out "$out" >"$out/report.md"; then
  echo "gpu-check: scripts/gpu_report.py could not write the report (above); the logs are in $logs"
  exit 1
fi
failed=()
for s in $all_stages; do [[ ${result[$s]} == FAILED ]] && failed+=("$s"); done
if ((${#failed[@]})); then
  echo "gpu-check: FAILED stages: ${failed[*]}; report: $out/report.md"
  exit 1
fi
echo "gpu-check: every stage run passed; report: $out/report.md"
