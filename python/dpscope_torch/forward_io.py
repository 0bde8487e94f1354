"""What a forward takes and gives, as the watchers read it: the batch size of its inputs, and the
autograd nodes of its outputs, which tell a backward of this model's loss from another's."""


def _torch():
    import torch

    return torch


def first_batch_size(value, depth=0):
    """The leading dimension of the first tensor in a forward's inputs (tuples, lists, dicts)."""
    torch = _torch()
    if depth == 0 and value.__class__ is tuple and value and value[0].__class__ is torch.Tensor:
        shape = value[0].shape  # model(x, ...): the common case, without the search
        return int(shape[0]) if shape else None
    if isinstance(value, torch.Tensor):
        return int(value.shape[0]) if value.dim() > 0 else None
    if depth < 3 and isinstance(value, (list, tuple)):
        for v in value:
            n = first_batch_size(v, depth + 1)
            if n is not None:
                return n
    if depth < 3 and isinstance(value, dict):
        for v in value.values():
            n = first_batch_size(v, depth + 1)
            if n is not None:
                return n
    return None


def output_nodes(value, nodes, depth=0):
    """Adds the autograd nodes of a forward's output tensors (in tuples, lists, dicts) to `nodes`."""
    torch = _torch()
    if isinstance(value, torch.Tensor):
        if value.grad_fn is not None:
            nodes.add(value.grad_fn)
    elif depth < 3 and isinstance(value, (list, tuple)):
        for v in value:
            output_nodes(v, nodes, depth + 1)
    elif depth < 3 and isinstance(value, dict):
        for v in value.values():
            output_nodes(v, nodes, depth + 1)


def reaches(root, targets):
    """Whether the autograd graph below `root` holds one of `targets` (nodes, compared by identity: a
    node's Python object stays the same while one reference to it lives, and `targets` holds one). A
    loss made of the model's outputs reaches them a few nodes down; a backward that never does (another
    model's loss, in a GAN, on a detached output of this one) is walked to its leaves."""
    if root is None:
        return False
    seen, stack = {root}, [root]
    while stack:
        node = stack.pop()
        if node in targets:
            return True
        for child, _ in node.next_functions:
            if child is not None and child not in seen:
                seen.add(child)
                stack.append(child)
    return False
