#!/usr/bin/env python3
"""One MLP training step in PyTorch eager, timed on a GPU (or the CPU), and side by side with dpscope.

Same model (nn.Sequential of Linear + ReLU, --model A-B-C), batch, loss (cross-entropy) and optimizer
(SGD lr 0.01, momentum 0.9; PyTorch's defaults otherwise: foreach on CUDA) as
bench/gpu/gpu_mlp_step_bench. TF32 stays off for matmul (PyTorch's default, and dpscope's).
Time = median over blocks of 10 steps, each block between torch.cuda.synchronize() calls.
With --dpscope-bin, PyTorch's step is also timed under torch.profiler (CPU and CUDA activities,
the way people profile a step), so dpscope's tracing cost sits beside PyTorch's own profiler's.

Usage:
  bench/torch_mlp_step.py [--device cuda] [--batch 128]          one JSON line, PyTorch only
  bench/torch_mlp_step.py --dpscope-bin build/.../gpu_mlp_step_bench [--batch 4096]
      both, alternating rounds, then a table with the ratio and one "bench-row" line for
      scripts/gpu-check.sh's report.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time


def torch_ms_per_step(sizes, batch, steps, device, profiled=False):
    """Median ms per step; profiled: every step runs under torch.profiler (CPU + CUDA activities)."""
    import contextlib
    import torch
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "parity"))
    from parity_common import build_mlp

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.manual_seed(0)
    model = build_mlp(sizes).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    x = torch.randn(batch, sizes[0], device=device)
    y = torch.randint(0, sizes[-1], (batch,), device=device)

    def sync():
        if device == "cuda":
            torch.cuda.synchronize()

    def step():
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()

    context = contextlib.nullcontext()
    if profiled:
        activities = [torch.profiler.ProfilerActivity.CPU]
        if device == "cuda":
            activities.append(torch.profiler.ProfilerActivity.CUDA)
        context = torch.profiler.profile(activities=activities)
    per_step = []
    with context:  # the profiler's post-processing at exit is not timed, as dpscope's is not
        for _ in range(10):
            step()
        block = 10
        for _ in range(max(1, steps // block)):
            sync()
            t0 = time.perf_counter()
            for _ in range(block):
                step()
            sync()
            per_step.append((time.perf_counter() - t0) / block)
    return statistics.median(per_step) * 1e3


def dpscope_ms_per_step(binary, model, batch, steps):
    out = subprocess.run([binary, model, str(batch), str(steps)], capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"torch_mlp_step: {binary} failed (exit {out.returncode}): {out.stderr.strip()}")
    return json.loads(out.stdout)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--model", default="784-512-512-10")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--dpscope-bin", default="", help="gpu_mlp_step_bench to run side by side")
    args = ap.parse_args()
    sizes = [int(s) for s in args.model.split("-")]
    import torch
    if args.device == "cuda" and not torch.cuda.is_available():
        print("torch_mlp_step: PyTorch sees no CUDA GPU", file=sys.stderr)
        return 2

    if not args.dpscope_bin:
        ms = torch_ms_per_step(sizes, args.batch, args.steps, args.device)
        print(json.dumps({"impl": "torch", "model": args.model, "batch": args.batch, "device": args.device,
                          "ms_per_step": round(ms, 4)}))
        return 0

    keys = ["ms_per_step", "ms_per_step_traced", "ms_per_step_timer_only", "ms_per_step_traced_events",
            "ms_per_step_sampled_10", "ms_per_step_sampled_50", "ms_per_step_phases_only"]
    graph_keys = ["ms_per_step_graph", "ms_per_step_graph_cupti"]
    # Where sampled tracing's cost goes (diagnostics, printed as measured).
    split_keys = ["ms_per_step_phases_no_flush", "ms_per_step_phases_null_sink", "ms_host_sampled_step",
                  "ms_host_step_after_sampled", "ms_host_other_step", "us_cuda_event_record",
                  "us_device_record", "us_cuda_event_query", "us_cuda_event_elapsed", "us_flush_soon"]
    split = {k: [] for k in split_keys}
    ours, theirs, profiled, gpu, timer, untimed = {k: [] for k in keys + graph_keys}, [], [], "", "", 0
    graph_notes = set()
    for _ in range(args.rounds):  # alternating, so both see the same clocks and temperature
        r = dpscope_ms_per_step(args.dpscope_bin, args.model, args.batch, args.steps)
        for k in keys:
            ours[k].append(r[k])
        for k in split_keys:
            if k in r:
                split[k].append(r[k])
        if r.get("graph_error"):
            graph_notes.add(f"could not be captured: {r['graph_error']}")
        elif r.get("ms_per_step_graph", -1) > 0:
            for k in graph_keys:
                ours[k].append(r[k])
            graph_notes.add(f"{r.get('graph_nodes', 0)} nodes, parameters after the replays vs eager: "
                            f"max |diff| {r.get('graph_max_abs_diff', -1):.3g}")
        gpu, timer = r.get("gpu", ""), r.get("kernel_timer", "")
        untimed += r.get("untimed_spans", 0)
        theirs.append(torch_ms_per_step(sizes, args.batch, args.steps, args.device))
        profiled.append(torch_ms_per_step(sizes, args.batch, args.steps, args.device, profiled=True))
    o, ot, oc, oe, s10, s50, sp = (statistics.median(ours[k]) for k in keys)
    t, tp = statistics.median(theirs), statistics.median(profiled)
    print(f"MLP {args.model}, batch {args.batch}, SGD(momentum), CE, on {gpu or args.device}, "
          f"torch {torch.__version__}, median of {args.rounds} rounds x {args.steps} steps")
    print(f"kernel timer: {timer}; spans with no GPU work found: {untimed}")
    print(f"{'implementation':<34}{'ms/step':>10}{'vs PyTorch':>12}{'vs untraced':>13}")
    print(f"{'PyTorch eager':<34}{t:>10.3f}{1.0:>11.2f}x")
    print(f"{'PyTorch eager, torch.profiler on':<34}{tp:>10.3f}{tp / t:>11.2f}x")
    for name, ms in [("dpscope (cuda, no trace)", o), ("dpscope (cuda, traced)", ot),
                     ("dpscope (cuda, timer only)", oc), ("dpscope (cuda, traced, events)", oe),
                     ("dpscope (kernels 1 step in 10)", s10), ("dpscope (kernels 1 step in 50)", s50),
                     ("dpscope (phase spans only)", sp)]:
        print(f"{name:<34}{ms:>10.3f}{ms / t:>11.2f}x{ms / o:>12.2f}x")
    print(f"bench-row\tMLP {args.model} step, batch {args.batch} (ms)\t{o:.3f}\tPyTorch eager {t:.3f}"
          f"\t{o / t:.2f}\t<= 1.00")
    print(f"bench-row\ttracing cost, batch {args.batch} (traced / untraced)\t{ot:.3f}\tuntraced {o:.3f}"
          f"\t{ot / o:.2f}\t<= 1.05")
    # Tracing's cost against the profiler's, each as the share of its own untraced step it adds.
    ours_cost, torch_cost = ot / o - 1, tp / t - 1
    versus = f"{ours_cost / torch_cost:.2f}" if torch_cost > 0 else "-"
    print(f"tracing adds {100 * ours_cost:.1f} % to dpscope's step; torch.profiler adds "
          f"{100 * torch_cost:.1f} % to PyTorch's")
    print(f"bench-row\ttracing cost vs torch.profiler's, batch {args.batch} (added share)"
          f"\t{100 * ours_cost:.1f} %\ttorch.profiler {100 * torch_cost:.1f} %\t{versus}\t< 1")
    print(f"bench-row\t  of which the kernel timer, batch {args.batch} (timer only / untraced)\t{oc:.3f}"
          f"\tuntraced {o:.3f}\t{oc / o:.2f}\t-")
    print(f"bench-row\t  traced with CUDA events instead, batch {args.batch}\t{oe:.3f}"
          f"\tuntraced {o:.3f}\t{oe / o:.2f}\t-")
    # Sampled tracing (train --trace-kernels-every K): every kernel of one step in K, phases otherwise.
    for k, ms in [(10, s10), (50, s50)]:
        print(f"bench-row\tsampled tracing, kernels 1 step in {k}, batch {args.batch} (traced / untraced)"
              f"\t{ms:.3f}\tuntraced {o:.3f}\t{ms / o:.2f}\t<= 1.05")
    print(f"bench-row\t  of which the phase spans, batch {args.batch} (phases only / untraced)\t{sp:.3f}"
          f"\tuntraced {o:.3f}\t{sp / o:.2f}\t-")
    if all(split[k] for k in split_keys):
        m = {k: statistics.median(v) for k, v in split.items()}
        print(f"phase spans only: {sp / o:.3f}x; without the per-step hand-off to the writer "
              f"{m['ms_per_step_phases_no_flush'] / o:.3f}x; into no recorder "
              f"{m['ms_per_step_phases_null_sink'] / o:.3f}x")
        print(f"kernels 1 step in 10, host ms per step: the sampled step {m['ms_host_sampled_step']:.3f}, "
              f"the next {m['ms_host_step_after_sampled']:.3f}, the others {m['ms_host_other_step']:.3f}")
        print(f"us per call: cudaEventRecord {m['us_cuda_event_record']:.2f}, device record (pool + record) "
              f"{m['us_device_record']:.2f}, cudaEventQuery {m['us_cuda_event_query']:.2f}, "
              f"cudaEventElapsedTime {m['us_cuda_event_elapsed']:.2f}, flush_soon {m['us_flush_soon']:.2f}")
    sampled_cost = s10 / o - 1
    sampled_versus = f"{sampled_cost / torch_cost:.2f}" if torch_cost > 0 else "-"
    print(f"bench-row\tsampled tracing (1 in 10) vs torch.profiler's, batch {args.batch} (added share)"
          f"\t{100 * sampled_cost:.1f} %\ttorch.profiler {100 * torch_cost:.1f} %\t{sampled_versus}\t< 1")
    # The experiment of gpu_mlp_step_bench: the step captured once as a CUDA graph and replayed.
    for note in sorted(graph_notes):
        print(f"CUDA graph of the step: {note}")
    if ours["ms_per_step_graph"]:
        g, gc = (statistics.median(ours[k]) for k in graph_keys)
        print(f"{'dpscope (cuda graph replay)':<34}{g:>10.3f}{g / t:>11.2f}x{g / o:>12.2f}x")
        print(f"{'dpscope (graph replay, CUPTI on)':<34}{gc:>10.3f}{gc / t:>11.2f}x{gc / o:>12.2f}x")
        print(f"bench-row\texperiment: the step as a CUDA graph replay, batch {args.batch} (ms)\t{g:.3f}"
              f"\teager {o:.3f}\t{g / o:.2f}\t-")
        print(f"bench-row\texperiment: CUPTI timing a graph replay's kernels, batch {args.batch}\t{gc:.3f}"
              f"\tgraph replay {g:.3f}\t{gc / g:.2f}\t<= 1.05")
    return 0


if __name__ == "__main__":
    sys.exit(main())
