#!/usr/bin/env python3
"""A DDP training script in the shapes people write (tests/python/ddp_trace_test.py runs it, watched and
unwatched): the tutorial's MLP or other models, under DDP's options and the training loops' habits.

How the ranks start (--start):
  env    once per rank by a launcher (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT: `dpscope launch`);
  spawn  PyTorch's DDP tutorial: one process that calls torch.multiprocessing.spawn(fn, nprocs=N),
         MASTER_ADDR/MASTER_PORT set in the script (--port);
  fork   one process that starts N multiprocessing.Process(target=fn) with the fork start method;
  process  the same with the spawn start method;
  forkserver  the same with the forkserver start method.

Each rank writes DUMP.rankK (--dump): what PyTorch itself reports (DDP's logging data, each step's
loss, the parameters that require grad, a hash of the weights), in ddp_trace_test.py's check_run form.
"""
import argparse
import contextlib
import hashlib
import json
import os
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

FEATURES, CLASSES, VOCAB, SEQ = 16, 4, 50, 6
KEPT = []  # the trained model, kept until the process ends (main(), with a communication hook)


class Mlp(nn.Module):
    def __init__(self, norm=False, dict_output=False):
        super().__init__()
        self.fc1 = nn.Linear(FEATURES, 32)
        self.norm = nn.BatchNorm1d(32) if norm else None
        self.fc2 = nn.Linear(32, CLASSES)
        self.dict_output = dict_output

    def forward(self, x):
        h = torch.relu(self.fc1(x))
        if self.norm is not None:
            h = self.norm(h)
        out = self.fc2(h)
        return {"logits": out, "hidden": h} if self.dict_output else out


class Sequence(nn.Module):
    """An embedding (dense), an LSTM and a Transformer encoder layer over token sequences."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, 16)
        self.lstm = nn.LSTM(16, 16, batch_first=True)
        self.encoder = nn.TransformerEncoderLayer(16, 2, dim_feedforward=32, dropout=0.0, batch_first=True)
        self.head = nn.Linear(16, CLASSES)

    def forward(self, tokens):
        h, _ = self.lstm(self.embed(tokens))
        return self.head(self.encoder(h).mean(1)), h


class Branches(nn.Module):
    """Two heads, one used on even forwards and the other on odd ones: a dynamic graph, whose unused
    head DDP finds each step (find_unused_parameters=True)."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(FEATURES, 32)
        self.even = nn.Linear(32, CLASSES)
        self.odd = nn.Linear(32, CLASSES)
        self.calls = 0

    def forward(self, x):
        h = torch.relu(self.fc1(x))
        self.calls += 1
        return (self.even if self.calls % 2 else self.odd)(h)


class Tied(nn.Module):
    """A language-model shape: the output layer's weight is the embedding's (one shared parameter)."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, 16)
        self.hidden = nn.Linear(16, 16)
        self.out = nn.Linear(16, VOCAB, bias=False)
        self.out.weight = self.embed.weight

    def forward(self, tokens):
        return self.out(torch.tanh(self.hidden(self.embed(tokens).mean(1))))


class SparseBag(nn.Module):
    """An embedding with sparse gradients (nn.Embedding(sparse=True): DDP reduces its gradient in a
    bucket of its own, the sparse tensor itself) and a dense head."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, 16, sparse=True)
        self.head = nn.Linear(16, CLASSES)

    def forward(self, tokens):
        return self.head(self.embed(tokens).mean(1))


def build(args, device):
    if args.model == "sparse":
        model = SparseBag()
    elif args.model == "sequence":
        model = Sequence()
    elif args.model == "branches":
        model = Branches()
    elif args.model == "tied":
        model = Tied()
    elif args.model == "big":  # 50.4 M parameters in 5 Linear layers (202 MB of fp32 weights)
        model = nn.Sequential(nn.Linear(FEATURES, 4096), nn.ReLU(), nn.Linear(4096, 4096), nn.ReLU(),
                              nn.Linear(4096, 4096), nn.ReLU(), nn.Linear(4096, 4096), nn.ReLU(),
                              nn.Linear(4096, CLASSES))
    else:
        model = Mlp(norm=args.model == "batchnorm" or args.model == "syncbn", dict_output=args.dict_output)
    if args.model == "syncbn":
        model = nn.SyncBatchNorm.convert_sync_batchnorm(model)
    if args.frozen:  # the first layer, as when fine-tuning
        for p in (model.embed if args.model == "sequence" else model.fc1).parameters():
            p.requires_grad_(False)
    return model.to(device)


def data(args):
    g = torch.Generator().manual_seed(1)
    if args.model in ("sequence", "tied", "sparse"):
        x = torch.randint(0, VOCAB, (args.samples, SEQ), generator=g)
    else:
        x = torch.randn(args.samples, FEATURES, generator=g)
    return TensorDataset(x, torch.randint(0, CLASSES, (args.samples,), generator=g))


def logits_of(output):
    if isinstance(output, dict):
        return output["logits"]
    if isinstance(output, tuple):
        return output[0]
    return output


def train(rank, world, args):
    autocast = autocast_of(args)
    if args.start != "env":
        os.environ["MASTER_ADDR"] = "127.0.0.1"
        os.environ["MASTER_PORT"] = str(args.port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(rank if args.seed_per_rank else 0)  # DDP broadcasts rank 0's weights either way
    torch.set_num_threads(1)
    device = torch.device("cpu")
    model = build(args, device)
    if args.resume:  # a checkpoint of model.module's state_dict, loaded before DDP is built
        model.load_state_dict(torch.load(args.resume))
    ddp = DDP(model, gradient_as_bucket_view=args.gradient_as_bucket_view, static_graph=args.static_graph,
              broadcast_buffers=True, find_unused_parameters=args.find_unused,
              **({"bucket_cap_mb": args.bucket_cap_mb} if args.bucket_cap_mb else {}))
    if args.hook == "fp16":
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

        ddp.register_comm_hook(None, default_hooks.fp16_compress_hook)
    elif args.hook == "powersgd":
        from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook

        state = powerSGD_hook.PowerSGDState(process_group=None, matrix_approximation_rank=1, start_powerSGD_iter=2)
        ddp.register_comm_hook(state, powerSGD_hook.powerSGD_hook)
    elif args.hook == "builtin":  # DDP's C++ hook
        ddp._register_builtin_comm_hook(dist.BuiltinCommHookType.ALLREDUCE)
    elif args.hook == "builtin-fp16":
        ddp._register_builtin_comm_hook(dist.BuiltinCommHookType.FP16_COMPRESS)
    names = [n for n, p in ddp.module.named_parameters() if p.requires_grad]  # DDP's, fixed at construction
    dataset = data(args)
    sampler = None
    if not args.no_sampler:
        sampler = DistributedSampler(dataset, num_replicas=world, rank=rank, shuffle=not args.no_shuffle, seed=0,
                                     drop_last=args.drop_last)
    loader = DataLoader(dataset, batch_size=args.batch, sampler=sampler, num_workers=args.workers)
    if args.validate_every:
        val_set = data(args)
        val_loader = DataLoader(val_set, batch_size=16, num_workers=args.workers,
                                sampler=DistributedSampler(val_set, num_replicas=world, rank=rank, shuffle=False))
    if args.param_groups:
        optimizer = torch.optim.SGD([{"params": ddp.module.fc1.parameters(), "lr": args.lr / 2},
                                     {"params": ddp.module.fc2.parameters()}], lr=args.lr, momentum=0.9)
    else:
        optimizer = torch.optim.SGD([p for p in ddp.parameters() if p.requires_grad], lr=args.lr)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=3, gamma=0.5) if args.param_groups else None
    loss_fn = nn.CrossEntropyLoss()
    if args.second_model:  # another DDP model (an EMA, a critic): built, used in no_grad, not trained here
        other = DDP(build(args, device))
    losses = []
    skipped = []  # the steps whose optimizer.step() was not called (--skip-every)
    used = []  # the parameters that got a gradient in each step (--model branches, --freeze-after)
    join = contextlib.nullcontext()
    if args.uneven:  # rank r stops r batches early each epoch; DDP's join shadows the others' all-reduces
        from torch.distributed.algorithms.join import Join

        join = Join([ddp])
    with join:
        for epoch in range(args.epochs):
            if sampler is not None:
                sampler.set_epoch(epoch)
            # (the whole epoch's batches fetched first, as a loop that trims them does; --stream:
            # fetched one at a time as they are trained on)
            batches = iter(loader) if args.stream else list(loader)
            if args.uneven:
                batches = batches[:len(batches) - rank]
            if args.freeze_after and epoch == args.freeze_after:  # fine-tuning: the first layer stops training
                for p in ddp.module.fc1.parameters():
                    p.requires_grad_(False)
            for inputs, targets in batches:
                if args.accumulate > 1:  # gradient accumulation: no all-reduce until the last micro-batch
                    optimizer.zero_grad(set_to_none=args.set_to_none)
                    micro = inputs.chunk(args.accumulate), targets.chunk(args.accumulate)
                    for k, (x, y) in enumerate(zip(*micro)):
                        sync = ddp.no_sync() if k < len(micro[0]) - 1 else contextlib.nullcontext()
                        with sync:
                            loss = loss_fn(logits_of(ddp(x)), y) / len(micro[0])
                            loss.backward()
                else:
                    def closure():
                        optimizer.zero_grad(set_to_none=args.set_to_none or args.model == "branches")
                        with autocast():
                            loss = loss_fn(logits_of(ddp(inputs)), targets)
                            if args.two_views:  # a second view of the same batch, one backward for both
                                loss = loss + loss_fn(logits_of(ddp(inputs * 0.5)), targets)
                        if args.autograd_backward:
                            torch.autograd.backward(loss)  # (what loss.backward() calls)
                        else:
                            loss.backward()
                        return loss

                    # optimizer.step(closure): the forward and backward run inside step()
                    loss = optimizer.step(closure) if args.closure else closure()
                used.append(sum(1 for p in ddp.module.parameters() if p.grad is not None and p.requires_grad))
                if args.clip:  # between backward and step, on the averaged gradients
                    torch.nn.utils.clip_grad_norm_(ddp.parameters(), args.clip)
                if args.closure:
                    pass  # (stepped above)
                elif args.skip_every and len(losses) % args.skip_every == args.skip_every - 1:
                    skipped.append(len(losses))  # as GradScaler does when a gradient is not finite
                else:
                    optimizer.step()
                if scheduler is not None:
                    scheduler.step()
                losses.append(loss.item())
                if args.checkpoint_every and len(losses) % args.checkpoint_every == 0:
                    dist.barrier()
                    if rank == 0:
                        torch.save(ddp.module.state_dict(), args.checkpoint)
                    dist.barrier()
                if args.validate_every and len(losses) % args.validate_every == 0:
                    # A validation loop over a DataLoader of its own, with its own DistributedSampler.
                    ddp.eval()
                    with torch.no_grad():
                        for vx, _ in val_loader:
                            logits_of(ddp(vx))
                    ddp.train()
                if args.eval_between:
                    ddp.eval()
                    with torch.no_grad():
                        logits_of(ddp(inputs[:2]))
                        if args.second_model:
                            logits_of(other(inputs[:2]))
                    ddp.train()
    if args.dump:
        logging = {k: (v if isinstance(v, (int, float, str)) else str(v))
                   for k, v in ddp._get_ddp_logging_data().items()}
        with open(f"{args.dump}.rank{rank}", "w", encoding="utf-8") as f:
            json.dump({"rank": rank, "world_size": world, "losses": losses, "logging": logging,
                       "params": names,
                       "weights_sha256": hashlib.sha256(b"".join(
                           p.detach().cpu().numpy().tobytes() for p in ddp.module.parameters())).hexdigest(),
                       "dataset": len(dataset), "batch": args.batch, "epochs": args.epochs,
                       "set_epoch": True, "sampler": sampler is not None, "micro_batches": args.accumulate,
                       "batches_dropped": rank if args.uneven else 0, "hook": args.hook,
                       "shuffle": not args.no_shuffle, "drop_last": args.drop_last, "skipped": skipped,
                       "used_params": used, "forwards_per_backward": 2 if args.two_views else 1,
                       "sparse_params": [i for i, n in enumerate(names) if args.model == "sparse" and n.startswith("embed.")]}, f)
    if args.destroy:
        dist.destroy_process_group()
    if args.raise_at_end:
        raise RuntimeError(f"rank {rank} fails on purpose (--raise-at-end)")
    return ddp  # (main() may keep it: see there)


def autocast_of(args):
    if args.autocast:
        return lambda: torch.cpu.amp.autocast(dtype=torch.bfloat16)
    return contextlib.nullcontext


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--start", default="env", choices=["env", "spawn", "fork", "process", "forkserver"])
    ap.add_argument("--nproc", type=int, default=2, help="ranks to start (spawn, fork)")
    ap.add_argument("--port", type=int, default=29500, help="MASTER_PORT (spawn, fork)")
    ap.add_argument("--model", default="mlp",
                    choices=["mlp", "batchnorm", "syncbn", "sequence", "branches", "tied", "sparse", "big"])
    ap.add_argument("--samples", type=int, default=64)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--gradient-as-bucket-view", action="store_true")
    ap.add_argument("--static-graph", action="store_true")
    ap.add_argument("--hook", default="", choices=["", "fp16", "powersgd", "builtin", "builtin-fp16"],
                    help="registered after DDP is built (builtin: DDP's C++ ALLREDUCE or FP16_COMPRESS hook)")
    ap.add_argument("--stream", action="store_true", help="batches fetched as trained on (not list(loader) first)")
    ap.add_argument("--two-views", action="store_true", help="two forwards of each batch, one backward")
    ap.add_argument("--validate-every", type=int, default=0,
                    help="a validation loop (its own DataLoader and DistributedSampler) every K steps")
    ap.add_argument("--closure", action="store_true", help="optimizer.step(closure), the closure the step's forward and backward")
    ap.add_argument("--autograd-backward", action="store_true", help="torch.autograd.backward(loss), not loss.backward()")
    ap.add_argument("--frozen", action="store_true", help="the first layer's parameters do not require grad")
    ap.add_argument("--param-groups", action="store_true", help="two parameter groups, momentum, StepLR")
    ap.add_argument("--dict-output", action="store_true", help="the model returns a dict")
    ap.add_argument("--workers", type=int, default=0, help="DataLoader num_workers")
    ap.add_argument("--no-sampler", action="store_true", help="no DistributedSampler: every rank reads all")
    ap.add_argument("--set-to-none", action="store_true", help="optimizer.zero_grad(set_to_none=True)")
    ap.add_argument("--eval-between", action="store_true", help="an eval forward under no_grad after each step")
    ap.add_argument("--second-model", action="store_true", help="a second DDP model, evaluated only")
    ap.add_argument("--accumulate", type=int, default=1, help="micro-batches per step, all but the last in no_sync()")
    ap.add_argument("--uneven", action="store_true", help="rank r runs r batches fewer, under Join([ddp])")
    ap.add_argument("--destroy", action="store_true", help="dist.destroy_process_group() at the end")
    ap.add_argument("--raise-at-end", action="store_true", help="each rank raises after training")
    ap.add_argument("--find-unused", action="store_true", help="find_unused_parameters=True")
    ap.add_argument("--bucket-cap-mb", type=float, default=0.0, help="DDP's bucket_cap_mb (0: its default)")
    ap.add_argument("--clip", type=float, default=0.0, help="clip_grad_norm_ to this norm before each step")
    ap.add_argument("--autocast", action="store_true", help="forward and loss under CPU autocast (bfloat16)")
    ap.add_argument("--skip-every", type=int, default=0, help="no optimizer.step() on one step in K (GradScaler)")
    ap.add_argument("--checkpoint", default="", help="rank 0 saves model.module's state_dict here (--checkpoint-every)")
    ap.add_argument("--checkpoint-every", type=int, default=0, help="steps between checkpoints, between barriers")
    ap.add_argument("--resume", default="", help="load this state_dict into the model before DDP is built")
    ap.add_argument("--freeze-after", type=int, default=0, help="fc1 stops requiring grad from this epoch on")
    ap.add_argument("--no-shuffle", action="store_true", help="DistributedSampler(shuffle=False)")
    ap.add_argument("--drop-last", action="store_true", help="DistributedSampler(drop_last=True)")
    ap.add_argument("--seed-per-rank", action="store_true", help="torch.manual_seed(rank) before the model is built")
    ap.add_argument("--dump", default="")
    args = ap.parse_args()
    if args.hook == "powersgd":
        # These runs are on the CPU, but PyTorch 2.x's PowerSGD hook calls torch.cuda.synchronize(the
        # bucket's device) whenever a GPU is visible, which fails for a CPU tensor ("Expected a cuda
        # device, but got: cpu"): hide the GPUs, before anything has asked CUDA for them.
        os.environ["CUDA_VISIBLE_DEVICES"] = ""
    if args.start == "env":
        KEPT.append(train(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), args))
        if args.hook:
            # PyTorch 1.13 with gloo and a Python communication hook: destroying the model (its
            # reducer holds the last reference to the process group once destroy_process_group() has
            # run) can hang the rank: ~ProcessGroupGloo joins gloo's threads with the GIL held while
            # one of them still has to free the hook's Python callback (docs/pytorch.md, "Limits").
            # Seen here in the unwatched run, 1 in 6 under load, as train() returned (faulthandler:
            # no Python frame). So the model is kept and the process ends without that teardown, as
            # dpscope_torch.run ends its own.
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(0)
    elif args.start == "spawn":
        mp.spawn(train, args=(args.nproc, args), nprocs=args.nproc, join=True)
    else:  # multiprocessing.Process(target=train), under the fork, spawn or forkserver start method
        context = mp.get_context({"fork": "fork", "forkserver": "forkserver"}.get(args.start, "spawn"))
        ranks = [context.Process(target=train, args=(r, args.nproc, args)) for r in range(args.nproc)]
        for p in ranks:
            p.start()
        for p in ranks:
            p.join()
        bad = [p.exitcode for p in ranks if p.exitcode != 0]
        if bad:
            raise SystemExit(f"a rank failed with exit code {bad[0]}")


if __name__ == "__main__":
    main()
