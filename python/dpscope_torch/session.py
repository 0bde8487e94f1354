"""The zero-change mode's hooks (run.py): what makes an unmodified script's first DDP model (or
nn.DataParallel) recorded, in the process that runs the script and in every process it starts.

Before the script runs, `install(options)` teaches four PyTorch classes to report here:
DistributedDataParallel (the first one a process builds is watched from its construction, so that a
communication hook registered later is wrapped), torch.optim.Optimizer (every optimizer's step() may
end a step), DistributedSampler (the indices it yields) and nn.DataParallel.

A script that starts its ranks itself (PyTorch's DDP tutorial: `torch.multiprocessing.spawn(fn,
nprocs=N)`, or `multiprocessing.Process(target=fn)`, under the spawn or the fork start method) runs
them in processes of its own; a spawned one is a fresh interpreter that knows nothing of the hooks.
So `multiprocessing`'s Process.start(), in a process without a process group (the one that starts
ranks, not a rank starting DataLoader workers), hands the child `_Child(options, fn)` instead of fn:
a picklable wrapper, defined in this module (not in run.py, which is `__main__` in the parent), that
installs the hooks in the child before fn runs, and closes the child's trace when fn returns or
raises. torch.multiprocessing.spawn's children run `_wrap(fn, i, args, error_queue)`: fn, inside it,
is the one wrapped, so that the error the child reports to the parent is the script's own.
"""
import multiprocessing.process
import os
import sys

from .writer import TraceError, printable_line

_SESSION = None  # this process's Session, once install() has run


class Session:
    """The options, this process's watcher (of its first DDP or DataParallel model) and the
    optimizers and samplers made before that model existed."""

    def __init__(self, options):
        self.options = options
        self.watcher = None
        self.optimizers = []
        self.samplers = []
        self.pid = os.getpid()  # a forked child inherits the Session: its watcher is not the child's

    def run_entry(self):
        return {"script": os.path.basename(self.options.script), "argv": list(self.options.args)}


REFUSAL_ENV = "DPSCOPE_TORCH_REFUSAL"  # "PID:PATH": run.py's process, and the file its children say a refusal in


def fail(message, code):
    """One line, `dpscope: error: ...`, and the exit status (2: usage, 1: at run time).

    In a process the script started (its ranks, under torch.multiprocessing.spawn or Process), the
    first to be refused says so in the file run.py named (REFUSAL_ENV) and prints its line; the
    others, refused alike, only exit; run.py then ends with that status instead of the traceback of
    the script's own report that a child failed (one line in all, as for a refusal before the start)."""
    marker = os.environ.get(REFUSAL_ENV, "")
    parent, _, path = marker.partition(":")
    if path and parent != str(os.getpid()):
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            sys.exit(code)  # a sibling said it
        except OSError:
            pass  # (the line is printed all the same)
        else:
            os.write(fd, str(code).encode())
            os.close(fd)
    print(printable_line(f"dpscope: error: {message}"), file=sys.stderr)
    sys.stderr.flush()
    sys.exit(code)


def child_refusal():
    """The exit status of a refusal a child process of this one reported (fail()), or None."""
    parent, _, path = os.environ.get(REFUSAL_ENV, "").partition(":")
    if not path or parent != str(os.getpid()):
        return None
    try:
        with open(path, encoding="utf-8") as f:
            return int(f.read() or 1)
    except (OSError, ValueError):
        return None


def install(options):
    """Installs the hooks in this process (once) and returns its Session."""
    global _SESSION
    if _SESSION is not None:
        return _SESSION
    session = Session(options)
    _install_ddp(session)
    _install_data_parallel(session)
    _install_process_start(session)
    _SESSION = session
    return session


def _install_ddp(session):
    import torch
    from torch.nn.parallel import DistributedDataParallel
    from torch.utils.data.distributed import DistributedSampler

    from .watch import Watcher

    ddp_init = DistributedDataParallel.__init__

    def init(self, *args, **kwargs):
        ddp_init(self, *args, **kwargs)
        if session.watcher is not None:
            print("dpscope_torch: a second DistributedDataParallel model is not recorded", file=sys.stderr)
            return
        try:
            session.watcher = Watcher(self, session.options.trace_dir, values_every=session.options.values_every,
                                      run=session.run_entry())
        except TraceError as e:
            fail(str(e), 1)
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
        try:
            session.watcher = DataParallelWatcher(self, session.options.trace_dir,
                                                  values_every=session.options.values_every, run=session.run_entry())
        except TraceError as e:
            fail(str(e), 1)
        for optimizer in session.optimizers:
            session.watcher.watch_optimizer(optimizer)

    DataParallel.__init__ = init


def _install_process_start(session):
    """Process.start() hands a child process `_Child(options, fn)` instead of its target (module doc)."""
    base = multiprocessing.process.BaseProcess
    start = base.start

    def start_watched(self):
        _wrap_target(self, session.options)
        return start(self)

    base.start = start_watched


def _wrap_target(process, options):
    target = getattr(process, "_target", None)
    if target is None or isinstance(target, _Child) or _has_process_group():
        return
    module = getattr(target, "__module__", "") or ""
    if module.startswith(("torch.utils.data", "multiprocessing.", "concurrent.")):
        return  # DataLoader workers, a Manager's server, a process pool's workers: helpers, never ranks
    if module == "torch.multiprocessing.spawn" and getattr(target, "__name__", "") == "_wrap":
        args = tuple(process._args)
        if args and not isinstance(args[0], _Child):
            process._args = (_Child(options, args[0]),) + args[1:]
        return
    process._target = _Child(options, target)


def _has_process_group():
    dist = sys.modules.get("torch.distributed")
    try:
        return dist is not None and dist.is_available() and dist.is_initialized()
    except Exception:
        return False


class _Child:
    """A child process's function, run with the hooks installed and its trace closed at the end.

    Pickled by reference to this module (spawn), so the child imports dpscope_torch from the
    parent's sys.path, which multiprocessing hands to it."""

    def __init__(self, options, fn):
        self.options, self.fn = options, fn

    def __call__(self, *args, **kwargs):
        session = install(self.options)  # in a forked child, the parent's (already installed)
        if session.pid != os.getpid():
            session.watcher, session.pid = None, os.getpid()
        try:
            result = self.fn(*args, **kwargs)
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
            if code != 0 and session.watcher is not None:
                session.watcher.record_error(RuntimeError(f"the process exited with status {code}"))
            close(session)
            raise
        except BaseException as e:
            if session.watcher is not None:
                session.watcher.record_error(e)
            close(session)
            raise
        close(session)
        return result


def close(session, keep_model=False):
    """Closes this process's trace (what is left of it written), if it has one."""
    if session.watcher is not None:
        try:
            session.watcher.close(keep_model=keep_model)
        except TraceError as e:
            print(printable_line(f"dpscope: error: {e}"), file=sys.stderr)
