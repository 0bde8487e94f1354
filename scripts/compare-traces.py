#!/usr/bin/env python3
"""Proves "no behaviour change": records what dpscope prints and traces for the README's simulated
commands, and compares two recordings (or two traces) in a canonical form.

Usage:
  compare-traces.py record BIN DIR [--only NAME,...]   run the commands below with dpscope BIN in DIR
  compare-traces.py diff A B                           compare two traces, or two recorded directories
  compare-traces.py canon TRACE                        print TRACE in canonical form
  compare-traces.py list                               the recorded commands, one per line

A refactoring records main's build and its own, then diffs them:
  scripts/compare-traces.py record /work/main/build/ci/bin/dpscope /tmp/before
  scripts/compare-traces.py record build/ci/bin/dpscope /tmp/after
  scripts/compare-traces.py diff /tmp/before /tmp/after      # exit 0: identical, 1: they differ

What legitimately differs between two runs of the same binary and command, found by running each
command twice (everything else is compared byte for byte):
  - the order of trace lines: rank threads (ddp) and DataParallel's replica threads write into one
    recorder in whatever order they get to it, so lines are sorted by (ts, rank, dev, text);
  - `flow` ids: the recorder hands them out in that same order, so each id is renumbered by the
    sorted text (without the id) of the events that carry it;
  - on stdout, measured wall-clock time: the `wall time ...` line of `dpscope train` and the `wall`
    column of `dpscope bench`'s table are masked.
Trace paths on stdout do not differ because every command runs in DIR with relative paths.

Exit codes: 0 equal (or done), 1 different or a command failed, 2 usage error. Standard library only.
"""

import json
import os
import re
import subprocess
import sys

# The README's "Train on simulated GPUs" lines, docs/scaling.md's timing-only run, a bench table,
# and two lessons' scenarios (one on the bench, one on training): NAME -> dpscope arguments.
# Each writes NAME.jsonl (lessons: a directory NAME/) and its output goes to NAME.out.
README_SAME = ("--model 784-1024-1024-10 --dataset blobs:4096:784:10 --loss ce --optim sgd --lr 0.05 "
               "--momentum 0.9 --steps 8 --preset h100-sxm").split()
COMMANDS = {
    "single": ["train", *README_SAME, "--mode", "single", "--batch", "1024", "--trace", "single.jsonl"],
    "dp": ["train", *README_SAME, "--mode", "dp", "--devices", "4", "--batch", "1024", "--trace", "dp.jsonl"],
    "ddp": ["train", *README_SAME, "--mode", "ddp", "--devices", "4", "--batch", "256", "--trace", "ddp.jsonl"],
    "scaling": ["train", "--mode", "ddp", "--timing-only", "--devices", "1024", "--preset", "h100-sxm",
                "--model", "4096-4096-4096-4096-4096-4096-4096-1000", "--batch", "64", "--steps", "2",
                "--trace", "scaling.jsonl"],
    "bench_all_reduce": ["bench", "all_reduce", "-b", "8", "-e", "16M", "-f", "4", "--trace",
                         "bench_all_reduce.jsonl"],
    # The training loop's other paths: no_sync steps with ZeRO-1, and a pitfall that stops a run.
    "ddp_no_sync_zero": ["train", "--model", "784-1024-1024-10", "--dataset", "blobs:4096:784:10", "--optim", "adam",
                         "--lr", "0.001", "--steps", "8", "--mode", "ddp", "--devices", "2", "--batch", "256",
                         "--no-sync-every", "3", "--zero", "--trace", "ddp_no_sync_zero.jsonl"],
    "single_input_on_cpu": ["train", "--model", "784-1024-1024-10", "--dataset", "blobs:4096:784:10",
                            "--steps", "3", "--mode", "single", "--batch", "1024", "--pitfall", "input-on-cpu",
                            "--trace", "single_input_on_cpu.jsonl"],
    "lesson_04": ["lesson", "run", "4", "--no-viz", "--out", "lesson_04"],
    "lesson_05": ["lesson", "run", "5", "--no-viz", "--out", "lesson_05"],
}

FLOW = re.compile(r'"flow":(\d+)')
WALL_TIME = re.compile(r"^wall time .*$", re.MULTILINE)


class UsageError(Exception):
    pass


def read_trace(path):
    """The lines of the trace at `path`, each parsed (a malformed line stops with its number)."""
    lines = []
    with open(path, encoding="utf-8") as f:
        for number, text in enumerate(f, 1):
            text = text.rstrip("\n")
            try:
                event = json.loads(text)
            except json.JSONDecodeError as e:
                raise UsageError(f"{path}:{number}: not a JSON line ({e.msg})") from None
            lines.append((text, event))
    return lines


def canonical_trace(path):
    """The trace's lines in canonical form: the header first as written, then the events sorted by
    (ts, rank, dev, text) with flow ids renumbered by the content of the events they link."""
    lines = read_trace(path)
    header = [text for text, event in lines if event.get("type") == "header"]
    events = [(text, event) for text, event in lines if event.get("type") != "header"]
    # Each flow id -> the sorted texts (id blanked) of the events carrying it.
    linked = {}
    for text, event in events:
        if "flow" in event:
            blanked, count = FLOW.subn('"flow":_', text)
            if count != 1:
                raise UsageError(f"{path}: an event has {count} flow fields: {text[:120]}")
            linked.setdefault(event["flow"], []).append(blanked)
    renumbered = {}
    for new_id, (old_id, _) in enumerate(sorted(linked.items(), key=lambda item: sorted(item[1])), 1):
        renumbered[old_id] = new_id
    out = []
    for text, event in events:
        if "flow" in event:
            text = FLOW.sub(f'"flow":{renumbered[event["flow"]]}', text)
        out.append((event.get("ts", -1), event.get("rank", -1), event.get("dev", -1), text))
    out.sort()
    return header + [text for *_, text in out]


def canonical_output(text):
    """A command's printed output with its measured wall-clock times masked."""
    text = WALL_TIME.sub("wall time <measured>", text)
    # dpscope bench: the column headed `wall` under a `#  size  count ...` header line.
    wall_column = None
    lines = []
    for line in text.split("\n"):
        fields = line.split()
        if line.startswith("#") and "wall" in fields and "size" in fields:
            wall_column = fields.index("wall") - 1  # the header's fields start with "#"
        elif wall_column is not None and fields and not line.startswith("#") and len(fields) > wall_column:
            fields[wall_column] = "<measured>"
            line = " ".join(fields)
        lines.append(line)
    return "\n".join(lines)


def first_difference(a, b):
    """(index, line of a, line of b) of the first lines that differ, or None."""
    for i in range(max(len(a), len(b))):
        left = a[i] if i < len(a) else "<end>"
        right = b[i] if i < len(b) else "<end>"
        if left != right:
            return i, left, right
    return None


def compare_file(a, b, name):
    """Returns a list of messages (empty when `a` and `b` are equal in canonical form)."""
    if name.endswith(".jsonl"):
        left, right = canonical_trace(a), canonical_trace(b)
        what = "canonical line"
    elif name.endswith(".out"):
        with open(a, encoding="utf-8", errors="replace") as f:
            left = canonical_output(f.read()).split("\n")
        with open(b, encoding="utf-8", errors="replace") as f:
            right = canonical_output(f.read()).split("\n")
        what = "output line"
    else:
        with open(a, "rb") as f:
            left_bytes = f.read()
        with open(b, "rb") as f:
            right_bytes = f.read()
        return [] if left_bytes == right_bytes else [f"{name}: the files differ byte for byte"]
    found = first_difference(left, right)
    if found is None:
        return []
    i, l, r = found
    return [f"{name}: {what} {i + 1} differs ({len(left)} vs {len(right)} lines)\n  - {l[:300]}\n  + {r[:300]}"]


def files_under(root):
    found = set()
    for directory, _, names in os.walk(root):
        for n in names:
            found.add(os.path.relpath(os.path.join(directory, n), root))
    return found


def diff(a, b):
    for p in (a, b):
        if not os.path.exists(p):
            raise UsageError(f"{p}: no such file or directory")
    if os.path.isdir(a) != os.path.isdir(b):
        raise UsageError(f"diff takes two traces or two directories: {a} and {b}")
    if not os.path.isdir(a):
        problems = compare_file(a, b, os.path.basename(a))
        names = [a]
    else:
        left, right = files_under(a), files_under(b)
        problems = [f"{n}: only in {a}" for n in sorted(left - right)]
        problems += [f"{n}: only in {b}" for n in sorted(right - left)]
        names = sorted(left & right)
        for n in names:
            problems += compare_file(os.path.join(a, n), os.path.join(b, n), n)
    for p in problems:
        print(p)
    print(f"compare-traces: {len(names)} files compared, {'differ' if problems else 'identical'}")
    return 1 if problems else 0


def record(binary, directory, only):
    binary = os.path.abspath(binary)
    if not os.access(binary, os.X_OK):
        raise UsageError(f"{binary}: not an executable")
    names = list(COMMANDS) if only is None else only
    for n in names:
        if n not in COMMANDS:
            raise UsageError(f"--only {n}: not one of {', '.join(COMMANDS)}")
    os.makedirs(directory, exist_ok=True)
    failed = 0
    for n in names:
        run = subprocess.run([binary, *COMMANDS[n]], cwd=directory, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, timeout=600)
        with open(os.path.join(directory, n + ".out"), "wb") as f:
            f.write(run.stdout)
            f.write(f"\nexit status {run.returncode}\n".encode())
        print(f"{n}: exit {run.returncode}")
        failed += run.returncode != 0
    return 1 if failed else 0


def main(argv):
    try:
        if len(argv) >= 1 and argv[0] == "list":
            for n, args in COMMANDS.items():
                print(f"{n}: dpscope {' '.join(args)}")
            return 0
        if len(argv) == 2 and argv[0] == "canon":
            print("\n".join(canonical_trace(argv[1])))
            return 0
        if len(argv) == 3 and argv[0] == "diff":
            return diff(argv[1], argv[2])
        if len(argv) in (3, 5) and argv[0] == "record":
            only = None
            if len(argv) == 5:
                if argv[3] != "--only":
                    raise UsageError(f"unknown option {argv[3]}")
                only = [n for n in argv[4].split(",") if n]
            return record(argv[1], argv[2], only)
        raise UsageError("usage: compare-traces.py record BIN DIR [--only NAME,...] | diff A B | canon TRACE | list")
    except UsageError as e:
        print(f"compare-traces: error: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"compare-traces: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
