"""What every watcher (DDP's in watch.py, DataParallel's in data_parallel.py) hooks the same way: the
step's moments that belong to the user's loop, not to the model. `Tensor.backward()` ends forward and
begins backward, the optimizer's `step()` is the optimizer phase and ends the step, the sampler's
indices are the step's samples, and a `with` block records the error that leaves it.

A subclass provides `_torch`, `_samples` (a _Samples), `_optimizers` (a list), and the
moments `_on_backward_begin(tensor)`, `_on_backward_end()`, `_on_optimizer_begin()`,
`_on_optimizer_end(optimizer, returned)`, `record_error(exc)` and `close()`, and `_params`
((name, parameter) of the watched model)."""

import collections
import itertools
import os
import threading
import types
import weakref

_LIST_ITERATOR = type(iter([]))
_RANGE_ITERATOR = type(iter(range(0)))
STATE_RECOUNT_STEPS = 3  # an optimizer's state is counted at each of its first steps (_optimizer_state_bytes)


_ORDER = itertools.count(1)  # the order of passes begun and batches fetched, over every queue


def _ints(indices):
    """Indices as ints, a batch sampler's lists of them flattened (a sampler given to watch() may
    yield batches)."""
    out = []
    for i in indices:
        if i.__class__ is int:
            out.append(i)
        elif isinstance(i, (list, tuple)):
            out.extend(int(j) for j in i)
        else:
            out.append(int(i))
    return out


class _SampleQueue:
    """The indices a watched sampler yields, taken batch by batch as forwards consume them, with the
    epoch they belong to: the pass over the sampler that training drew from, counted from 0 (the
    trace's `epoch`; not the value given to set_epoch, which stays 0 when a script forgets it: the
    pitfall to be seen). A pass no training forward took from is no epoch: a batch looked at with
    next(iter(loader)) before training, or the pass a multi-worker DataLoader starts and drops.

    A pass whose indices are known when it starts (DistributedSampler's __iter__ returns an iterator
    over a list it has built) is queued whole, at once; any other is queued index by index as the
    sampler yields them. Either way forwards take them in the order the sampler gives them.

    A DataLoader over the sampler says more: the indices of each batch it returns (fetch()). Those
    no forward took wait in `_fetched`, in order, each with its pass (take_batch())."""

    def __init__(self):
        self._indices = []  # this pass's indices so far (the sampler's thread appends)
        self._at = 0  # the first not yet taken by a forward
        self._pass = 0  # this pass's number, counting every start()
        self._epochs = {}  # pass number -> its epoch, once training took from it
        self.epoch = None  # the last epoch given out
        self.started = 0  # when this pass began (_ORDER)
        self.last_fetch = 0  # when a DataLoader last returned a batch of this sampler's (_ORDER); 0: never
        self.trained = False  # a training forward took from this queue
        self._fetched = collections.deque()  # (indices, pass) per batch returned, not yet taken

    def start(self, indices=()):
        """A new pass over the sampler (what the last one left, as with drop_last, is not this one's;
        nor are batches a loader returned that no forward took: a loop that stopped its epoch early)."""
        self._indices = indices if isinstance(indices, list) else list(indices)
        self._at = 0
        self._fetched.clear()
        self._pass += 1
        self.started = next(_ORDER)

    def put(self, index):
        self._indices.append(index)

    def _epoch_of(self, pass_number):
        epoch = self._epochs.get(pass_number)
        if epoch is None:
            epoch = self._epochs[pass_number] = 0 if self.epoch is None else self.epoch + 1
            self.epoch = epoch
            for old in [p for p in self._epochs if p < pass_number]:
                del self._epochs[old]
        return epoch

    def take(self, count):
        """A training forward's `count` indices, in the order the pass gives them."""
        at = self._at
        taken = self._indices[at:at + count]
        self._at = at + len(taken)
        if not taken:
            return [], self.epoch
        self.trained = True
        return _ints(taken), self._epoch_of(self._pass)

    def fetch(self, indices):
        """A DataLoader over this sampler returned the batch of `indices` (the ones it asked for)."""
        self._fetched.append((_ints(indices), self._pass))
        self.last_fetch = next(_ORDER)

    def has_fetched(self):
        return bool(self._fetched)

    def take_batch(self):
        """The oldest batch returned that no forward took, whole, with its epoch."""
        indices, pass_number = self._fetched.popleft()
        self.trained = True
        return indices, self._epoch_of(pass_number)

    def held(self):
        return len(self._indices) + sum(len(b[0]) for b in self._fetched) + len(self._epochs)


class _Samples:
    """The samplers one watcher follows (watch()'s, or under dpscope_torch.run every
    DistributedSampler: a validation loader's too), a queue each.

    When DataLoaders over them say what they return, a training forward's samples are the oldest
    batch returned that no forward took, whole, whatever the forward's tensors look like (a
    sequence-first layout, a batch filtered or cut into micro-batches, keyword arguments): of the
    sampler training took from before, whose loader returned a batch last (a validation loop's
    batches are never the training's once training began), else of the one whose loader returned a
    batch last. A second forward of one batch (two views, a no_grad forward before the training one)
    finds none left and takes none; `batches = list(loader)` gives them out one a forward. Without a
    DataLoader (a sampler iterated by hand) the samples are the next `count` of the pass begun last,
    `count` being the leading dimension of the forward's first tensor."""

    def __init__(self):
        self.queues = []

    def queue_for(self, sampler):
        queue = sampler.__dict__.get("_dpscope_queue")
        if not any(q is queue for q in self.queues):
            queue = _SampleQueue()
            self.queues.append(queue)
        return queue

    def take(self, count):
        """A training forward's samples: (indices, epoch). `count`: its batch's leading dimension, or
        None when unknown (read only without a DataLoader)."""
        # Once training took from a sampler, only such samplers feed it (a validation loader's
        # leftovers are never a second view's); before, any whose loader returned a batch.
        trained = [q for q in self.queues if q.trained and q.last_fetch]
        waiting = [q for q in (trained or self.queues) if q.has_fetched()]
        if waiting:
            return max(waiting, key=lambda q: q.last_fetch).take_batch()
        if not self.queues or count is None or any(q.last_fetch for q in self.queues):
            return [], None  # (a loader's batches were all taken: the same batch again)
        return max(self.queues, key=lambda q: q.started).take(count)

    def indices_held(self):
        return sum(q.held() for q in self.queues)


def follow_data_loaders(torch):
    """Makes every DataLoader iterator made from now on say which indices each batch it returns holds,
    to the queue of its sampler when that one is watched (once per process). Indices are asked for
    in order and batches returned in that order, prefetched by workers or not: each batch's are the
    oldest not yet returned. An iterator made before is left alone (its prefetched batches are not
    known)."""
    it = torch.utils.data.dataloader._BaseDataLoaderIter
    if it.__dict__.get("_dpscope_followed"):
        return
    init, next_index, next_batch, reset = it.__init__, it._next_index, it.__next__, it._reset

    def __init__(self, *args, **kwargs):
        self._dpscope_asked = collections.deque()
        init(self, *args, **kwargs)

    def _reset(self, *args, **kwargs):  # (each epoch of persistent workers: before prefetching)
        self._dpscope_asked = collections.deque()
        return reset(self, *args, **kwargs)

    def _next_index(self):
        index = next_index(self)
        asked = self.__dict__.get("_dpscope_asked")
        if asked is not None:
            asked.append(index)
        return index

    def __next__(self):
        batch = next_batch(self)
        asked = self.__dict__.get("_dpscope_asked")
        if asked:
            index = asked.popleft()
            sampler = self._index_sampler  # a batch sampler (watched itself, or the sampler inside it)
            queue = getattr(sampler, "_dpscope_queue", None) or getattr(getattr(sampler, "sampler", None),
                                                                        "_dpscope_queue", None)
            if queue is not None:
                queue.fetch(list(index) if isinstance(index, (list, tuple)) else [index])
        return batch

    it.__init__, it._reset, it._next_index, it.__next__ = __init__, _reset, _next_index, __next__
    it._dpscope_followed = True


def watch_sampler(sampler, queue):
    """Makes `sampler` report the indices it yields to `queue` (its class is swapped for a subclass
    whose __iter__ does, since iter() looks the method up on the type)."""
    cls = type(sampler)
    if getattr(cls, "_dpscope_watched", False):
        sampler._dpscope_queue = queue
        return

    def __iter__(self):
        q = getattr(self, "_dpscope_queue", None)
        it = cls.__iter__(self)
        if q is None:
            return it
        if it.__class__ is _LIST_ITERATOR or it.__class__ is _RANGE_ITERATOR:
            indices = list(it)  # a finite pass, known now: queued whole, handed on unchanged
            q.start(indices)
            return iter(indices)
        q.start()
        return _reporting(it, q.put)

    sampler.__class__ = type(cls.__name__, (cls,), {"__iter__": __iter__, "_dpscope_watched": True,
                                                     "__module__": cls.__module__})
    sampler._dpscope_queue = queue


def _reporting(indices, put):
    """Yields `indices`, each put in the queue first (a sampler that makes them as it goes)."""
    for index in indices:
        put(index)
        yield index


class _Backward:
    """This process's torch.autograd.backward wrapper (what Tensor.backward calls too), and the open
    watchers it tells (in the order they were made): several models may be watched at once (a GAN's
    two DDP models, each into a trace of its own), and closed in any order."""

    watchers = []
    original = None
    wrapper = None
    nested = threading.local()  # .depth: backwards running on this thread (a checkpointed segment's
                                # recomputation calls torch.autograd.backward inside the outer one)


_HOOK_DICTS = ("_forward_pre_hooks", "_forward_hooks")
# DDP's list of (hook, state) pairs, PyTorch 2.x: register_comm_hook appends to it.
_HOOK_LISTS = ("_comm_hooks",)


def _ours(value):
    """A hook, method or wrapper of a watcher's, or the model's reference to its watcher."""
    if isinstance(value, weakref.ref):
        return isinstance(value(), StepWatcher)
    return callable(value) and (getattr(value, "__module__", None) or "").startswith("dpscope_torch.")


def _entry_is_ours(entry):
    """Whether an entry of a hook list (a hook, or a tuple holding one) is a watcher's."""
    return _ours(entry) or (isinstance(entry, tuple) and any(_ours(x) for x in entry))


def _holds_ours(key, value):
    """Whether a module's state entry is, or holds, a hook of a watcher's."""
    if _ours(value):
        return True
    if key in _HOOK_DICTS and isinstance(value, dict):
        return any(_ours(h) for h in value.values())
    if key in _HOOK_LISTS and isinstance(value, list):
        return any(_entry_is_ours(e) for e in value)
    return False


def _without_ours(state):
    """A module's pickled state less what watching added to it (the instance attributes and hooks of a
    watcher): `torch.save(model)` and `copy.deepcopy(model)` of a watched model work as unwatched, and
    neither the file nor the copy carries a watcher's hooks (a copy that did would record its forwards
    into the watched model's trace)."""
    if not isinstance(state, dict) or not any(_holds_ours(k, v) for k, v in state.items()):
        return state
    clean = {}
    for key, value in state.items():
        if _ours(value):
            continue
        if key in _HOOK_DICTS and isinstance(value, dict):
            value = value.__class__((k, h) for k, h in value.items() if not _ours(h))
        elif key in _HOOK_LISTS and isinstance(value, list):
            value = [e for e in value if not _entry_is_ours(e)]
        clean[key] = value
    return clean


def _filter_pickles(torch):
    """Makes Module's and DDP's __getstate__ leave out what watching added (_without_ours), once."""
    for cls in (torch.nn.Module, torch.nn.parallel.DistributedDataParallel):
        if cls.__dict__.get("_dpscope_filtered"):
            continue
        own = cls.__dict__.get("__getstate__")

        def __getstate__(self, _own=own, _cls=cls):
            if _own is not None:
                return _without_ours(_own(self))
            above = getattr(super(_cls, self), "__getstate__", None)  # a mixin's, or object's (3.11)
            return _without_ours(above() if above is not None else self.__dict__)

        cls.__getstate__ = __getstate__
        cls._dpscope_filtered = True


class StepWatcher:
    def _claim(self, model, path):
        """Refuses, before anything is set, a model another open watcher records (its hooks would
        record each event twice, into two traces that each lack half) and a trace this process is
        already writing (two watchers in one file corrupt it: the second truncates the first's)."""
        other = getattr(model, "_dpscope_watcher", lambda: None)()
        if other is not None and not other._closed:
            raise RuntimeError(f"dpscope_torch.watch: this model is already watched (into '{other._writer.path}'): "
                               "close() that watcher first")
        real = os.path.realpath(path)
        for w in _Backward.watchers:
            if not w._closed and os.path.realpath(w._writer.path) == real:
                raise RuntimeError(f"dpscope_torch.watch: trace '{path}' is being written by another watcher of this "
                                   "process: give each watched model a trace of its own")

    def _wrap_backward(self, model):
        """torch.autograd.backward() while watched (`loss.backward()` calls it, as a script may
        directly): where forward ends and the loss is. Each open watcher hears every outermost backward
        (newest first as it begins, oldest first as it ends); one nested in it (a checkpointed
        segment's) is the same backward's. The last close() puts the original back. A wrapper serves
        the watchers made while it was the one (its own list): one left beneath a wrapper of someone
        else's after the last close() tells no one."""
        model._dpscope_watcher = weakref.ref(self)
        _filter_pickles(self._torch)
        if not _Backward.watchers:
            torch = self._torch
            original, watchers, nested = torch.autograd.backward, [], _Backward.nested

            def backward(tensors, *args, **kwargs):
                depth = getattr(nested, "depth", 0)
                if not isinstance(tensors, torch.Tensor):
                    tensors = tuple(tensors)  # (as the original takes them: a generator is read once)
                first = tensors if isinstance(tensors, torch.Tensor) else (tensors[0] if tensors else None)
                told = list(watchers) if depth == 0 and isinstance(first, torch.Tensor) else []
                for w in reversed(told):
                    w._on_backward_begin(first)
                nested.depth = depth + 1
                try:
                    return original(tensors, *args, **kwargs)
                finally:
                    nested.depth = depth
                    for w in told:
                        w._on_backward_end()

            _Backward.watchers, _Backward.original, _Backward.wrapper = watchers, original, backward
            torch.autograd.backward = backward
        _Backward.watchers.append(self)

    def _unwrap_backward(self):
        if self in _Backward.watchers:
            _Backward.watchers.remove(self)
        if not _Backward.watchers and self._torch.autograd.backward is _Backward.wrapper:
            self._torch.autograd.backward = _Backward.original

    def watch_sampler(self, sampler):
        """Records the indices `sampler` yields (the forward that consumes them gets them)."""
        follow_data_loaders(self._torch)
        watch_sampler(sampler, self._samples.queue_for(sampler))

    def watch_optimizer(self, optimizer):
        """Ends each step at `optimizer`.step() and records it as the optimizer phase."""
        if any(o is optimizer for o in self._optimizers):
            return
        self._optimizers.append(optimizer)
        original = optimizer.step
        watcher = self

        def step(_optimizer, *args, **kwargs):
            if not watcher._steps_this_model(optimizer):  # (another model's: a GAN's other optimizer)
                return original(*args, **kwargs)
            closure = kwargs.get("closure", args[0] if args else None)
            if closure is None:
                watcher._on_optimizer_begin()
            else:
                # step(closure): the closure is the step's forward and backward, run inside step() (LBFGS
                # runs it several times): the optimizer phase begins each time it returns.
                def watched_closure():
                    try:
                        return closure()
                    finally:
                        watcher._on_optimizer_begin()

                if "closure" in kwargs:
                    kwargs = dict(kwargs, closure=watched_closure)
                else:
                    args = (watched_closure, *args[1:])
            returned = None
            try:
                returned = original(*args, **kwargs)
                return returned
            finally:
                # (with a closure, step() returns the step's loss as the optimizer saw it: LBFGS, which
                # runs the closure several times, returns the first one's)
                watcher._on_optimizer_end(optimizer, returned if closure is not None else None)

        # A bound method, as the attribute was: an LR scheduler made afterwards wraps optimizer.step
        # through its __self__ and __func__ (torch.optim.lr_scheduler's with_counter).
        optimizer.step = types.MethodType(step, optimizer)

    def _steps_this_model(self, optimizer):
        """Whether `optimizer` updates a parameter of the watched model: only such a step() ends this
        model's step (under dpscope_torch.run every optimizer is watched, and a GAN's discriminator's
        steps while the generator's step is still in its forward). Read again when its parameter
        groups change (add_param_group)."""
        cache = self.__dict__.setdefault("_steps_cache", {})
        groups = optimizer.param_groups
        key = (id(groups), len(groups), sum(len(g["params"]) for g in groups))
        cached = cache.get(id(optimizer))
        if cached is not None and cached[0] == key:
            return cached[1]
        mine = {id(p) for _, p in self._params}
        answer = any(id(p) in mine for g in groups for p in g["params"])
        cache[id(optimizer)] = (key, answer)
        return answer

    def _optimizer_state_bytes(self):
        """The bytes of the watched optimizers' state tensors (momentum, Adam's moments).

        Counted again only when an optimizer's state may have changed size: on its first steps
        (STATE_RECOUNT_STEPS), when it gains or loses parameters' entries, or when it is replaced
        (load_state_dict makes a new one). PyTorch's optimizers make a parameter's state tensors once,
        on its first step, and update them in place: walking every state tensor every step (one
        Python loop over all parameters) would be the only cost that grows with the model."""
        key = [(id(o.state), len(o.state)) for o in self._optimizers]
        steps = getattr(self, "_state_steps", 0)
        if key == getattr(self, "_state_key", None) and steps >= STATE_RECOUNT_STEPS:
            return self._state_counted
        self._state_key, self._state_steps = key, steps + 1
        torch = self._torch
        self._state_counted = sum(v.numel() * v.element_size() for o in self._optimizers for s in o.state.values()
                                  for v in s.values() if isinstance(v, torch.Tensor))
        return self._state_counted

    @property
    def trace_failure(self):
        """Why the trace ended before the run did (a write failed: the disk full), or None."""
        return self._writer.failure

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc is not None and not isinstance(exc, (KeyboardInterrupt, GeneratorExit)):
            self.record_error(exc)
        elif isinstance(exc, KeyboardInterrupt):
            self.record_error(RuntimeError("interrupted (KeyboardInterrupt)"))
        self.close()
        return False
