"""watch(): records a real PyTorch DistributedDataParallel run into one dpscope trace per rank.

    with dpscope_torch.watch(ddp_model, "traces/run1", sampler=sampler, optimizer=optimizer):
        for epoch in range(epochs):
            sampler.set_epoch(epoch)
            for x, y in loader:
                optimizer.zero_grad()
                loss_fn(ddp_model(x), y).backward()
                optimizer.step()

What is recorded, and from where (docs/pytorch.md says the same for users):
- steps and phases: a step starts at the first training forward of the DDP model after the previous
  step ended and ends when the optimizer's step() returns (or, when no step() follows a backward whose
  gradients DDP averaged, as when GradScaler skips one, with that backward, seen at the next forward);
  `data` is the time before the forward, `forward` runs to the call of backward() (the loss
  included), `backward` to its return (DDP waits there for the last bucket), `optimizer` is step().
  Each phase is a span of category `phase`; the forward, the backward's computation (to the last
  gradient) and step() are also work spans;
- gradient-ready instants, one per parameter and backward, from a hook on the parameter's
  AccumulateGrad node (register_post_accumulate_grad_hook where PyTorch has it, >= 2.1);
- buckets as DDP first builds them (header) and every assignment after (`buckets` events, from the
  GradBucket each all-reduce gets), bucket launched / done instants and the all-reduce span, through a
  communication hook that wraps the user's own hook or does what DDP does without one;
- the sample indices each rank's sampler yields for each forward, with the sampler's epoch;
- the loss, memory by category, and 32 gradient values per parameter before and after the average
  on one step in `values_every`;
- each rank's clock offset to rank 0 (clock.py), and an `error` instant if the run raises.
"""
import collections
import math
import os
import queue
import socket
import sys
import threading
import traceback

from . import schema
from .clock import await_peers, measure_offsets, now_ns
from .clocks import CudaClock, HostClock
from .ddp_layout import ddp_parameters, first_bucket_bytes, initial_buckets, parse_sizes
from .forward_io import first_batch_size
from .step_watcher import StepWatcher, _Samples
from .writer import (TraceError, TraceWriter, all_reduce_lines, buckets_line, check_trace_dir, counter_line,
                     grad_ready_lines, loss_line, samples_line, span_line, values_line, values_every_problem)

VALUE_SAMPLES = 32  # gradient elements per parameter in a `values` event (the runtime's count)
WAITER_GRACE_S = 30.0  # close() waits this long for an all-reduce still running
# ... and this long once the run has failed (an error recorded): the all-reduce waits for peers that
# will not come, and the rank's exit is what tells them (a failed rank lingered 30 s, and its peers
# with it, where unwatched the job ended in 2 s).
WAITER_GRACE_AFTER_ERROR_S = 1.0
RETIRE_S = 10.0  # the tensors handed to gloo are kept this long after close() (Watcher._flat)
_HANDED = {}  # id -> tensor given to the process group, kept until retired


def _retire(ids):
    """Lets the tensors with these ids go RETIRE_S from now, on a daemon timer thread (at the
    interpreter's exit, with the rest of the module)."""

    def release():
        for i in ids:
            _HANDED.pop(i, None)

    timer = threading.Timer(RETIRE_S, release)
    timer.daemon = True
    timer.start()


def _torch():
    import torch

    return torch


def _stride(shape):
    """Elements 0, stride, 2*stride, ... of the flattened tensor: VALUE_SAMPLES spread over all of it;
    for a matrix, lowered until prime to the row length so that they fall in different columns."""
    numel = math.prod(shape)
    stride = max(1, numel // VALUE_SAMPLES)
    if len(shape) >= 2:
        row = shape[-1]
        while stride > 1 and math.gcd(stride, row) != 1:
            stride -= 1
    return stride


def _one_line(exc):
    text = f"{type(exc).__name__}: {exc}".strip()
    first = text.splitlines()[0] if text else type(exc).__name__
    return first[:2000]


def _averaged(buffer, world_size):
    """`buffer` made ready for a summing all-reduce to average it, in place, as DDP's reducer does
    without a hook, so that a watched run's gradients have the same bits as an unwatched one's: a dense
    bucket times 1/world_size (the reducer multiplies as it copies the gradients in), a sparse gradient
    divided by it (the reducer's div_ on the gradient itself)."""
    if buffer.is_sparse:
        return buffer.div_(world_size)
    return buffer.mul_(1.0 / world_size)


class _Layout:
    """One bucket as the communication hook last read it: its parameters (indices, shapes) in
    packing order, its buffer (`key`: address and elements; `flat`, the tensor gloo gets), what its
    all-reduce's lines say of it, and where its sampled gradient values lie in the flat bucket (one
    gather and one norm per parameter per side)."""

    __slots__ = ("params", "shapes", "size", "key", "flat", "count", "dtype", "name", "counts", "strides", "_plan")

    def __init__(self, params, shapes, size, key=None, flat=None, count=0, dtype="", name=""):
        self.params, self.shapes, self.size = params, shapes, size
        self.key, self.flat, self.count, self.dtype, self.name = key, flat, count, dtype, name
        self.counts = self.strides = self._plan = None

    def sample(self, tensor):
        """(the sampled elements, each parameter's norm) as tensors, read when written (on a GPU, once
        the work is done, so that sampling never waits for it)."""
        torch = _torch()
        flat = tensor.detach().reshape(-1)
        if self._plan is None or self._plan[0].device != flat.device:
            positions, segments, counts, strides, at = [], [], [], [], 0
            for shape in self.shapes:
                numel = math.prod(shape)
                stride = _stride(shape)
                picked = range(at, at + numel, stride)[:VALUE_SAMPLES]
                positions.extend(picked)
                counts.append(len(picked))
                strides.append(stride)
                segments.append((at, at + numel))
                at += numel
            self.counts, self.strides = counts, strides
            self._plan = (torch.tensor(positions, dtype=torch.long, device=flat.device), segments)
        positions, segments = self._plan
        return flat.index_select(0, positions), torch.stack([flat[a:b].norm() for a, b in segments])


class _Collective:
    """One bucket's all-reduce in one backward: its launch, its end and the values sampled."""

    __slots__ = ("coll", "index", "layout", "step", "launch", "end", "before", "after", "unwrap")

    def __init__(self, coll, index, layout, step, launch, unwrap):
        self.coll, self.index, self.layout, self.step, self.launch = coll, index, layout, step, launch
        self.end = self.before = self.after = None
        self.unwrap = unwrap  # the future's value is [tensor] (our own all-reduce's)


class Watcher(StepWatcher):
    """Records one DDP model's run (watch() makes one; close() or leaving the `with` ends it)."""

    def __init__(self, ddp_model, trace_dir, sampler=None, optimizer=None, values_every=10, run=None):
        torch = _torch()
        dist = torch.distributed
        if not isinstance(ddp_model, torch.nn.parallel.DistributedDataParallel):
            raise TypeError(f"dpscope_torch.watch: expected a DistributedDataParallel model, got {type(ddp_model).__name__}")
        if not dist.is_initialized():
            raise RuntimeError("dpscope_torch.watch: the default process group is not initialized (call "
                               "torch.distributed.init_process_group first)")
        problem = values_every_problem(values_every)
        if problem is not None:
            raise ValueError(f"dpscope_torch.watch: {problem}")
        self._torch = torch
        self._ddp = ddp_model
        self._ddp_group = ddp_model.process_group
        self._values_every = int(values_every)
        self.rank = dist.get_rank()
        self.world_size = dist.get_world_size()
        self.backend = str(dist.get_backend())
        self._lock = threading.RLock()
        self._closed = False

        # Device and clock: where the model's parameters are.
        self._params = ddp_parameters(ddp_model)
        first = self._params[0][1] if self._params else None
        self.device = first.device if first is not None else torch.device("cpu")
        self._clock = CudaClock(torch, self.device) if self.device.type == "cuda" else HostClock()
        self._gpu = self._clock.gpu  # on the CPU every stamp is a time at once: events are written directly

        # Everything that can fail on bad input is checked before any hook is set.
        self._claim(ddp_model, os.path.join(os.fspath(trace_dir), f"rank-{self.rank}.jsonl"))
        self.path = check_trace_dir(trace_dir, self.rank, self.world_size)
        offset, uncertainty = self._measure_clock()

        self._index_of = {p.data_ptr(): i for i, (_, p) in enumerate(self._params)}
        self._param_sizes = [(p, p.numel() * p.element_size()) for _, p in self._params]
        self._param_bytes = sum(size for _, size in self._param_sizes)
        self._buffer_bytes = sum(b.numel() * b.element_size() for b in ddp_model.module.buffers())
        self._state_bytes = 0
        logging = self._logging_data()
        self._buckets = initial_buckets(ddp_model, self._params, parse_sizes(logging.get("bucket_sizes", "")))
        header = self._header(run or {}, offset, uncertainty)
        self._writer = TraceWriter(self.path, header)

        # Step state (the main thread's, except where noted).
        self.step = -1
        self._in_step = False
        self._grads_on = False  # gradient-ready instants are logged: in a step, in a backward DDP reduces
        self._reduced = None  # the stamp at which this step's backward that DDP reduced returned
        self._shadow_bucket = None  # a joined rank's last shadow all-reduce's bucket (_shadow_step)
        self._phase = "none"
        self._phase_start = None
        self._step_end = self._clock.stamp()  # step 0's data phase starts here
        self._backward_start = None
        self._forward_start = None
        # A backward begun in this model's forward phase: (stamp, the forward's memory, the loss, step)
        # until it ends, when it is known whether it was this model's (_touched: a gradient of its own).
        self._pending_backward = None
        self._touched = False
        self._last_grad = None  # stamp of this backward's latest gradient
        self._loss = None
        self._log = []  # (param index, stamp) per gradient hook, (bucket's param indices, stamp) per launch
        self._ready = set()  # parameters whose gradient-ready was recorded this backward
        self._launch_of_param = {}  # parameter -> stamp of its bucket's launch, if that came first
        self._observed = {}  # bucket index -> its _Layout, this backward
        self._noted = None  # the _Layouts of the last assignment written (_note_buckets)
        self._bucket_cache = {}  # bucket index -> _Layout as last read from a bucket
        self._out = []  # CPU runs: the step's lines, made on this thread, handed to the writer at its end
        self._thread = threading.get_ident()  # the training thread (the one that calls watch())
        self._collectives = 0
        self._done = collections.deque()  # _Collectives done, written at the step's end
        self._held = []  # GPU runs: futures our callbacks hang on, freed on this thread (_hold)
        self._queue = queue.SimpleQueue()  # CPU runs: (collective, its future, DDP's future) to wait for
        self._flats = {}  # bucket index -> ((storage pointer, size, dtype), our tensor over it): _flat
        self._handed = []  # ids in _HANDED of the tensors this watcher gave the process group
        self._waiter = None
        self._pending = []  # (stamps, emit) waiting for the GPU (CudaClock)
        self._samples = _Samples()
        self._optimizers = []

        if self._buckets is not None:
            self._writer.buckets(self._step_end_ns(), self.rank, 0, -1, "none", "initial",
                                 self._bucket_list(self._buckets))
        self._hooks = []
        self._hook_registered = False
        self._install_hooks()
        if not self._clock.gpu:
            self._waiter = threading.Thread(target=self._wait_loop, name="dpscope_torch waiter", daemon=True)
            self._waiter.start()
        if sampler is not None:
            self.watch_sampler(sampler)
        if optimizer is not None:
            self.watch_optimizer(optimizer)
        self._writer.flush()

    # -- set-up --------------------------------------------------------------------------------------

    def _measure_clock(self):
        torch = self._torch
        dist = torch.distributed
        if self.world_size == 1:
            return 0, 0
        await_peers(dist, self.rank, self.world_size)
        group = None
        if self.backend != "gloo":
            group = dist.new_group(backend="gloo")  # every rank calls watch(), so every rank makes it
        return measure_offsets(dist, group)

    def _logging_data(self):
        try:
            return dict(self._ddp._get_ddp_logging_data())
        except Exception:  # a private API: its absence costs the initial buckets only
            return {}

    def _step_end_ns(self):
        return self._clock.ns(self._step_end) if self._clock.ready(self._step_end) else now_ns()

    def _device_entry(self):
        torch = self._torch
        if self.device.type == "cuda":
            props = torch.cuda.get_device_properties(self.device)
            return {"id": 0, "name": f"cuda:{self.device.index or 0}", "kind": "cuda", "hardware": props.name,
                    "memory_bytes": int(props.total_memory), "peak_flops": 0, "mem_bandwidth": 0}
        return {"id": 0, "name": "cpu", "kind": "cpu", "hardware": _cpu_model(), "memory_bytes": 0,
                "peak_flops": 0, "mem_bandwidth": 0}

    def _header(self, extra_run, offset, uncertainty):
        torch = self._torch
        ddp = self._ddp
        run = {
            "mode": "ddp",
            "source": "dpscope_torch",
            "torch": torch.__version__,
            "device": self.device.type,
            "backend": self.backend,
            "devices": self.world_size,
            "model": type(ddp.module).__name__,
            "host": socket.gethostname(),
            "bucket_cap_mb": round(ddp.bucket_bytes_cap / (1 << 20), 6),
            "first_bucket_mb": round(first_bucket_bytes(torch, ddp) / (1 << 20), 6),
            "find_unused_parameters": bool(ddp.find_unused_parameters),
            "gradient_as_bucket_view": bool(getattr(ddp, "gradient_as_bucket_view", False)),
            "static_graph": bool(getattr(ddp, "static_graph", False)),
            "values_every": self._values_every,
        }
        run.update(extra_run)
        run["process"] = {"rank": self.rank, "world_size": self.world_size, "clock_offset_ns": int(offset),
                          "clock_uncertainty_ns": int(uncertainty)}
        params = [{"index": i, "name": name, "shape": list(p.shape), "bytes": p.numel() * p.element_size()}
                  for i, (name, p) in enumerate(self._params)]
        return {"type": "header", "format": schema.FORMAT, "version": schema.VERSION, "clock": "measured",
                "run": run, "devices": [self._device_entry()], "links": [], "params": params,
                "buckets": self._bucket_list(self._buckets or [])}

    @staticmethod
    def _bucket_list(buckets):
        return [{"id": i, "params": list(indices), "bytes": int(size)} for i, (indices, size) in enumerate(buckets)]

    def _install_hooks(self):
        ddp = self._ddp
        self._hooks.append(ddp.register_forward_pre_hook(self._on_forward))
        self._grad_nodes = []
        for index, (_, param) in enumerate(self._params):
            hook = self._grad_hook(index)
            if hasattr(param, "register_post_accumulate_grad_hook"):
                self._hooks.append(param.register_post_accumulate_grad_hook(hook))
            else:
                node = param.expand_as(param).grad_fn.next_functions[0][0]  # the AccumulateGrad node
                self._grad_nodes.append(node)  # kept alive: the hook lives on this node
                self._hooks.append(node.register_hook(hook))
        # The communication hook: ours wraps the user's (registered now or later) or does DDP's work.
        self._inner_hook = None
        self._inner_state = None
        self._successor = None  # a watcher of the same model made after close(): our hook forwards to it
        previous = getattr(ddp, "_dpscope_watcher", lambda: None)()
        if isinstance(previous, Watcher) and previous._closed and previous._hook_registered:
            # Watched before (PyTorch 1.13 cannot remove a communication hook): the one registered then
            # is that watcher's, which hands each bucket on to this one, the user's hook with it.
            self._inner_state, self._inner_hook = previous._inner_state, previous._inner_hook
            previous._successor = self
            self._divert_user_hooks(ddp)
        elif self._logging_data().get("comm_hook"):
            print(f"dpscope_torch: rank {self.rank}: a communication hook was registered before watch(); "
                  "buckets are not recorded (call watch() before register_comm_hook)", file=sys.stderr)
        else:
            ddp.register_comm_hook(None, self._comm_hook)
            self._divert_user_hooks(ddp)
        self._wrap_backward(self._ddp)  # where the forward phase ends and the loss is

    def _divert_user_hooks(self, ddp):
        """DDP takes one communication hook, ours: the user's, registered later, goes inside it (the
        instance's methods, in place of the class's)."""
        ddp.register_comm_hook = self._register_user_hook
        ddp._register_builtin_comm_hook = self._register_builtin_hook
        self._hook_registered = True

    def _register_user_hook(self, state, hook):
        if self._inner_hook is not None:
            raise RuntimeError("register_comm_hook can only be called once (dpscope_torch wraps the first)")
        self._inner_state, self._inner_hook = state, hook

    def _register_builtin_hook(self, comm_hook_type):
        """DDP's built-in (C++) hooks, inside ours as their Python twins, which do the same arithmetic in
        the same order (the division before the all-reduce; FP16_COMPRESS: to float16, divided, summed,
        copied back into the bucket), so the gradients have the same bits as with the built-in hook."""
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

        dist = self._torch.distributed
        twins = {dist.BuiltinCommHookType.ALLREDUCE: default_hooks.allreduce_hook,
                 dist.BuiltinCommHookType.FP16_COMPRESS: default_hooks.fp16_compress_hook}
        if comm_hook_type not in twins:
            raise RuntimeError(f"dpscope_torch: built-in communication hook {comm_hook_type} is not known here")
        self._register_user_hook(None, twins[comm_hook_type])

    # -- events, in the clock's time ----------------------------------------------------------------

    def _emit(self, stamps, emit):
        """Calls emit(*times_ns) once every stamp is resolved: at once on the CPU, later on a GPU."""
        if not self._clock.gpu:
            emit(*stamps)
            return
        with self._lock:
            self._pending.append((stamps, emit))

    def _drain(self, wait):
        if not self._clock.gpu:
            return
        with self._lock:
            pending, self._pending = self._pending, []
        done = 0
        for stamps, emit in pending:
            if not wait and not all(self._clock.ready(s) for s in stamps if s is not None):
                break
            if wait:
                for s in stamps:
                    if s is not None:
                        s[1].synchronize()
            emit(*[self._clock.ns(s) if s is not None else None for s in stamps])
            done += 1
        if done < len(pending):
            with self._lock:
                self._pending = pending[done:] + self._pending

    def _phase_span(self, name, start, end, step):
        self._span(start, end, step, name, name, "phase")

    def _span(self, start, end, step, phase, name, cat):
        if not self._gpu:
            self._out.append(span_line(start, self.rank, 0, step, phase, name, cat, end - start))
            return
        writer, rank = self._writer, self.rank
        self._emit((start, end), lambda t0, t1: writer.span(t0, rank, 0, step, phase, name, cat, "compute", t1 - t0))

    def _memory(self, stamp, phase, step, values=None):
        values = self._memory_values() if values is None else values
        if not self._gpu:
            self._out.append(counter_line(stamp, self.rank, 0, step, phase, "memory", values))
            return
        writer, rank = self._writer, self.rank
        self._emit((stamp,), lambda t: writer.counter(t, rank, 0, step, phase, "memory", values))

    def _memory_values(self):
        """Bytes by category: tensors counted (the optimizer's state as of the last step); on a GPU
        the allocator's count, less those, is the activations (and the allocator's other blocks)."""
        torch = self._torch
        grads = sum([size for p, size in self._param_sizes if p.grad is not None])
        state = self._state_bytes
        buffers = self._buffer_bytes
        values = {"parameters": self._param_bytes, "gradients": grads, "optimizer_state": state,
                  "activations": 0, "buffers": buffers, "capacity": 0}
        if self.device.type == "cuda":
            allocated = torch.cuda.memory_allocated(self.device)
            values["activations"] = max(0, allocated - self._param_bytes - grads - state - buffers)
            values["capacity"] = int(torch.cuda.get_device_properties(self.device).total_memory)
        return values

    # -- the step's moments -------------------------------------------------------------------------

    def _on_forward(self, module, inputs):
        if self._closed or not module.training or not self._torch.is_grad_enabled():
            return None
        t = self._clock.stamp()
        self._take_log()  # a backward without Tensor.backward() (torch.autograd.backward) ends here
        if self._in_step and self._reduced is not None and self._phase == "none":
            # The step's gradients were averaged and no optimizer.step() followed (GradScaler skipping a
            # step whose gradients are not finite; micro-batches accumulated without no_sync()): that
            # step ended with its backward, and this forward begins the next (one all-reduce of every
            # bucket, one gradient-ready per parameter, one loss per step).
            self._end_step(self._reduced)
        with self._lock:
            # A backward under DDP's no_sync() (gradient accumulation) reduces nothing: its gradients
            # are not ready for any bucket yet, the last micro-batch's are (docs/pytorch.md).
            self._grads_on = bool(getattr(self._ddp, "require_backward_grad_sync", True))
            self._shadow_bucket = None
            if not self._in_step:
                self.step += 1
                self._in_step = True
                self._ready.clear()
                self._clock.reanchor()
                self._phase_span("data", self._step_end, t, self.step)
            elif self._phase != "none":
                self._end_phase(t)
            self._phase, self._phase_start = "forward", t
            self._forward_start = t
            step = self.step
        indices, epoch = self._samples.take(first_batch_size(inputs))  # (kwargs-only forwards: None)
        if indices:
            if not self._gpu:
                self._out.append(samples_line(t, self.rank, 0, step, indices, epoch))
            else:
                writer, rank = self._writer, self.rank
                self._emit((t,), lambda ts: writer.samples(ts, rank, 0, step, indices, epoch))
        return None

    def _end_phase(self, t, memory=None):
        """Ends the current phase at stamp t (its phase span and its work span); `memory`: its memory
        sample, when it was taken at t (by default it is taken now)."""
        phase, start, step = self._phase, self._phase_start, self.step
        if phase == "none" or start is None:
            return
        self._phase_span(phase, start, t, step)
        if phase == "forward":
            self._span(start, t, step, "forward", "forward", "compute")
        self._memory(t, phase, step, memory)
        self._phase, self._phase_start = "none", None

    def _on_backward_begin(self, tensor):
        """A backward begins while this model's forward phase runs. Whether it is this model's is
        known only at its end: one that gave none of its parameters a gradient is another model's
        (every watcher hears every backward: a GAN's discriminator's loss on a detached output of the
        generator). So the moment, the memory of the forward and the loss are kept until then, and
        nothing of a step is held meanwhile (no graph of its outputs)."""
        self._pending_backward = None
        if self._closed or not self._in_step or self._phase != "forward":
            return
        t = self._clock.stamp()
        with self._lock:
            self._touched = False
            self._last_grad = None
            self._ready.clear()
            self._launch_of_param.clear()
            self._observed.clear()
            loss = tensor.detach() if tensor.numel() == 1 else None
            self._pending_backward = (t, self._memory_values(), loss, self.step)

    def _on_backward_end(self):
        pending, self._pending_backward = self._pending_backward, None
        if self._closed or pending is None or not self._touched:
            return
        begun, memory, loss, step = pending
        with self._lock:  # the backward's beginning, now that it was this model's
            self._end_phase(begun, memory)
            self._phase, self._phase_start = "backward", begun
            self._backward_start = begun
            if loss is not None:
                self._loss = (loss, begun, step)
        t = self._clock.stamp()
        self._take_log()
        with self._lock:
            step = self.step
            # (to the last gradient; a backward under no_sync() logs none: to its end)
            last = self._last_grad if self._last_grad is not None else t
            self._span(self._backward_start, last, step, "backward", "backward", "compute")
            self._end_phase(t)
            self._note_buckets(t, step)
            if self._grads_on:
                self._reduced = t
        if not self._optimizers:
            self._end_step(t)

    def _note_buckets(self, t, step):
        """A `buckets` event when this backward's assignment is new (the first seen, or a rebuild)."""
        observed = self._observed
        if not observed or len(observed) != max(observed) + 1:
            return
        layouts = [observed[i] for i in range(len(observed))]
        if layouts == self._noted:  # the same _Layout objects as last time: unchanged
            return
        self._noted = layouts
        seen = [(layout.params, layout.size) for layout in layouts]
        if self._buckets is not None and seen == [(list(p), b) for p, b in self._buckets]:
            return
        reason = "initial" if self._buckets is None else "rebuilt"
        self._buckets = seen
        for index in [i for i in self._flats if i >= len(layouts)]:  # buckets the new assignment has not
            self._retire_flat(index)
        buckets = self._bucket_list(seen)
        rank = self.rank
        # PyTorch rebuilds the buckets as this step's forward begins (DDP's pre-forward calls
        # Reducer._rebuild_buckets), before any of them is launched; the comm hook only shows them
        # bucket by bucket, so they are known here and written at the moment they came to be.
        at, phase = (self._forward_start, "forward") if reason == "rebuilt" and self._forward_start else (t, "backward")
        if not self._gpu:
            self._out.append(buckets_line(at, rank, 0, step, phase, reason, buckets))
            return
        self._emit((at,), lambda ts: self._writer.buckets(ts, rank, 0, step, phase, reason, buckets))

    def _on_optimizer_begin(self):
        if self._closed or not self._in_step:
            return
        t = self._clock.stamp()
        with self._lock:
            self._end_phase(t)
            self._phase, self._phase_start = "optimizer", t

    def _on_optimizer_end(self, optimizer, returned=None):
        if self._closed or self._phase != "optimizer":
            return
        t = self._clock.stamp()
        with self._lock:
            start, step = self._phase_start, self.step
            self._span(start, t, step, "optimizer", f"optimizer.step {type(optimizer).__name__}", "optimizer")
            self._state_bytes = self._optimizer_state_bytes()
            self._end_phase(t)
            if self._loss is not None and isinstance(returned, self._torch.Tensor) and returned.numel() == 1:
                self._loss = (returned.detach(), *self._loss[1:])  # step(closure)'s loss, as scripts log it
        self._end_step(t)

    def _end_step(self, t):
        self._take_log()
        with self._lock:
            self._in_step = False
            self._grads_on = False
            self._reduced = None
            self._step_end = t
            loss, self._loss = self._loss, None
        if loss is not None:
            value, stamp, step = loss
            if not self._gpu:
                self._out.append(loss_line(stamp, self.rank, 0, step, value.item()))
            else:
                writer, rank = self._writer, self.rank
                self._emit((stamp,), lambda ts: writer.loss(ts, rank, 0, step, value.item()))
        if self._done:
            self._write_collectives()
        if self._gpu:
            self._drain(wait=False)
        if self._held:
            self._release_done_futures()
        out, self._out = self._out, []
        self._writer.flush(out)

    def _hand_out(self):
        """Hands the lines of the step so far to the writer (CPU runs; the training thread's)."""
        out, self._out = self._out, []
        if out:
            self._writer.add_lines(out)

    # -- gradients and buckets (autograd's thread, and the waiter's) ---------------------------------

    def _grad_hook(self, index):
        """The hook on one parameter's AccumulateGrad: as cheap as can be, since it runs once per
        parameter and backward: a (parameter, stamp) pair appended to the backward's log (a list
        append is atomic), turned into gradient-ready instants when the backward ends."""
        log = self._log
        stamp = self._clock.stamp
        watcher = self

        def hook(*_):
            if watcher._grads_on:
                log.append((index, stamp()))
            watcher._touched = True  # (the backward is this model's: _on_backward_begin)

        return hook

    def _take_log(self):
        """Writes the gradient-ready instants logged since the last call, one per parameter (its first
        hook of this backward). The log also holds each bucket's launch, in the order they happened:
        a parameter whose bucket launched before its own hook ran (DDP's hook on the node runs first)
        was ready when the bucket launched."""
        log = self._log
        if not log:
            return
        entries = log[:]
        del log[:len(entries)]
        ready, launch = self._ready, self._launch_of_param
        params, stamps = [], []
        with self._lock:
            for key, t in entries:
                if key.__class__ is int:
                    if key in ready:
                        continue
                    ready.add(key)
                    params.append(key)
                    stamps.append(launch.pop(key, t))
                else:  # a bucket's launch: its parameters
                    for p in key:
                        if p not in ready:
                            launch[p] = t
            if not params:
                return
            self._last_grad = stamps[-1]
            step, rank, writer = self.step, self.rank, self._writer
        if not self._clock.gpu:
            self._out.extend(grad_ready_lines(rank, 0, step, params, stamps))
            return
        self._emit(tuple(stamps), lambda *ts: writer.grad_ready_all(rank, 0, step, params, ts))

    def _bucket_layout(self, bucket, index, buffer):
        """The bucket as a _Layout: its parameters in packing order, its size and (without a user's
        hook) the tensor of ours over its buffer (_flat). DDP rebuilds its buckets once, in the second
        step (the order may change while the sizes stay: one bucket [0..5] becomes [5..0]), so they are
        read from the bucket until step 3, then kept while the bucket's buffer stays the same (its
        address and length: one lookup a bucket and step, the rest made once)."""
        # A sparse gradient (nn.Embedding(sparse=True)) is a bucket of its own, the gradient itself:
        # no storage of one address, a new tensor every step (PyTorch's reducer assigns it as is).
        sparse = buffer.is_sparse
        key = ("sparse", buffer.numel()) if sparse else (buffer.data_ptr(), buffer.numel())
        cached = self._bucket_cache.get(index)
        if cached is not None and cached.key == key and self.step >= 3:
            return cached
        index_of = self._index_of
        tensors = bucket.parameters()
        count = key[1]
        size = count * buffer.element_size()
        flat = self._flat(index, buffer) if self._inner_hook is None and not sparse else None
        layout = _Layout([index_of.get(p.data_ptr(), -1) for p in tensors], [tuple(p.shape) for p in tensors], size,
                         key, flat, count, str(buffer.dtype)[6:], f"all_reduce bucket {index} {_bytes_text(size)}")
        self._bucket_cache[index] = layout
        return layout

    def _values_step(self, step):
        return self._values_every > 0 and step >= 0 and step % self._values_every == 0

    def _flat(self, index, buffer):
        """A tensor of our own over the bucket's buffer (the same memory), made once per buffer.

        Not the buffer itself: a tensor Python has seen is, once Python lets it go while C++ still
        holds it, freed by whichever thread drops the last C++ reference, which must take the GIL
        for it (PyTorch 1.13 keeps its Python object alive until then). Gloo's worker drops its
        reference to an all-reduce's tensors a moment after completing it; were that the last one,
        as when DDP's reducer goes at once, it would wait for the GIL while ~ProcessGroupGloo,
        called with the GIL held, waits for it: a hang at exit. So gloo only ever gets these,
        which stay referenced from _HANDED until RETIRE_S after close(); the buffer's last
        reference is the reducer's."""
        key = (buffer.data_ptr(), buffer.numel(), buffer.dtype)
        cached = self._flats.get(index)
        if cached is not None and cached[0] == key:
            return cached[1]
        if cached is not None:
            self._retire_flat(index)  # the bucket's buffer was replaced (DDP rebuilt its buckets)
        # untyped_storage(): PyTorch 2.x (its storage() warns that TypedStorage is deprecated); 1.13 lacks it.
        storage = buffer.untyped_storage() if hasattr(buffer, "untyped_storage") else buffer.storage()
        flat = buffer.new_empty(0).set_(storage, buffer.storage_offset(), (buffer.numel(),))
        self._flats[index] = (key, flat)
        _HANDED[id(flat)] = flat
        self._handed.append(id(flat))
        return flat

    def _retire_flat(self, index):
        """Lets our tensor over bucket `index`'s former buffer go RETIRE_S from now: the buffer DDP
        replaced when it rebuilt its buckets (the first assignment, in PyTorch 1.13 one bucket of
        every parameter) is otherwise kept for the whole run, as large as all the gradients. Its
        all-reduces ended in an earlier backward, so gloo has long dropped its reference by then."""
        entry = self._flats.pop(index, None)
        cached = self._bucket_cache.get(index)
        if cached is not None and entry is not None and cached.flat is entry[1]:
            del self._bucket_cache[index]
        if entry is None:
            return
        handed = id(entry[1])
        if handed in self._handed:
            self._handed.remove(handed)
        del entry
        _retire([handed])

    def _comm_hook(self, state, bucket):
        if self._closed:
            if self._successor is not None:  # (closed too: its own successor's, or its closed hook)
                return self._successor._comm_hook(state, bucket)
            return self._closed_hook(bucket)
        t = self._clock.stamp()
        index = bucket.index()
        if not self._in_step:
            self._shadow_step(index)
        buffer = bucket.buffer()
        layout = self._bucket_layout(bucket, index, buffer)
        step = self.step
        self._log.append((layout.params, t))  # (autograd's thread, as the gradient hooks)
        self._observed[index] = layout
        inner = self._inner_hook
        if inner is None and layout.flat is not None:  # (a sparse gradient has none: itself)
            buffer = layout.flat
        coll = _Collective(self._collectives, index, layout, step, t, inner is None)
        self._collectives += 1
        if self._values_step(step) and not buffer.is_sparse:  # (a sparse one's values are not sampled)
            coll.before = layout.sample(buffer)  # before the all-reduce writes over the buffer
        if inner is not None:
            future = inner(self._inner_state, bucket)
        else:
            future = self._ddp_group.allreduce([_averaged(buffer, self.world_size)]).get_future()
        if self._clock.gpu:
            return self._then(coll, future)
        # On the CPU no Python runs on the communication library's threads (see _wait_loop): DDP
        # waits on a future of ours, which the waiter completes; after close(), this thread does.
        outer = self._torch.futures.Future()
        self._queue.put((coll, future, outer))
        return outer

    def _shadow_step(self, index):
        """An all-reduce outside any step of this rank's: DDP's Join (uneven inputs) on a rank past its
        last batch, which joins, with zeros, each bucket's all-reduce of every step its peers still
        take (`_match_all_reduce_for_bwd_pass`, on the training thread, bucket by bucket in order).
        Each pass over the buckets is the next step, as it is on the peers: a bucket index not above
        the last one begins it, and the previous pass's lines are written then."""
        if self._shadow_bucket is None or index <= self._shadow_bucket:
            if threading.get_ident() == self._thread:
                self._write_collectives()
                self._hand_out()
                self._writer.flush()
            self.step += 1
        self._shadow_bucket = index

    def _closed_hook(self, bucket):
        """The communication hook once closed (PyTorch 1.13 cannot remove it): the user's hook, or
        the all-reduce, waited for here (no waiter thread any more), nothing recorded."""
        if self._inner_hook is not None:
            return self._inner_hook(self._inner_state, bucket)
        buffer = bucket.buffer()
        flat = buffer if buffer.is_sparse else self._flat(bucket.index(), buffer)
        result = self._ddp_group.allreduce([_averaged(flat, self.world_size)]).get_future().wait()[0]
        outer = self._torch.futures.Future()
        outer.set_result(result)
        return outer

    def _wait_loop(self):
        """The waiter thread (CPU runs): waits for each all-reduce, stamps its end, samples the
        averaged values if asked, and hands the result to DDP through the future the hook returned.

        Python callbacks on a future of gloo's (future.then) run, and are freed, on gloo's worker
        threads, which then need the GIL; PyTorch 1.13's ~ProcessGroupGloo joins those threads with
        the GIL held (when DDP's reducer goes): a rank hung at exit, in about one run in two. Here
        gloo's threads never touch a Python object: its futures are waited on (the GIL released) on
        this thread of ours, which close() ends."""
        items, stamp, done = self._queue, self._clock.stamp, self._done
        while True:
            item = items.get()
            if item is None:
                return
            coll, future, outer = item
            try:
                result = future.wait()
            except Exception as e:  # a failed collective: DDP raises it on the training thread
                self.record_error(e)
                outer.set_exception(e)
                continue
            coll.end = stamp()
            if coll.unwrap:
                result = result[0]
            if coll.before is not None:
                coll.after = coll.layout.sample(result[0] if isinstance(result, (list, tuple)) else result)
            done.append(coll)
            outer.set_result(result)
            del item, coll, future, outer, result

    def _then(self, coll, future):
        """On a GPU: the end of the all-reduce from a callback on its future (a CUDA future: the
        callback's stamp is recorded on the stream after the collective)."""
        self._hold(future)

        def finished(fut):
            try:
                result = fut.value()
            except Exception as e:
                self.record_error(e)
                raise
            coll.end = self._clock.stamp()
            if coll.unwrap:
                result = result[0]
            if coll.before is not None:
                coll.after = coll.layout.sample(result[0] if isinstance(result, (list, tuple)) else result)
            self._done.append(coll)
            return result

        outer = future.then(finished)
        self._hold(outer)
        return outer

    def _write_collectives(self):
        """Writes the all-reduces done so far (the training thread's, at a step's end)."""
        done = self._done
        while done:
            coll = done.popleft()
            if coll.end is None:
                continue
            if self._clock.gpu:
                self._emit((coll.launch, coll.end),
                           lambda t0, t1, c=coll: self._writer.add_lines(self._collective_lines(c, t0, t1, [])))
            else:
                self._collective_lines(coll, coll.launch, coll.end, self._out)

    def _collective_lines(self, coll, t0, t1, out):
        """Appends to `out` the lines of one all-reduce (and its values, on a values step)."""
        layout, step = coll.layout, coll.step
        out.append(all_reduce_lines(t0, t1, self.rank, 0, step, coll.coll, coll.index, layout.size, layout.count,
                                    layout.dtype, len(layout.params), self.world_size, layout.name))
        if coll.before is not None:
            self._values_lines(out, t0, step, "before_reduce", layout, coll.before)
        if coll.after is not None:
            self._values_lines(out, t1, step, "after_reduce", layout, coll.after)
        return out

    def _hold(self, future):
        """Keeps `future` (and the Python callbacks attached to it) alive until this thread lets it go
        (GPU runs: the callbacks run on the communication library's thread; freed here, at each
        step's end, the rest at close())."""
        with self._lock:
            self._held.append(future)

    def _release_done_futures(self):
        with self._lock:
            held, self._held = self._held, []
        keep = [f for f in held if not f.done()]
        del held  # the completed ones go here, on this thread
        if keep:
            with self._lock:
                self._held = keep + self._held

    def _values_lines(self, out, ts, step, when, layout, sampled):
        values, norms = sampled
        values, norms = values.tolist(), norms.tolist()
        rank, at = self.rank, 0
        for p, count, stride, norm in zip(layout.params, layout.counts, layout.strides, norms):
            out.append(values_line(ts, rank, 0, step, "backward", p, when, values[at:at + count], norm, stride))
            at += count

    # -- the end --------------------------------------------------------------------------------------

    def record_error(self, exc):
        """An `error` instant: the run stopped with `exc` (the trace stays readable)."""
        if self._closed:
            return
        with self._lock:
            if getattr(self, "_error_recorded", False):
                return
            self._error_recorded = True
            # Between steps (the DataLoader, zero_grad) is the next step's data phase, as the data span
            # the next forward would have written says.
            step, phase = (self.step, self._phase) if self._in_step else (self.step + 1, "data")
        if threading.get_ident() == self._thread:
            self._hand_out()  # the step's lines so far, before the error
        self._drain(wait=False)
        try:
            self._writer.instant(now_ns(), self.rank, 0, step, phase, "error", {"message": _one_line(exc)})
            self._writer.flush()
        except TraceError:
            pass

    def close(self, keep_model=False):
        """Removes every hook, writes what is left and closes the trace. Safe to call twice.

        keep_model: hold on to the model (and so its process group) after closing, as
        `dpscope_torch.run` does until the process ends without tearing it down."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        for handle in self._hooks:
            handle.remove()
        self._hooks = []
        self._unwrap_backward()
        self._stop_waiter()
        self._handed, handed = [], self._handed
        self._flats = {}  # any made after close() is kept until the process ends
        if handed:
            _retire(handed)
        if self._in_step and self._reduced is not None and self._phase == "none":
            self._end_step(self._reduced)  # a last step without optimizer.step(): its loss, its all-reduces
        self._take_log()
        self._write_collectives()
        self._hand_out()
        try:
            self._drain(wait=True)
        except Exception:  # a GPU that failed: what could be resolved is written
            traceback.print_exc(file=sys.stderr)
        self._writer.close()
        # Our futures and their callbacks go here, on this thread (_hold). Then the model: a watcher
        # that kept it would keep its process group until the interpreter's exit, where destroying
        # it aborts the process ("terminate called without an active exception").
        self._held = []  # (one never completed, after a failure, is the library's to free)
        if keep_model:
            return
        self._ddp = None
        self._params, self._param_sizes, self._grad_nodes = [], [], []
        self._index_of, self._bucket_cache, self._optimizers = {}, {}, []
        self._loss = None

    def _stop_waiter(self):
        """Ends the waiter thread once every all-reduce handed to it is done: gloo's threads are then
        free of anything of ours before the user's model and process group go. One that never ends
        (a peer that failed) is waited for WAITER_GRACE_S (WAITER_GRACE_AFTER_ERROR_S once the run
        failed), then left to the daemon thread."""
        waiter, self._waiter = self._waiter, None
        if waiter is None:
            return
        self._queue.put(None)
        grace = WAITER_GRACE_AFTER_ERROR_S if getattr(self, "_error_recorded", False) else WAITER_GRACE_S
        waiter.join(grace)
        if waiter.is_alive():
            print(f"dpscope_torch: rank {self.rank}: an all-reduce did not end within {grace:g} s of "
                  "close(); its bucket_done is not recorded", file=sys.stderr)


def _bytes_text(n):
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.2f} {unit}"
    return f"{n} B"


def _cpu_model():
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return os.uname().machine


def watch(ddp_model, trace_dir, sampler=None, optimizer=None, values_every=10, run=None):
    """Starts recording `ddp_model`'s run into TRACE_DIR/rank-K.jsonl; use as a context manager.

    sampler: the DistributedSampler (or any sampler) whose indices each step's forward consumes.
    optimizer: the optimizer whose step() ends a training step (without one, a step ends with backward).
    values_every: gradient values before and after the average on one step in this many (0: never).
    run: extra entries for the header's `run` object (e.g. the script's arguments).
    Every rank must call it (it measures the clocks through the process group).
    """
    return Watcher(ddp_model, trace_dir, sampler=sampler, optimizer=optimizer, values_every=values_every, run=run)
