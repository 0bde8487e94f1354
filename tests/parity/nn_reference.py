#!/usr/bin/python3
"""PyTorch reference for dpscope's nn/optim parity tests.

Reads one JSON spec on stdin, trains a torch.nn.Sequential MLP (Linear layers with ReLU between
them, the same model `dpscope train --model` builds) and prints one JSON object on stdout.

Spec:
  sizes      [in, hidden..., out]                      layer sizes, e.g. [784, 512, 10]
  seed       int (optional, default 0)                 torch.manual_seed before building the model
  params     {"0.weight": [flat floats], ...} (opt.)   initial values (replace the seeded ones)
  batch      int                                       rows of x
  x          [flat floats]                             inputs, batch * sizes[0]
  loss       "ce" | "mse"
  y          [ints] (ce) | [flat floats] (mse)         targets
  optimizer  {"name": "sgd"|"adam"|"adamw", ...options as torch.optim keyword arguments}
  steps      int                                       optimizer steps on the same batch
Output:
  {"initial": {name: [flat]}, "steps": [{"loss": float, "grads": {name: [flat]}, "params": {name: [flat]}}]}
Errors go to stderr with exit status 1.
"""
import json
import sys

import torch


def flat(t):
    return t.detach().reshape(-1).tolist()


def build_model(sizes):
    layers = []
    for i in range(len(sizes) - 1):
        if i > 0:
            layers.append(torch.nn.ReLU())
        layers.append(torch.nn.Linear(sizes[i], sizes[i + 1]))
    return torch.nn.Sequential(*layers)


def build_optimizer(spec, params):
    options = dict(spec)
    name = options.pop("name")
    if "betas" in options:
        options["betas"] = tuple(options["betas"])
    classes = {"sgd": torch.optim.SGD, "adam": torch.optim.Adam, "adamw": torch.optim.AdamW}
    if name not in classes:
        raise ValueError(f"unknown optimizer '{name}'")
    return classes[name](params, **options)


def main():
    spec = json.load(sys.stdin)
    torch.set_num_threads(1)
    torch.manual_seed(spec.get("seed", 0))
    sizes = spec["sizes"]
    model = build_model(sizes)
    if "params" in spec:
        state = {name: torch.tensor(values, dtype=torch.float32).reshape(model.state_dict()[name].shape)
                 for name, values in spec["params"].items()}
        model.load_state_dict(state)
    out = {"initial": {name: flat(t) for name, t in model.state_dict().items()}, "steps": []}
    steps = spec.get("steps", 0)
    if steps > 0:
        batch = spec["batch"]
        x = torch.tensor(spec["x"], dtype=torch.float32).reshape(batch, sizes[0])
        if spec["loss"] == "ce":
            y = torch.tensor(spec["y"], dtype=torch.int64)
            loss_fn = torch.nn.CrossEntropyLoss()
        elif spec["loss"] == "mse":
            y = torch.tensor(spec["y"], dtype=torch.float32).reshape(batch, sizes[-1])
            loss_fn = torch.nn.MSELoss()
        else:
            raise ValueError(f"unknown loss '{spec['loss']}'")
        optimizer = build_optimizer(spec["optimizer"], model.parameters())
        for _ in range(steps):
            optimizer.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            grads = {name: flat(p.grad) for name, p in model.named_parameters()}
            optimizer.step()
            out["steps"].append({"loss": loss.item(), "grads": grads,
                                 "params": {name: flat(t) for name, t in model.state_dict().items()}})
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    try:
        main()
    except Exception as error:  # one clear line for the C++ test's failure message
        print(f"nn_reference.py: {type(error).__name__}: {error}", file=sys.stderr)
        sys.exit(1)
