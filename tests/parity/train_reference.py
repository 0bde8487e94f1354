#!/usr/bin/env python3
"""PyTorch reference for `dpscope train --mode single` parity tests.

Usage: train_reference.py OUT_DIR MODEL LOSS OPTIM LR MOMENTUM WEIGHT_DECAY BATCH STEPS SEED N

Writes into OUT_DIR: x.npy, y.npy (the data), init.safetensors (the initial state_dict of
nn.Sequential(Linear, ReLU, ..., Linear)), expected.safetensors (the state_dict after STEPS optimizer
steps over the data in order, without shuffling, the last batch possibly smaller) and losses.txt.
safetensors files are written by hand (the format is tiny) so only torch and numpy are needed.
"""
import sys

import numpy as np
import torch

from parity_common import build_mlp, save_safetensors


def main():
    out, model_spec, loss_name, optim_name = sys.argv[1:5]
    lr, momentum, weight_decay = map(float, sys.argv[5:8])
    batch, steps, seed, n = map(int, sys.argv[8:12])
    sizes = [int(s) for s in model_spec.split("-")]
    torch.manual_seed(seed)
    model = build_mlp(sizes)

    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, sizes[0])).astype(np.float32)
    if loss_name == "ce":
        y = rng.integers(0, sizes[-1], size=n).astype(np.int64)
        criterion = torch.nn.CrossEntropyLoss()
    else:
        y = rng.standard_normal((n, sizes[-1])).astype(np.float32)
        criterion = torch.nn.MSELoss()
    np.save(f"{out}/x.npy", x)
    np.save(f"{out}/y.npy", y)
    save_safetensors(f"{out}/init.safetensors", model.state_dict())

    if optim_name == "sgd":
        opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum, weight_decay=weight_decay)
    elif optim_name == "adam":
        opt = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=weight_decay)
    else:
        opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay if weight_decay else 1e-2)
    xt, yt = torch.from_numpy(x), torch.from_numpy(y)
    batches = [(xt[i:i + batch], yt[i:i + batch]) for i in range(0, n, batch)]
    losses = []
    for step in range(steps):
        xb, yb = batches[step % len(batches)]
        opt.zero_grad()
        loss = criterion(model(xb), yb)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    save_safetensors(f"{out}/expected.safetensors", model.state_dict())
    with open(f"{out}/losses.txt", "w") as f:
        f.write("\n".join(repr(v) for v in losses) + "\n")


if __name__ == "__main__":
    main()
