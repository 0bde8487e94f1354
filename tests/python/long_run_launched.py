#!/usr/bin/env python3
"""A long run of a tiny DDP model, started once per rank by a launcher, for measuring by hand what a
long watched run costs (docs/pytorch.md, "Long runs"; CI runs the one-process long_run.py instead):

    dpscope launch --nproc 2 -- /usr/bin/python3 -m dpscope_torch.run --trace-dir D \\
        tests/python/long_run_launched.py --steps 4000 --dump OUT

Each rank writes OUT.rankK: every step's time (seconds) and, at steps 500, 1000, 2000 and the
last, its resident memory (bytes) and the number of live Python objects."""
import argparse
import gc
import json
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def resident_bytes():
    with open("/proc/self/statm", encoding="utf-8") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--dump", default="")
    args = ap.parse_args()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    ddp = DDP(nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4)))
    g = torch.Generator().manual_seed(1)
    dataset = TensorDataset(torch.randn(256, 16, generator=g), torch.randint(0, 4, (256,), generator=g))
    sampler = DistributedSampler(dataset, shuffle=True, seed=0)
    loader = DataLoader(dataset, batch_size=8, sampler=sampler)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    times, marks, step, epoch = [], {}, 0, 0
    while step < args.steps:
        sampler.set_epoch(epoch)
        epoch += 1
        for x, y in loader:
            start = time.perf_counter()
            optimizer.zero_grad()
            loss_fn(ddp(x), y).backward()
            optimizer.step()
            times.append(time.perf_counter() - start)
            step += 1
            if step in (500, 1000, 2000, args.steps):
                gc.collect()
                marks[step] = {"rss": resident_bytes(), "objects": len(gc.get_objects())}
            if step >= args.steps:
                break
    if args.dump:
        with open(f"{args.dump}.rank{rank}", "w", encoding="utf-8") as f:
            json.dump({"times": times, "marks": marks}, f)


if __name__ == "__main__":
    main()
