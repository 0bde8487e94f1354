#!/usr/bin/env python3
"""Tests of scripts/compare-traces.py, the proof that a refactoring changed no behaviour.

  compare_traces_test.py SOURCE_DIR DPSCOPE_BIN CASE

Cases:
  synthetic           the canonical form ignores line order and flow numbering, and nothing else
  same_binary_equal   two recordings by one binary compare equal (so the canonical form absorbs
                      exactly what varies run to run: ddp and dp threads interleave differently)
  other_lr_detected   a recording with another --lr differs, and diff names the file
  usage_errors        bad arguments: one `compare-traces: error:` line, exit 2
Prints `PASS (CASE)` on success.
"""

import os
import shutil
import subprocess
import sys
import tempfile


def run(args, cwd=None):
    return subprocess.run(args, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=600)


def check(condition, message):
    if not condition:
        print(f"FAIL: {message}")
        sys.exit(1)


def write(path, lines):
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


HEADER = '{"type":"header","format":"dpscope-trace","version":"1.0","clock":"simulated"}'
SEND = '{"type":"transfer","ts":10,"rank":0,"dev":0,"step":0,"name":"ring","src":0,"dst":2,"bytes":8,"flow":%d}'
RECV = '{"type":"transfer","ts":10,"rank":1,"dev":2,"step":0,"name":"ring","src":2,"dst":3,"bytes":8,"flow":%d}'
SPAN = '{"type":"span","ts":0,"rank":1,"dev":2,"step":0,"name":"fwd","dur":5}'


def synthetic(script, tmp):
    a, b, c, d = (os.path.join(tmp, n) for n in ("a.jsonl", "b.jsonl", "c.jsonl", "d.jsonl"))
    write(a, [HEADER, SEND % 1, SPAN, RECV % 2])
    write(b, [HEADER, RECV % 7, SEND % 3, SPAN])  # other order, other flow ids: the same run
    r = run([sys.executable, script, "diff", a, b])
    check(r.returncode == 0, f"reordered lines and renumbered flows should compare equal:\n{r.stdout}{r.stderr}")
    canon = run([sys.executable, script, "canon", b]).stdout.split("\n")
    check(canon[0] == HEADER, "the header stays first")
    check(canon[1] == SPAN and '"flow":1' in canon[2] and '"flow":2' in canon[3],
          f"events sorted by ts, flows numbered by content:\n{canon}")
    # One event linked to another: the same lines, but the two transfers now share one flow.
    write(c, [HEADER, SEND % 4, SPAN, RECV % 4])
    r = run([sys.executable, script, "diff", a, c])
    check(r.returncode == 1, "a flow that links other events must differ")
    # One byte of a value changed (`bytes` 8 -> 9).
    write(d, [HEADER, SEND % 1, SPAN, (RECV % 2).replace('"bytes":8', '"bytes":9')])
    r = run([sys.executable, script, "diff", a, d])
    check(r.returncode == 1 and "a.jsonl: canonical line" in r.stdout, f"a changed value must differ:\n{r.stdout}")
    # Masked output: wall-clock lines and bench's wall column differ, nothing else.
    out1, out2 = os.path.join(tmp, "x1.out"), os.path.join(tmp, "x2.out")
    table = "#  size  count  type  redop  root  time  algbw  busbw  wall  #wrong  algo/proto"
    write(out1, ["wall time 1.0 s (4 steps/s)", table, "  8  2  float  sum  -1  10.20  0.00  0.00  9662.4  0  ring/LL"])
    write(out2, ["wall time 2.5 s (2 steps/s)", table, "  8  2  float  sum  -1  10.20  0.00  0.00  11.0  0  ring/LL"])
    check(run([sys.executable, script, "diff", out1, out2]).returncode == 0, "measured wall times are masked")
    write(out2, ["wall time 2.5 s (2 steps/s)", table, "  8  2  float  sum  -1  10.21  0.00  0.00  11.0  0  ring/LL"])
    check(run([sys.executable, script, "diff", out1, out2]).returncode == 1, "a simulated time is not masked")


COMMON = ["single", "ddp", "bench_all_reduce"]


def same_binary_equal(script, binary, tmp):
    first, second = os.path.join(tmp, "first"), os.path.join(tmp, "second")
    for d in (first, second):
        r = run([sys.executable, script, "record", binary, d, "--only", ",".join(COMMON)])
        check(r.returncode == 0, f"record failed:\n{r.stdout}{r.stderr}")
    r = run([sys.executable, script, "diff", first, second])
    check(r.returncode == 0, f"two recordings by one binary should be equal:\n{r.stdout}")
    check("6 files compared, identical" in r.stdout, f"every recorded file is compared:\n{r.stdout}")


def other_lr_detected(script, binary, tmp):
    first, other = os.path.join(tmp, "first"), os.path.join(tmp, "other")
    r = run([sys.executable, script, "record", binary, first, "--only", "single"])
    check(r.returncode == 0, f"record failed:\n{r.stdout}{r.stderr}")
    shutil.copytree(first, other)
    # The recorded command, with another learning rate.
    listed = [line for line in run([sys.executable, script, "list"]).stdout.split("\n") if line.startswith("single:")]
    args = listed[0].split()[2:]
    args[args.index("--lr") + 1] = "0.06"
    r = run([binary, *args], cwd=other)
    check(r.returncode == 0, f"train failed: {r.stderr}")
    r = run([sys.executable, script, "diff", first, other])
    check(r.returncode == 1, f"another --lr must differ:\n{r.stdout}")
    check("single.jsonl: canonical line" in r.stdout, f"the differing trace is named:\n{r.stdout}")


def usage_errors(script, tmp):
    for args, words in (([], "usage:"), (["diff", os.path.join(tmp, "nope"), tmp], "no such file"),
                        (["record", os.path.join(tmp, "nope"), tmp], "not an executable"),
                        (["frobnicate"], "usage:")):
        r = run([sys.executable, script, *args])
        lines = r.stderr.strip().split("\n")
        check(r.returncode == 2 and len(lines) == 1 and lines[0].startswith("compare-traces: error:")
              and words in lines[0], f"{args}: exit {r.returncode}, stderr {r.stderr!r}")
    bad = os.path.join(tmp, "bad.jsonl")
    write(bad, [HEADER, "{not json"])
    r = run([sys.executable, script, "canon", bad])
    check(r.returncode == 2 and "bad.jsonl:2: not a JSON line" in r.stderr, f"malformed line: {r.stderr!r}")


def main():
    if len(sys.argv) != 4:
        print(__doc__)
        return 2
    source, binary, case = sys.argv[1:]
    script = os.path.join(source, "scripts", "compare-traces.py")
    with tempfile.TemporaryDirectory(prefix="compare-traces-") as tmp:
        if case == "synthetic":
            synthetic(script, tmp)
        elif case == "same_binary_equal":
            same_binary_equal(script, binary, tmp)
        elif case == "other_lr_detected":
            other_lr_detected(script, binary, tmp)
        elif case == "usage_errors":
            usage_errors(script, tmp)
        else:
            print(f"unknown case {case}")
            return 2
    print(f"PASS ({case})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
