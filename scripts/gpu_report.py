#!/usr/bin/env python3
"""gpu_report.py: the report of a scripts/gpu-check.sh run (docs/gpu.md), from the files it leaves.

gpu-check.sh drives the stages; this script reads what they wrote and draws the tables. Standard
library only, so it runs wherever python3 does (the GPU machine has no network).

  gpu_report.py report --run RUN_TSV --logs DIR --out DIR   prints report.md on stdout
  gpu_report.py allreduce-rows BENCH_OUT [COPY_OUT]         prints the all-reduce benchmark's rows

RUN_TSV (written by gpu-check.sh) holds tab-separated lines: `meta KEY VALUE` for the run's facts
(started, finished, host, gpu, source, build, cuda_arch, log, jobs, ddp_command, nccl_ranks,
sim_preset) and `stage NAME RESULT SECONDS NOTE` per stage, in order. In DIR: tests.junit.xml (ctest
--output-junit), each stage's NAME.log, bench-calibrate.out.txt, ddp.stats.txt, ddp.sim-stats.txt,
nccl-processes.stats.txt. Benchmarks print tab-separated `bench-row` lines (label, dpscope,
reference, ratio, goal) that the benchmark table is made of.

Exit status: 0; 1 allreduce-rows found no row or a wrong value; 2 usage or unreadable input.
"""
import argparse
import os
import re
import sys
import xml.etree.ElementTree as ET

BENCH_STAGES = ("bench-copy", "bench-allreduce", "bench-mlp", "bench-calibrate")
# A test that needs a GPU says so in its name (CudaDevice.*, NcclBackend.*, *_cuda_nccl, Gpu*); the
# tests of gpu-check.sh itself (scripts_gpu_check_*) need none.
GPU_TEST = re.compile(r"cuda|nccl|gpu(?!_check)", re.IGNORECASE)
MAX_LISTED = 40  # skipped tests named in the report; the rest are counted


class InputError(Exception):
    """An input file missing or malformed: one line naming it and why."""


def read_text(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError as e:
        raise InputError(f"{path}: {e.strerror}") from None


def read_run(path):
    """RUN_TSV -> (meta dict, [(name, result, seconds, note)])."""
    meta, stages = {}, []
    for number, line in enumerate(read_text(path).splitlines(), 1):
        fields = line.split("\t")
        if fields[0] == "meta" and len(fields) == 3:
            meta[fields[1]] = fields[2]
        elif fields[0] == "stage" and len(fields) == 5:
            stages.append(tuple(fields[1:]))
        elif line.strip():
            raise InputError(f"{path}:{number}: expected 'meta KEY VALUE' or 'stage NAME RESULT SECONDS NOTE'")
    return meta, stages


def suite_of(name):
    """GoogleTest's suite (Prefix/Suite.Case/param -> Suite); other tests: the name's first word."""
    if "." in name:
        return name.split(".", 1)[0].split("/")[-1]
    return name.split("_", 1)[0]


def read_junit(path):
    """ctest's JUnit file -> [(name, outcome, reason)], outcome one of passed, failed, skipped."""
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError) as e:
        raise InputError(f"{path}: not a JUnit file ({e})") from None
    cases = []
    for case in root.iter("testcase"):
        name = case.get("name", "?")
        out = case.findtext("system-out") or ""
        if case.find("failure") is not None or case.get("status") == "fail":
            cases.append((name, "failed", "Failed"))
        elif case.find("skipped") is not None or case.get("status") in ("notrun", "disabled"):
            # GoogleTest's own line says why; else ctest's (a skip return code or expression).
            said = re.search(r"\[  SKIPPED \] ?(.*)", out)
            reason = said.group(1).strip() if said and said.group(1).strip() else None
            if reason is None:
                element = case.find("skipped")
                reason = element.get("message", "") if element is not None else case.get("status", "")
            cases.append((name, "skipped", reason or "Skipped"))
        else:
            cases.append((name, "passed", ""))
    return cases


def tests_section(logs, jobs, result):
    lines = ["## Tests"]
    junit = os.path.join(logs, "tests.junit.xml")
    if result == "not run":
        return lines + ["Not run (not in --stages)."]
    if not os.path.isfile(junit):
        return lines + ["ctest wrote no JUnit file: see gpu-check.log (tests)."]
    cases = read_junit(junit)
    count = {o: sum(1 for c in cases if c[1] == o) for o in ("passed", "failed", "skipped")}
    lines.append(f"**{count['passed']} passed, {count['failed']} failed, {count['skipped']} skipped** "
                 f"out of {len(cases)} (ctest, {jobs} jobs).")
    suites = {}
    for name, outcome, _ in cases:
        if GPU_TEST.search(name):
            suites.setdefault(suite_of(name), {"passed": 0, "failed": 0, "skipped": 0})[outcome] += 1
    if suites:
        lines += ["", "GPU tests (their names say cuda, nccl or gpu), per suite:", "",
                  "| suite | passed | failed | skipped |", "|---|---|---|---|"]
        for suite in sorted(suites):
            s = suites[suite]
            lines.append(f"| {suite} | {s['passed']} | {s['failed']} | {s['skipped']} |")
    failed = [c for c in cases if c[1] == "failed"]
    if failed:
        lines += ["", "Failed:"] + [f"- {name} (Failed)" for name, _, _ in failed]
    skipped = [c for c in cases if c[1] == "skipped"]
    if skipped:
        lines += ["", "Skipped (on a GPU machine a GPU test should not skip):"]
        lines += [f"- {name} ({reason})" for name, _, reason in skipped[:MAX_LISTED]]
        if len(skipped) > MAX_LISTED:
            lines.append(f"- ... and {len(skipped) - MAX_LISTED} more")
    return lines


def escape_cell(text):
    return text.replace("|", "\\|")


def benchmarks_section(logs, results):
    lines = ["## Benchmarks", "Each row was measured side by side in one run (bench/gpu/, bench/torch_mlp_step.py).", "",
             "| benchmark | dpscope | reference | ratio | goal |", "|---|---|---|---|---|"]
    rows = []
    for stage in BENCH_STAGES:
        log = os.path.join(logs, f"{stage}.log")
        if results.get(stage, "not run") == "not run" or not os.path.isfile(log):
            continue
        for line in read_text(log).splitlines():
            fields = line.split("\t")
            if fields[0] == "bench-row":
                cells = (fields[1:] + [""] * 5)[:5]
                rows.append("| " + " | ".join(escape_cell(c) for c in cells) + " |")
    return lines + (rows or ["| (no benchmark produced a result: see the stages above) | | | | |"])


def calibration_section(logs, result):
    lines = ["## Calibration of the simulator"]
    out = os.path.join(logs, "bench-calibrate.out.txt")
    if result == "not run" or not os.path.isfile(out):
        return lines + [f"Not measured (bench-calibrate: {result})."]
    body = [line for line in read_text(out).splitlines() if not line.startswith("bench-")]
    return lines + ["```"] + body + ["```"]


def fenced(path):
    return ["```"] + read_text(path).rstrip("\n").splitlines() + ["```"]


def ddp_section(meta, logs, out_dir, result):
    lines = ["## Measured DDP run (4 logical GPUs, cuda backend)",
             f"Command: `{meta.get('ddp_command', 'dpscope train ...')}`", ""]
    if result == "not run":
        return lines + ["Not run (not in --stages)."]
    trace = os.path.join(out_dir, "ddp-cuda.jsonl")
    if os.path.isfile(trace):
        with open(trace, "rb") as f:
            count = sum(1 for _ in f)
        lines += [f"Trace: `{trace}` ({count} lines; open it with dpscope-viz or",
                  "`dpscope trace export --chrome` for Perfetto)."]
        if os.path.isfile(os.path.join(out_dir, "ddp-cuda.png")):
            lines.append(f"Screenshot: `{os.path.join(out_dir, 'ddp-cuda.png')}`.")
    else:
        lines.append(f"No trace was written (ddp: {result}).")
    titles = (("ddp.stats.txt", "`dpscope trace stats`, measured on the GPU:"),
              ("ddp.sim-stats.txt", f"The same run on simulated GPUs ({meta.get('sim_preset', 'h100-sxm')}):"))
    for name, title in titles:
        path = os.path.join(logs, name)
        if os.path.isfile(path):
            lines += ["", title] + fenced(path)
    return lines


def nccl_section(meta, logs, out_dir, result):
    n = meta.get("nccl_ranks", "?")
    lines = ["", f"## NCCL across processes ({n} process(es), one per GPU)",
             f"Command: `dpscope launch --nproc {n} -- dpscope train ... --devices {n} --device cuda "
             "--backend nccl --trace ddp-nccl`", ""]
    if result == "not run":
        return lines + ["Not run (not in --stages)."]
    lines.append(f"Result: {result}; rank traces in `{os.path.join(out_dir, 'ddp-nccl')}/`.")
    stats = os.path.join(logs, "nccl-processes.stats.txt")
    if os.path.isfile(stats):
        lines += ["", "`dpscope trace stats` of rank 0:"] + fenced(stats)
    return lines


def report(run_tsv, logs, out_dir):
    meta, stages = read_run(run_tsv)
    results = {name: result for name, result, _, _ in stages}
    lines = ["# dpscope gpu-check report", "",
             f"- started {meta.get('started', '?')}, finished {meta.get('finished', '?')} on {meta.get('host', '?')}",
             f"- GPU: {meta.get('gpu', '')}",
             f"- source: {meta.get('source', '?')}",
             f"- build: {meta.get('build', '?')} (CUDA arch {meta.get('cuda_arch', '90')}, warnings as errors); "
             f"full log: {meta.get('log', '?')}",
             "", "## Stages", "| stage | result | seconds | note |", "|---|---|---|---|"]
    lines += [f"| {name} | {result} | {seconds} | {escape_cell(note)} |" for name, result, seconds, note in stages]
    lines += [""] + tests_section(logs, meta.get("jobs", "?"), results.get("tests", "not run"))
    lines += [""] + benchmarks_section(logs, results)
    lines += [""] + calibration_section(logs, results.get("bench-calibrate", "not run"))
    lines += [""] + ddp_section(meta, logs, out_dir, results.get("ddp", "not run"))
    lines += nccl_section(meta, logs, out_dir, results.get("nccl-processes", "not run"))
    for name, result, _, _ in stages:
        log = os.path.join(logs, f"{name}.log")
        if result == "FAILED" and os.path.isfile(log):
            lines += ["", f"## {name} failed: the last 40 lines of its log", "```"]
            lines += read_text(log).rstrip("\n").splitlines()[-40:] + ["```"]
    return "\n".join(lines) + "\n"


def allreduce_rows(bench_out, copy_out):
    """The rows of `dpscope bench all_reduce` at its largest size against the copy rate that
    gpu_copy_bench measured (its `bench-value d2d_copy_gbps` line): the out-of-place busbw, and 4 ranks
    x busbw, the share of the GPU's copy rate the 4 ranks use together. Raises InputError on no row, or
    on #wrong other than 0 in either column group (out-of-place, in-place: nccl-tests' layout, whose
    header names time, algbw, busbw and #wrong once per group)."""
    columns, last = None, None
    for line in read_text(bench_out).splitlines():
        if line.startswith("#") and " busbw " in line and "#wrong" in line:
            columns = line[1:].split()
        elif columns and re.match(r"^ *[0-9]+ ", line):
            last = {}
            for name, value in zip(columns, line.split()):
                last.setdefault(name, []).append(value)  # [out-of-place, in-place]
    if last is None or "busbw" not in last:
        raise InputError(f"{bench_out}: no result row in the bench output")
    busbw = last["busbw"][0]
    copy = None
    if copy_out and os.path.isfile(copy_out):
        for line in read_text(copy_out).splitlines():
            fields = line.split()
            if fields[:2] == ["bench-value", "d2d_copy_gbps"] and len(fields) >= 3:
                copy = fields[2]
    label = "ring all-reduce 256 MiB, 4 logical GPUs: out-of-place busbw (GB/s)"
    rows = []
    if copy is not None:
        ratio, share = float(busbw) / float(copy), 4 * float(busbw)
        rows.append(f"bench-row\t{label}\t{busbw}\td2d copy {copy}\t{ratio:.2f}\t-")
        rows.append(f"bench-row\tsame, 4 ranks x busbw: GPU copy rate used (GB/s)\t{share:.1f}\t"
                    f"d2d copy {copy}\t{share / float(copy):.2f}\t-")
    else:
        rows.append(f"bench-row\t{label}\t{busbw}\tn/a (copy bench failed)\t-\t-")
    print("\n".join(rows))
    groups = ("out-of-place", "in-place")
    for i, wrong in enumerate(last.get("#wrong", [])):
        if wrong != "0":
            group = f" ({groups[i]})" if i < len(groups) else ""
            raise InputError(f"#wrong is '{wrong}' at the largest size{group}")


def main(argv):
    parser = argparse.ArgumentParser(prog="gpu_report.py", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    r = commands.add_parser("report", help="print report.md")
    r.add_argument("--run", required=True, help="the run's stages and facts (gpu-check.sh writes it)")
    r.add_argument("--logs", required=True, help="the stage logs' folder")
    r.add_argument("--out", required=True, help="OUT_DIR: the traces and screenshot")
    a = commands.add_parser("allreduce-rows", help="the all-reduce benchmark's bench-row lines")
    a.add_argument("bench_out")
    a.add_argument("copy_out", nargs="?")
    args = parser.parse_args(argv)
    try:
        if args.command == "report":
            sys.stdout.write(report(args.run, args.logs, args.out))
        else:
            allreduce_rows(args.bench_out, args.copy_out)
    except InputError as e:
        print(f"gpu_report: {e}", file=sys.stderr if args.command == "report" else sys.stdout)
        return 2 if args.command == "report" else 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
