#!/usr/bin/env python3
"""What dpscope_torch costs a real PyTorch DDP step: the same job with and without watch(), side by side.

A 784-512-512-10 MLP (nn.Sequential of Linear + ReLU), cross-entropy, SGD, batch 64 per rank, on two
gloo processes of this machine's CPUs (one thread each), started by `dpscope launch`. Each process
builds the model twice, from the same seed, each with its own DDP, optimizer and sampler, and watches
one of them (watch(), the defaults unless --values-every is given). It then alternates blocks of
BLOCK steps of the plain and the watched model, PAIRS times, each block between barriers and timed
on rank 0 (the first block of a pair alternates too), after a warm-up of both: both see the same
machine at nearly the same moments, which on a shared machine matters more than anything else.
The plain model's backward passes through watch()'s Tensor.backward wrapper, which returns at once
for a model it does not watch (that call is charged to the plain side).

--clock cpu times rank 0's CPU time (all its threads) instead of the elapsed time: on a machine
shared with other jobs it moves far less, and it is what watching adds to do; --python-dir takes
dpscope_torch from elsewhere (an older checkout, for a before/after on one machine); --breakdown
adds the thread CPU time each of the watcher's entry points takes per watched step (on the training
thread: the forward, backward and optimizer wrappers, the communication hook, the gradient hooks;
the step's end, where its lines are written, is inside the optimizer's) and that of one pass over the
gradients alone (what scaling the buckets in the hook adds).
Printed: the median ms per step of each, the spread (quartiles), and watched / plain as the ratio
of the medians and as the median of the pairs' ratios (goal: <= 1.03).

--floor KIND puts something else than watch() on the watched model, to say what any recorder built
the same way must cost (the same pairs, the same timing):
  torch-hook      PyTorch's own Python communication hook (default_hooks.allreduce_hook);
  skeleton        what dpscope_torch hooks, doing nothing but take the time: the forward pre-hook, the
                  Tensor.backward and optimizer.step wrappers, a hook per parameter's AccumulateGrad
                  node, and the communication hook with its waiter thread (scale, all-reduce, a future
                  of ours completed by the waiter); nothing formatted or written;
  skeleton-write  the skeleton, and a step's worth of trace (5,000 bytes) written and flushed a step.

Usage:
  /usr/bin/python3 bench/dpscope_torch_overhead.py [--dpscope build/release/bin/dpscope] [--pairs 40]
      [--block 10] [--launches 1] [--batch 64] [--model 784-512-512-10] [--values-every N] [--clock wall|cpu]
      [--python-dir DIR] [--breakdown] [--floor torch-hook|skeleton|skeleton-write]
Per rank (what the driver launches): dpscope_torch_overhead.py --rank-run --trace-dir DIR ...
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BREAKDOWN = {}  # entry point -> [us of thread CPU time per watched step, one per launch] (--breakdown)
WARMUP = 20  # steps of each model before timing


ENTRY_POINTS = ("_on_forward", "_on_backward_begin", "_on_backward_end", "_on_optimizer_begin",
                "_on_optimizer_end", "_comm_hook")


def time_entry_points(watch_module, spent):
    """Wraps the watcher's entry points on the training thread (and each gradient hook) so that
    each adds the thread CPU time it takes to spent[name] (--breakdown)."""
    import functools

    clock = time.thread_time_ns

    def timed(name, fn):
        @functools.wraps(fn)  # DDP checks the communication hook's signature
        def wrapper(*a, **k):
            t0 = clock()
            try:
                return fn(*a, **k)
            finally:
                spent[name] += clock() - t0

        return wrapper

    cls = watch_module.Watcher
    for name in ENTRY_POINTS:
        setattr(cls, name, timed(name, getattr(cls, name)))
    make_hook = cls._grad_hook
    cls._grad_hook = lambda self, index: timed("gradient hooks", make_hook(self, index))


class _Skeleton:
    """--floor skeleton[-write]: the hooks watch() sets, each only taking the time (see the usage)."""

    STEP_BYTES = 5000  # about what watch() writes a step here (a 2-bucket MLP, 6 parameters)

    def __init__(self, torch, ddp, optimizer, path, write):
        import queue
        import threading

        self._torch, self._stamp, self._log = torch, time.monotonic_ns, []
        self._queue = queue.SimpleQueue()
        self._group, self._scale, self._flats = ddp.process_group, 1.0 / ddp.process_group.size(), {}
        self._waiter = threading.Thread(target=self._wait_loop, daemon=True)
        self._waiter.start()
        ddp.register_comm_hook(None, self._comm_hook)
        ddp.register_forward_pre_hook(lambda module, inputs: self._log.append(self._stamp()))
        self._nodes = []
        for index, param in enumerate(ddp.parameters()):
            node = param.expand_as(param).grad_fn.next_functions[0][0]
            self._nodes.append(node)
            node.register_hook(lambda *_, index=index: self._log.append((index, self._stamp())))
        self._backward = original_backward = torch.Tensor.backward
        self._file = open(path, "w", encoding="utf-8") if write else None
        log, stamp, text, file = self._log, self._stamp, "x" * (self.STEP_BYTES - 1) + "\n", self._file

        def backward(tensor, *a, **k):
            log.append(stamp())
            try:
                return original_backward(tensor, *a, **k)
            finally:
                log.append(stamp())

        original_step = optimizer.step

        def step(*a, **k):
            log.append(stamp())
            try:
                return original_step(*a, **k)
            finally:
                log.append(stamp())
                log.clear()
                if file is not None:
                    file.write(text)
                    file.flush()

        torch.Tensor.backward, optimizer.step = backward, step

    def _comm_hook(self, state, bucket):
        self._log.append(self._stamp())
        index, buffer = bucket.index(), bucket.buffer()
        key = (buffer.data_ptr(), buffer.numel())
        kept = self._flats.get(index)
        if kept is None or kept[0] != key:
            kept = self._flats[index] = (key, buffer.new_empty(0).set_(buffer.storage(), buffer.storage_offset(),
                                                                      (buffer.numel(),)))
        flat = kept[1]
        flat.mul_(self._scale)
        future = self._group.allreduce([flat]).get_future()
        outer = self._torch.futures.Future()
        self._queue.put((future, outer))
        return outer

    def _wait_loop(self):
        while True:
            item = self._queue.get()
            if item is None:
                return
            future, outer = item
            result = future.wait()
            self._log.append(self._stamp())
            outer.set_result(result[0])
            del item, future, outer, result

    def close(self):
        self._queue.put(None)
        self._waiter.join()
        self._torch.Tensor.backward = self._backward
        if self._file is not None:
            self._file.close()


class _Nothing:
    def close(self):
        pass


def watch_or_floor(args, dpscope_torch, torch, ddp, sampler, optimizer):
    """watch() on the watched model, or what --floor asks for instead."""
    if args.floor == "torch-hook":
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

        ddp.register_comm_hook(None, default_hooks.allreduce_hook)
        return _Nothing()
    if args.floor in ("skeleton", "skeleton-write"):
        os.makedirs(args.trace_dir, exist_ok=True)
        path = os.path.join(args.trace_dir, f"skeleton-{torch.distributed.get_rank()}.txt")
        return _Skeleton(torch, ddp, optimizer, path, args.floor == "skeleton-write")
    options = {} if args.values_every is None else {"values_every": args.values_every}
    return dpscope_torch.watch(ddp, args.trace_dir, sampler=sampler, optimizer=optimizer, **options)


def rank_run(args):
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    from torch.utils.data import DataLoader, TensorDataset
    from torch.utils.data.distributed import DistributedSampler

    sys.path.insert(0, args.python_dir)
    import collections
    import importlib

    import dpscope_torch

    spent = collections.Counter()
    if args.breakdown:
        time_entry_points(importlib.import_module("dpscope_torch.watch"), spent)
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    sizes = [int(s) for s in args.model.split("-")]
    steps = WARMUP + args.pairs * args.block
    samples = steps * args.batch * dist.get_world_size()
    data = torch.Generator().manual_seed(1)
    dataset = TensorDataset(torch.randn(samples, sizes[0], generator=data),
                            torch.randint(0, sizes[-1], (samples,), generator=data))
    loss_fn = torch.nn.CrossEntropyLoss()

    def job():
        layers = []
        for a, b in zip(sizes[:-1], sizes[1:]):
            layers += [torch.nn.Linear(a, b), torch.nn.ReLU()]
        torch.manual_seed(0)
        ddp = DDP(torch.nn.Sequential(*layers[:-1]))
        sampler = DistributedSampler(dataset, shuffle=True, seed=0)
        optimizer = torch.optim.SGD(ddp.parameters(), lr=0.01)
        return ddp, sampler, optimizer

    plain, watched = job(), job()
    watcher = watch_or_floor(args, dpscope_torch, torch, *watched)
    batches = {}
    for name, (ddp, sampler, _) in (("plain", plain), ("watched", watched)):
        sampler.set_epoch(0)
        batches[name] = iter(DataLoader(dataset, batch_size=args.batch, sampler=sampler))

    clock = time.process_time if args.clock == "cpu" else time.perf_counter

    def run(name, count):
        ddp, _, optimizer = plain if name == "plain" else watched
        it = batches[name]
        dist.barrier()
        t0 = clock()
        for _ in range(count):
            x, y = next(it)
            optimizer.zero_grad()
            loss_fn(ddp(x), y).backward()
            optimizer.step()
        dist.barrier()
        return (clock() - t0) / count

    run("plain", WARMUP)
    run("watched", WARMUP)
    spent.clear()
    for pair in range(args.pairs):
        order = ("plain", "watched") if pair % 2 == 0 else ("watched", "plain")
        times = {name: run(name, args.block) for name in order}
        if rank == 0:
            print(f"pair {pair} plain_ms {times['plain'] * 1e3:.4f} watched_ms {times['watched'] * 1e3:.4f}",
                  flush=True)
    if rank == 0 and args.breakdown:
        steps = args.pairs * args.block
        for name, ns in spent.most_common():
            print(f"breakdown {name} {ns / steps / 1e3:.1f}", flush=True)
        # The pass DDP fuses into its copy without a hook (watch.py, _comm_hook): its cost alone.
        grads = torch.zeros(sum(p.numel() for p in watched[0].parameters()))
        times = []
        for _ in range(50):
            t0 = time.thread_time_ns()
            grads.mul_(0.5)
            times.append(time.thread_time_ns() - t0)
        print(f"breakdown extra_pass {statistics.median(times) / 1e3:.1f}", flush=True)
    watcher.close()
    dist.destroy_process_group()


def run_once(args, tmp):
    trace_dir = os.path.join(tmp, "trace")
    shutil.rmtree(trace_dir, ignore_errors=True)
    cmd = [args.dpscope, "launch", "--nproc", "2", "--master-addr", "127.0.0.1", "--master-port", "0", "--",
           sys.executable, os.path.abspath(__file__), "--rank-run", "--trace-dir", trace_dir,
           "--pairs", str(args.pairs), "--block", str(args.block), "--batch", str(args.batch), "--model", args.model,
           "--clock", args.clock, "--python-dir", args.python_dir] + (["--breakdown"] if args.breakdown else [])
    if args.values_every is not None:
        cmd += ["--values-every", str(args.values_every)]
    if args.floor:
        cmd += ["--floor", args.floor]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)
    if out.returncode != 0:
        sys.exit(f"dpscope_torch_overhead: {' '.join(cmd)} failed (exit {out.returncode}): {out.stderr.strip()}")
    pairs = []
    for line in out.stdout.splitlines():
        words = line.split()
        if "breakdown" in words and len(words) >= words.index("breakdown") + 3:
            at = words.index("breakdown")
            BREAKDOWN.setdefault(" ".join(words[at + 1:-1]), []).append(float(words[-1]))
        words = line.split()  # "[rank 0] pair N plain_ms P watched_ms W" (the launcher names the rank)
        if "pair" in words and len(words) >= words.index("pair") + 6:
            at = words.index("pair")
            pairs.append((float(words[at + 3]), float(words[at + 5])))
    if len(pairs) != args.pairs:
        sys.exit(f"dpscope_torch_overhead: {len(pairs)} pairs in the output, expected {args.pairs}: {out.stdout}")
    return pairs


def quartiles(values):
    q = statistics.quantiles(values, n=4)
    return f"{q[0]:.3f}-{q[2]:.3f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rank-run", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--trace-dir", default="", help=argparse.SUPPRESS)
    ap.add_argument("--dpscope", default=os.path.join(HERE, "..", "build", "release", "bin", "dpscope"))
    ap.add_argument("--pairs", type=int, default=40, help="plain/watched block pairs per launch")
    ap.add_argument("--block", type=int, default=10, help="steps per block")
    ap.add_argument("--launches", type=int, default=1, help="fresh pairs of processes, one after the other")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--model", default="784-512-512-10")
    ap.add_argument("--values-every", type=int, default=None, help="watch()'s values_every (default: its default)")
    ap.add_argument("--clock", choices=["wall", "cpu"], default="wall",
                    help="wall: elapsed time; cpu: rank 0's CPU time, all its threads (less moved by other jobs)")
    ap.add_argument("--breakdown", action="store_true",
                    help="also print the thread CPU time of each of the watcher's entry points per watched step")
    ap.add_argument("--floor", choices=["torch-hook", "skeleton", "skeleton-write"], default=None,
                    help="instead of watch(): what any recorder hooked the same way costs (see the usage)")
    ap.add_argument("--python-dir", default=os.path.join(HERE, "..", "python"),
                    help="where dpscope_torch is imported from (e.g. an older checkout's python/)")
    args = ap.parse_args()
    if args.pairs < 2 or args.block < 1 or args.launches < 1:
        print("dpscope: error: dpscope_torch_overhead: --pairs must be >= 2, --block and --launches >= 1",
              file=sys.stderr)
        return 2
    if args.rank_run:
        return rank_run(args)
    import torch

    sys.path.insert(0, args.python_dir)
    import inspect

    import dpscope_torch

    values_every = args.values_every
    if values_every is None:
        values_every = inspect.signature(dpscope_torch.watch).parameters["values_every"].default
    tmp = tempfile.mkdtemp(prefix="dpscope-torch-overhead-")
    pairs = []
    try:
        for _ in range(args.launches):
            pairs += run_once(args, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    plain = [p for p, _ in pairs]
    watched = [w for _, w in pairs]
    ratios = [w / p for p, w in pairs]
    p, w = statistics.median(plain), statistics.median(watched)
    print(f"DDP step, MLP {args.model}, batch {args.batch} per rank, 2 gloo processes, torch {torch.__version__}, "
          f"values_every {values_every}, {args.clock} clock, "
          + (f"--floor {args.floor} instead of watch(): " if args.floor else
             f"dpscope_torch from {os.path.abspath(args.python_dir)}: ")
          + f"{args.launches} launch(es) x {args.pairs} pairs of {args.block}-step blocks")
    print(f"plain   median {p:.3f} ms/step  (quartiles {quartiles(plain)}, range {min(plain):.3f}-{max(plain):.3f})")
    print(f"watched median {w:.3f} ms/step  (quartiles {quartiles(watched)}, range {min(watched):.3f}-{max(watched):.3f})")
    print(f"watched / plain: {w / p:.3f} (medians), {statistics.median(ratios):.3f} (median of pairs; quartiles "
          f"{quartiles(ratios)}); goal <= 1.03")
    if BREAKDOWN:
        print("thread CPU time per watched step, rank 0, median over launches (us):")
        for name, values in BREAKDOWN.items():
            what = " (one pass over the gradients, alone: the scaling watch() adds)" if name == "extra_pass" else ""
            print(f"  {name:22s} {statistics.median(values):8.1f}{what}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
