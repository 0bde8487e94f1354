#!/usr/bin/env bash
# Tests of the quick start's scripts (scripts/run.sh, scripts/install-deps.sh): the lesson profile
# installs a part of the full list and none of the test suite's or MPI's packages; a bad option is
# one error line, exit 2; a failing stage prints FAILED, the tail of its log and one error line
# naming the log, exits 1, and keeps the whole log; a machine with everything says so in one line.
# Usage: quick_start_test.sh SOURCE_DIR CASE
set -uo pipefail
src=$1
case_name=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() {
  echo "FAIL: $*"
  exit 1
}
# A machine where every package is installed, whatever this one has (the GPU machine is not Debian
# and has none of them): dpkg-query says so, and apt-get or sudo, if called, leave a mark.
mkdir -p "$tmp/bin"
cat >"$tmp/bin/dpkg-query" <<'STUB'
#!/usr/bin/env bash
printf 'install ok installed'
STUB
for tool in apt-get sudo; do
  printf '#!/usr/bin/env bash\necho "$0 $*" >>"%s/called"\nexit 1\n' "$tmp" >"$tmp/bin/$tool"
done
chmod +x "$tmp/bin/"*
export PATH="$tmp/bin:$PATH"

case "$case_name" in
  lesson_profile_is_a_part)
    all=$("$src/scripts/install-deps.sh" --list) || fail "--list: $all"
    lesson=$("$src/scripts/install-deps.sh" --lesson --list) || fail "--lesson --list: $lesson"
    [[ $(wc -l <<<"$lesson") -lt $(wc -l <<<"$all") ]] || fail "the lesson profile is not smaller"
    for p in $lesson; do grep -qx "$p" <<<"$all" || fail "$p is in --lesson but not in the full list"; done
    for p in libgtest-dev libbenchmark-dev libopenmpi-dev openmpi-bin python3-numpy; do
      grep -qx "$p" <<<"$lesson" && fail "--lesson installs $p, which lesson 1 does not need"
    done
    for p in cmake libimgui-dev libglfw3-dev xvfb libzstd-dev; do
      grep -qx "$p" <<<"$lesson" || fail "--lesson misses $p"
    done
    ;;
  bad_option)
    out=$("$src/scripts/install-deps.sh" --frobnicate 2>&1)
    code=$?
    [[ $code == 2 ]] || fail "exit $code: $out"
    [[ $out == "dpscope: error: unknown option '--frobnicate'"* && $(wc -l <<<"$out") == 1 ]] || fail "'$out'"
    ;;
  everything_installed_is_one_line)
    out=$("$src/scripts/install-deps.sh" --lesson 2>&1) || fail "$out"
    [[ $out == "dpscope: all "*" packages already installed" && $(wc -l <<<"$out") == 1 ]] || fail "'$out'"
    ;;
  failing_stage_prints_its_log)
    # A cmake that fails after many lines: run.sh says FAILED for the build, prints the tail and
    # names the log, which keeps every line. (Run from a copy, so that nothing is built here.)
    mkdir -p "$tmp/repo/scripts"
    cp "$src/scripts/run.sh" "$src/scripts/install-deps.sh" "$src/scripts/build.sh" "$tmp/repo/scripts/"
    cat >"$tmp/bin/cmake" <<'CMAKE'
#!/usr/bin/env bash
for i in $(seq 1 100); do echo "compiling unit $i"; done
echo "fatal: the compiler broke" >&2
exit 1
CMAKE
    chmod +x "$tmp/bin/cmake"
    out=$(cd "$tmp/repo" && DPSCOPE_OUT="$tmp/out" scripts/run.sh 2>&1)
    code=$?
    [[ $code == 1 ]] || fail "exit $code: $out"
    grep -q "^== build dpscope and dpscope-viz .*FAILED$" <<<"$out" || fail "no FAILED line: $out"
    grep -q "fatal: the compiler broke" <<<"$out" || fail "the log's tail is not printed: $out"
    grep -q "compiling unit 1$" <<<"$out" && fail "the whole log was printed, not its tail: $out"
    tail -n 1 <<<"$out" | grep -q "^dpscope: error: build dpscope and dpscope-viz .* failed (the whole log: $tmp/out/logs/build.log)$" ||
      fail "last line: $(tail -n 1 <<<"$out")"
    grep -q "compiling unit 1$" "$tmp/out/logs/build.log" || fail "the log lost its first lines"
    ;;
  *) fail "unknown case $case_name" ;;
esac
[[ -e $tmp/called ]] && fail "apt-get or sudo was called: $(cat "$tmp/called")"
echo "PASS ($case_name)"
