"""PyTorch's answer for dpscope's all_to_all_single parity test (AllToAllParity in
collectives_parity_test.cpp): N gloo ranks, rank r holding 1000 r + i at element i of an input of
N x BLOCK floats, call dist.all_to_all_single(output, input) without split sizes; each rank prints
one line `rank: v0 v1 ...` of its output. Usage: all_to_all_reference.py N BLOCK RENDEZVOUS_FILE"""
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def run(rank, n, block, path, queue):
    dist.init_process_group("gloo", init_method="file://" + path, rank=rank, world_size=n)
    inp = torch.tensor([1000.0 * rank + i for i in range(n * block)], dtype=torch.float32)
    out = torch.empty_like(inp)
    dist.all_to_all_single(out, inp)
    queue.put((rank, out.tolist()))
    dist.destroy_process_group()


def main():
    n, block, path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=run, args=(r, n, block, path, queue)) for r in range(n)]
    for p in procs:
        p.start()
    results = dict(queue.get(timeout=120) for _ in range(n))
    for p in procs:
        p.join(120)
        if p.exitcode != 0:
            sys.exit(f"rank process exited with {p.exitcode}")
    for r in range(n):
        print(f"{r}: " + " ".join(repr(v) for v in results[r]))


if __name__ == "__main__":
    main()
