"""Where a trace's times come from: the host's clock for CPU work, CUDA events for GPU work.

A stamp marks a moment of the work being recorded. On the CPU, work happens when the host runs
it, so a stamp is the host's monotonic time. On a GPU the host only queues work: a stamp is a CUDA
event recorded on the current stream, resolved once the GPU has passed it, to the host clock
through a chain of anchors (an anchor's host time is the previous anchor's plus the GPU time between
them, so cudaEventElapsedTime's float milliseconds never span more than a step or two).
"""
import time

from .clock import now_ns


class HostClock:
    """Stamps are host times (int ns): the work ran on the thread that stamps it."""

    gpu = False
    stamp = staticmethod(time.monotonic_ns)  # now_ns's clock, called directly: stamped several times a step

    def ready(self, stamp):
        return True

    def ns(self, stamp):
        return stamp

    def reanchor(self):
        pass


class _Anchor:
    __slots__ = ("event", "host_ns")

    def __init__(self, event, host_ns):
        self.event = event
        self.host_ns = host_ns


class CudaClock:
    """Stamps are (anchor, CUDA event) pairs on the current stream of `device`."""

    gpu = True

    def __init__(self, torch, device):
        self._torch = torch
        self._device = device
        event = torch.cuda.Event(enable_timing=True)
        event.record()
        event.synchronize()
        self._anchor = _Anchor(event, now_ns())

    def stamp(self):
        event = self._torch.cuda.Event(enable_timing=True)
        event.record()
        return (self._anchor, event)

    def ready(self, stamp):
        return stamp[1].query()

    def ns(self, stamp):
        anchor, event = stamp
        return anchor.host_ns + int(round(anchor.event.elapsed_time(event) * 1e6))

    def reanchor(self):
        """A new anchor at the current point of the stream (called once a step, by the host)."""
        old = self._anchor
        event = self._torch.cuda.Event(enable_timing=True)
        event.record()
        # Resolved lazily: its host time is the old anchor's plus the GPU time between them.
        self._anchor = _LazyAnchor(old, event)


class _LazyAnchor(_Anchor):
    """An anchor whose host time is read from its predecessor once the GPU has passed it."""

    __slots__ = ("_previous",)

    def __init__(self, previous, event):
        self._previous = previous
        self.event = event

    def __getattr__(self, name):  # host_ns, first asked for
        if name != "host_ns":
            raise AttributeError(name)
        previous = self._previous
        host = previous.host_ns + int(round(previous.event.elapsed_time(self.event) * 1e6))
        object.__setattr__(self, "host_ns", host)
        self._previous = None  # the chain behind it can go
        return host
