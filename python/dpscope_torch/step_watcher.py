"""What every watcher (DDP's in watch.py, DataParallel's in data_parallel.py) hooks the same way: the
step's moments that belong to the user's loop, not to the model. `Tensor.backward()` ends forward and
begins backward, the optimizer's `step()` is the optimizer phase and ends the step, the sampler's
indices are the step's samples, and a `with` block records the error that leaves it.

A subclass provides `_torch`, `_samples` (a _SampleQueue), `_optimizers` (a list), and the
moments `_on_backward_begin(tensor)`, `_on_backward_end()`, `_on_optimizer_begin()`,
`_on_optimizer_end(optimizer)`, `record_error(exc)` and `close()`."""

import collections


class _SampleQueue:
    """The indices a watched sampler yields, taken batch by batch as forwards consume them, with the
    epoch they belong to: the pass over the sampler, counted from 0 (the trace's `epoch`; not the
    value given to set_epoch, which stays 0 when a script forgets it: the pitfall to be seen)."""

    def __init__(self):
        self.indices = collections.deque()  # appended by the sampler (atomic), taken by forwards
        self.epoch = None

    def start(self):
        self.indices.clear()  # what the last epoch left (drop_last) is not this epoch's
        self.epoch = 0 if self.epoch is None else self.epoch + 1

    def take(self, count):
        indices = self.indices
        take = indices.popleft
        return [take() for _ in range(min(count, len(indices)))], self.epoch


def watch_sampler(sampler, queue):
    """Makes `sampler` report the indices it yields to `queue` (its class is swapped for a subclass
    whose __iter__ does, since iter() looks the method up on the type)."""
    cls = type(sampler)
    if getattr(cls, "_dpscope_watched", False):
        sampler._dpscope_queue = queue
        return

    def __iter__(self):
        q = getattr(self, "_dpscope_queue", None)
        if q is None:
            yield from cls.__iter__(self)
            return
        q.start()
        put = q.indices.append
        for index in cls.__iter__(self):
            put(int(index))
            yield index

    sampler.__class__ = type(cls.__name__, (cls,), {"__iter__": __iter__, "_dpscope_watched": True,
                                                     "__module__": cls.__module__})
    sampler._dpscope_queue = queue


class StepWatcher:
    def _wrap_backward(self):
        """Tensor.backward() for every tensor, while watched: where forward ends and the loss is. close()
        puts `_original_backward` back."""
        torch = self._torch
        self._original_backward = torch.Tensor.backward
        watcher = self

        def backward(tensor, *args, **kwargs):
            watcher._on_backward_begin(tensor)
            try:
                return watcher._original_backward(tensor, *args, **kwargs)
            finally:
                watcher._on_backward_end()

        torch.Tensor.backward = backward

    def watch_sampler(self, sampler):
        """Records the indices `sampler` yields (the forward that consumes them gets them)."""
        watch_sampler(sampler, self._samples)

    def watch_optimizer(self, optimizer):
        """Ends each step at `optimizer`.step() and records it as the optimizer phase."""
        if any(o is optimizer for o in self._optimizers):
            return
        self._optimizers.append(optimizer)
        original = optimizer.step
        watcher = self

        def step(*args, **kwargs):
            watcher._on_optimizer_begin()
            try:
                return original(*args, **kwargs)
            finally:
                watcher._on_optimizer_end(optimizer)

        optimizer.step = step

    def _optimizer_state_bytes(self):
        """The bytes of the watched optimizers' state tensors (momentum, Adam's moments)."""
        torch = self._torch
        return sum(v.numel() * v.element_size() for o in self._optimizers for s in o.state.values()
                   for v in s.values() if isinstance(v, torch.Tensor))

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc is not None and not isinstance(exc, (KeyboardInterrupt, GeneratorExit)):
            self.record_error(exc)
        elif isinstance(exc, KeyboardInterrupt):
            self.record_error(RuntimeError("interrupted (KeyboardInterrupt)"))
        self.close()
        return False
