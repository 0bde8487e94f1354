#!/usr/bin/env python3
"""A DDP training step on N processes: dpscope's mpi backend vs PyTorch DDP on gloo, side by side.

Same MLP, loss (cross-entropy), optimizer (SGD lr 0.01), batch per rank and process count, on this
machine's CPUs, rounds alternating:
  (a) dpscope: `mpirun -np N dpscope train --mode ddp --device cpu --backend mpi --devices N ...`;
      the time per step is (wall of a long run - wall of a short run) / (step difference), so process
      start-up, MPI init and data loading cancel out. Wall times are the summary's `wall time`.
  (b) PyTorch: N processes (torch.multiprocessing), init_process_group("gloo") over TCP loopback,
      DistributedDataParallel around the same nn.Sequential, mean time per step on rank 0 over the
      timed steps after warm-up.
Both sides run one thread per process (OPENBLAS_NUM_THREADS=1, torch.set_num_threads(1)).
Usage: /usr/bin/python3 bench/ddp_processes_vs_gloo.py [--dpscope build/ci/bin/dpscope]
       [--ranks 2 4] [--model 784-512-512-10] [--batch 64] [--rounds 3]
"""
import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

SHORT, LONG = 10, 60  # dpscope: steps of the two runs whose difference is timed
WARMUP, TIMED = 5, 40  # torch


def dpscope_wall(binary, ranks, model, batch, steps):
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_btl_vader_single_copy_mechanism="none", OPENBLAS_NUM_THREADS="1")
    classes = model.split("-")[-1]
    features = model.split("-")[0]
    cmd = [shutil.which("mpirun"), "--oversubscribe", "-np", str(ranks), binary, "train", "--mode", "ddp",
           "--device", "cpu", "--backend", "mpi", "--devices", str(ranks), "--model", model,
           "--dataset", f"blobs:{batch * ranks * LONG}:{features}:{classes}", "--batch", str(batch),
           "--steps", str(steps), "--no-shuffle"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout
    return float(re.search(r"wall time ([0-9.]+) s", out).group(1))


def dpscope_step_ms(binary, ranks, model, batch):
    short = dpscope_wall(binary, ranks, model, batch, SHORT)
    long = dpscope_wall(binary, ranks, model, batch, LONG)
    return (long - short) / (LONG - SHORT) * 1e3


def _torch_worker(rank, ranks, store_file, sizes, batch, queue):
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{store_file}", rank=rank, world_size=ranks)
    layers = []
    for i in range(len(sizes) - 1):
        layers.append(torch.nn.Linear(sizes[i], sizes[i + 1]))
        if i + 2 < len(sizes):
            layers.append(torch.nn.ReLU())
    model = DDP(torch.nn.Sequential(*layers))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = torch.nn.CrossEntropyLoss()
    x = torch.randn(batch, sizes[0])
    y = torch.randint(0, sizes[-1], (batch,))

    def step():
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()

    for _ in range(WARMUP):
        step()
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(TIMED):
        step()
    dist.barrier()
    if rank == 0:
        queue.put((time.perf_counter() - t0) / TIMED * 1e3)
    dist.destroy_process_group()


def torch_step_ms(ranks, sizes, batch):
    import torch.multiprocessing as mp
    # A file store: no port to pick, so no race with another program for one.
    with tempfile.TemporaryDirectory(prefix="dpscope-gloo-") as store_dir:
        store_file = os.path.join(store_dir, "store")
        ctx = mp.get_context("spawn")
        queue = ctx.SimpleQueue()
        mp.start_processes(_torch_worker, args=(ranks, store_file, sizes, batch, queue), nprocs=ranks, join=True,
                           start_method="spawn")
        return queue.get()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dpscope", default="build/ci/bin/dpscope")
    ap.add_argument("--ranks", type=int, nargs="+", default=[2, 4])
    ap.add_argument("--model", default="784-512-512-10")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    if shutil.which("mpirun") is None:
        sys.exit("ddp_processes_vs_gloo: no mpirun on PATH (apt install openmpi-bin)")
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    sizes = [int(s) for s in args.model.split("-")]
    print(f"DDP step, model {args.model}, batch {args.batch} per rank, {os.cpu_count()} CPU cores, "
          f"median of {args.rounds} rounds")
    for ranks in args.ranks:
        ours, theirs = [], []
        for _ in range(args.rounds):
            ours.append(dpscope_step_ms(args.dpscope, ranks, args.model, args.batch))
            theirs.append(torch_step_ms(ranks, sizes, args.batch))
        d, g = statistics.median(ours), statistics.median(theirs)
        print(f"  {ranks} processes: dpscope mpi {d:7.2f} ms/step, PyTorch DDP gloo {g:7.2f} ms/step, "
              f"gloo / dpscope = {g / d:.2f}x (goal: > 1, dpscope faster)", flush=True)


if __name__ == "__main__":
    main()
