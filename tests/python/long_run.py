#!/usr/bin/env python3
"""A long watched run in one process (a DDP model on a one-rank gloo group, under dpscope_torch.watch):
what the watcher keeps must not grow with the steps. ddp_trace_test.py's `long_run` case runs it.

    /usr/bin/python3 long_run.py TRACE_DIR STEPS

Prints one JSON object: the Python objects alive (gc) and the watcher's retained state after the
warm-up and at the end, the median step time of the first and the last 200 steps after the
warm-up, the trace's lines per step at both ends, and the bytes of the tensors the watcher still
hands to the process group (only the buckets' current buffers once the replaced ones retired)."""
import gc
import json
import os
import socket
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

import dpscope_torch

watch_module = sys.modules["dpscope_torch.watch"]  # (the package's `watch` is the function)

WARM_UP = 300


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    trace_dir, steps = sys.argv[1], int(sys.argv[2])
    watch_module.RETIRE_S = 0.2  # (a replaced bucket buffer's tensor goes this long after; 10 s in use)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{free_port()}", rank=0, world_size=1)
    torch.manual_seed(0)
    torch.set_num_threads(1)
    # Past the first bucket's 1 MiB: DDP's first assignment (one bucket) is rebuilt into two.
    model = nn.Sequential(nn.Linear(16, 512), nn.ReLU(), nn.Linear(512, 640), nn.ReLU(), nn.Linear(640, 4))
    ddp = DDP(model, bucket_cap_mb=1)
    g = torch.Generator().manual_seed(1)
    dataset = TensorDataset(torch.randn(256, 16, generator=g), torch.randint(0, 4, (256,), generator=g))
    sampler = DistributedSampler(dataset, num_replicas=1, rank=0, shuffle=True, seed=0)
    loader = DataLoader(dataset, batch_size=8, sampler=sampler)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    times, marks, step, epoch = [], {}, 0, 0
    with dpscope_torch.watch(ddp, trace_dir, sampler=sampler, optimizer=optimizer, values_every=10) as watcher:
        while step < steps:
            sampler.set_epoch(epoch)
            epoch += 1
            for x, y in loader:
                start = time.perf_counter()
                optimizer.zero_grad()
                loss_fn(ddp(x), y).backward()
                optimizer.step()
                times.append(time.perf_counter() - start)
                step += 1
                if step in (WARM_UP, steps):
                    time.sleep(2 * watch_module.RETIRE_S)
                    gc.collect()
                    marks[step] = {"objects": len(gc.get_objects()), "state": retained(watcher),
                                   "handed_bytes": sum(t.numel() * t.element_size()
                                                       for t in watch_module._HANDED.values())}
                if step >= steps:
                    break
    bucket_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    lines = {}
    with open(os.path.join(trace_dir, "rank-0.jsonl"), encoding="utf-8") as f:
        next(f)
        for line in f:
            s = json.loads(line)["step"]
            lines[s] = lines.get(s, 0) + 1
    after = times[WARM_UP:]
    print(json.dumps({"steps": steps, "marks": marks, "bucket_bytes": bucket_bytes,
                      "first_ms": statistics.median(after[:200]) * 1e3, "last_ms": statistics.median(after[-200:]) * 1e3,
                      "lines_first": [lines.get(s, 0) for s in range(WARM_UP, WARM_UP + 10)],
                      "lines_last": [lines.get(s, 0) for s in range(steps - 10, steps)]}))
    dist.destroy_process_group()


def retained(watcher):
    """The sizes of every container the watcher holds (a list, dict, set or deque that grew with the
    steps would show here)."""
    sizes = {}
    for name, value in vars(watcher).items():
        if isinstance(value, (list, dict, set, tuple)) or type(value).__name__ == "deque":
            sizes[name] = len(value)
    sizes["samples indices"] = watcher._samples.indices_held()
    return sizes


if __name__ == "__main__":
    main()
