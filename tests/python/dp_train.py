#!/usr/bin/env python3
"""A small nn.DataParallel training script for tests/python/dp_trace_test.py.

    dp_train.py (--standin N | --device-ids 0,1) [--watch TRACE] [--dump FILE] [options]

--standin N: the CPU stand-in of DataParallel over N logical devices (dp_standin.py); --device-ids:
the real nn.DataParallel on those GPUs. --watch TRACE: dpscope_torch.watch(model, TRACE, sampler=...,
optimizer=...) around the loop; without it the script is unchanged (for dpscope_torch.run). --dump FILE:
what PyTorch itself saw, as JSON (the losses, each step's dataset indices, the final weights and the
last step's gradients), which the test compares with the trace.
"""
import argparse
import json
import os
import sys

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Columns(nn.Module):
    """The network on a batch given as columns ([features, batch] in, [classes, batch] out): for dim=1."""

    def __init__(self, net):
        super().__init__()
        self.net = net

    def forward(self, x):
        return self.net(x.t()).t()


def main():
    parser = argparse.ArgumentParser()
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--standin", type=int, help="CPU stand-in of DataParallel over N logical devices")
    group.add_argument("--device-ids", help="real nn.DataParallel on these GPUs, e.g. 0,1 (or 0,0)")
    parser.add_argument("--watch", help="record with dpscope_torch.watch() into this trace")
    parser.add_argument("--dump", help="write what PyTorch saw (JSON)")
    parser.add_argument("--samples", type=int, default=40)
    parser.add_argument("--batch", type=int, default=10)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--sizes", default="6-16-16-3")
    parser.add_argument("--values-every", type=int, default=1)
    parser.add_argument("--fail-at-step", type=int, default=-1)
    parser.add_argument("--skip-step-every", type=int, default=0,
                        help="every Nth batch ends without optimizer.step() (as GradScaler skips a step)")
    parser.add_argument("--dim", type=int, default=0, help="DataParallel's dim: 1 feeds the batch as columns")
    args = parser.parse_args()

    torch.manual_seed(0)
    sizes = [int(s) for s in args.sizes.split("-")]
    layers = []
    for i in range(len(sizes) - 1):
        layers.append(nn.Linear(sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2:
            layers.append(nn.ReLU())
    net = nn.Sequential(*layers)
    if args.dim == 1:
        net = Columns(net)
    x = torch.randn(args.samples, sizes[0])
    y = torch.randint(0, sizes[-1], (args.samples,))
    dataset = TensorDataset(x, y, torch.arange(args.samples))
    loader = DataLoader(dataset, batch_size=args.batch, shuffle=True, generator=torch.Generator().manual_seed(1))

    if args.standin is not None:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from dp_standin import CpuDataParallel

        model = CpuDataParallel(net, args.standin, dim=args.dim)
        target_device = torch.device("cpu")
    else:
        ids = [int(d) for d in args.device_ids.split(",")]
        net = net.cuda(ids[0])
        model = nn.DataParallel(net, device_ids=ids, dim=args.dim)
        target_device = torch.device("cuda", ids[0])
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loss_fn = nn.CrossEntropyLoss()

    watcher = None
    if args.watch:
        import dpscope_torch

        watcher = dpscope_torch.watch(model, args.watch, sampler=loader.sampler, optimizer=optimizer,
                                      values_every=args.values_every)
    losses, batches, skipped, step = [], [], [], 0
    try:
        for _ in range(args.epochs):
            for xb, yb, idx in loader:
                if step == args.fail_at_step:
                    raise RuntimeError(f"failing on purpose at step {step}")
                optimizer.zero_grad()
                out = model(xb.t() if args.dim == 1 else xb)
                loss = loss_fn(out.t() if args.dim == 1 else out, yb.to(target_device))
                loss.backward()
                grads = [p.grad.detach().cpu().reshape(-1).tolist() for p in net.parameters()]
                if args.skip_step_every > 0 and (step + 1) % args.skip_step_every == 0:
                    skipped.append(step)
                else:
                    optimizer.step()
                losses.append(loss.item())
                batches.append(idx.tolist())
                step += 1
    except BaseException as e:
        if watcher is not None:
            watcher.__exit__(type(e), e, e.__traceback__)
        raise
    if watcher is not None:
        watcher.close()
    if args.dump:
        with open(args.dump, "w", encoding="utf-8") as f:
            json.dump({"losses": losses, "batches": batches, "params": [n for n, _ in net.named_parameters()],
                       "weights": [p.detach().cpu().reshape(-1).tolist() for p in net.parameters()],
                       "last_grads": grads, "skipped": skipped}, f)


if __name__ == "__main__":
    main()
