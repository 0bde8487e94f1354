"""dpscope_torch: records a real PyTorch DistributedDataParallel run into dpscope's trace format.

    with dpscope_torch.watch(ddp_model, "traces/run", sampler=sampler, optimizer=optimizer):
        ...  # the training loop, unchanged

or, for an unmodified script, once per rank under a launcher:

    dpscope launch --nproc 2 -- python3 -m dpscope_torch.run --trace-dir traces/run train.py ARGS...

Then `dpscope-viz --follow traces/run` (live) and `dpscope trace stats traces/run`. docs/pytorch.md.
"""
from .watch import Watcher, watch
from .writer import TraceError

__all__ = ["watch", "Watcher", "TraceError"]
__version__ = "0.1.0"
