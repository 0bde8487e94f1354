#!/usr/bin/env python3
"""How a watched sampler's indices reach the forwards (python/dpscope_torch/step_watcher.py): a pass
known when it starts (an iterator over a list or a range, as DistributedSampler's) is queued whole,
any other index by index as the sampler yields it; forwards take them in order, batch by batch, and a
pass never hands its leftovers (drop_last) to the next. And the optimizer's state bytes (the memory
counters' optimizer_state), counted when the state may have changed size. Needs no PyTorch.
Usage: sampler_queue_test.py SOURCE_DIR
"""
import os
import sys

sys.path.insert(0, os.path.join(sys.argv[1], "python"))
from dpscope_torch.step_watcher import STATE_RECOUNT_STEPS, StepWatcher, _SampleQueue, watch_sampler  # noqa: E402  (no torch imported)

failures = []


def check(what, got, expected):
    if got != expected:
        failures.append(f"{what}: got {got!r}, expected {expected!r}")


class ListSampler:  # returns an iterator over a list it builds, as DistributedSampler does
    def __init__(self, n):
        self.n, self.epoch = n, 0

    def __iter__(self):
        return iter([(i * 7 + self.epoch) % self.n for i in range(self.n)])


class GeneratorSampler:  # makes its indices as it goes (it could be endless)
    def __init__(self):
        self.made = 0

    def __iter__(self):
        i = 0
        while True:
            self.made += 1
            yield i * 3
            i += 1


class Index:  # an index that is not an int (a numpy or 0-d tensor index, say)
    def __init__(self, v):
        self.v = v

    def __int__(self):
        return self.v


class OddSampler:
    def __iter__(self):
        return iter([Index(5), Index(2)])


# A pass known at its start: queued whole; the iterator the loader gets yields the same indices.
q = _SampleQueue()
s = ListSampler(10)
watch_sampler(s, q)
check("the sampler's class name", type(s).__name__, "ListSampler")
check("isinstance of its class", isinstance(s, ListSampler), True)
seen = list(iter(s))
check("indices handed on", seen, [(i * 7) % 10 for i in range(10)])
check("no epoch before training took from the pass", q.epoch, None)
check("first batch", q.take(4), ([0, 7, 4, 1], 0))
check("second batch", q.take(4), ([8, 5, 2, 9], 0))
check("a short last batch", q.take(4), ([6, 3], 0))
check("nothing left", q.take(4), ([], 0))
# The next pass: its own indices, its own epoch; the last pass's leftovers are gone.
s.epoch = 1
it = iter(s)
check("second pass, first batch", q.take(3), ([1, 8, 5], 1))
check("second pass handed on", next(it), 1)
s.epoch = 2
_ = iter(s)  # a pass started before the last was used up (drop_last, or a loop left early)
check("third pass starts clean", q.take(2), ([2, 9], 2))

# A range pass (SequentialSampler-like) is known too.
class RangeSampler:
    def __iter__(self):
        return iter(range(3, 6))


q = _SampleQueue()
r = RangeSampler()
watch_sampler(r, q)
check("range handed on", list(iter(r)), [3, 4, 5])
check("range queued", q.take(5), ([3, 4, 5], 0))

# A generator sampler: only what it has yielded is queued, and it is never run ahead.
q = _SampleQueue()
g = GeneratorSampler()
watch_sampler(g, q)
it = iter(g)
check("nothing made before the loader asks", g.made, 0)
check("first two", [next(it), next(it)], [0, 3])
check("queued as yielded", q.take(5), ([0, 3], 0))
check("made as asked", g.made, 2)
next(it)
check("the next one", q.take(1), ([6], 0))

# Indices that are not ints are written as ints.
q = _SampleQueue()
o = OddSampler()
watch_sampler(o, q)
list(iter(o))
check("non-int indices", q.take(2), ([5, 2], 0))

# A second watcher takes the sampler over; an unwatched instance of a watched class is left alone.
q2 = _SampleQueue()
watch_sampler(s, q2)
list(iter(s))
check("the new queue gets the pass", len(q2.take(100)[0]), 10)
plain = type(s)(4)  # the watched subclass, without a queue of its own
check("an unwatched instance", list(iter(plain)), [0, 3, 2, 1])


# Several samplers, and what DataLoaders over them return (fetch()): a training forward takes the
# oldest batch returned that no forward took, whole, of the sampler training took from before.
from dpscope_torch.step_watcher import _Samples  # noqa: E402

samples = _Samples()
train, val = ListSampler(16), ListSampler(8)
tq, vq = samples.queue_for(train), samples.queue_for(val)
watch_sampler(train, tq)
watch_sampler(val, vq)
list(iter(train))
tq.fetch([0, 7, 14, 5])
check("the batch a loader returned, whatever the forward's leading dimension", samples.take(3),
      ([0, 7, 14, 5], 0))
check("the same batch again (two views, a no_grad forward first): none", samples.take(4), ([], None))
list(iter(val))  # a validation loop, under eval / no_grad: its batches are returned, never trained on
vq.fetch([0, 7, 6, 5])
tq.fetch([12, 3, 10, 1])
vq.fetch([4, 3, 2, 1])  # (even one returned after the training batch)
check("after a validation loop: the training batch", samples.take(4), ([12, 3, 10, 1], 0))
check("a forward without a known batch size (keyword arguments)", (tq.fetch([8, 15]), samples.take(None))[1],
      ([8, 15], 0))
# batches = list(loader): every batch returned before the first forward, one a forward.
tq.fetch([4, 11, 2, 9])
tq.fetch([0, 1, 2, 3])
check("the first of the batches fetched ahead", samples.take(4), ([4, 11, 2, 9], 0))
check("then the next", samples.take(4), ([0, 1, 2, 3], 0))
tq.fetch([5, 6])  # returned, never trained on: the loop left its epoch early
list(iter(train))  # the next epoch
list(iter(train))  # (a multi-worker DataLoader starts a pass and drops it: no epoch)
tq.fetch([1, 8])
check("its epoch, not the last one's leftovers", samples.take(2), ([1, 8], 1))
# A sampler that yields batches (a batch sampler given to watch()): its lists are flattened.
batches = _Samples()
bq = batches.queue_for(ListSampler(4))
bq.start([[3, 1], [0, 2]])
check("a batch sampler by hand", batches.take(2), ([3, 1, 0, 2], 0))
# A sampler iterated by hand (no loader): the pass begun last, in order, `count` at a time.
hand = _Samples()
hq = hand.queue_for(ListSampler(5))
hq.start([4, 1, 3, 0, 2])
check("by hand", [hand.take(2), hand.take(2), hand.take(None)], [([4, 1], 0), ([3, 0], 0), ([], None)])


# The optimizer's state bytes: counted on the first STATE_RECOUNT_STEPS steps, then again only when
# a state gains or loses entries or is replaced (load_state_dict); PyTorch's optimizers make each
# parameter's state tensors once and update them in place.
class FakeTensor:  # numel and element_size, as a torch.Tensor
    def __init__(self, n):
        self.n = n

    def numel(self):
        return self.n

    def element_size(self):
        return 4


class FakeTorch:
    Tensor = FakeTensor


class FakeOptimizer:
    def __init__(self):
        self.state = {}


opt = FakeOptimizer()
w = StepWatcher()
w._torch, w._optimizers = FakeTorch, [opt]
check("no state yet", w._optimizer_state_bytes(), 0)
opt.state["w"] = {"momentum_buffer": FakeTensor(10), "step": 3}  # a new entry: counted
check("an entry made on the first step", w._optimizer_state_bytes(), 40)
opt.state["w"]["momentum_buffer"] = FakeTensor(20)  # within the first steps: counted
check("a tensor replaced within the first steps", w._optimizer_state_bytes(), 80)
for _ in range(STATE_RECOUNT_STEPS):
    w._optimizer_state_bytes()
opt.state["w"]["momentum_buffer"] = FakeTensor(30)  # in place, same entries: not walked again
check("entries unchanged after the first steps: the count kept", w._optimizer_state_bytes(), 80)
opt.state["b"] = {"momentum_buffer": FakeTensor(5)}  # a parameter's first step (once unused)
check("a new entry: counted again", w._optimizer_state_bytes(), 140)
opt.state = {"w": {"momentum_buffer": FakeTensor(1)}, "b": {"momentum_buffer": FakeTensor(1)}}  # load_state_dict
check("a state replaced: counted again", w._optimizer_state_bytes(), 8)

# Only an optimizer of the watched model's parameters ends its step (under dpscope_torch.run every
# optimizer is watched: a GAN's discriminator's steps while the generator's step is in its forward).
class Group(FakeOptimizer):
    def __init__(self, params):
        super().__init__()
        self.param_groups = [{"params": params}]


mine, theirs = FakeTensor(1), FakeTensor(1)
w._params = [("w", mine)]
generator, discriminator = Group([mine]), Group([theirs])
check("the model's optimizer", w._steps_this_model(generator), True)
check("another model's optimizer", w._steps_this_model(discriminator), False)
discriminator.param_groups.append({"params": [mine]})  # add_param_group
check("a group added with the model's parameters", w._steps_this_model(discriminator), True)

if failures:
    print("\n".join(failures))
    print("FAIL (sampler_queue)")
    sys.exit(1)
print("PASS (sampler_queue)")
