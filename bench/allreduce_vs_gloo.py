#!/usr/bin/env python3
"""16 MiB all-reduce over 4 ranks on this machine: dpscope's sim backend vs torch.distributed gloo
vs the machine's memcpy bound, side by side in one run (the collectives' speed goal; docs/benchmarks.md).

  (a) dpscope: `dpscope bench all_reduce --devices 4 -b 16M -e 16M` (4 rank threads, real data,
      ring algorithm, exact check); its `wall` column: mean host time per all-reduce, from the first
      rank's call until every rank has returned.
  (b) gloo: 4 processes (torch.multiprocessing), init_process_group("gloo") over TCP loopback; mean
      time per all-reduce on rank 0 over back-to-back calls between two barriers.
  (c) memcpy bound: the bytes a ring all-reduce moves between ranks, 2(n-1)/n * S per rank, i.e.
      2(n-1) * S in all, copied at the machine's best measured memcpy bandwidth (torch copy_ of a
      256 MiB buffer, 1 thread and all threads; the faster counts).
  (d) dpscope mpi backend: `mpirun -np 4 dpscope bench all_reduce --backend mpi` (4 processes,
      OpenMPI's own all-reduce, exact check); its time column: the slowest rank's time per
      all-reduce between barriers. Skipped (printed) without mpirun.

Rounds alternate (a), (b), (c), (d); medians are reported. Without torch, (b) and (c) are
skipped with a line saying so, and (a) vs (d) still run. Usage:
  /usr/bin/python3 bench/allreduce_vs_gloo.py [--dpscope build/release/bin/dpscope] [--rounds 3]
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

SIZE_BYTES = 16 << 20
RANKS = 4
ITERS = 20
WARMUP = 3


def find_dpscope(explicit):
    candidates = [explicit] if explicit else []
    candidates += ["build/release/bin/dpscope", "build/ci/bin/dpscope", "build/bin/dpscope"]
    for path in candidates:
        if path and os.path.exists(path):
            return path
    sys.exit("dpscope binary not found; build it (scripts/build.sh) or pass --dpscope PATH")


def dpscope_ms(binary, algo):
    cmd = [binary, "bench", "all_reduce", "--devices", str(RANKS), "-b", "16M", "-e", "16M", "--algo", algo,
           "-n", str(ITERS), "-w", str(WARMUP)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    rows = [line.split() for line in out.splitlines() if line.strip() and not line.startswith("#")]
    assert len(rows) == 1 and rows[0][-1] == "0", out  # one size, no wrong values
    return float(rows[0][8]) / 1e3, float(rows[0][5])  # wall ms, simulated us


def mpi_ms(binary):
    """(d): the mpi backend's time per 16 MiB all-reduce in ms, or None without mpirun."""
    mpirun = shutil.which("mpirun")
    if mpirun is None:
        return None
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_btl_vader_single_copy_mechanism="none")
    cmd = [mpirun, "--oversubscribe", "-np", str(RANKS), binary, "bench", "all_reduce", "--backend", "mpi",
           "--devices", str(RANKS), "-b", "16M", "-e", "16M", "-n", str(ITERS), "-w", str(WARMUP)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout
    rows = [line.split() for line in out.splitlines() if line.strip() and not line.startswith("#")]
    assert len(rows) == 1 and rows[0][-1] == "0", out
    return float(rows[0][5]) / 1e3


def torch_available():
    try:
        import torch  # noqa: F401
        return True
    except ImportError:
        return False


def _gloo_worker(rank, store_file, queue):
    import torch
    import torch.distributed as dist
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{store_file}", rank=rank, world_size=RANKS)
    t = torch.full((SIZE_BYTES // 4,), float(rank + 1))
    for _ in range(WARMUP):
        dist.all_reduce(t)
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(ITERS):
        dist.all_reduce(t)
    dist.barrier()
    elapsed = time.perf_counter() - t0
    if rank == 0:
        queue.put(elapsed / ITERS * 1e3)
    dist.destroy_process_group()


def gloo_ms():
    import torch.multiprocessing as mp
    # A file store: no port to pick, so no race with another program for one.
    with tempfile.TemporaryDirectory(prefix="dpscope-gloo-") as store_dir:
        store_file = os.path.join(store_dir, "store")
        ctx = mp.get_context("spawn")
        queue = ctx.SimpleQueue()
        mp.start_processes(_gloo_worker, args=(store_file, queue), nprocs=RANKS, join=True, start_method="spawn")
        return queue.get()


def memcpy_gbps():
    import torch
    src = torch.ones(256 << 20, dtype=torch.uint8)
    dst = torch.empty_like(src)
    best = 0.0
    for threads in (1, os.cpu_count() or 1):
        torch.set_num_threads(threads)
        dst.copy_(src)
        times = []
        for _ in range(10):
            t0 = time.perf_counter()
            dst.copy_(src)
            times.append(time.perf_counter() - t0)
        best = max(best, src.numel() / min(times) / 1e9)
    return best


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dpscope", help="path to the dpscope binary")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--algo", default="ring")
    args = ap.parse_args()
    binary = find_dpscope(args.dpscope)
    moved_bytes = 2 * (RANKS - 1) * SIZE_BYTES

    have_torch = torch_available()
    ours, theirs, copy_bw, procs, sim_us = [], [], [], [], 0.0
    for r in range(args.rounds):
        wall, sim_us = dpscope_ms(binary, args.algo)
        ours.append(wall)
        if have_torch:
            theirs.append(gloo_ms())
            copy_bw.append(memcpy_gbps())
        m = mpi_ms(binary)
        if m is not None:
            procs.append(m)
        line = f"round {r + 1}: dpscope sim {ours[-1]:.2f} ms"
        if have_torch:
            line += f", gloo {theirs[-1]:.2f} ms, memcpy {copy_bw[-1]:.2f} GB/s"
        if procs:
            line += f", dpscope mpi {procs[-1]:.2f} ms"
        print(line, flush=True)

    d = statistics.median(ours)
    busbw = lambda ms: 2 * (RANKS - 1) / RANKS * SIZE_BYTES / (ms / 1e3) / 1e9  # noqa: E731
    print(f"\n16 MiB float32 all-reduce, {RANKS} ranks, {os.cpu_count()} CPU cores, median of {args.rounds} rounds")
    print(f"  (a) dpscope sim backend ({args.algo}):  {d:8.2f} ms per all-reduce, busbw {busbw(d):6.2f} GB/s"
          f"  (simulated H100 time {sim_us:.1f} us)")
    if have_torch:
        g, bw = statistics.median(theirs), statistics.median(copy_bw)
        bound_ms = moved_bytes / (bw * 1e9) * 1e3
        print(f"  (b) torch.distributed gloo:        {g:8.2f} ms per all-reduce, busbw {busbw(g):6.2f} GB/s")
        print(f"  (c) memcpy bound:                  {bound_ms:8.2f} ms  ({moved_bytes / 2**20:.0f} MiB at {bw:.2f} GB/s)")
    else:
        print("  (b), (c) skipped: this python3 has no torch (DPSCOPE_WITH_TORCH=1 scripts/install-deps.sh)")
    if procs:
        p = statistics.median(procs)
        print(f"  (d) dpscope mpi backend:           {p:8.2f} ms per all-reduce, busbw {busbw(p):6.2f} GB/s")
    else:
        print("  (d) skipped: no mpirun on PATH")
    if have_torch:
        print(f"  gloo / dpscope sim = {g / d:.2f}x  (goal: > 1, dpscope faster)")
        print(f"  dpscope / memcpy bound = {d / bound_ms:.2f}x  (goal: <= 3)")
        if procs:
            print(f"  gloo / dpscope mpi = {g / p:.2f}x  (goal: > 1, dpscope faster)")
    if procs:
        print(f"  dpscope mpi / dpscope sim = {p / d:.2f}x  (processes vs rank threads)")

if __name__ == "__main__":
    main()
