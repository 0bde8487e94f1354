"""A CPU stand-in for nn.DataParallel, so that dpscope_torch's DataParallel recorder is tested without a GPU.

On a machine without a GPU nn.DataParallel keeps no device_ids and calls its module unsplit. This
subclass runs DataParallel.forward itself (scatter, replicate, parallel_apply, gather) on "devices" that
are all the CPU:
- scatter: torch.chunk along `dim` (the chunk sizes of torch.cuda.comm.scatter: ceil(N/n) rows, the last
  smaller, possibly fewer chunks than devices);
- replicate: PyTorch's own replicate() (torch/nn/parallel/replicate.py), with its two CUDA-only pieces
  replaced while it runs: the autograd function Broadcast by CpuBroadcast below (clones forward; backward
  sums the replicas' gradients in replica order, as ReduceAddCoalesced does onto device_ids[0]) and
  comm.broadcast_coalesced (used for buffers) by clones;
- parallel_apply: the replicas called one after another (PyTorch uses one thread per device);
- gather: torch.cat along `dim`.
So the autograd graph has the same shape as on GPUs: replicas' parameters are outputs of one Broadcast
node whose backward reduce-adds into the original parameters.
"""
import sys

import torch
from torch import nn

_functions = sys.modules["torch.nn.parallel._functions"]
_comm = sys.modules["torch.nn.parallel.comm"]
_data_parallel = sys.modules["torch.nn.parallel.data_parallel"]
_replicate = sys.modules["torch.nn.parallel.replicate"]


class CpuBroadcast(torch.autograd.Function):
    """Broadcast on the CPU: every input cloned once per target, replica-major (as Broadcast's outputs)."""

    @staticmethod
    def forward(ctx, target_devices, *inputs):
        ctx.inputs = len(inputs)
        ctx.targets = len(target_devices)
        return tuple(t.clone() for _ in target_devices for t in inputs)

    @staticmethod
    def backward(ctx, *grads):
        n = ctx.inputs
        sums = []
        for i in range(n):
            total = grads[i].clone()
            for j in range(1, ctx.targets):
                total = total + grads[j * n + i]
            sums.append(total)
        return (None, *sums)


class CpuDataParallel(nn.DataParallel):
    """nn.DataParallel over `replicas` logical devices that are all the CPU (see the module's docstring)."""

    def __init__(self, module, replicas, dim=0):
        # DataParallel.__init__ itself, told that the device type is "cpu" (it finds none here) and
        # without its balance check (CUDA properties): so code that patches it (dpscope_torch.run) sees it.
        found, balance = _data_parallel._get_available_device_type, _data_parallel._check_balance
        _data_parallel._get_available_device_type = lambda: "cpu"
        _data_parallel._check_balance = lambda device_ids: None
        try:
            super().__init__(module, device_ids=list(range(replicas)), output_device=0, dim=dim)
        finally:
            _data_parallel._get_available_device_type, _data_parallel._check_balance = found, balance
        self.src_device_obj = torch.device("cpu")  # forward compares parameters' devices with it

    def scatter(self, inputs, kwargs, device_ids):
        pieces = [t.chunk(len(device_ids), self.dim) for t in inputs]
        count = min(len(p) for p in pieces) if pieces else 0
        scattered = tuple(tuple(p[i] for p in pieces) for i in range(count))
        return scattered, tuple({} for _ in scattered)

    def replicate(self, module, device_ids):
        broadcast, coalesced = _functions.Broadcast, _comm.broadcast_coalesced
        _functions.Broadcast = CpuBroadcast
        _comm.broadcast_coalesced = lambda tensors, devices, buffer_size=0: [[t.detach().clone() for t in tensors]
                                                                              for _ in devices]
        try:
            return _replicate.replicate(module, device_ids, not torch.is_grad_enabled())
        finally:
            _functions.Broadcast, _comm.broadcast_coalesced = broadcast, coalesced

    def parallel_apply(self, replicas, inputs, kwargs):
        return [replica(*args, **kw) for replica, args, kw in zip(replicas, inputs, kwargs)]

    def gather(self, outputs, output_device):
        return torch.cat(outputs, self.dim)
