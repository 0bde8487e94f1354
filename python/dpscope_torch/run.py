"""Zero-change mode: runs an unmodified training script with its DDP model watched.

    python3 -m dpscope_torch.run --trace-dir DIR [--values-every N] SCRIPT [ARGS...]

Started once per rank by a launcher (`dpscope launch --nproc N -- python3 -m dpscope_torch.run ...`,
or torchrun). Before the script runs, three PyTorch classes learn to report to dpscope_torch:
DistributedDataParallel (the first one the script builds is watched, from its construction, so
that a communication hook the script registers later is wrapped), torch.optim.Optimizer (every
optimizer's step() may end a step) and DistributedSampler (the indices it yields). The script then
runs as `__main__` with its own arguments; if it raises, the trace gets an `error` instant first.
"""
import argparse
import os
import runpy
import sys
import traceback

from .watch import Watcher
from .writer import TraceError

USAGE = "python3 -m dpscope_torch.run --trace-dir DIR [--values-every N] SCRIPT [ARGS...]"


def _fail(message, code):
    print(f"dpscope: error: {message}", file=sys.stderr)
    sys.exit(code)


def _parse(argv):
    parser = argparse.ArgumentParser(prog="python3 -m dpscope_torch.run", usage=USAGE, add_help=True)
    parser.add_argument("--trace-dir", required=True, help="where each rank writes rank-K.jsonl")
    parser.add_argument("--values-every", type=int, default=10,
                        help="gradient values before and after the average on one step in N (0: never)")
    parser.add_argument("script", help="the training script, run as __main__")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="the script's own arguments")

    def error(message):
        _fail(f"dpscope_torch.run: {message} (usage: {USAGE})", 2)

    parser.error = error
    options = parser.parse_args(argv)
    if options.values_every < 0:
        _fail(f"dpscope_torch.run: --values-every must be >= 0, got {options.values_every}", 2)
    if not os.path.isfile(options.script):
        _fail(f"dpscope_torch.run: script '{options.script}' is not a file", 2)
    return options


class _Session:
    """The watcher of the script's first DDP model, and what arrived before it existed."""

    def __init__(self, options):
        self.options = options
        self.watcher = None
        self.optimizers = []
        self.samplers = []


def _install(session):
    import torch
    from torch.nn.parallel import DistributedDataParallel
    from torch.utils.data.distributed import DistributedSampler

    ddp_init = DistributedDataParallel.__init__

    def init(self, *args, **kwargs):
        ddp_init(self, *args, **kwargs)
        if session.watcher is not None:
            print("dpscope_torch: a second DistributedDataParallel model is not recorded", file=sys.stderr)
            return
        run = {"script": os.path.basename(session.options.script), "argv": list(session.options.args)}
        try:
            session.watcher = Watcher(self, session.options.trace_dir, values_every=session.options.values_every,
                                      run=run)
        except TraceError as e:
            _fail(str(e), 1)
        for optimizer in session.optimizers:
            session.watcher.watch_optimizer(optimizer)
        for sampler in session.samplers:
            session.watcher.watch_sampler(sampler)

    DistributedDataParallel.__init__ = init

    optimizer_init = torch.optim.Optimizer.__init__

    def optimizer_init_watched(self, *args, **kwargs):
        optimizer_init(self, *args, **kwargs)
        session.optimizers.append(self)
        if session.watcher is not None:
            session.watcher.watch_optimizer(self)

    torch.optim.Optimizer.__init__ = optimizer_init_watched

    sampler_init = DistributedSampler.__init__

    def sampler_init_watched(self, *args, **kwargs):
        sampler_init(self, *args, **kwargs)
        session.samplers.append(self)
        if session.watcher is not None:
            session.watcher.watch_sampler(self)

    DistributedSampler.__init__ = sampler_init_watched
    _install_data_parallel(session)


def _install_data_parallel(session):
    """nn.DataParallel (one process, several GPUs): the first one built is watched from its construction,
    into TRACE_DIR/rank-0.jsonl, with every optimizer's step() ending a step (docs/pytorch.md)."""
    from torch.nn import DataParallel

    from .data_parallel import DataParallelWatcher

    dp_init = DataParallel.__init__

    def init(self, *args, **kwargs):
        dp_init(self, *args, **kwargs)
        if session.watcher is not None:
            print("dpscope_torch: a second model (DataParallel) is not recorded", file=sys.stderr)
            return
        if not self.device_ids:
            print("dpscope_torch: nn.DataParallel found no GPU and calls its module unsplit: not recorded",
                  file=sys.stderr)
            return
        run = {"script": os.path.basename(session.options.script), "argv": list(session.options.args)}
        try:
            session.watcher = DataParallelWatcher(self, session.options.trace_dir,
                                                  values_every=session.options.values_every, run=run)
        except TraceError as e:
            _fail(str(e), 1)
        for optimizer in session.optimizers:
            session.watcher.watch_optimizer(optimizer)

    DataParallel.__init__ = init


def main(argv=None):
    options = _parse(sys.argv[1:] if argv is None else argv)
    session = _Session(options)
    _install(session)
    sys.argv = [options.script] + list(options.args)
    sys.path.insert(0, os.path.dirname(os.path.abspath(options.script)))
    code = 0
    try:
        runpy.run_path(options.script, run_name="__main__")
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        if code != 0 and session.watcher is not None:
            session.watcher.record_error(RuntimeError(f"the script exited with status {code}"))
    except BaseException as e:
        if session.watcher is not None:
            session.watcher.record_error(e)
            session.watcher.close(keep_model=True)
        traceback.print_exc()  # as the interpreter would have, then the same exit status
        return 1
    if session.watcher is not None:
        session.watcher.close(keep_model=True)
    return code


if __name__ == "__main__":
    # The process ends here, without the interpreter's teardown: destroying a gloo process group
    # joins its threads with the GIL held, and one of them may still need the GIL to free a Python
    # callback of the communication hook (PyTorch 1.13): a rank would hang at exit. The model (and
    # its group) stay alive in the session until then; the trace is closed and stdio flushed first.
    status = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status if isinstance(status, int) else 1)
