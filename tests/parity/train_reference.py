#!/usr/bin/env python3
"""PyTorch reference for `dpscope train --mode single` parity tests.

Usage: train_reference.py OUT_DIR MODEL LOSS OPTIM LR MOMENTUM WEIGHT_DECAY BATCH STEPS SEED N

Writes into OUT_DIR: x.npy, y.npy (the data), init.safetensors (the initial state_dict of
nn.Sequential(Linear, ReLU, ..., Linear)), expected.safetensors (the state_dict after STEPS optimizer
steps over the data in order, without shuffling, the last batch possibly smaller) and losses.txt.
safetensors files are written by hand (the format is tiny) so only torch and numpy are needed.
"""
import json
import struct
import sys

import numpy as np
import torch


def save_safetensors(path, tensors):
    header, chunks, offset = {}, [], 0
    for name, t in tensors.items():
        data = t.detach().cpu().contiguous().numpy().astype("<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        chunks.append(data)
        offset += len(data)
    blob = json.dumps(header, separators=(",", ":")).encode()
    blob += b" " * ((8 - len(blob) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(blob)))
        f.write(blob)
        for c in chunks:
            f.write(c)


def main():
    out, model_spec, loss_name, optim_name = sys.argv[1:5]
    lr, momentum, weight_decay = map(float, sys.argv[5:8])
    batch, steps, seed, n = map(int, sys.argv[8:12])
    sizes = [int(s) for s in model_spec.split("-")]
    torch.manual_seed(seed)
    layers = []
    for i in range(len(sizes) - 1):
        layers.append(torch.nn.Linear(sizes[i], sizes[i + 1]))
        if i + 2 < len(sizes):
            layers.append(torch.nn.ReLU())
    model = torch.nn.Sequential(*layers)

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
