"""Each rank's clock against rank 0's, measured once at start through the process group.

A rank's trace times are its own monotonic clock (time.monotonic_ns()). Rank 0 answers each rank's
ping with its own time; the round trip with the smallest duration gives the offset (rank 0's time
minus the midpoint of the round trip on this rank's clock) and its uncertainty (half that round
trip): the runtime's `process` header entry (docs/trace-format.md). Adding the offset to a rank's
times puts them on rank 0's clock.
"""
import datetime
import sys
import time

ROUNDS = 8  # round trips per rank; the fastest one is kept
NOTE_AFTER_S = 10.0  # a rank still waiting for its peers to call watch() says so after this long
_CALLS = [0]  # watch() calls of this process: each has its own keys in the store


def _has_key(store, key):
    try:
        store.wait([key], datetime.timedelta(milliseconds=1))  # (a PrefixStore has no check())
        return True
    except RuntimeError:
        return False


def await_peers(dist, rank, world):
    """Waits, through the process group's store, until every rank has called watch() this many times:
    the clock measurement is collectives of all ranks, so a rank that never calls watch() (a script
    watching rank 0 only) would leave the others in them, and its own DDP all-reduces met by them.
    Says so after NOTE_AFTER_S, and gives up at the store's own timeout (the process group's, 30
    minutes unless init_process_group was given one) with an error naming the ranks missing. Without
    a store to ask (a private API of PyTorch's) the measurement goes ahead as before."""
    try:
        store = dist.distributed_c10d._get_default_store()
        limit = store.timeout.total_seconds()
    except Exception:
        return
    prefix = f"dpscope_torch/watch/{_CALLS[0]}/"
    _CALLS[0] += 1
    store.set(f"{prefix}{rank}", "1")
    keys = [f"{prefix}{r}" for r in range(world) if r != rank]
    started, noted = time.monotonic(), False
    while True:
        waited = time.monotonic() - started
        step = limit - waited if noted else min(NOTE_AFTER_S, limit - waited)
        try:
            store.wait(keys, datetime.timedelta(seconds=max(step, 0.001)))
            return
        except RuntimeError:
            missing = [r for r in range(world) if r != rank and not _has_key(store, f"{prefix}{r}")]
            if not missing:
                return
            names = ", ".join(map(str, missing))
            if time.monotonic() - started >= limit:
                raise RuntimeError(f"dpscope_torch.watch: rank {rank}: rank(s) {names} did not call watch() within "
                                   f"{limit:g} s: every rank must call it (each writes its own rank-K.jsonl)") from None
            if not noted:
                print(f"dpscope_torch: rank {rank}: waiting for rank(s) {names} to call watch(): every rank must "
                      f"(giving up after {limit:g} s)", file=sys.stderr, flush=True)
                noted = True


def now_ns():
    return time.monotonic_ns()


def measure_offsets(dist, group=None):
    """(offset_ns, uncertainty_ns) of this rank; (0, 0) on rank 0. Every rank must call it.

    Runs over `group` (a gloo group: NCCL point-to-point needs CUDA tensors and adds kernel times).
    """
    import torch

    rank = dist.get_rank()
    world = dist.get_world_size()
    stamp = torch.zeros(1, dtype=torch.int64)
    if rank == 0:
        for peer in range(1, world):
            for _ in range(ROUNDS):
                dist.recv(stamp, src=peer, group=group)
                stamp[0] = now_ns()
                dist.send(stamp, dst=peer, group=group)
        dist.barrier(group=group)
        return 0, 0
    best = None
    for _ in range(ROUNDS):
        sent = now_ns()
        stamp[0] = sent
        dist.send(stamp, dst=0, group=group)
        dist.recv(stamp, src=0, group=group)
        back = now_ns()
        trip = back - sent
        if best is None or trip < best[0]:
            best = (trip, int(stamp[0]) - (sent + back) // 2)
    dist.barrier(group=group)
    trip, offset = best
    return offset, (trip + 1) // 2
