#!/usr/bin/env python3
"""A DistributedDataParallel training script as PyTorch's DDP tutorials teach it, on CPU processes (gloo).

One process per rank, started by a launcher that sets RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT:

    dpscope launch --nproc 2 -- python3 examples/pytorch/ddp_tutorial.py
    dpscope launch --nproc 2 -- python3 -m dpscope_torch.run --trace-dir traces/tutorial \
        examples/pytorch/ddp_tutorial.py          # the same, recorded for dpscope-viz (docs/pytorch.md)

It trains a small classifier on a synthetic data set with a DistributedSampler (set_epoch every
epoch), cross-entropy and SGD. Options make it a test subject: --model conv (convolution, batch
norm and an unused parameter, with find_unused_parameters=True), --straggler RANK:MS (that rank's
backward sleeps MS milliseconds, mid-backward), --no-set-epoch (the pitfall), --dump FILE (what
PyTorch itself reports, as JSON: DDP's logging data and each step's loss, for tests to compare),
--export DIR (the MLP's initial weights as DIR/init.safetensors and the data set as DIR/x.npy and
DIR/y.npy, so that `dpscope train --init ... --data ...` runs the same model on the same data:
lesson 14 sets the two runs side by side).
"""
import argparse
import contextlib
import hashlib
import json
import os
import struct
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


class Straggle(torch.autograd.Function):
    """Identity forward; its backward sleeps: a rank slowed down in the middle of backward."""

    @staticmethod
    def forward(ctx, x, seconds):
        ctx.seconds = seconds
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        time.sleep(ctx.seconds)
        return grad, None


class Mlp(nn.Module):
    def __init__(self, sizes, delay_s):
        super().__init__()
        layers = []
        for a, b in zip(sizes[:-1], sizes[1:]):
            layers += [nn.Linear(a, b), nn.ReLU()]
        self.net = nn.Sequential(*layers[:-1])
        self.delay_s = delay_s

    def forward(self, x):
        x = self.net[:2](x)
        if self.delay_s > 0:
            x = Straggle.apply(x, self.delay_s)
        return self.net[2:](x)


class ConvNet(nn.Module):
    """Convolution, batch norm, pooling and a head, plus a layer forward never uses (DDP must be told:
    find_unused_parameters=True)."""

    def __init__(self, classes, delay_s):
        super().__init__()
        self.conv = nn.Conv2d(1, 8, 3, padding=1)
        self.norm = nn.BatchNorm2d(8)
        self.head = nn.Linear(8 * 4 * 4, classes)
        self.unused = nn.Linear(4, 4)
        self.delay_s = delay_s

    def forward(self, x):
        x = torch.relu(self.norm(self.conv(x.view(-1, 1, 8, 8))))
        if self.delay_s > 0:
            x = Straggle.apply(x, self.delay_s)
        return self.head(nn.functional.max_pool2d(x, 2).flatten(1))


def save_safetensors(path, tensors):
    """`tensors` (name -> float32 tensor) as a safetensors file: an 8-byte little-endian header length,
    the JSON header (dtype, shape, byte range of each tensor), the tensors' bytes."""
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        blob = t.detach().cpu().contiguous().numpy().astype("<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)  # the data starts 8-byte aligned
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def export(directory, mlp, x, y):
    """What `dpscope train` needs to run this model on this data: the weights under the names of
    dpscope's MLP (the Sequential's own: 0.weight, 0.bias, 2.weight, ...), the data as .npy files."""
    import numpy as np

    os.makedirs(directory, exist_ok=True)
    save_safetensors(os.path.join(directory, "init.safetensors"), mlp.net.state_dict())
    np.save(os.path.join(directory, "x.npy"), x.numpy().astype(np.float32))
    np.save(os.path.join(directory, "y.npy"), y.numpy().astype(np.int64))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="mlp", choices=["mlp", "conv"])
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"],
                    help="cuda: one GPU per rank (LOCAL_RANK) and NCCL instead of gloo")
    ap.add_argument("--sizes", default="64-128-128-10", help="the MLP's layer widths")
    ap.add_argument("--samples", type=int, default=512, help="data set size")
    ap.add_argument("--batch", type=int, default=32, help="batch per rank")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--bucket-cap-mb", type=float, default=None,
                    help="passed to DDP when given (left out, DDP's default: 25 MiB, and a first bucket of 1 MiB)")
    ap.add_argument("--straggler", default="", help="RANK:MS: that rank's backward sleeps MS ms each step")
    ap.add_argument("--no-set-epoch", action="store_true", help="the pitfall: never call sampler.set_epoch")
    ap.add_argument("--dump", default="", help="write PyTorch's own account of the run here (JSON)")
    ap.add_argument("--trace-dir", default="", help="record the run with dpscope_torch.watch() into this directory")
    ap.add_argument("--fail-at-step", type=int, default=-1, help="raise an error at this step (0-based)")
    ap.add_argument("--export", default="", help="write the MLP's initial weights and the data set here "
                    "(init.safetensors, x.npy, y.npy) for `dpscope train --init --data`")
    args = ap.parse_args()
    if args.export and args.model != "mlp":
        ap.error("--export needs --model mlp: dpscope's runtime trains MLPs")

    dist.init_process_group("nccl" if args.device == "cuda" else "gloo")  # env://, from the launcher
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("cpu")
    if args.device == "cuda":
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        torch.cuda.set_device(device)
    on_gpu = {"device_ids": [device.index]} if device.type == "cuda" else {}
    torch.manual_seed(0)  # the same initial model everywhere (DDP broadcasts rank 0's anyway)
    torch.set_num_threads(1)
    delay_s = 0.0
    if args.straggler:
        who, ms = args.straggler.split(":")
        delay_s = float(ms) / 1000 if int(who) == rank else 0.0

    features = 64
    sizes = [int(s) for s in args.sizes.split("-")]
    # Only when given: PyTorch 2.x caps the first bucket at an explicit bucket_cap_mb too, even 25.
    bucket_cap = {} if args.bucket_cap_mb is None else {"bucket_cap_mb": args.bucket_cap_mb}
    if args.model == "mlp":
        features, classes = sizes[0], sizes[-1]
        model = Mlp(sizes, delay_s).to(device)
        ddp = DDP(model, **bucket_cap, **on_gpu)
    else:
        classes = 10
        model = ConvNet(classes, delay_s).to(device)
        ddp = DDP(model, find_unused_parameters=True, **bucket_cap, **on_gpu)

    data = torch.Generator().manual_seed(1)
    x = torch.randn(args.samples, features, generator=data)
    y = torch.randint(0, classes, (args.samples,), generator=data)
    dataset = TensorDataset(x, y)
    if args.export and rank == 0:
        export(args.export, model, x, y)
    sampler = DistributedSampler(dataset, num_replicas=world, rank=rank, shuffle=True, seed=0)
    loader = DataLoader(dataset, batch_size=args.batch, sampler=sampler)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=args.lr)
    loss_fn = nn.CrossEntropyLoss()

    watcher = contextlib.nullcontext()
    if args.trace_dir:  # the few-lines API; `python3 -m dpscope_torch.run` does the same unasked
        import dpscope_torch

        watcher = dpscope_torch.watch(ddp, args.trace_dir, sampler=sampler, optimizer=optimizer)

    losses = []
    with watcher:
        for epoch in range(args.epochs):
            if not args.no_set_epoch:
                sampler.set_epoch(epoch)  # a different shuffle each epoch, the same on every rank
            for inputs, targets in loader:
                inputs, targets = inputs.to(device), targets.to(device)
                if len(losses) == args.fail_at_step:
                    raise RuntimeError(f"failing on purpose at step {len(losses)} (--fail-at-step)")
                optimizer.zero_grad()
                loss = loss_fn(ddp(inputs), targets)
                loss.backward()
                optimizer.step()
                losses.append(loss.item())
            if rank == 0:
                print(f"epoch {epoch + 1}/{args.epochs}: loss {losses[-1]:.4f}", flush=True)

    if args.dump:
        logging = {k: (v if isinstance(v, (int, float, str)) else str(v))
                   for k, v in ddp._get_ddp_logging_data().items()}
        with open(f"{args.dump}.rank{rank}", "w", encoding="utf-8") as f:
            json.dump({"rank": rank, "world_size": world, "losses": losses, "logging": logging,
                       "params": [n for n, p in ddp.module.named_parameters() if p.requires_grad],
                       "weights_sha256": hashlib.sha256(b"".join(
                           p.detach().cpu().numpy().tobytes() for p in ddp.module.parameters())).hexdigest(),
                       "dataset": len(dataset), "batch": args.batch, "epochs": args.epochs,
                       "set_epoch": not args.no_set_epoch}, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
