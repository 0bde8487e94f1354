"""dpscope_torch: records a real PyTorch DistributedDataParallel (or nn.DataParallel) run into dpscope's
trace format.

    with dpscope_torch.watch(ddp_model, "traces/run", sampler=sampler, optimizer=optimizer):
        ...  # the training loop, unchanged

or, for an unmodified script, once per rank under a launcher:

    dpscope launch --nproc 2 -- python3 -m dpscope_torch.run --trace-dir traces/run train.py ARGS...

Then `dpscope-viz --follow traces/run` (live) and `dpscope trace stats traces/run`. docs/pytorch.md.
An nn.DataParallel model is one process on several GPUs: watch(dp_model, "traces/dp") writes one
file, traces/dp/rank-0.jsonl (or the file itself when the name ends in .jsonl).
"""
from .watch import Watcher
from .watch import watch as _watch_ddp
from .writer import TraceError


def watch(model, trace_dir, sampler=None, optimizer=None, values_every=10, run=None):
    """Starts recording `model`'s run; use as a context manager (docs/pytorch.md).

    A DistributedDataParallel model: every rank calls it and writes TRACE_DIR/rank-K.jsonl (watch.py).
    An nn.DataParallel model: one trace of the one process and its devices (data_parallel.py).
    """
    import torch

    if isinstance(model, torch.nn.DataParallel):
        from .data_parallel import DataParallelWatcher

        return DataParallelWatcher(model, trace_dir, sampler=sampler, optimizer=optimizer,
                                   values_every=values_every, run=run)
    return _watch_ddp(model, trace_dir, sampler=sampler, optimizer=optimizer, values_every=values_every, run=run)


__all__ = ["watch", "Watcher", "TraceError"]
__version__ = "0.1.0"
