"""DDP's parameters and buckets as PyTorch builds them: the reducer's parameter order, the first
bucket assignment, and the limits the rebuilt buckets are cut at."""
import sys


def ddp_parameters(ddp):
    """(name, parameter) in DDP's order: the reducer's parameter indices are positions in this list.

    DDP takes the parameters that require grad, module by module (named_modules order), without those
    in parameters_to_ignore, each shared parameter once (DistributedDataParallel._build_params_for_reducer).
    """
    ignore = set(getattr(ddp, "parameters_to_ignore", ()) or ())
    seen = set()
    out = []
    for module_name, module in ddp.module.named_modules():
        for param_name, param in module.named_parameters(recurse=False):
            if not param.requires_grad or f"{module_name}.{param_name}" in ignore or id(param) in seen:
                continue
            seen.add(id(param))
            out.append((f"{module_name}.{param_name}" if module_name else param_name, param))
    return out


def initial_buckets(ddp, params, logging_sizes):
    """DDP's first bucket assignment, [(param indices in packing order, bytes)] with bucket 0 first,
    or None when it cannot be known.

    DDP builds it with dist._compute_bucket_assignment_by_size over its parameters, under size limits
    that depend on the PyTorch version and on find_unused_parameters / static_graph (1.13: one bucket
    of everything unless find_unused_parameters, which uses [first bucket cap, bucket_cap_mb]); the
    buckets are reduced in reverse. Both limit sets are tried; the one whose sizes DDP's own logging
    data reports (`bucket_sizes`) is kept.
    """
    import torch

    dist = torch.distributed
    compute = getattr(dist, "_compute_bucket_assignment_by_size", None)
    if compute is None or not logging_sizes:
        return None
    tensors = [p for _, p in params]
    sparse = sparse_gradients(ddp, params)
    for limits in ([sys.maxsize], [first_bucket_bytes(torch, ddp), ddp.bucket_bytes_cap]):
        try:
            indices, _ = compute(tensors, limits, sparse)
        except (TypeError, RuntimeError):
            return None
        buckets = [(list(group), sum(tensors[i].numel() * tensors[i].element_size() for i in group))
                   for group in reversed(indices)]
        if [b for _, b in buckets] == logging_sizes:
            return buckets
    return None


def sparse_gradients(ddp, params):
    """For each parameter, whether its gradient is sparse: a weight of an nn.Embedding or
    nn.EmbeddingBag made with sparse=True, which DDP reduces in a bucket of its own (its
    expect_sparse_gradient)."""
    import torch

    sparse = set()
    for module in ddp.module.modules():
        if isinstance(module, (torch.nn.Embedding, torch.nn.EmbeddingBag)) and module.sparse:
            sparse.update(id(p) for p in module.parameters(recurse=False))
    return [id(p) in sparse for _, p in params]


def parse_sizes(text):
    """DDP's logging data lists sizes as "1071144, 1607680"."""
    try:
        return [int(s) for s in str(text).split(",") if s.strip()]
    except ValueError:
        return []


def first_bucket_bytes(torch, ddp):
    """The limit of the first bucket DDP rebuilds (the last layers' gradients). PyTorch 1.13:
    dist._DEFAULT_FIRST_BUCKET_BYTES (1 MiB) always. PyTorch 2.x (2.11 checked): only while
    bucket_cap_mb is left at its default; a bucket_cap_mb given, even 25, caps the first bucket too."""
    if getattr(ddp, "bucket_bytes_cap_default", True) is False:
        return ddp.bucket_bytes_cap
    return getattr(torch.distributed, "_DEFAULT_FIRST_BUCKET_BYTES", 1 << 20)
