"""TraceWriter: one rank's dpscope trace file (docs/trace-format.md), written line by line.

Lines are built on the thread that records them and handed to the file at flush(), once per
training step, so that `dpscope-viz --follow DIR` sees each step moments after it ends. The
all-reduce callbacks of gloo and NCCL run on threads of their own: every method takes the lock.
The hot events (a step's spans, counters, samples, gradient-ready instants, all-reduces) are
formatted by hand, by the *_line functions, which a CPU watcher calls directly and hands a step's
lines to flush() at once; the rest with json.dumps. Both give the compact form the C++ recorder
writes (no spaces).
"""
import json
import math
import operator
import os
import stat
import sys
import threading


class TraceError(Exception):
    """A trace that cannot be written: the message names the file and the reason."""


def printable_line(text):
    """`text` with every control character written out as an escape a reader can see, as dpscope's own
    lines do (runtime/include/dpscope/base/terminal_text.hpp): a path holding a newline would split the
    one `dpscope: error:` line in two, and an escape sequence in it would be obeyed by the terminal."""
    text = str(text)
    if text.isprintable():
        return text
    out = []
    for ch in text:
        code = ord(ch)
        if ch in "\n\t\r":
            out.append({"\n": "\\n", "\t": "\\t", "\r": "\\r"}[ch])
        elif code < 0x20 or code == 0x7F:
            out.append(f"\\x{code:02x}")
        elif 0x80 <= code <= 0x9F:
            out.append(f"\\u00{code:02x}")
        else:
            out.append(ch)
    return "".join(out)


def _dumps(obj):
    return json.dumps(obj, separators=(",", ":"), allow_nan=False)


_names = {}


def _name(text):
    """A JSON string of `text`, escaped once per distinct name (a run has a few dozen)."""
    quoted = _names.get(text)
    if quoted is None:
        quoted = json.dumps(text, ensure_ascii=False)
        if len(_names) < 4096:
            _names[text] = quoted
    return quoted


def _numbers(values):
    """A JSON array body of floats: json's C encoder, or, when one is NaN or infinite (which JSON
    cannot hold), one by one with those as null."""
    try:
        return json.dumps(values, allow_nan=False)[1:-1].replace(" ", "")
    except ValueError:
        return ",".join(_number(v) for v in values)


def _number(x):
    """A JSON number: JSON has no NaN or infinity, so those become null (readers skip the value)."""
    if isinstance(x, bool):
        return "1" if x else "0"
    if isinstance(x, int):
        return str(x)
    if math.isfinite(x):
        return repr(float(x))
    return "null"


# -- the lines, as strings (ts and dur: int ns) ---------------------------------------------------


def span_line(ts, rank, dev, step, phase, name, cat, dur, stream="compute"):
    return (f'{{"type":"span","ts":{ts},"rank":{rank},"dev":{dev},"step":{step},"phase":"{phase}",'
            f'"name":{_names.get(name) or _name(name)},"cat":"{cat}","stream":"{stream}","dur":{dur if dur > 0 else 0}}}\n')


def counter_line(ts, rank, dev, step, phase, name, values):
    """A counter: values, a dict of numbers (ints as they are)."""
    body = ",".join([f'"{k}":{v}' if v.__class__ is int else f'"{k}":{_number(v)}' for k, v in values.items()])
    return f'{{"type":"counter","ts":{ts},"rank":{rank},"dev":{dev},"step":{step},"phase":"{phase}","name":"{name}","values":{{{body}}}}}\n'


def loss_line(ts, rank, dev, step, value):
    """The step's loss: a counter `loss` in the backward phase."""
    return (f'{{"type":"counter","ts":{ts},"rank":{rank},"dev":{dev},"step":{step},"phase":"backward","name":"loss",'
            f'"values":{{"loss":{_number(float(value))}}}}}\n')


def samples_line(ts, rank, dev, step, indices, epoch=None):
    line = f'{{"type":"samples","ts":{ts},"rank":{rank},"dev":{dev},"step":{step},"phase":"data","indices":[{",".join(map(str, indices))}]'
    if epoch is not None:
        line += f',"epoch":{int(epoch)}'
    return line + "}\n"


def grad_ready_lines(rank, dev, step, params, stamps):
    """One backward's gradient-ready instants (params[i] ready at stamps[i]), one line each: the
    part after ts is the same for all but the parameter."""
    middle = f',"rank":{rank},"dev":{dev},"step":{step},"phase":"backward","name":"grad_ready","args":{{"param":'
    return [f'{{"type":"instant","ts":{int(ts)}{middle}{param}}}}}\n' for param, ts in zip(params, stamps)]


def all_reduce_lines(t0, t1, rank, dev, step, coll, bucket, size, count, dtype, params, ranks, name):
    """One bucket's all-reduce in a backward: bucket_launched at t0, its span on the comm stream, and
    bucket_done at t1 (three lines: every bucket, every step)."""
    common = f'"rank":{rank},"dev":{dev},"step":{step},"phase":"backward"'
    bucket_args = f'{{"bucket":{bucket},"bytes":{size},"params":{params}}}'
    return (f'{{"type":"instant","ts":{int(t0)},{common},"name":"bucket_launched","args":{bucket_args}}}\n'
            f'{{"type":"span","ts":{int(t0)},{common},"name":{_name(name)},"cat":"collective","stream":"comm",'
            f'"dur":{max(0, int(t1 - t0))},"args":{{"coll":{coll},"op":"all_reduce","bucket":{bucket},'
            f'"bytes":{size},"count":{count},"dtype":{_name(dtype)},"redop":"sum","ranks":{ranks}}}}}\n'
            f'{{"type":"instant","ts":{int(t1)},{common},"name":"bucket_done","args":{bucket_args}}}\n')


def values_line(ts, rank, dev, step, phase, param, when, values, norm, stride):
    line = (f'{{"type":"values","ts":{int(ts)},"rank":{rank},"dev":{dev},"step":{step},"phase":"{phase}","name":"grad",'
            f'"param":{param},"when":"{when}","values":[{_numbers(values)}],"norm":{_number(norm)}')
    if stride != 1:
        line += f',"stride":{stride}'
    return line + "}\n"


def buckets_line(ts, rank, dev, step, phase, reason, buckets):
    return (f'{{"type":"buckets","ts":{int(ts)},"rank":{rank},"dev":{dev},"step":{step},"phase":"{phase}",'
            f'"reason":"{reason}","buckets":{_dumps(buckets)}}}\n')


VALUES_EVERY_MAX = 2**31 - 1  # the header's `values_every`, an integer every reader holds


def values_every_problem(values_every):
    """What is wrong with a `values_every` (None: nothing): 0 (never) up to VALUES_EVERY_MAX."""
    try:
        values_every = operator.index(values_every)  # an int, a NumPy integer; not 2.5
    except TypeError:
        return f"values_every must be an integer, got {values_every!r}"
    if not 0 <= values_every <= VALUES_EVERY_MAX:
        return f"values_every must be between 0 and {VALUES_EVERY_MAX}, got {values_every}"
    return None


def _rank_file_problem(trace_dir, name):
    """Why no rank of any run may write beside DIR/`name`, or None: a compressed rank file (the readers
    refuse a rank with both), or a rank file that is not a regular file (never written over)."""
    stem = name[:-4] if name.endswith(".zst") else name
    if not (stem.startswith("rank-") and stem.endswith(".jsonl") and stem[5:-6].isdigit()):
        return None
    other = os.path.join(trace_dir, name)
    if name.endswith(".zst"):
        return f"'{other}' is another run's trace of rank {stem[5:-6]}: remove it or choose another directory"
    try:
        if not stat.S_ISREG(os.lstat(other).st_mode):
            return f"'{other}' exists and is not a regular file: not written over"
    except FileNotFoundError:
        pass  # an earlier run's file that rank 0 replaced while this rank looked
    return None


def _make_trace_dir(trace_dir):
    """Makes DIR if missing; refuses one that is not a directory (a regular file, a FIFO: never opened)."""
    if os.path.exists(trace_dir) and not os.path.isdir(trace_dir):
        raise TraceError(f"trace directory '{trace_dir}' is not a directory")
    try:
        os.makedirs(trace_dir, exist_ok=True)
    except OSError as e:
        raise TraceError(f"cannot make trace directory '{trace_dir}': {e.strerror}") from None


def check_trace_dir_before_run(trace_dir):
    """What `python3 -m dpscope_torch.run` checks once, before the script starts: that DIR is (or can be
    made) a directory it may write in, holding nothing any rank would refuse whatever the world size.
    A script that starts its own ranks (torch.multiprocessing.spawn) is so refused in one line, not by
    each spawned rank and then the parent's traceback of their exits. Raises TraceError."""
    _make_trace_dir(trace_dir)
    if not os.access(trace_dir, os.W_OK | os.X_OK):
        raise TraceError(f"trace directory '{trace_dir}' is not writable")
    for name in sorted(os.listdir(trace_dir)):
        problem = _rank_file_problem(trace_dir, name)
        if problem is not None:
            raise TraceError(problem)


def check_trace_dir(trace_dir, rank, world_size):
    """Checks, before any work, that rank `rank` may write DIR/rank-K.jsonl; returns its path.

    The directory is made if missing. An earlier run's rank files are replaced: rank 0 removes them
    all first and says so (_replace_earlier_run; a follower starts over). Anything there that is not
    a regular file, a compressed rank file (the readers refuse a rank with both) or a rank beyond this
    run's world size is refused before anything is removed, by every rank alike (what it looks at is
    the same for all): no rank goes on to wait in a collective for one that stopped.
    """
    _make_trace_dir(trace_dir)
    path = os.path.join(trace_dir, f"rank-{rank}.jsonl")
    try:
        mode = os.lstat(path).st_mode
        if not stat.S_ISREG(mode):
            raise TraceError(f"'{path}' exists and is not a regular file: not written over")
    except FileNotFoundError:
        pass
    if os.path.lexists(path + ".zst"):
        raise TraceError(f"'{path}.zst' is another run's trace of rank {rank}: remove it or choose another directory")
    earlier = []
    for name in sorted(os.listdir(trace_dir)):
        stem = name[:-4] if name.endswith(".zst") else name
        if stem.startswith("rank-") and stem.endswith(".jsonl") and stem[5:-6].isdigit():
            if int(stem[5:-6]) >= world_size:
                ranks = f"{world_size} rank" + ("s" if world_size != 1 else "")
                raise TraceError(f"'{os.path.join(trace_dir, name)}' is a rank of another run (this one has "
                                 f"{ranks}): remove it or choose another directory")
            problem = _rank_file_problem(trace_dir, name)  # what that rank refuses, before anything is removed
            if problem is not None:
                raise TraceError(problem)
            earlier.append(name)
    if rank == 0:
        _replace_earlier_run(trace_dir, earlier)
    return path


def _replace_earlier_run(trace_dir, names):
    """An earlier run's rank files (of no more ranks than this run has) are this run's to replace, and
    are removed now, by rank 0, before any rank writes: a rank of this run that stops before its file
    is made must not leave the earlier run's in its place, read as part of this run. Every other rank
    opens its file only after the clock measurement, which rank 0 joins after this (watch.py)."""
    if not names:
        return
    for name in names:
        if name == "rank-0.jsonl":
            continue  # (opened for writing, so emptied, in a moment)
        try:
            os.remove(os.path.join(trace_dir, name))
        except FileNotFoundError:
            pass
        except OSError as e:
            raise TraceError(f"cannot replace '{os.path.join(trace_dir, name)}' of an earlier run: {e.strerror}") from None
    print(printable_line(f"dpscope_torch: '{trace_dir}' held an earlier run's trace ({', '.join(names)}): replaced by "
                         "this run's"),
          file=sys.stderr)


class TraceWriter:
    """Writes the header at once, then events; flush() hands the lines recorded so far to the file.

    The header is written before any work: a trace that cannot be begun raises TraceError. Once the
    run is going, a write that fails (the disk full, a file size limit) ends the trace, never the
    user's run: the file is cut back to its last whole step, so that every reader takes it, one line
    says why on stderr, `failure` keeps it, and every later line is dropped."""

    def __init__(self, path, header):
        self.path = path
        self.failure = None  # "cannot write trace 'PATH': REASON" once a write after the header failed
        self._lock = threading.Lock()
        self._lines = []
        try:
            self._file = open(path, "w", encoding="utf-8")
            self._file.write(_dumps(header) + "\n")
            self._file.flush()
            self._whole = self._file.tell()  # bytes up to the last line flushed whole
        except OSError as e:
            raise TraceError(f"cannot write trace '{path}': {e.strerror}") from None

    # -- events ------------------------------------------------------------------------------------
    # Each takes the common fields: ts (int ns), rank, dev, step, phase.

    @staticmethod
    def _common(kind, ts, rank, dev, step, phase):
        return f'{{"type":"{kind}","ts":{int(ts)},"rank":{rank},"dev":{dev},"step":{step},"phase":"{phase}"'

    def span(self, ts, rank, dev, step, phase, name, cat, stream, dur, args=None):
        line = span_line(int(ts), rank, dev, step, phase, name, cat, int(dur), stream)
        if args:
            line = f'{line[:-2]},"args":{_dumps(args)}}}\n'
        self._add(line)

    def all_reduce(self, t0, t1, rank, dev, step, coll, bucket, size, count, dtype, params, ranks, name):
        self._add(all_reduce_lines(t0, t1, rank, dev, step, coll, bucket, size, count, dtype, params, ranks, name))

    def instant(self, ts, rank, dev, step, phase, name, args):
        self._add(f'{self._common("instant", ts, rank, dev, step, phase)},"name":"{name}","args":{_dumps(args)}}}\n')

    def grad_ready(self, ts, rank, dev, step, param):
        self._add(f'{self._common("instant", ts, rank, dev, step, "backward")},"name":"grad_ready",'
                  f'"args":{{"param":{param}}}}}\n')

    def grad_ready_all(self, rank, dev, step, params, stamps):
        self.add_lines(grad_ready_lines(rank, dev, step, params, stamps))

    def counter(self, ts, rank, dev, step, phase, name, values):
        self._add(counter_line(int(ts), rank, dev, step, phase, name, values))

    def loss(self, ts, rank, dev, step, value):
        self._add(loss_line(int(ts), rank, dev, step, value))

    def values(self, ts, rank, dev, step, phase, param, when, values, norm, stride):
        self._add(values_line(ts, rank, dev, step, phase, param, when, values, norm, stride))

    def samples(self, ts, rank, dev, step, indices, epoch=None):
        self._add(samples_line(int(ts), rank, dev, step, indices, epoch))

    def buckets(self, ts, rank, dev, step, phase, reason, buckets):
        self._add(buckets_line(ts, rank, dev, step, phase, reason, buckets))

    def add_lines(self, lines):
        """Lines made by the *_line functions, in order (a CPU watcher's step, handed at once)."""
        with self._lock:
            if self._lines is not None:
                self._lines.extend(lines)

    def _add(self, line):
        with self._lock:
            if self._lines is not None:
                self._lines.append(line)

    # -- file ---------------------------------------------------------------------------------------

    def flush(self, lines=()):
        """Writes every line recorded so far, then `lines` (add_lines'), and flushes the file (a live
        reader sees them)."""
        with self._lock:
            if self._lines is None:
                return
            if lines:
                self._lines.extend(lines)
            if not self._lines:
                return
            text = "".join(self._lines)
            self._lines.clear()
            try:
                self._file.write(text)
                self._file.flush()
                self._whole = os.lseek(self._file.fileno(), 0, os.SEEK_CUR)
            except OSError as e:
                self._fail(e)

    def _fail(self, e):
        """Ends the trace after a failed write (the lock held): see the class."""
        self._lines = None
        self.failure = f"cannot write trace '{self.path}': {e.strerror or e}"
        fd = None
        try:
            fd = os.dup(self._file.fileno())
            self._file.close()  # (its buffer's flush fails again: the file is closed all the same)
        except OSError:
            pass
        if fd is not None:  # the file itself, not whatever its name may stand for by now
            try:
                os.ftruncate(fd, self._whole)
            except OSError:
                pass
            os.close(fd)
        print(printable_line(f"dpscope: error: {self.failure}; the trace ends at its last whole step, the run goes "
                             "on unrecorded"), file=sys.stderr, flush=True)

    def close(self):
        self.flush()
        with self._lock:
            if self._lines is None:
                return
            self._lines = None
            try:
                self._file.close()
            except OSError as e:
                self._fail(e)
