#!/usr/bin/env python3
"""PyTorch + gloo DistributedDataParallel reference for `dpscope train --mode ddp` parity tests.

Usage: ddp_reference.py DIR WORLD MODEL LOSS LR MOMENTUM BATCH STEPS

Reads DIR/x.npy, DIR/y.npy and DIR/init.safetensors (written by train_reference.py), runs WORLD
gloo processes on the CPU, each with DistributedSampler(shuffle=False) and a DataLoader of BATCH
samples, DDP around nn.Sequential(Linear, ReLU, ...), SGD(lr, momentum) for STEPS steps, and writes
rank 0's state_dict to DIR/ddp_expected.safetensors.
"""
import os
import sys

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from parity_common import build_mlp, load_safetensors, save_safetensors


def run(rank, world, d, sizes, loss_name, lr, momentum, batch, steps, port):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(0)
    model = build_mlp(sizes)
    model.load_state_dict(load_safetensors(f"{d}/init.safetensors"))
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    x = torch.from_numpy(np.load(f"{d}/x.npy"))
    y = torch.from_numpy(np.load(f"{d}/y.npy"))
    ds = torch.utils.data.TensorDataset(x, y)
    sampler = torch.utils.data.distributed.DistributedSampler(ds, num_replicas=world, rank=rank, shuffle=False)
    loader = torch.utils.data.DataLoader(ds, batch_size=batch, sampler=sampler)
    opt = torch.optim.SGD(ddp.parameters(), lr=lr, momentum=momentum)
    criterion = torch.nn.CrossEntropyLoss() if loss_name == "ce" else torch.nn.MSELoss()
    step, epoch = 0, 0
    while step < steps:
        sampler.set_epoch(epoch)
        for xb, yb in loader:
            if step == steps:
                break
            opt.zero_grad()
            criterion(ddp(xb), yb).backward()
            opt.step()
            step += 1
        epoch += 1
    if rank == 0:
        save_safetensors(f"{d}/ddp_expected.safetensors", model.state_dict())
    dist.destroy_process_group()


def main():
    d, world, model, loss_name, lr, momentum, batch, steps = sys.argv[1:9]
    sizes = [int(s) for s in model.split("-")]
    port = 29500 + os.getpid() % 1000
    mp.spawn(run, args=(int(world), d, sizes, loss_name, float(lr), float(momentum), int(batch), int(steps), port),
             nprocs=int(world), join=True)


if __name__ == "__main__":
    main()
