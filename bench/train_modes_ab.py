#!/usr/bin/env python3
"""Side by side: the wall time of `dpscope train` in every mode (and of starting dpscope), for two builds, run alternately.

A change to the training layer (one loop for every mode) must not make any mode slower. Each round
runs every mode once with build A and once with build B, in alternating order, so a load that comes
and goes on a shared machine falls on both; the table gives each mode's median over the rounds and
the median of the per-round ratios B / A, of wall time and of CPU time (user + system, which a
load that comes and goes disturbs less).

Usage:
  bench/train_modes_ab.py --a BEFORE/bin/dpscope --b AFTER/bin/dpscope [--rounds 7] [--only MODE,...]

The modes (each a whole `dpscope train` run, untraced and traced where a lesson traces it):
  single-cpu      784-512-512-10, batch 128, 100 steps on the CPU (measured kernels)
  single-sim      the same on one simulated H100, traced
  dp-sim          DataParallel on 4 simulated H100s, batch 512, 50 steps, traced
  ddp-sim         DDP on 4 simulated H100s (rank threads), batch 128 per rank, 50 steps, traced
  ddp-no-sync     the same with --no-sync-every 2 --zero
  timing-only     DDP --timing-only on 1,024 simulated H100s, a 1 B-parameter MLP, 2 steps
And what every command pays before it works, the process start:
  version         `dpscope --version`
  train-tiny      a 4-8-2 MLP, one step on one simulated GPU
  lesson-5        `dpscope lesson run 5 --no-viz` (what a knob in the viewer's lesson panel runs)
Exit codes: 0 done, 1 a run failed, 2 usage error. Standard library only.
"""

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

MLP = ["--model", "784-512-512-10", "--dataset", "blobs:8192:784:10"]
MODES = {
    "single-cpu": ["train", "--mode", "single", "--device", "cpu", *MLP, "--batch", "128", "--steps", "100"],
    "single-sim": ["train", "--mode", "single", *MLP, "--batch", "128", "--steps", "100", "--trace", "{dir}/t.jsonl"],
    "dp-sim": ["train", "--mode", "dp", "--devices", "4", *MLP, "--batch", "512", "--steps", "50", "--trace", "{dir}/t.jsonl"],
    "ddp-sim": ["train", "--mode", "ddp", "--devices", "4", *MLP, "--batch", "128", "--steps", "50", "--trace", "{dir}/t.jsonl"],
    "ddp-no-sync": ["train", "--mode", "ddp", "--devices", "4", *MLP, "--batch", "128", "--steps", "50", "--no-sync-every",
                    "2", "--zero", "--trace", "{dir}/t.jsonl"],
    "timing-only": ["train", "--mode", "ddp", "--timing-only", "--devices", "1024", "--model",
                    "4096-4096-4096-4096-4096-4096-4096-1000", "--batch", "64", "--steps", "2"],
    "version": ["--version"],
    "train-tiny": ["train", "--mode", "single", "--model", "4-8-2", "--dataset", "blobs:64:4:2", "--batch", "8",
                   "--steps", "1"],
    "lesson-5": ["lesson", "run", "5", "--no-viz", "--out", "{dir}/lesson-5"],
}


def children_cpu_seconds():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_once(binary, args, directory):
    """(wall seconds, CPU seconds: user + system) of one run."""
    command = [binary, *[a.replace("{dir}", directory) for a in args]]
    cpu_before = children_cpu_seconds()
    start = time.perf_counter()
    done = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=600)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed ({done.returncode}): {done.stderr.strip()[-300:]}")
    return seconds, children_cpu_seconds() - cpu_before


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--a", required=True, help="the baseline dpscope binary")
    parser.add_argument("--b", required=True, help="the changed dpscope binary")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--only", default="", help="comma-separated modes (default: all)")
    options = parser.parse_args(argv)
    modes = [m for m in options.only.split(",") if m] or list(MODES)
    for m in modes:
        if m not in MODES:
            parser.error(f"--only {m}: not one of {', '.join(MODES)}")
    for b in (options.a, options.b):
        if not os.access(b, os.X_OK):
            parser.error(f"{b}: not an executable")
    if options.rounds < 1:
        parser.error("--rounds must be at least 1")
    times = {m: ([], []) for m in modes}
    with tempfile.TemporaryDirectory() as directory:
        try:
            for m in modes:  # a warm-up run of each, untimed (page cache, OpenBLAS threads)
                run_once(options.a, MODES[m], directory)
                run_once(options.b, MODES[m], directory)
            for r in range(options.rounds):
                for m in modes:
                    order = (0, 1) if r % 2 == 0 else (1, 0)
                    for which in order:
                        binary = (options.a, options.b)[which]
                        times[m][which].append(run_once(binary, MODES[m], directory))
        except (RuntimeError, subprocess.TimeoutExpired) as e:
            print(f"train_modes_ab: error: {e}", file=sys.stderr)
            return 1
    print(f"# {options.rounds} rounds, alternating; A = {options.a}, B = {options.b}")
    print("# medians over the rounds; B/A: the median of the per-round ratios. CPU = user + system time,")
    print("# steadier than wall time on a loaded machine.")
    print(f"# {'mode':<12} {'A wall s':>9} {'B wall s':>9} {'B/A wall':>9} {'A CPU s':>9} {'B CPU s':>9} {'B/A CPU':>8}")
    for m in modes:
        a, b = times[m]
        row = [f"  {m:<12}"]
        for k in (0, 1):  # wall, CPU
            xs, ys = [t[k] for t in a], [t[k] for t in b]
            ratio = statistics.median(y / x for x, y in zip(xs, ys) if x > 0)
            row.append(f"{statistics.median(xs):>9.3f} {statistics.median(ys):>9.3f} {ratio:>{9 if k == 0 else 8}.3f}")
        print(" ".join(row))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
