"""A GAN's two DDP models in one process (generator and discriminator), each watched into a trace
of its own, closed out of order: the first opened is closed first, the other goes on recording; the
last close() puts torch.autograd.backward back (Tensor.backward was never touched). Run by ddp_trace_test.py's `two_models` case under
`dpscope launch --nproc 2`.

Usage: python3 two_models.py [TRACE_DIR]   (without: the unwatched run)
"""
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

import dpscope_torch

dist.init_process_group("gloo")
original_backward, tensor_backward = torch.autograd.backward, torch.Tensor.backward
torch.manual_seed(0)
g = DDP(torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 4)))
d = DDP(torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1)))
opt_g = torch.optim.SGD(g.parameters(), lr=0.1)
opt_d = torch.optim.SGD(d.parameters(), lr=0.1)
data = torch.Generator().manual_seed(dist.get_rank())
watched = len(sys.argv) > 1
wg = dpscope_torch.watch(g, sys.argv[1] + "/g", optimizer=opt_g) if watched else None
wd = dpscope_torch.watch(d, sys.argv[1] + "/d", optimizer=opt_d) if watched else None
for step in range(5):
    if step == 3 and watched:
        wg.close()  # the first opened, closed first: d's watcher goes on
    opt_d.zero_grad()
    d(g(torch.randn(8, 4, generator=data)).detach()).mean().backward()
    opt_d.step()
    opt_g.zero_grad()
    (-d(g(torch.randn(8, 4, generator=data))).mean()).backward()
    opt_g.step()
if watched:
    wd.close()
print(f"rank {dist.get_rank()}: backward restored: {torch.autograd.backward is original_backward and torch.Tensor.backward is tensor_backward}", flush=True)
weights = [p.detach().clone() for m in (g, d) for p in m.parameters()]
print(f"rank {dist.get_rank()}: weights " + ",".join(f"{float(w.double().sum()):.17g}" for w in weights), flush=True)
