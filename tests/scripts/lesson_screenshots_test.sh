#!/usr/bin/env bash
# Tests of scripts/lesson-screenshots.sh: usage errors exit 64 naming the problem; with the built
# dpscope and dpscope-viz, one lesson's chapters are all drawn, in the working view and in present
# mode at 1280x720 and 1920x1080 (skipped, exit 77, where nothing can draw: no dpscope-viz in the
# build, or neither a display nor xvfb-run).
# Usage: lesson_screenshots_test.sh SOURCE_DIR BIN_DIR
set -uo pipefail
src=$1
bin=$2
script="$src/scripts/lesson-screenshots.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() {
  echo "FAIL: $*"
  exit 1
}

out=$("$script" 2>&1)
[[ $? == 64 && $out == *"OUT_DIR is required"* ]] || fail "no OUT_DIR: '$out'"
out=$("$script" --frobnicate "$tmp/x" 2>&1)
[[ $? == 64 && $out == *"unknown option '--frobnicate'"* ]] || fail "unknown option: '$out'"
out=$("$script" --bin "$tmp/nowhere" "$tmp/x" 2>&1)
[[ $? == 64 && $out == *"no dpscope in '$tmp/nowhere'"* ]] || fail "missing binary: '$out'"

if [[ ! -x $bin/dpscope-viz ]]; then echo "SKIP: dpscope-viz is not built"; exit 77; fi
if [[ -z ${DISPLAY:-} ]] && ! command -v xvfb-run >/dev/null; then echo "SKIP: no display, no xvfb-run"; exit 77; fi
out=$("$script" --bin "$bin" --lessons 6 "$tmp/shots" 2>&1) || fail "lesson 6: $out"
[[ $out == *"ok   06-ring-tree-naive: 2 chapters in $tmp/shots/06-ring-tree-naive, 4 in present mode"* ]] ||
  fail "no ok line: $out"
[[ $out == *$'\n'"6 chapter screenshots in $tmp/shots"* ]] || fail "no total: $out"
dir="$tmp/shots/06-ring-tree-naive"
for n in 1 2; do
  for png in "$dir/06-ring-tree-naive-chapter-$n.png" "$dir/present-1280x720/06-ring-tree-naive-chapter-$n.png" \
    "$dir/present-1920x1080/06-ring-tree-naive-chapter-$n.png"; do
    [[ $(head -c 4 "$png" | od -An -c | tr -d ' ') == '211PNG' ]] || fail "$png is not a PNG"
  done
done
out=$("$script" --bin "$bin" --lessons 99 "$tmp/shots" 2>&1)
[[ $? == 1 && $out == *"FAIL 99: "* ]] || fail "an unknown lesson must fail and be named: '$out'"
echo "PASS (lesson_screenshots)"
