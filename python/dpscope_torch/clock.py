"""Each rank's clock against rank 0's, measured once at start through the process group.

A rank's trace times are its own monotonic clock (time.monotonic_ns()). Rank 0 answers each rank's
ping with its own time; the round trip with the smallest duration gives the offset (rank 0's time
minus the midpoint of the round trip on this rank's clock) and its uncertainty (half that round
trip): the runtime's `process` header entry (docs/trace-format.md). Adding the offset to a rank's
times puts them on rank 0's clock.
"""
import time

ROUNDS = 8  # round trips per rank; the fastest one is kept


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
