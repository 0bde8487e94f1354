#!/usr/bin/env bash
# Every chapter of every lesson as a screenshot, in one command: runs `dpscope lesson handout` for
# each lesson into OUT_DIR/ID/ (the Markdown page, the trace and ID-chapter-N.png drawn by
# dpscope-viz in the working view, under xvfb-run without a display), then draws every chapter of
# that trace in presentation mode at 1280x720 and 1920x1080 (OUT_DIR/ID/present-1280x720/ and
# present-1920x1080/, `dpscope-viz --lesson ID TRACE --present --seek chapter:N`), and prints how
# many pictures each lesson got. For reviewing the lessons as a student and a class see them, and
# for slides.
#
# Usage: scripts/lesson-screenshots.sh [--bin DIR] [--lessons ID,ID,...] [--no-present] OUT_DIR
#   --bin DIR      where dpscope and dpscope-viz are (default: build/release/bin, else build/ci/bin)
#   --lessons      only these lessons (ids or numbers, as `dpscope lesson run` takes them)
#   --no-present   the working view only (the handouts' pictures)
# Exit status: 0 every chapter of every lesson drawn; 1 a lesson failed or a chapter has no
# picture (named); 64 bad usage.
set -uo pipefail
cd "$(dirname "$0")/.."

usage() {
  sed -n '10,16p' "$0" | sed 's/^# \{0,1\}//'
  exit 64
}

bin=""
only=""
out=""
present=1
while (($# > 0)); do
  case $1 in
    --bin) (($# >= 2)) || usage; bin=$2; shift ;;
    --lessons) (($# >= 2)) || usage; only=$2; shift ;;
    --no-present) present=0 ;;
    -h | --help) usage ;;
    -*) echo "lesson-screenshots: unknown option '$1'" >&2; exit 64 ;;
    *) [[ -z $out ]] || { echo "lesson-screenshots: one OUT_DIR only (got '$out' and '$1')" >&2; exit 64; }
       out=$1 ;;
  esac
  shift
done
[[ -n $out ]] || { echo "lesson-screenshots: OUT_DIR is required (see --help)" >&2; exit 64; }
if [[ -z $bin ]]; then
  for candidate in build/release/bin build/ci/bin; do
    [[ -x $candidate/dpscope ]] && { bin=$candidate; break; }
  done
fi
[[ -n $bin && -x $bin/dpscope ]] ||
  { echo "lesson-screenshots: no dpscope in '${bin:-build/release/bin or build/ci/bin}' (build first, or --bin DIR)" >&2; exit 64; }
[[ -x $bin/dpscope-viz ]] || { echo "lesson-screenshots: no dpscope-viz in '$bin': nothing can draw the chapters" >&2; exit 1; }

all=$("$bin/dpscope" lesson list | awk 'NF > 1 && $1 ~ /^[0-9][0-9]-/ {print $1}')
if [[ -n $only ]]; then
  # Numbers name lessons as `dpscope lesson run` takes them (6 is 06-ring-tree-naive); an id that
  # matches none is kept, so that its failure is reported under the name given.
  lessons=""
  for want in ${only//,/ }; do
    full=""
    if [[ $want =~ ^[0-9]+$ ]]; then
      full=$(grep -m 1 "^$(printf '%02d' "$((10#$want))")-" <<<"$all")
    fi
    lessons+="${full:-$want} "
  done
else
  lessons=$all
fi

# dpscope-viz needs a display for screenshots: xvfb-run (Debian xvfb) without one.
xvfb=()
if [[ -z ${DISPLAY:-} ]]; then
  command -v xvfb-run >/dev/null || { echo "lesson-screenshots: no DISPLAY and no xvfb-run (apt install xvfb)" >&2; exit 1; }
  xvfb=(xvfb-run -a -s "-screen 0 1920x1080x24")
fi

failed=0
total=0
for id in $lessons; do
  dir="$out/$id"
  mkdir -p "$dir"
  if ! log=$("$bin/dpscope" lesson handout "$id" "$dir" 2>&1); then
    echo "FAIL $id: $(tail -n 1 <<<"$log")"
    failed=1
    continue
  fi
  line=$(grep -E '^chapter pictures: ' <<<"$log")
  drawn=$(sed -E 's/^chapter pictures: ([0-9]+) of ([0-9]+) .*/\1/' <<<"$line")
  chapters=$(sed -E 's/^chapter pictures: ([0-9]+) of ([0-9]+) .*/\2/' <<<"$line")
  if [[ -z $line || $drawn != "$chapters" ]]; then
    echo "FAIL $id: ${line:-no chapter pictures} ($(grep -v '^handout: ' <<<"$log" | tail -n 1))"
    failed=1
    continue
  fi
  total=$((total + drawn))
  presented=0
  if ((present)); then
    trace="$dir/$id.trace.jsonl"
    for size in 1280x720 1920x1080; do
      mkdir -p "$dir/present-$size"
      for ((c = 1; c <= chapters; c++)); do
        png="$dir/present-$size/$id-chapter-$c.png"
        if ! log=$("${xvfb[@]}" "$bin/dpscope-viz" --lesson "$id" "$trace" --present --seek "chapter:$c" \
          --size "$size" --screenshot "$png" 2>&1); then
          echo "FAIL $id: chapter $c in present mode at $size: $(tail -n 1 <<<"$log")"
          failed=1
          continue
        fi
        presented=$((presented + 1))
      done
    done
  fi
  total=$((total + presented))
  if ((present)); then
    echo "ok   $id: $drawn chapters in $dir, $presented in present mode"
  else
    echo "ok   $id: $drawn chapters in $dir"
  fi
done
echo "$total chapter screenshots in $out"
exit "$failed"
