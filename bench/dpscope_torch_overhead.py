#!/usr/bin/env python3
"""What dpscope_torch costs a real PyTorch DDP step: the same job with and without watch(), side by side.

A 784-512-512-10 MLP (nn.Sequential of Linear + ReLU), cross-entropy, SGD, batch 64 per rank, on two
gloo processes of this machine's CPUs (one thread each), started by `dpscope launch`; rounds
alternate watched and plain runs, so both see the same machine. Each run times STEPS steps after a
warm-up on rank 0 (the median of blocks of 10 steps, each block between barriers) and prints it;
this driver prints the medians over rounds and the ratio (goal: watched / plain <= 1.03).

Usage:
  /usr/bin/python3 bench/dpscope_torch_overhead.py [--dpscope build/release/bin/dpscope] [--rounds 5]
      [--steps 200] [--batch 64] [--model 784-512-512-10] [--values-every 10]
Per rank (what the driver launches): dpscope_torch_overhead.py --rank-run [--trace-dir DIR] ...
"""
import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
WARMUP, BLOCK = 10, 10


def rank_run(args):
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    from torch.utils.data import DataLoader, TensorDataset
    from torch.utils.data.distributed import DistributedSampler

    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    sizes = [int(s) for s in args.model.split("-")]
    layers = []
    for a, b in zip(sizes[:-1], sizes[1:]):
        layers += [torch.nn.Linear(a, b), torch.nn.ReLU()]
    torch.manual_seed(0)
    ddp = DDP(torch.nn.Sequential(*layers[:-1]))
    steps = WARMUP + args.steps
    samples = steps * args.batch * dist.get_world_size()
    data = torch.Generator().manual_seed(1)
    dataset = TensorDataset(torch.randn(samples, sizes[0], generator=data),
                            torch.randint(0, sizes[-1], (samples,), generator=data))
    sampler = DistributedSampler(dataset, shuffle=True, seed=0)
    loader = DataLoader(dataset, batch_size=args.batch, sampler=sampler)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.01)
    loss_fn = torch.nn.CrossEntropyLoss()
    watcher = None
    if args.trace_dir:
        sys.path.insert(0, os.path.join(HERE, "..", "python"))
        import dpscope_torch

        watcher = dpscope_torch.watch(ddp, args.trace_dir, sampler=sampler, optimizer=optimizer,
                                      values_every=args.values_every)
    blocks = []
    sampler.set_epoch(0)
    batches = iter(loader)
    for step in range(steps):
        if step >= WARMUP and (step - WARMUP) % BLOCK == 0:
            dist.barrier()
            t0 = time.perf_counter()
        x, y = next(batches)
        optimizer.zero_grad()
        loss_fn(ddp(x), y).backward()
        optimizer.step()
        if step >= WARMUP and (step - WARMUP) % BLOCK == BLOCK - 1:
            dist.barrier()
            blocks.append((time.perf_counter() - t0) / BLOCK)
    if watcher is not None:
        watcher.close()
    if rank == 0:
        print(f"ms_per_step {statistics.median(blocks) * 1e3:.4f}", flush=True)
    dist.destroy_process_group()


def run_once(args, watched, tmp):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:  # a free port: never another run's
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = [args.dpscope, "launch", "--nproc", "2", "--master-addr", "127.0.0.1", "--master-port", str(port), "--",
           sys.executable, os.path.abspath(__file__), "--rank-run",
           "--steps", str(args.steps), "--batch", str(args.batch), "--model", args.model,
           "--values-every", str(args.values_every)]
    trace_dir = os.path.join(tmp, "trace")
    if watched:
        shutil.rmtree(trace_dir, ignore_errors=True)
        cmd += ["--trace-dir", trace_dir]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)
    if out.returncode != 0:
        sys.exit(f"dpscope_torch_overhead: {' '.join(cmd)} failed (exit {out.returncode}): {out.stderr.strip()}")
    for line in out.stdout.splitlines():
        if "ms_per_step" in line:
            return float(line.split()[-1])
    sys.exit(f"dpscope_torch_overhead: no time in the output: {out.stdout}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rank-run", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--trace-dir", default="", help=argparse.SUPPRESS)
    ap.add_argument("--dpscope", default=os.path.join(HERE, "..", "build", "release", "bin", "dpscope"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--model", default="784-512-512-10")
    ap.add_argument("--values-every", type=int, default=10)
    args = ap.parse_args()
    if args.rank_run:
        return rank_run(args)
    import torch

    tmp = tempfile.mkdtemp(prefix="dpscope-torch-overhead-")
    plain, watched = [], []
    try:
        for _ in range(args.rounds):
            plain.append(run_once(args, False, tmp))
            watched.append(run_once(args, True, tmp))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    p, w = statistics.median(plain), statistics.median(watched)
    print(f"DDP step, MLP {args.model}, batch {args.batch} per rank, 2 gloo processes, torch {torch.__version__}, "
          f"median of {args.rounds} rounds x {args.steps} steps (values every {args.values_every})")
    print(f"plain   {p:.3f} ms  ({', '.join(f'{x:.3f}' for x in plain)})")
    print(f"watched {w:.3f} ms  ({', '.join(f'{x:.3f}' for x in watched)})")
    print(f"watched / plain = {w / p:.3f} (goal <= 1.03)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
