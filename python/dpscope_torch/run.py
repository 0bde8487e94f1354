"""Zero-change mode: runs an unmodified training script with its DDP model watched.

    python3 -m dpscope_torch.run --trace-dir DIR [--values-every N] SCRIPT [ARGS...]

Started once per rank by a launcher (`dpscope launch --nproc N -- python3 -m dpscope_torch.run ...`,
or torchrun), or once for a script that starts its ranks itself (torch.multiprocessing.spawn).
Before the script runs, session.py's hooks are installed: the first DistributedDataParallel (or
DataParallel) model a process builds is watched from its construction, every optimizer's step()
may end a step, every DistributedSampler reports its indices, and the processes the script starts
install the same hooks. The script then runs as `__main__` with its own arguments; if it raises,
the trace gets an `error` instant first.
"""
import argparse
import atexit
import contextlib
import gc
import io
import logging
import os
import runpy
import secrets
import sys
import tempfile
import traceback

from . import session as hooks
from .writer import TraceError, check_trace_dir_before_run, values_every_problem

USAGE = "python3 -m dpscope_torch.run --trace-dir DIR [--values-every N] SCRIPT [ARGS...]"


_fail = hooks.fail


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
    problem = values_every_problem(options.values_every)
    if problem is not None:
        _fail(f"dpscope_torch.run: --{problem.replace('_', '-', 1)}", 2)
    if not os.path.isfile(options.script):
        _fail(f"dpscope_torch.run: script '{options.script}' is not a file", 2)
    try:
        check_trace_dir_before_run(options.trace_dir)  # an output refused before any work starts
    except TraceError as e:
        _fail(str(e), 2)
    return options


def _quiet_spawn_after_refusal():
    """PyTorch 2.x's spawn() logs a warning for each rank it stops once one has failed ("Terminating
    process N via signal SIGTERM"): after a refusal, whose one line said why, those are not said."""
    logging.getLogger("torch.multiprocessing.spawn").addFilter(lambda record: hooks.child_refusal() is None)


def main(argv=None):
    options = _parse(sys.argv[1:] if argv is None else argv)
    session = hooks.install(options)
    _quiet_spawn_after_refusal()
    sys.argv = [options.script] + list(options.args)
    sys.path.insert(0, os.path.dirname(os.path.abspath(options.script)))
    code = 0
    # Where a child process says it was refused: a file the first refused child creates (O_EXCL), so
    # that a run without a refusal leaves nothing behind, even when it is killed.
    refusal = os.path.join(tempfile.gettempdir(), f"dpscope_torch-{os.getpid()}-{secrets.token_hex(8)}.refused")
    os.environ[hooks.REFUSAL_ENV] = f"{os.getpid()}:{refusal}"
    try:
        runpy.run_path(options.script, run_name="__main__")
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        if code != 0 and session.watcher is not None:
            session.watcher.record_error(RuntimeError(f"the script exited with status {code}"))
        refused = hooks.child_refusal() if code != 0 else None
        if refused is not None:
            code = refused  # the script's report that a rank it started failed: that rank's line said why
        elif e.code is not None and not isinstance(e.code, int):
            print(e.code, file=sys.stderr)  # sys.exit("text"): the interpreter prints the text
    except BaseException as e:
        if session.watcher is not None:
            session.watcher.record_error(e)
            session.watcher.close(keep_model=True)
        refused = hooks.child_refusal()
        if refused is not None:
            return refused  # a rank it started was refused, in one line: not the script's report of it
        traceback.print_exc()  # as the interpreter would have, then the same exit status
        return 1
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(refusal)
    if session.watcher is not None:
        session.watcher.close(keep_model=True)
        if code == 0 and session.watcher.trace_failure is not None:
            code = 1  # the run went on, its trace did not (the line was said when it stopped)
    return code


def end_as_the_interpreter_would():
    """What the interpreter's exit does that a script relies on, short of destroying objects: its
    atexit handlers run (each one's exception printed, as the interpreter prints it), then every file
    it left open has its buffer written, as finalizing the file would (a log opened at module level
    and never closed keeps its last lines)."""
    atexit._run_exitfuncs()
    for obj in gc.get_objects():
        # type(), not isinstance(): that reads obj.__class__, which some objects answer with a
        # warning (torch.distributed.reduce_op's deprecation).
        if issubclass(type(obj), (io.BufferedIOBase, io.TextIOBase)):
            with contextlib.suppress(Exception):  # closed, detached, unwritable or broken: nothing to keep
                if not obj.closed and obj.writable():
                    obj.flush()


if __name__ == "__main__":
    # The process ends here, without the interpreter's teardown: destroying a gloo process group
    # joins its threads with the GIL held, and one of them may still need the GIL to free a Python
    # callback of the communication hook (PyTorch 1.13): a rank would hang at exit. The model (and
    # its group) stay alive in the session until then; the trace is closed, the script's atexit
    # handlers run and its files and stdio flushed first.
    status = main()
    end_as_the_interpreter_would()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status if isinstance(status, int) else 1)
