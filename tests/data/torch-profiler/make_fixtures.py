"""Makes the torch.profiler (Kineto) traces that `dpscope trace import` is tested on.

Run ONCE, by hand, with a PyPI PyTorch >= 2.1 (not Debian's 1.13):
the traces are committed, and the test command does not need this PyTorch.
The committed ones were made with torch 2.15.0 (the PyPI wheel, 2.15.0+cu132, run on the CPU with
gloo; Python 3.11) by:

    python3 -m venv /tmp/torch2 && /tmp/torch2/bin/pip install torch numpy
    /tmp/torch2/bin/python3 tests/data/torch-profiler/make_fixtures.py tests/data/torch-profiler

What it runs: two processes (torch.multiprocessing.spawn), gloo, a tiny MLP (16-32-32-4) wrapped in
DistributedDataParallel with bucket_cap_mb=0.004 so that its gradients split into two buckets, SGD,
5 steps under torch.profiler(record_shapes=True) with schedule(wait=1, warmup=1, active=2):
steps 2 and 3 are recorded (ProfilerStep#2, ProfilerStep#3). Each rank writes its trace with
export_chrome_trace to OUT/ddp-gloo/rank-K.pt.trace.json (tensorboard_trace_handler's names end
in .pt.trace.json too). record_shapes gives the collectives' sizes ("Input Dims").
"""

import os
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.profiler import ProfilerActivity, profile, schedule

STEPS = 5
SCHEDULE = dict(wait=1, warmup=1, active=2, repeat=1)


def model():
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)
    )


def train(net, path, rank):
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    gen = torch.Generator().manual_seed(rank)
    with profile(activities=[ProfilerActivity.CPU], schedule=schedule(**SCHEDULE), record_shapes=True,
                 on_trace_ready=lambda p: p.export_chrome_trace(path)) as prof:
        for _ in range(STEPS):
            x = torch.randn(8, 16, generator=gen)
            y = torch.randn(8, 4, generator=gen)
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(net(x), y)
            loss.backward()
            opt.step()
            prof.step()


def worker(rank, world_size, out):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = "29533"
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    # Gradient bytes per layer: 16-32 2176, 32-32 4224, 32-4 528. DDP fills buckets from the last
    # layer back and closes one once it reaches the cap (4194 bytes): {32-4, 32-32}, then {16-32}.
    net = DDP(model(), bucket_cap_mb=0.004)
    train(net, os.path.join(out, "ddp-gloo", f"rank-{rank}.pt.trace.json"), rank)
    dist.destroy_process_group()


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    os.makedirs(os.path.join(out, "ddp-gloo"), exist_ok=True)
    print("torch_version", torch.__version__)
    mp.spawn(worker, args=(2, out), nprocs=2, join=True)


if __name__ == "__main__":
    main()
