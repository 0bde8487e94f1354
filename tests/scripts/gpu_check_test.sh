#!/usr/bin/env bash
# Tests of scripts/gpu-check.sh that need no GPU and no network (tests/CMakeLists.txt runs each case
# as its own ctest test): without a GPU it says so in one line and exits 2, writing nothing; --help
# documents both modes; usage errors exit 64; its package table covers every CMake package the build
# requires; with a stand-in nvidia-smi, the report names each stage's result and a failing stage
# makes the run exit 1 while the stages after it still run; the tests section is counted from the
# JUnit file ctest writes (the report itself: scripts/gpu_report.py, tests/scripts/gpu_report_test.py).
# Usage: gpu_check_test.sh SOURCE_DIR CASE
set -uo pipefail
src=$1
case_name=$2
script="$src/scripts/gpu-check.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

fail() {
  echo "FAIL ($case_name): $*"
  exit 1
}

# Runs gpu-check with the arguments given; sets rc and output (stdout and stderr together).
run() {
  output=$(env -u DPSCOPE_SOURCE "$script" "$@" 2>&1)
  rc=$?
}

expect_rc() { [[ $rc == "$1" ]] || fail "exit status $rc, expected $1; output: $output"; }
expect_one_line() { [[ $(printf '%s\n' "$output" | wc -l) == 1 ]] || fail "expected one line, got: $output"; }
expect_text() { grep -qF -- "$1" <<<"$output" || fail "output lacks '$1': $output"; }

# A stand-in nvidia-smi that lists one GPU, so the run mode starts on a machine without one.
fake_smi() {
  cat >"$tmp/nvidia-smi" <<'SMI'
#!/bin/sh
[ "$1" = "-L" ] && { echo "GPU 0: Stand-in GPU (UUID: GPU-test)"; exit 0; }
echo "Stand-in GPU, 80 GiB"
SMI
  chmod +x "$tmp/nvidia-smi"
  export DPSCOPE_NVIDIA_SMI="$tmp/nvidia-smi"
}

case_no_gpu_smi_fails() {
  DPSCOPE_NVIDIA_SMI=false run "$tmp/out"
  expect_rc 2
  expect_one_line
  expect_text "gpu-check: no NVIDIA GPU on this machine (false -L: failed with no output)"
  [[ ! -e $tmp/out ]] || fail "OUT_DIR was created without a GPU"
}

case_no_gpu_smi_missing() {
  DPSCOPE_NVIDIA_SMI="$tmp/no-such-nvidia-smi" run "$tmp/out"
  expect_rc 2
  expect_one_line
  expect_text "no-such-nvidia-smi not found"
  [[ ! -e $tmp/out ]] || fail "OUT_DIR was created without a GPU"
}

case_no_gpu_smi_lists_none() {
  DPSCOPE_NVIDIA_SMI=true run "$tmp/out"
  expect_rc 2
  expect_one_line
  expect_text "lists no GPU"
}

case_help() {
  run --help
  expect_rc 0
  expect_text "--prepare [--deps DIR]"
  expect_text "[--stages LIST] OUT_DIR"
  expect_text "2 no NVIDIA GPU on this machine"
  expect_text "gpu deps configure build tests bench-copy bench-allreduce bench-mlp bench-calibrate ddp nccl-processes viz"
  expect_text "--tests REGEX"
}

case_usage_errors() {
  run
  expect_rc 64
  expect_one_line
  expect_text "give OUT_DIR"
  run --frobnicate "$tmp/out"
  expect_rc 64
  expect_text "unknown option '--frobnicate'"
  run --stages gpu,warp-drive "$tmp/out"
  expect_rc 64
  expect_text "unknown stage 'warp-drive'"
  run "$tmp/a" "$tmp/b"
  expect_rc 64
  expect_text "one OUT_DIR only"
  run --prepare "$tmp/out"
  expect_rc 64
  expect_text "--prepare takes no OUT_DIR"
  run "$tmp/out" --tests
  expect_rc 64
  expect_text "--tests needs a regular expression"
}

# Every `find_package(NAME ... REQUIRED)` of the build (but Threads, which every system has) has a
# line "NAME: debian-package ..." in the table --prepare downloads.
case_packages_cover_cmake() {
  run --print-packages
  expect_rc 0
  local required name
  required=$(cat "$src/cmake/DpscopeFeatures.cmake" "$src/tests/CMakeLists.txt" |
    sed -nE 's/^ *find_package\(([A-Za-z0-9_]+) .*REQUIRED.*/\1/p' | sort -u)
  [[ $(wc -w <<<"$required") -ge 7 ]] || fail "found only '$required' in the CMake files: did the parse break?"
  for name in $required; do
    [[ $name == Threads ]] && continue
    grep -qE "^$name: [a-z0-9]" <<<"$output" || fail "no Debian package for find_package($name) in: $output"
  done
  expect_text "BLAS: libopenblas-dev"
}

case_report_names_stages() {
  fake_smi
  run --build-dir "$tmp/build" --stages gpu "$tmp/out"
  expect_rc 0
  local report="$tmp/out/report.md"
  [[ -f $report ]] || fail "no report.md; output: $output"
  grep -qE '^\| gpu \| passed \| [0-9]+ \|' "$report" || fail "gpu stage not passed in: $(cat "$report")"
  grep -qF '| build | not run | - | not in --stages |' "$report" || fail "build stage not 'not run': $(cat "$report")"
  grep -qF 'Stand-in GPU, 80 GiB' "$tmp/out/gpu-check.log" || fail "nvidia-smi output not in gpu-check.log"
  # The commit, said to differ when the files do (a copy carried to a GPU machine may have an old .git);
  # a snapshot inside another checkout (git archive) has no history of its own.
  local head top
  top=$(git -C "$src" rev-parse --show-toplevel 2>/dev/null)
  if [[ $top != "$(cd "$src" && pwd)" ]]; then
    grep -qF -- "- source: a copy without git history (set DPSCOPE_SOURCE to name it)" "$report" ||
      fail "a snapshot's source line does not say it has no history: $(cat "$report")"
  else
    head=$(git -C "$src" rev-parse --short HEAD 2>/dev/null) || return 0
    grep -qE "^- source: $head( with uncommitted changes \(the files are not that commit's\))?$" "$report" ||
      fail "no source line naming $head in: $(cat "$report")"
  fi
  # DPSCOPE_SOURCE names a snapshot.
  output=$(DPSCOPE_SOURCE=abc1234 "$script" --build-dir "$tmp/build" --stages gpu "$tmp/out" 2>&1)
  grep -qxF -- "- source: abc1234 (given by DPSCOPE_SOURCE)" "$report" ||
    fail "DPSCOPE_SOURCE not in the source line: $(cat "$report")"
}

case_failed_stage_exits_1() {
  fake_smi
  mkdir -p "$tmp/empty-deps"
  run --deps "$tmp/empty-deps" --build-dir "$tmp/build" --stages gpu,deps,viz "$tmp/out"
  expect_rc 1
  expect_text "gpu-check: FAILED stages: deps;"
  local report="$tmp/out/report.md"
  grep -qF "| deps | FAILED |" "$report" || fail "deps not FAILED in: $(cat "$report")"
  grep -qF "no .deb files in $tmp/empty-deps" "$report" || fail "the reason is not in the report: $(cat "$report")"
  grep -qE '^\| viz \| passed \|' "$report" || fail "the stage after the failure did not run: $(cat "$report")"
}

# The benchmark table from stand-in benchmark programs: the copy bench's row as printed, the
# all-reduce row computed from the bench table's largest size (busbw 242.81 GB/s against a copy rate
# of 1000 GB/s: ratio 0.24; 4 ranks x busbw = 971.2 GB/s: 0.97), and #wrong 3 in the out-of-place
# group fails the stage.
case_benchmark_table() {
  fake_smi
  mkdir -p "$tmp/build/bin"
  cat >"$tmp/build/bin/gpu_copy_bench" <<'BENCH'
#!/bin/sh
printf 'bench-row\tDP scatter, 4 logical GPUs (GB/s)\t812.5\tcudaMemcpy D2D 1000.0 GB/s\t0.81\t>= 0.70\n'
echo "bench-value d2d_copy_gbps 1000.000"
BENCH
  cat >"$tmp/build/bin/dpscope" <<'BENCH'
#!/bin/sh
echo "# dpscope bench all_reduce: backend cuda, 4 x Stand-in GPU"
echo "#                                                              out-of-place                              in-place"
echo "#       size         count    type   redop  root        time     algbw     busbw  #wrong        time     algbw     busbw  #wrong        wall  algo/proto"
echo "#        (B)    (elements)                              (us)    (GB/s)    (GB/s)                (us)    (GB/s)    (GB/s)                (us)"
echo "     1048576        262144   float     sum    -1       10.69     98.10    147.15       0       10.93     95.93    143.90       0       856.0  ring/LL128"
echo "   268435456      67108864   float     sum    -1     1659.00    161.87    242.81       3     1671.20    160.62    240.94       0      1188.7  ring/Simple"
BENCH
  chmod +x "$tmp/build/bin/gpu_copy_bench" "$tmp/build/bin/dpscope"
  run --build-dir "$tmp/build" --stages bench-copy,bench-allreduce "$tmp/out"
  expect_rc 1
  local report="$tmp/out/report.md"
  grep -qF '| DP scatter, 4 logical GPUs (GB/s) | 812.5 | cudaMemcpy D2D 1000.0 GB/s | 0.81 | >= 0.70 |' "$report" ||
    fail "copy row missing: $(cat "$report")"
  grep -qF '| ring all-reduce 256 MiB, 4 logical GPUs: out-of-place busbw (GB/s) | 242.81 | d2d copy 1000.000 | 0.24 | - |' "$report" ||
    fail "all-reduce row missing: $(cat "$report")"
  grep -qF '| same, 4 ranks x busbw: GPU copy rate used (GB/s) | 971.2 | d2d copy 1000.000 | 0.97 | - |' "$report" ||
    fail "all-reduce share row missing: $(cat "$report")"
  grep -qF "| bench-allreduce | FAILED |" "$report" || fail "#wrong 3 did not fail the stage: $(cat "$report")"
  grep -qF "#wrong is '3' at the largest size (out-of-place)" "$report" || fail "the reason is not in the report: $(cat "$report")"
}

# The tests section from a real ctest run over a stand-in test list: one test passes, one fails,
# one skips the way a GPU test does without a GPU (its reason, GoogleTest's line, in the list).
case_tests_summary() {
  fake_smi
  mkdir -p "$tmp/build"
  cat >"$tmp/build/CTestTestfile.cmake" <<'CTEST'
add_test(AnUnwritableFileIsAnIoError "true")
add_test(passes "true")
add_test(fails "false")
add_test(skips "sh" "-c" "echo '[  SKIPPED ] no CUDA GPU on this machine'")
set_tests_properties(skips PROPERTIES SKIP_REGULAR_EXPRESSION "\\[  SKIPPED \\]")
CTEST
  run --build-dir "$tmp/build" --stages tests "$tmp/out"
  expect_rc 1
  local report="$tmp/out/report.md"
  grep -qF '**2 passed, 1 failed, 1 skipped** out of 4' "$report" || fail "wrong summary: $(cat "$report")"
  # The stage's note is ctest's count, not a passing test whose name says "Error".
  grep -qE '^\| tests \| FAILED \| [0-9]+ \| exit [0-9]+: .*1 tests failed out of 4' "$report" ||
    fail "the stage's note: $(grep '^| tests' "$report")"
  grep -qxF -- '- fails (Failed)' "$report" || fail "failed test not named: $(cat "$report")"
  grep -qxF -- '- skips (no CUDA GPU on this machine)' "$report" || fail "skipped test not named: $(cat "$report")"
  [[ -f $tmp/build/gpu-check-logs/tests.junit.xml ]] || fail "ctest wrote no JUnit file"
  grep -qF '| tests | FAILED |' "$report" || fail "tests stage not FAILED: $(cat "$report")"
  # --tests REGEX runs only the matching tests.
  run --build-dir "$tmp/build" --stages tests --tests '^pass' "$tmp/out"
  expect_rc 0
  grep -qF '**1 passed, 0 failed, 0 skipped** out of 1' "$report" || fail "--tests ran others: $(cat "$report")"
}

# The counts come from the JUnit file given to ctest's --output-junit, not from its text: a stand-in
# ctest copies the committed fixture there and prints a summary that disagrees.
case_tests_counted_from_junit() {
  fake_smi
  mkdir -p "$tmp/build" "$tmp/path"
  echo 'add_test(passes "true")' >"$tmp/build/CTestTestfile.cmake"
  cat >"$tmp/path/ctest" <<CTEST
#!/bin/sh
while [ \$# -gt 0 ]; do [ "\$1" = --output-junit ] && cp "$src/tests/scripts/fixtures/gpu_report/logs/tests.junit.xml" "\$2"; shift; done
echo "100% tests passed out of 2"
CTEST
  chmod +x "$tmp/path/ctest"
  PATH="$tmp/path:$PATH" run --build-dir "$tmp/build" --stages tests "$tmp/out"
  expect_rc 0
  local report="$tmp/out/report.md"
  grep -qF '**5 passed, 1 failed, 2 skipped** out of 8' "$report" || fail "not counted from JUnit: $(cat "$report")"
}

# A benchmark that hangs is stopped after DPSCOPE_RUN_TIMEOUT seconds: its stage fails with the
# reason, and the run goes on to write the report.
case_hung_bench_is_stopped() {
  fake_smi
  mkdir -p "$tmp/build/bin"
  printf '#!/bin/sh\nexec sleep 60\n' >"$tmp/build/bin/gpu_copy_bench"
  chmod +x "$tmp/build/bin/gpu_copy_bench"
  local t0=$SECONDS
  DPSCOPE_RUN_TIMEOUT=1 run --build-dir "$tmp/build" --stages bench-copy,viz "$tmp/out"
  expect_rc 1
  ((SECONDS - t0 < 30)) || fail "the hung benchmark was not stopped in time ($((SECONDS - t0)) s)"
  local report="$tmp/out/report.md"
  grep -qF "ran past 1 s and was stopped" "$report" || fail "the reason is not in the report: $(cat "$report")"
  grep -qE "^\| bench-copy \| FAILED \| [0-9]+ \| exit 124: gpu-check: '.*gpu_copy_bench ...' ran past 1 s and was stopped \|$" \
    "$report" || fail "bench-copy's row does not name the limit: $(cat "$report")"
  grep -qE '^\| viz \| passed \|' "$report" || fail "the run did not go on: $(cat "$report")"
}

declare -F "case_$case_name" >/dev/null || fail "no such case"
"case_$case_name"
echo "PASS ($case_name)"
