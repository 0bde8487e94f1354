"""watch() for nn.DataParallel: one process, several devices, one trace file.

    model = torch.nn.DataParallel(net.cuda(0))
    with dpscope_torch.watch(model, "traces/dp", sampler=loader.sampler, optimizer=optimizer):
        for x, y in loader:
            optimizer.zero_grad()
            loss_fn(model(x), y.cuda(0)).backward()
            optimizer.step()

DataParallel.forward calls four methods of the instance, in order (torch/nn/parallel/data_parallel.py):
`scatter` (the batch split along `dim` into chunks, one per device), `replicate` (the module copied to
the devices through the autograd function Broadcast), `parallel_apply` (one thread per replica) and
`gather` (the outputs concatenated on `output_device`). Its backward is autograd's: the gradient of
gather scatters grad_output, each replica back-propagates, and Broadcast's backward, ReduceAddCoalesced,
sums the replicas' gradients onto device_ids[0], into the original parameters.

The recorder writes the words dpscope's own DataParallel writes (runtime/src/parallel/data_parallel.cpp),
with `rank` = the replica's index and `dev` = its device's id in the header:
- `samples` per replica: the indices the watched sampler yielded, split by the chunk sizes scatter made;
- `copy H2D` (or `copy D2D`) transfers host -> replica for the scatter, `copy D2D` device 0 -> replica
  for the replication and replica -> output device for the gather (and back for the gradient of gather);
- a `forward replica K` span per replica (its args: the rows it got), `grad_ready` per replica and
  parameter (the moment the replica's gradient for the parameter is computed: a hook on the autograd
  node that consumes the replica's copy of it), a `backward replica K` span;
- the reduce-add: a `reduce_add` span on device 0, from Broadcast's backward node starting to it ending,
  and a `copy D2D` transfer replica -> device 0 per replica beyond the first;
- phases (data, forward, backward, optimizer), `optimizer.step NAME`, the loss, memory per device, and
  gradient values per replica (`local`) and after the reduce-add (`after_reduce`), as watch.py does.

On GPUs every moment is a CUDA event on the current stream of the device it belongs to (one CudaClock
per device); on CPUs the host's clock. A DataParallel with no device_ids (PyTorch found no GPU) calls
its module unsplit: there is nothing of DataParallel to record, and watch() says so.
"""
import os
import socket
import sys
import threading
import traceback

from . import schema
from .clock import now_ns
from .clocks import CudaClock, HostClock
from .forward_io import output_nodes, reaches
from .step_watcher import StepWatcher, _Samples
from .watch import VALUE_SAMPLES, _cpu_model, _one_line, _stride
from .writer import TraceError, TraceWriter, _name, check_trace_dir, values_every_problem


class _Writer(TraceWriter):
    """TraceWriter and the `transfer` events DataParallel's copies need (DDP's recorder has none)."""

    def transfer(self, ts, rank, dev, step, phase, name, stream, dur, src, dst, size, flow):
        self._add(f'{self._common("transfer", ts, rank, dev, step, phase)},"name":{_name(name)},"stream":"{stream}",'
                  f'"dur":{max(0, int(dur))},"src":{src},"dst":{dst},"bytes":{int(size)},"flow":{flow}}}\n')


def trace_path(target):
    """The file a DataParallel run writes: TARGET itself when it names a `.jsonl` file, else
    TARGET/rank-0.jsonl (a directory, as `--trace-dir` gives: one process, so rank 0 of 1)."""
    target = os.fspath(target)
    if not target.endswith(".jsonl"):
        return check_trace_dir(target, 0, 1)
    if os.path.isdir(target):
        raise TraceError(f"trace file '{target}' is a directory")
    if os.path.lexists(target) and not os.path.isfile(target):
        raise TraceError(f"'{target}' exists and is not a regular file: not written over")
    return target


def _tensors(value, depth=0):
    """The tensors in a forward's inputs or outputs (tuples, lists, dicts), in order."""
    import torch

    if isinstance(value, torch.Tensor):
        return [value]
    out = []
    if depth < 4 and isinstance(value, (list, tuple)):
        for v in value:
            out += _tensors(v, depth + 1)
    elif depth < 4 and isinstance(value, dict):
        for v in value.values():
            out += _tensors(v, depth + 1)
    return out


def _rows(value, dim):
    """The batch's rows in a forward's inputs: the first tensor's size along `dim` (DataParallel's split)."""
    tensors = _tensors(value)
    if not tensors or not -tensors[0].dim() <= dim < tensors[0].dim():
        return None
    return int(tensors[0].shape[dim])


def _nbytes(tensors):
    return sum(t.numel() * t.element_size() for t in tensors)


class _Replication:
    """One forward's replicas: which module is replica K, and which autograd node (Broadcast's backward)
    and output slot carries replica K's copy of parameter P."""

    def __init__(self):
        self.index_of = {}  # id(replica root module) -> replica index
        self.copies = {}  # output_nr of Broadcast's node -> (replica, param)
        self.node = None  # Broadcast's backward node (None: no gradients flow back, e.g. no_grad)
        self.replicas = []


class DataParallelWatcher(StepWatcher):
    """Records one nn.DataParallel model's run (watch() makes one; close() or the `with` ends it)."""

    def __init__(self, dp_model, trace, sampler=None, optimizer=None, values_every=10, run=None):
        import torch

        if not isinstance(dp_model, torch.nn.DataParallel):
            raise TypeError(f"dpscope_torch.watch: expected an nn.DataParallel model, got {type(dp_model).__name__}")
        problem = values_every_problem(values_every)
        if problem is not None:
            raise ValueError(f"dpscope_torch.watch: {problem}")
        if not dp_model.device_ids:
            raise ValueError("dpscope_torch.watch: this DataParallel has no device_ids (PyTorch found no GPU), so "
                             "it calls its module unsplit: there is no DataParallel run to record")
        self._torch = torch
        self._dp = dp_model
        self._values_every = int(values_every)
        self.rank = 0
        self._lock = threading.RLock()
        self._closed = False

        self._device_ids = [int(d) for d in dp_model.device_ids]
        self._kind = dp_model.src_device_obj.type  # "cuda" (a CPU stand-in in the tests: "cpu")
        self._gpu = self._kind == "cuda"
        self._dim = int(getattr(dp_model, "dim", 0))
        self._host = len(self._device_ids)  # the host's id in the header, after the replicas' devices
        out = int(dp_model.output_device)  # a device index (DataParallel's _get_device_index); -1: the CPU
        self._output = self._device_ids.index(out) if out in self._device_ids else self._host
        if self._gpu:
            self._clocks = {}
            for d in sorted(set(self._device_ids)):
                with torch.cuda.device(d):
                    self._clocks[d] = CudaClock(torch, torch.device("cuda", d))
            self._resolver = self._clocks[self._device_ids[0]]
        else:
            self._resolver = HostClock()

        self._params = [(name, p) for name, p in dp_model.module.named_parameters()]
        self._param_index = {id(p): i for i, (_, p) in enumerate(self._params)}
        self._param_bytes = _nbytes([p for _, p in self._params])
        self._buffer_bytes = _nbytes(list(dp_model.module.buffers()))
        self._state_bytes = 0

        target = os.fspath(trace)
        self._claim(dp_model, target if target.endswith(".jsonl") else os.path.join(target, "rank-0.jsonl"))
        self.path = trace_path(trace)
        self._writer = _Writer(self.path, self._header(run or {}))

        # Step state (the main thread's, except where noted).
        self.step = -1
        self._in_step = False
        self._backward_end = None  # the stamp at which this step's backward returned (a step may end there)
        self._outputs = set()  # this step's forward outputs' autograd nodes (watch.py's Watcher._outputs)
        self._phase = "none"
        self._phase_start = None
        self._step_end = self._stamp(0)
        self._loss = None
        self._batch_indices = None  # the sampler's indices for this forward, split at scatter
        self._chunks = []  # rows per replica, from scatter
        self._replication = None
        self._forward_of = {}  # replica -> stamp of its forward's start (parallel_apply's threads)
        self._grad_scatter = None  # (start, end) of the gradient of gather
        self._ready = set()  # (replica, param) whose gradient-ready was recorded this backward
        self._pending_consumers = {}  # (replica, param) -> autograd nodes still to run that produce it
        self._last_grad = {}  # replica -> stamp of its latest gradient this backward
        self._reduce_start = None
        self._local_values = None
        self._flows = 0
        self._pending = []  # (stamps, emit) waiting for the GPU
        self._samples = _Samples()
        self._optimizers = []
        self._hooks = []
        self._install_hooks()
        if sampler is not None:
            self.watch_sampler(sampler)
        if optimizer is not None:
            self.watch_optimizer(optimizer)
        self._writer.flush()

    # -- set-up --------------------------------------------------------------------------------------

    def _device_entries(self):
        torch = self._torch
        entries = []
        seen = {}
        for slot, d in enumerate(self._device_ids):
            # Two replicas on one device (device_ids=[0, 0]) are two logical devices, as dpscope's own.
            seen[d] = seen.get(d, 0) + 1
            name = f"{self._kind}:{d}" if seen[d] == 1 else f"{self._kind}:{d} ({seen[d] - 1})"
            if self._gpu:
                props = torch.cuda.get_device_properties(d)
                entries.append({"id": slot, "name": name, "kind": "cuda", "hardware": props.name,
                                "memory_bytes": int(props.total_memory), "peak_flops": 0, "mem_bandwidth": 0})
            else:
                entries.append({"id": slot, "name": name, "kind": "cpu", "hardware": _cpu_model(),
                                "memory_bytes": 0, "peak_flops": 0, "mem_bandwidth": 0})
        entries.append({"id": self._host, "name": "host", "kind": "host", "hardware": "", "memory_bytes": 0,
                        "peak_flops": 0, "mem_bandwidth": 0})
        return entries

    def _header(self, extra_run):
        torch = self._torch
        dp = self._dp
        run = {
            "mode": "dp",
            "source": "dpscope_torch",
            "torch": torch.__version__,
            "device": self._kind,
            "backend": "none",
            "devices": len(self._device_ids),
            "device_ids": list(self._device_ids),
            "output_device": self._output if self._output != self._host else -1,
            "dim": self._dim,
            "model": type(dp.module).__name__,
            "host": socket.gethostname(),
            "values_every": self._values_every,
        }
        run.update(extra_run)
        run["process"] = {"rank": 0, "world_size": 1, "clock_offset_ns": 0, "clock_uncertainty_ns": 0}
        params = [{"index": i, "name": name, "shape": list(p.shape), "bytes": p.numel() * p.element_size()}
                  for i, (name, p) in enumerate(self._params)]
        return {"type": "header", "format": schema.FORMAT, "version": schema.VERSION, "clock": "measured",
                "run": run, "devices": self._device_entries(), "links": [], "params": params, "buckets": []}

    def _install_hooks(self):
        dp = self._dp
        self._hooks.append(dp.register_forward_pre_hook(self._on_forward))
        self._hooks.append(dp.register_forward_hook(self._on_forward_end))
        # The module's forward hooks are shared with its replicas (replicate copies the module's
        # __dict__), so these fire for every replica's forward, on parallel_apply's threads.
        self._hooks.append(dp.module.register_forward_pre_hook(self._on_replica_forward))
        self._hooks.append(dp.module.register_forward_hook(self._on_replica_forward_end))
        self._originals = {}
        for name in ("scatter", "replicate", "gather"):
            self._originals[name] = dp.__dict__.get(name)  # an instance attribute of the user's, if any
            setattr(dp, name, getattr(self, f"_{name}_wrapper")(getattr(dp, name)))
        # One device only: DataParallel calls the module itself, no replicas; its gradient is then
        # ready where the original parameter's AccumulateGrad runs.
        self._grad_nodes = []
        for index, (_, param) in enumerate(self._params):
            if not param.requires_grad:
                continue
            hook = self._accumulate_hook(index)
            if hasattr(param, "register_post_accumulate_grad_hook"):
                self._hooks.append(param.register_post_accumulate_grad_hook(lambda p, h=hook: h()))
            else:
                node = param.expand_as(param).grad_fn.next_functions[0][0]  # the AccumulateGrad node
                self._grad_nodes.append(node)
                self._hooks.append(node.register_hook(lambda *_, h=hook: h()))
        self._wrap_backward(self._dp)  # where the forward phase ends and the loss is

    # -- clocks ---------------------------------------------------------------------------------------

    def _stamp(self, slot):
        """A stamp on replica slot's device (on a GPU: its current stream)."""
        if not self._gpu:
            return self._resolver.stamp()
        d = self._device_ids[slot]
        with self._torch.cuda.device(d):
            return self._clocks[d].stamp()

    def _stamps(self):
        return [self._stamp(slot) for slot in range(len(self._device_ids))]

    def _slot_of(self, device):
        """The replica slot of a torch device (the first with its index), or the host's id."""
        if not self._gpu or device.type != self._kind:
            return self._host  # on CPUs (the tests' stand-in) a batch is the host's
        index = 0 if device.index is None else device.index
        return self._device_ids.index(index) if index in self._device_ids else self._host

    def _emit(self, stamps, emit):
        """Calls emit(*times_ns) once every stamp is resolved: at once on the CPU, later on a GPU."""
        if not self._gpu:
            emit(*stamps)
            return
        with self._lock:
            self._pending.append((stamps, emit))

    def _drain(self, wait):
        if not self._gpu:
            return
        with self._lock:
            pending, self._pending = self._pending, []
        done = 0
        for stamps, emit in pending:
            if not wait and not all(self._resolver.ready(s) for s in stamps):
                break
            if wait:
                for s in stamps:
                    s[1].synchronize()
            emit(*[self._resolver.ns(s) for s in stamps])
            done += 1
        if done < len(pending):
            with self._lock:
                self._pending = pending[done:] + self._pending

    def _flow(self):
        with self._lock:
            self._flows += 1
            return self._flows

    # -- events ---------------------------------------------------------------------------------------

    def _span(self, slot, phase, name, cat, stream, start, end, step, args=None):
        def emit(t0, t1):
            self._writer.span(t0, slot, slot, step, phase, name, cat, stream, t1 - t0, args)

        self._emit((start, end), emit)

    def _transfer(self, rank, slot, phase, name, src, dst, size, start, end, step):
        flow = self._flow()

        def emit(t0, t1):
            self._writer.transfer(t0, rank, slot, step, phase, name, "copy", t1 - t0, src, dst, size, flow)

        self._emit((start, end), emit)

    def _copy_name(self, src, dst):
        if src == self._host:
            return "copy H2D"
        if dst == self._host:
            return "copy D2H"
        return "copy D2D"

    def _phase_span(self, name, start, end, step):
        self._span(0, name, name, "phase", "compute", start, end, step)

    def _memory(self, phase, step):
        """Memory counters after a phase: on device 0 the tensors counted (parameters, gradients,
        optimizer state, buffers); on a GPU each device's allocator count, less those on device 0, is
        its activations (on device 0 and on the other devices: replicas, chunks, activations)."""
        torch = self._torch
        grads = sum(p.numel() * p.element_size() for _, p in self._params if p.grad is not None)
        base = {"parameters": self._param_bytes, "gradients": grads, "optimizer_state": self._state_bytes,
                "activations": 0, "buffers": self._buffer_bytes, "capacity": 0}
        counted = set()
        for slot, d in enumerate(self._device_ids):
            if d in counted or (slot > 0 and not self._gpu):
                continue  # a device counted once; on CPUs only the originals' tensors are known
            counted.add(d)
            values = dict(base) if slot == 0 else {k: 0 for k in base}
            if self._gpu:
                allocated = torch.cuda.memory_allocated(d)
                values["activations"] = max(0, allocated - sum(values[k] for k in
                                                               ("parameters", "gradients", "optimizer_state",
                                                                "buffers")))
                values["capacity"] = int(torch.cuda.get_device_properties(d).total_memory)
            stamp = self._stamp(slot)
            self._emit((stamp,), lambda t, s=slot, v=values: self._writer.counter(t, s, s, step, phase, "memory", v))

    def _values(self, slot, when, step, samples):
        def emit(t):
            for p, stride, values, norm in samples:
                self._writer.values(t, slot, slot, step, "backward", p, when, values.tolist(), float(norm), stride)

        return emit

    def _values_step(self, step):
        return self._values_every > 0 and step % self._values_every == 0

    @staticmethod
    def _sample(tensor, stride):
        flat = tensor.detach().reshape(-1)
        return flat[::stride][:VALUE_SAMPLES].clone(), flat.norm()

    # -- forward ----------------------------------------------------------------------------------------

    def _on_forward(self, module, inputs):
        if self._closed or not module.training or not self._torch.is_grad_enabled():
            return None
        t = self._stamp(0)
        if self._in_step and self._backward_end is not None and self._phase == "none":
            # The step's backward summed its gradients and no optimizer.step() followed (GradScaler
            # skipping a step whose gradients are not finite; gradients accumulated over batches):
            # that step ended with its backward, and this forward begins the next (one scatter, one
            # reduce-add and one loss per step, as every forward and backward of DataParallel does).
            self._end_step(self._backward_end)
        with self._lock:
            if not self._in_step:
                self.step += 1
                self._in_step = True
                for d, clock in (self._clocks.items() if self._gpu else ()):
                    with self._torch.cuda.device(d):
                        clock.reanchor()
                self._phase_span("data", self._step_end, t, self.step)
            elif self._phase != "none":
                self._end_phase(t)
            self._phase, self._phase_start = "forward", t
            self._replication = None
            self._chunks = []
        self._batch_indices = self._samples.take(_rows(inputs, self._dim))
        return None

    def _scatter_wrapper(self, scatter):
        def wrapped(inputs, kwargs, device_ids):
            if self._closed or not self._in_step:
                return scatter(inputs, kwargs, device_ids)
            sources = _tensors(inputs) + _tensors(kwargs)
            src = self._slot_of(sources[0].device) if sources else self._host
            before = self._stamps()
            result = scatter(inputs, kwargs, device_ids)
            after = self._stamps()
            step = self.step
            chunks = []
            for i, (args, kw) in enumerate(zip(*result)):
                pieces = _tensors(args) + _tensors(kw)
                rows = _rows((args, kw), self._dim)
                chunks.append(rows or 0)
                if i < len(self._device_ids) and src != i and pieces:
                    # The copies run on copy streams; each device's current stream waits for its own
                    # (Scatter.forward), so its stamp after the call is when its chunk has arrived.
                    self._transfer(i, i, "forward", self._copy_name(src, i), src, i, _nbytes(pieces), before[i],
                                   after[i], step)
            self._chunks = chunks
            batch = self._batch_indices
            if batch is not None:
                indices, epoch = batch
                at = 0
                for i, rows in enumerate(chunks):
                    part = indices[at:at + rows]
                    at += rows
                    if part:
                        self._emit((before[i],), lambda t, i=i, part=part: self._writer.samples(t, i, i, step, part,
                                                                                               epoch))
            return result

        return wrapped

    def _replicate_wrapper(self, replicate):
        def wrapped(module, device_ids):
            if self._closed or not self._in_step:
                return replicate(module, device_ids)
            before = self._stamps()
            replicas = replicate(module, device_ids)
            after = self._stamps()
            step = self.step
            r = _Replication()
            r.replicas = list(replicas)
            r.index_of = {id(m): j for j, m in enumerate(replicas)}
            # Replica j's copy of parameter k: the modules walked in the same order as the original's
            # (replicate builds them so), each copy an output of Broadcast's node (_former_parameters).
            originals = list(module.modules())
            for j, replica in enumerate(replicas):
                for original, copy in zip(originals, replica.modules()):
                    former = getattr(copy, "_former_parameters", None) or {}
                    for key, param in original._parameters.items():
                        c = former.get(key)
                        k = self._param_index.get(id(param))
                        if c is None or k is None or c.grad_fn is None:
                            continue
                        r.node = c.grad_fn if r.node is None else r.node
                        if c.grad_fn is r.node:
                            r.copies[c.output_nr] = (j, k)
            size = self._param_bytes + self._buffer_bytes
            for j in range(1, len(replicas)):
                self._transfer(j, j, "forward", "copy D2D", 0, j, size, before[j], after[j], step)
            if r.node is not None:
                self._hook_reduce_add(r, step)
            self._replication = r
            return replicas

        return wrapped

    def _gather_wrapper(self, gather):
        def wrapped(outputs, output_device):
            if self._closed or not self._in_step:
                return gather(outputs, output_device)
            out = self._output
            before = self._stamp(out) if out != self._host else self._stamp(0)
            result = gather(outputs, output_device)
            after = self._stamp(out) if out != self._host else self._stamp(0)
            step = self.step
            sizes = []
            for j, o in enumerate(outputs):
                pieces = _tensors(o)
                sizes.append(_nbytes(pieces))
                if j != out and pieces:
                    self._transfer(0, 0 if out == self._host else out, "forward", self._copy_name(j, out), j, out,
                                   sizes[-1], before, after, step)
            # Its gradient: grad_output scattered back to the replicas (a hook before and after the node).
            tensors = _tensors(result)
            if tensors and tensors[0].grad_fn is not None:
                node = tensors[0].grad_fn
                watcher = self

                def pre(*_):
                    watcher._grad_scatter = (watcher._stamp(0 if out == watcher._host else out), None)

                def post(*_):
                    start = watcher._grad_scatter[0] if watcher._grad_scatter else None
                    end = watcher._stamp(0 if out == watcher._host else out)
                    watcher._grad_scatter = (start, end)
                    if start is None:
                        return
                    for j, size in enumerate(sizes):
                        if j != out and size:
                            watcher._transfer(j, j, "backward", watcher._copy_name(out, j), out, j, size, start, end,
                                              step)

                if hasattr(node, "register_prehook"):
                    node.register_prehook(pre)
                else:
                    tensors[0].register_hook(lambda g: pre())
                node.register_hook(post)
            return result

        return wrapped

    def _replica_of(self, module):
        r = self._replication
        if r is not None and id(module) in r.index_of:
            return r.index_of[id(module)]
        return 0 if module is self._dp.module else None

    def _on_replica_forward(self, module, inputs):
        if self._closed or not self._in_step or self._phase != "forward":
            return None
        j = self._replica_of(module)
        if j is not None:
            t = self._stamp(j)
            with self._lock:
                self._forward_of[j] = t
        return None

    def _on_replica_forward_end(self, module, inputs, output):
        if self._closed or not self._in_step or self._phase != "forward":
            return None
        j = self._replica_of(module)
        if j is None:
            return None
        t = self._stamp(j)
        with self._lock:
            start = self._forward_of.pop(j, None)
            step = self.step
        if start is not None:
            rows = _rows(inputs, self._dim)
            self._span(j, "forward", f"forward replica {j}", "compute", "compute", start, t, step,
                       {"rows": rows} if rows is not None else None)
        return None

    # -- backward --------------------------------------------------------------------------------------

    def _hook_reduce_add(self, r, step):
        """Times Broadcast's backward (ReduceAddCoalesced onto device_ids[0]) and samples the replicas'
        gradients that flow into it (its grad_outputs, replica-major) and the sums it makes."""
        node = r.node
        replicas = len(r.replicas)
        watcher = self

        def pre(*_):
            watcher._reduce_start = watcher._stamp(0)

        def post(grad_inputs, grad_outputs):
            end = watcher._stamp(0)
            start = watcher._reduce_start or end
            watcher._reduce_start = None
            grads = [g for g in grad_inputs if g is not None]
            size = _nbytes(grads)
            watcher._span(0, "backward", "reduce_add", "compute", "compute", start, end, step,
                          {"bytes": size, "replicas": replicas})
            for j in range(1, replicas):
                watcher._transfer(0, 0, "backward", "copy D2D", j, 0, size, start, end, step)
            if watcher._values_step(step):
                locals_ = {}
                for nr, g in enumerate(grad_outputs):
                    if g is None or nr not in r.copies:
                        continue
                    j, k = r.copies[nr]
                    stride = _stride(tuple(g.shape))
                    locals_.setdefault(j, []).append((k, stride, *watcher._sample(g, stride)))
                for j, samples in sorted(locals_.items()):
                    watcher._emit((end,), watcher._values(j, "local", step, samples))

        if hasattr(node, "register_prehook"):
            node.register_prehook(pre)
        node.register_hook(post)

    def _hook_replica_gradients(self, tensor):
        """Hooks, in this backward's graph, every node that produces a replica's gradient of a parameter
        (a node whose next function is Broadcast's, in the slot of that copy): when it has run, the
        gradient is ready. The walk stops at Broadcast's node and at the leaves."""
        r = self._replication
        if r is None or r.node is None or tensor.grad_fn is None:
            return
        target = r.node
        seen = {}  # id -> node, held so that ids are not reused while walking
        stack = [tensor.grad_fn]
        consumers = {}
        while stack:
            node = stack.pop()
            if node is None or id(node) in seen:
                continue
            seen[id(node)] = node
            produced = []
            for nxt, nr in node.next_functions:
                if nxt is None:
                    continue
                if nxt is target:
                    if nr in r.copies:
                        produced.append(r.copies[nr])
                else:
                    stack.append(nxt)
            if produced:
                consumers[id(node)] = (node, produced)
        pending = {}
        for _, produced in consumers.values():
            for key in produced:
                pending[key] = pending.get(key, 0) + 1
        self._pending_consumers = pending
        for node, produced in consumers.values():
            node.register_hook(lambda *_, produced=produced: self._on_replica_grad(produced))

    def _on_replica_grad(self, produced):
        if self._closed or not self._in_step:
            return
        step = self.step
        for j, k in produced:
            with self._lock:
                left = self._pending_consumers.get((j, k), 1) - 1
                self._pending_consumers[(j, k)] = left
                if left > 0 or (j, k) in self._ready:
                    continue
                self._ready.add((j, k))
            t = self._stamp(j)
            with self._lock:
                self._last_grad[j] = t
            self._emit((t,), lambda ts, j=j, k=k: self._writer.grad_ready(ts, j, j, step, k))

    def _accumulate_hook(self, index):
        def hook():
            # With replicas the originals' AccumulateGrad runs after the reduce-add: the replicas'
            # gradient-ready came from _on_replica_grad. Without (one device), it is replica 0's.
            if self._closed or not self._in_step or self._phase != "backward":
                return
            if self._replication is not None and self._replication.node is not None:
                return
            with self._lock:
                if (0, index) in self._ready:
                    return
                self._ready.add((0, index))
                step = self.step
            t = self._stamp(0)
            with self._lock:
                self._last_grad[0] = t
            self._emit((t,), lambda ts: self._writer.grad_ready(ts, 0, 0, step, index))

        return hook

    def _on_forward_end(self, module, inputs, output):
        if self._closed or not self._in_step or not module.training or not self._torch.is_grad_enabled():
            return None
        output_nodes(output, self._outputs)
        return None

    def _on_backward_begin(self, tensor):
        if self._closed or not self._in_step or self._phase != "forward":
            return
        if self._outputs and not reaches(tensor.grad_fn, self._outputs):
            return  # another model's backward: not this step's (watch.py's Watcher does the same)
        t = self._stamp(0)
        with self._lock:
            self._end_phase(t)
            self._phase, self._phase_start = "backward", t
            self._ready.clear()
            self._last_grad = {}
            self._grad_scatter = None
            self._reduce_start = None
            if tensor.numel() == 1:
                self._loss = (tensor.detach(), t, self.step)
        self._hook_replica_gradients(tensor)

    def _on_backward_end(self):
        if self._closed or self._phase != "backward":
            return
        t = self._stamp(0)
        with self._lock:
            step = self.step
            start = self._phase_start
            scattered = self._grad_scatter[1] if self._grad_scatter and self._grad_scatter[1] is not None else start
            for j, last in sorted(self._last_grad.items()):
                self._span(j, "backward", f"backward replica {j}", "compute", "compute",
                           scattered if j != 0 or self._replication is not None else start, last, step)
            if self._values_step(step):
                after = []
                for k, (_, p) in enumerate(self._params):
                    if p.grad is not None:
                        stride = _stride(tuple(p.grad.shape))
                        after.append((k, stride, *self._sample(p.grad, stride)))
                when = "after_reduce" if self._replication is not None else "local"
                self._emit((t,), self._values(0, when, step, after))
            self._replication = None  # the replicas live for one iteration, as in PyTorch
            self._end_phase(t)
            self._backward_end = t
        if not self._optimizers:
            self._end_step(t)

    # -- phases and steps -------------------------------------------------------------------------------

    def _end_phase(self, t):
        phase, start, step = self._phase, self._phase_start, self.step
        if phase == "none" or start is None:
            return
        self._phase_span(phase, start, t, step)
        self._memory(phase, step)
        self._phase, self._phase_start = "none", None

    def _on_optimizer_begin(self):
        if self._closed or not self._in_step:
            return
        t = self._stamp(0)
        with self._lock:
            self._end_phase(t)
            self._phase, self._phase_start = "optimizer", t

    def _on_optimizer_end(self, optimizer, returned=None):
        if self._closed or self._phase != "optimizer":
            return
        t = self._stamp(0)
        with self._lock:
            start, step = self._phase_start, self.step
            self._span(0, "optimizer", f"optimizer.step {type(optimizer).__name__}", "optimizer", "compute", start,
                       t, step)
            self._state_bytes = self._optimizer_state_bytes()
            self._end_phase(t)
            if self._loss is not None and isinstance(returned, self._torch.Tensor) and returned.numel() == 1:
                self._loss = (returned.detach(), *self._loss[1:])  # step(closure)'s loss, as scripts log it
        self._end_step(t)

    def _end_step(self, t):
        with self._lock:
            self._in_step = False
            self._backward_end = None
            self._outputs = set()
            self._step_end = t
            loss, self._loss = self._loss, None
        if loss is not None:
            value, stamp, step = loss
            slot = 0 if self._output == self._host else self._output
            self._emit((stamp,), lambda ts: self._writer.counter(ts, slot, slot, step, "backward", "loss",
                                                                  {"loss": float(value.item())}))
        self._drain(wait=False)
        self._writer.flush()

    # -- the end ---------------------------------------------------------------------------------------

    def record_error(self, exc):
        """An `error` instant: the run stopped with `exc` (the trace stays readable)."""
        if self._closed:
            return
        with self._lock:
            if getattr(self, "_error_recorded", False):
                return
            self._error_recorded = True
            step, phase = self.step, self._phase
        self._drain(wait=False)
        try:
            self._writer.instant(now_ns(), 0, 0, step, phase, "error", {"message": _one_line(exc)})
            self._writer.flush()
        except TraceError:
            pass

    def close(self, keep_model=False):
        """Removes every hook and wrapper, writes what is left and closes the trace. Safe to call twice.
        (keep_model: as Watcher.close takes it; a DataParallel has no process group to keep alive.)"""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        for handle in self._hooks:
            handle.remove()
        self._hooks = []
        dp = self._dp
        for name, original in self._originals.items():
            if original is None:
                dp.__dict__.pop(name, None)
            else:
                setattr(dp, name, original)
        self._unwrap_backward()
        try:
            self._drain(wait=True)
        except Exception:  # a GPU that failed: what could be resolved is written
            traceback.print_exc(file=sys.stderr)
        self._writer.close()
        self._replication = None
        self._grad_nodes = []
        self._loss = None


__all__ = ["DataParallelWatcher", "trace_path"]
