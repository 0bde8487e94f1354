"""A DDP model watched, closed, trained on, watched again (ddp_trace_test.py's `train_after_close`
case, under `dpscope launch --nproc 2`): refusals while open, torch.save and deepcopy of the watched
model, the weights equal to an unwatched run's.

Usage: python3 after_close.py TRACE_DIR
"""
import copy
import inspect
import io
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

import dpscope_torch

dist.init_process_group("gloo")
def run(trace_dir):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    ddp = DDP(model)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.1)
    data = torch.Generator().manual_seed(dist.get_rank())
    def steps(n):
        for _ in range(n):
            optimizer.zero_grad()
            ddp(torch.randn(4, 8, generator=data)).sum().backward()
            optimizer.step()
    if trace_dir:
        with dpscope_torch.watch(ddp, trace_dir, optimizer=optimizer):
            # Refused while it is open: the same model again, another model into the same trace.
            for args in ((ddp, trace_dir + "-other"), (DDP(torch.nn.Linear(2, 2)), trace_dir)):
                try:
                    dpscope_torch.watch(*args).close()
                    print("accepted")
                except RuntimeError as e:
                    print(f"rank {dist.get_rank()}: RuntimeError: {e}", flush=True)
            steps(3)
            saved(ddp)
    else:
        steps(3)
    steps(3)
    if trace_dir:  # watched again: the hook registered the first time hands its buckets on
        with dpscope_torch.watch(ddp, trace_dir + "-again", optimizer=optimizer):
            steps(2)
    else:
        steps(2)
    steps(1)
    if trace_dir:
        saved(ddp)
    return [p.detach().clone() for p in model.parameters()]
def saved(ddp):
    # torch.save of the whole DDP object, and a deep copy of the model, as unwatched: without our hooks.
    buffer = io.BytesIO()
    torch.save(ddp, buffer)
    buffer.seek(0)
    # The whole object, not weights: PyTorch >= 2.6 loads weights only unless told (1.13 has no such switch).
    whole = {"weights_only": False} if "weights_only" in inspect.signature(torch.load).parameters else {}
    loaded = torch.load(buffer, **whole)
    clean = not loaded._forward_pre_hooks and "register_comm_hook" not in loaded.__dict__
    print(f"rank {dist.get_rank()}: saved whole: {clean and not copy.deepcopy(ddp.module)._forward_pre_hooks}",
          flush=True)
plain, watched = run(None), run(sys.argv[1])
same = all(torch.equal(a, b) for a, b in zip(plain, watched))
print(f"rank {dist.get_rank()}: same weights as unwatched: {same}", flush=True)
