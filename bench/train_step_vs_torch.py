#!/usr/bin/env python3
"""Side-by-side CPU training step: dpscope vs PyTorch, same MLP, batch, loss and optimizer.

Runs build/<preset>/bin/train_step_bench (tracing off and on) and PyTorch (torch.set_num_threads =
cores, as both use all cores) in one run, alternating rounds, and prints median ms per step and ratios.
Usage: bench/train_step_vs_torch.py [--bin build/release/bin] [--model 784-512-512-10] [--batch 128]
       [--baseline-bin DIR]   also run an older build's train_step_bench in the same rounds (a
                              regression check: prints new/old ratios measured side by side)
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time


def torch_step_ms(sizes, batch, steps):
    import torch
    torch.manual_seed(0)
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "parity"))
    from parity_common import build_mlp
    model = build_mlp(sizes)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    x = torch.randn(batch, sizes[0])
    y = torch.randint(0, sizes[-1], (batch,))

    def step():
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()

    for _ in range(10):
        step()
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="build/release/bin")
    ap.add_argument("--model", default="784-512-512-10")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--baseline-bin", default="")
    args = ap.parse_args()
    sizes = [int(s) for s in args.model.split("-")]
    import torch
    torch.set_num_threads(os.cpu_count())
    def run_bench(bin_dir):
        out = subprocess.run([f"{bin_dir}/train_step_bench", args.model, str(args.batch), str(args.steps), "cpu"],
                             check=True, capture_output=True, text=True).stdout
        r = json.loads(out)
        return r["ms_per_step"], r["ms_per_step_traced"]

    ours, ours_traced, theirs, base, base_traced = [], [], [], [], []
    for _ in range(args.rounds):
        o, ot = run_bench(args.bin)
        ours.append(o)
        ours_traced.append(ot)
        if args.baseline_bin:
            b, bt = run_bench(args.baseline_bin)
            base.append(b)
            base_traced.append(bt)
        theirs.append(torch_step_ms(sizes, args.batch, args.steps))
    o, ot, t = statistics.median(ours), statistics.median(ours_traced), statistics.median(theirs)
    print(f"MLP {args.model}, batch {args.batch}, SGD(momentum), CE, {os.cpu_count()} cores, "
          f"torch {torch.__version__}, median of {args.rounds} rounds x {args.steps} steps")
    print(f"{'implementation':<28}{'ms/step':>10}{'vs PyTorch':>12}")
    print(f"{'PyTorch (CPU)':<28}{t:>10.3f}{1.0:>11.2f}x")
    print(f"{'dpscope (cpu, no trace)':<28}{o:>10.3f}{o / t:>11.2f}x")
    print(f"{'dpscope (cpu, traced)':<28}{ot:>10.3f}{ot / t:>11.2f}x")
    if args.baseline_bin:
        b, bt = statistics.median(base), statistics.median(base_traced)
        print(f"{'baseline (cpu, no trace)':<28}{b:>10.3f}{b / t:>11.2f}x")
        print(f"{'baseline (cpu, traced)':<28}{bt:>10.3f}{bt / t:>11.2f}x")
        print(f"this build vs baseline: no trace {100.0 * (o - b) / b:+.1f} %, traced {100.0 * (ot - bt) / bt:+.1f} %")
    print(f"tracing overhead: {100.0 * (ot - o) / o:+.1f} % of step time")


if __name__ == "__main__":
    main()
