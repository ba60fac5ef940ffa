"""Several processes with ``torch.distributed``: process group from torchrun, gathering with gradients, sharding.

Launch with torchrun (``torchrun --standalone --nproc_per_node=2 ...``): every process calls
:func:`init_distributed`, which reads ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR`` and
``MASTER_PORT`` and joins the group with NCCL on CUDA or gloo on the CPU. Without ``WORLD_SIZE`` (a
plain ``python`` run) every function here is the identity of one process: rank 0 of a world of 1.

**Global-batch losses.** The AP losses of HAP-VR (Eq. 6–12), InfoNCE/SSHN (Eq. 15's L_base) and the
frame-level AP (§3.4) rank each query against the whole batch. With per-rank batch B, each rank gathers
the other ranks' embeddings (or similarity rows) with :func:`all_gather_with_grad`, so it ranks against
all ``W·B`` items. The convention that makes ``W`` ranks with batch B equal one process with batch ``W·B``:

* every rank returns a loss whose **mean over ranks** is the global loss: either the global loss
  itself, computed identically on every rank from gathered tensors ("replicated"), or, when each rank
  only holds its own query rows of the global score matrix ("row-sharded", memory ÷ W), its local
  mean rescaled by :func:`global_mean`;
* ``DistributedDataParallel`` averages the parameter gradients over ranks;
* the backward of :func:`all_gather_with_grad` sums the incoming gradients over ranks (all_reduce SUM)
  and keeps this rank's slice. Why: every rank's loss ``L_s`` depends on rank r's rows ``x_r``, so the
  gradient of the averaged loss ``(1/W)·Σ_s L_s`` is ``(1/W)·Σ_s ∂L_s/∂x_r``; the sum gives
  ``Σ_s ∂L_s/∂x_r`` on rank r and DDP's division by W completes it. (``x_r.grad`` itself is therefore W times the
  single-process gradient; the parameter gradients after averaging are exactly equal.)

Example (in the training step of each rank, ``model`` wrapped in DDP)::

    emb = model(local_batch)                                   # [B, D]
    emb_all, labels_all = gather_batch(emb, local_labels)      # [W·B, D], [W·B]
    scores = emb_all @ emb_all.T                               # global [W·B, W·B]
    relevance = labels_all[:, None] == labels_all[None, :]
    loss = InfoNCE()(scores, relevance)                        # replicated: the same value on every rank
    rows = rank_rows(len(emb))                                 # or row-sharded (this rank's queries only):
    ap = QuadLinearAP()(scores[rows], relevance[rows])
    loss = loss + global_mean(ap, count_ranked_queries(relevance[rows]))
    loss.backward()                                            # DDP averages: exact global-batch gradients
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch import Tensor, nn


def _env_int(name: str) -> int | None:
    value = os.environ.get(name)
    if value is None or value == "":
        return None
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"environment variable {name} must be an integer, got {value!r}") from None


def init_distributed(backend: str | None = None, timeout_s: float = 600.0) -> bool:
    """Join the process group described by torchrun's environment; a no-op without ``WORLD_SIZE``.

    Args:
        backend: "gloo", "nccl" or None for NCCL when CUDA is available, else gloo. On CUDA each process
            is bound to GPU ``LOCAL_RANK``.
        timeout_s: how long collectives wait for the other ranks.

    Returns:
        True when this process is part of a group of several processes (after the call), else False.

    Examples:
        >>> init_distributed()  # a plain python process: nothing to join
        False
        >>> get_rank(), get_world_size(), is_main_process()
        (0, 1, True)
    """
    if is_distributed():
        return True
    world = _env_int("WORLD_SIZE")
    if world is None or world == 1:
        return False
    rank = _env_int("RANK")
    if rank is None or not 0 <= rank < world:
        raise ValueError(f"RANK must be set to an int in [0, WORLD_SIZE={world}) (torchrun sets it), "
                         f"got {os.environ.get('RANK')!r}")
    if backend is None:
        backend = "nccl" if torch.cuda.is_available() else "gloo"
    if backend not in ("gloo", "nccl"):
        raise ValueError(f"backend must be 'gloo', 'nccl' or None, got {backend!r}")
    if backend == "nccl":
        torch.cuda.set_device(_env_int("LOCAL_RANK") or 0)
    dist.init_process_group(backend, rank=rank, world_size=world, timeout=timedelta(seconds=timeout_s))
    return True


def destroy_distributed() -> None:
    """Leave the process group (call at the end of each rank's run); a no-op in a single process.

    Examples:
        >>> destroy_distributed()  # a no-op outside a process group
    """
    if is_distributed():
        dist.destroy_process_group()


def is_distributed() -> bool:
    """True inside an initialised process group.

    Examples:
        >>> is_distributed()  # a single process
        False
    """
    return dist.is_available() and dist.is_initialized()


def get_rank() -> int:
    """This process's rank (0 in a single process).

    Examples:
        >>> get_rank()  # a single process
        0
    """
    return dist.get_rank() if is_distributed() else 0


def get_world_size() -> int:
    """Number of processes (1 in a single process).

    Examples:
        >>> get_world_size()  # a single process
        1
    """
    return dist.get_world_size() if is_distributed() else 1


def get_local_rank() -> int:
    """Rank within this machine (``LOCAL_RANK`` set by torchrun; 0 otherwise): the GPU to use.

    Examples:
        >>> get_local_rank()  # a single process
        0
    """
    return (_env_int("LOCAL_RANK") or 0) if is_distributed() else 0


def is_main_process() -> bool:
    """True on rank 0, the process that alone logs, evaluates, prints and writes checkpoints.

    Examples:
        >>> is_main_process()  # a single process
        True
    """
    return get_rank() == 0


def barrier() -> None:
    """Wait for every rank (no-op in a single process).

    Examples:
        >>> barrier()  # returns at once in a single process
    """
    if is_distributed():
        dist.barrier()


def rank_device() -> torch.device:
    """The device of this rank: ``cuda:LOCAL_RANK`` with NCCL, else the CPU (or ``cuda`` in one process).

    Examples:
        >>> rank_device().type in ("cpu", "cuda")
        True
    """
    if is_distributed():
        return torch.device("cuda", get_local_rank()) if dist.get_backend() == "nccl" else torch.device("cpu")
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


class AllGatherWithGrad(torch.autograd.Function):
    """``torch.distributed.all_gather`` along dim 0 that lets gradients flow back to every rank.

    Forward: concatenate the equal-shaped tensors of all ranks in rank order. Backward: all_reduce (SUM)
    the incoming gradient over ranks, then keep this rank's slice (see the module docstring).

    Examples:
        >>> x = torch.ones(2, 3, requires_grad=True)
        >>> all_gather_with_grad(x).shape  # one process: the tensor itself
        torch.Size([2, 3])
    """

    @staticmethod
    def forward(ctx, tensor: Tensor) -> Tensor:  # noqa: D102
        ctx.rank, ctx.rows = dist.get_rank(), tensor.shape[0]
        parts = [torch.empty_like(tensor) for _ in range(dist.get_world_size())]
        dist.all_gather(parts, tensor.contiguous())
        return torch.cat(parts)

    @staticmethod
    def backward(ctx, grad: Tensor) -> Tensor:  # noqa: D102
        grad = grad.contiguous().clone()
        dist.all_reduce(grad, op=dist.ReduceOp.SUM)
        return grad[ctx.rank * ctx.rows:(ctx.rank + 1) * ctx.rows]


def _check_gatherable(tensor: object, name: str) -> Tensor:
    if not isinstance(tensor, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(tensor).__name__}")
    if tensor.ndim == 0:
        raise ValueError(f"{name} must have a leading batch dimension, got a 0-d tensor")
    return tensor


def _check_same_shape(tensor: Tensor, name: str) -> None:
    """All ranks must gather the same shape (all_gather has no padding): a clear error otherwise."""
    if tensor.ndim > 7:
        raise ValueError(f"{name} must have at most 7 dimensions to be gathered, got shape {tuple(tensor.shape)}")
    meta = torch.full((8,), -1, dtype=torch.int64, device=tensor.device)
    meta[0] = tensor.ndim
    meta[1:1 + tensor.ndim] = torch.tensor(tensor.shape, dtype=torch.int64)
    shapes = [torch.empty_like(meta) for _ in range(get_world_size())]
    dist.all_gather(shapes, meta)
    if any(not torch.equal(s, meta) for s in shapes):
        described = [tuple(s[1:1 + int(s[0])].tolist()) for s in shapes]
        raise ValueError(f"{name} must have the same shape on every rank to be gathered, got {described} "
                         "(shard with equal per-rank batches)")


def all_gather_with_grad(tensor: Tensor) -> Tensor:
    """All ranks' ``tensor`` concatenated along dim 0, differentiable (HAP-VR's global batch for Eq. 12/15).

    Args:
        tensor: [B, ...] float tensor of the same shape on every rank.

    Returns:
        A ``[W·B, ...]`` tensor, rank r's rows at ``r·B : (r+1)·B`` (:func:`rank_rows`); in a single
        process the input.

    Examples:
        >>> import torch
        >>> x = torch.ones(2, 3, requires_grad=True)
        >>> all_gather_with_grad(x) is x  # one process: nothing to gather
        True
    """
    tensor = _check_gatherable(tensor, "tensor")
    if not is_distributed() or get_world_size() == 1:
        return tensor
    if not tensor.is_floating_point():
        raise TypeError(f"tensor must be floating to carry gradients, got {tensor.dtype} (use all_gather_tensor)")
    _check_same_shape(tensor, "tensor")
    return AllGatherWithGrad.apply(tensor)


def all_gather_tensor(tensor: Tensor) -> Tensor:
    """All ranks' ``tensor`` concatenated along dim 0, without gradient (labels, keys for a memory bank, codes).

    TCA's memory bank enqueues the keys of all ranks and AutoSSVH clusters the codes of all ranks this way.
    Bool tensors are gathered as uint8 (NCCL has no bool) and returned as bool.

    Examples:
        >>> import torch
        >>> all_gather_tensor(torch.tensor([1, 2]))
        tensor([1, 2])
    """
    tensor = _check_gatherable(tensor, "tensor")
    if not is_distributed() or get_world_size() == 1:
        return tensor.detach()
    _check_same_shape(tensor, "tensor")
    send = tensor.detach().contiguous()
    send = send.to(torch.uint8) if tensor.dtype == torch.bool else send
    parts = [torch.empty_like(send) for _ in range(get_world_size())]
    dist.all_gather(parts, send)
    out = torch.cat(parts)
    return out.bool() if tensor.dtype == torch.bool else out


def gather_batch(*tensors: Tensor) -> tuple[Tensor, ...]:
    """Gather each per-rank batch tensor to the global batch: with gradient when it requires one.

    Args:
        tensors: [B, ...] tensors, each the same shape on every rank (embeddings, labels, ids, ...).

    Returns:
        A tuple of [W·B, ...] tensors, rank r's rows at :func:`rank_rows` ``(B)``.

    Examples:
        >>> import torch
        >>> emb, labels = gather_batch(torch.randn(4, 8, requires_grad=True), torch.arange(4))
        >>> emb.shape, labels
        (torch.Size([4, 8]), tensor([0, 1, 2, 3]))
    """
    if not tensors:
        raise ValueError("gather_batch needs at least one tensor")
    return tuple(all_gather_with_grad(t) if isinstance(t, Tensor) and t.requires_grad else all_gather_tensor(t)
                 for t in tensors)


def rank_rows(local_rows: int) -> slice:
    """This rank's rows in a tensor gathered from ``local_rows`` rows per rank.

    Examples:
        >>> rank_rows(4)  # rank 0 of a single process
        slice(0, 4, None)
    """
    if not isinstance(local_rows, int) or isinstance(local_rows, bool) or local_rows < 0:
        raise ValueError(f"local_rows must be a non-negative int, got {local_rows!r}")
    start = get_rank() * local_rows
    return slice(start, start + local_rows)


def count_ranked_queries(relevance: Tensor, ignore: Tensor | None = None) -> Tensor:
    """Number of query rows with at least one kept positive: what the ranking losses average over (HAP-VR Eq. 12).

    :class:`hapref.losses.RankingLoss` subclasses (QuadLinear-AP, Smooth-AP, ...) and InfoNCE average their
    per-query losses over these rows; pass the count to :func:`global_mean` with a row-sharded loss.

    Args:
        relevance: [Q, M] bool, this rank's query rows.
        ignore: optional [Q, M] bool, True = entry left out.

    Returns:
        0-d int64 tensor.

    Examples:
        >>> import torch
        >>> count_ranked_queries(torch.tensor([[True, False], [False, False]]))
        tensor(1)
    """
    if not isinstance(relevance, Tensor) or relevance.ndim != 2:
        raise ValueError(f"relevance must be a [Q, M] tensor, got {getattr(relevance, 'shape', type(relevance))}")
    keep = relevance.bool() if ignore is None else relevance.bool() & ~ignore.bool()
    return keep.any(1).sum()


def global_mean(local_mean: Tensor, count: Tensor | int) -> Tensor:
    """Rescale a rank's mean over its ``count`` rows so that the mean over ranks is the global mean.

    Returns ``local_mean · W · count / Σ_ranks count``: averaged over ranks (as DDP averages gradients)
    this is ``Σ_r count_r · mean_r / Σ_r count_r``, the mean over all rows of the global batch, i.e. the
    loss one process computes on the whole batch (HAP-VR Eq. 12 averages AP over queries). Ranks with
    ``count = 0`` contribute zero. In a single process the input is returned.

    Args:
        local_mean: 0-d tensor, this rank's mean over its rows (e.g. a ranking loss on its query rows).
        count: the number of rows the mean is over (:func:`count_ranked_queries`).

    Examples:
        >>> import torch
        >>> global_mean(torch.tensor(0.5), 3)
        tensor(0.5000)
    """
    if not isinstance(local_mean, Tensor) or local_mean.ndim != 0:
        raise ValueError(f"local_mean must be a 0-d tensor, got {getattr(local_mean, 'shape', type(local_mean))}")
    count_t = torch.as_tensor(count, dtype=torch.float64, device=local_mean.device)
    if count_t.ndim != 0 or count_t < 0:
        raise ValueError(f"count must be a non-negative scalar, got {count!r}")
    if not is_distributed() or get_world_size() == 1:
        return local_mean
    total = count_t.clone()
    dist.all_reduce(total, op=dist.ReduceOp.SUM)
    if total == 0:
        return local_mean * 0
    return local_mean * (get_world_size() * count_t / total).to(local_mean.dtype)


def all_reduce_mean(value: Tensor | float) -> float:
    """Mean of a scalar over ranks, as a float (for logging the global loss on rank 0).

    Examples:
        >>> all_reduce_mean(2.5)
        2.5
    """
    t = torch.as_tensor(value, dtype=torch.float64).detach().clone().cpu()
    if t.numel() != 1:
        raise ValueError(f"value must be a scalar, got shape {tuple(t.shape)}")
    if is_distributed() and get_world_size() > 1:
        if dist.get_backend() == "nccl":
            t = t.to(rank_device())
        dist.all_reduce(t, op=dist.ReduceOp.SUM)
        t = t / get_world_size()
    return float(t)


def average_gradients(module: nn.Module) -> None:
    """Average every parameter gradient over ranks in place: what ``DistributedDataParallel`` does.

    For a model not wrapped in DDP (the hapref trainer syncs by hand, so pipelines may call any method of
    the model, not only ``forward``); a no-op in one process. Parameters without a gradient on this rank
    but with one on another get a zero gradient first, so every rank reduces the same tensors; parameters
    no rank used keep no gradient (the optimiser skips them, as in one process).

    Examples:
        >>> import torch
        >>> layer = torch.nn.Linear(2, 1)
        >>> layer(torch.ones(1, 2)).sum().backward()
        >>> average_gradients(layer)  # one process: unchanged
        >>> layer.weight.grad
        tensor([[1., 1.]])
    """
    if not is_distributed() or get_world_size() == 1:
        return
    params = [p for p in module.parameters() if p.requires_grad]
    if not params:
        return
    used = torch.tensor([p.grad is not None for p in params], dtype=torch.float32, device=params[0].device)
    dist.all_reduce(used, op=dist.ReduceOp.SUM)
    params = [p for p, n in zip(params, used.tolist()) if n > 0]    # unused everywhere: no gradient, as in 1 process
    for p in params:       # a parameter unused on this rank still takes part (the others used it)
        if p.grad is None:
            p.grad = torch.zeros_like(p)
    by_dtype: dict[tuple[torch.dtype, torch.device], list[nn.Parameter]] = {}
    for p in params:
        by_dtype.setdefault((p.grad.dtype, p.grad.device), []).append(p)
    for group in by_dtype.values():       # one all_reduce per dtype and device, not one per parameter
        flat = torch.cat([p.grad.reshape(-1) for p in group])
        dist.all_reduce(flat, op=dist.ReduceOp.SUM)
        flat /= get_world_size()
        for p, part in zip(group, flat.split([p.numel() for p in group])):
            p.grad.copy_(part.view_as(p.grad))


def broadcast_object(obj: Any, src: int = 0) -> Any:
    """Rank ``src``'s ``obj`` on every rank (e.g. a run folder name or a config chosen on rank 0).

    Examples:
        >>> broadcast_object({"run": "a"})
        {'run': 'a'}
    """
    if not is_distributed() or get_world_size() == 1:
        return obj
    box = [obj if get_rank() == src else None]
    dist.broadcast_object_list(box, src=src)
    return box[0]


def rank_seed(seed: int, rank: int | None = None) -> int:
    """A seed of its own for each rank, derived from the run's ``seed`` (NumPy ``SeedSequence`` spawning).

    Rank streams are statistically independent, and the same (seed, rank) always gives the same stream,
    so a resumed run at the same world size draws the same batches.

    Examples:
        >>> rank_seed(0, 0) == rank_seed(0, 0), rank_seed(0, 0) == rank_seed(0, 1)
        (True, False)
    """
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise ValueError(f"seed must be a non-negative int, got {seed!r}")
    rank = get_rank() if rank is None else rank
    state = np.random.SeedSequence(seed, spawn_key=(rank,)).generate_state(2, dtype=np.uint32)
    return int(state[0]) << 32 | int(state[1])


def rank_generator(seed: int, rank: int | None = None) -> torch.Generator:
    """A CPU ``torch.Generator`` seeded with :func:`rank_seed` (each rank its own stream).

    Examples:
        >>> a, b = rank_generator(3, rank=0), rank_generator(3, rank=1)
        >>> torch.equal(torch.rand(4, generator=a), torch.rand(4, generator=b))
        False
    """
    return torch.Generator().manual_seed(rank_seed(seed, rank))


def shard_indices(n: int, rank: int | None = None, world: int | None = None) -> range:
    """The contiguous block of ``range(n)`` this rank handles; block sizes differ by at most one.

    Concatenating the blocks of ranks 0..W−1 gives ``range(n)`` in order (evaluation shards queries or
    database videos this way and gathers results in rank order). Defaults: this process's rank and world.

    Examples:
        >>> [shard_indices(10, r, 3) for r in range(3)]
        [range(0, 4), range(4, 7), range(7, 10)]
    """
    rank = get_rank() if rank is None else rank
    world = get_world_size() if world is None else world
    for name, v in (("n", n), ("rank", rank), ("world", world)):
        if not isinstance(v, int) or isinstance(v, bool):
            raise ValueError(f"{name} must be an int, got {v!r}")
    if n < 0 or world < 1 or not 0 <= rank < world:
        raise ValueError(f"need n >= 0, world >= 1 and 0 <= rank < world, got n={n}, rank={rank}, world={world}")
    base, extra = divmod(n, world)
    start = rank * base + min(rank, extra)
    return range(start, start + base + (rank < extra))


__all__: Sequence[str] = [
    "AllGatherWithGrad", "all_gather_tensor", "all_gather_with_grad", "all_reduce_mean", "average_gradients",
    "barrier", "broadcast_object", "count_ranked_queries", "destroy_distributed", "gather_batch",
    "get_local_rank", "get_rank", "get_world_size", "global_mean", "init_distributed", "is_distributed",
    "is_main_process", "rank_device", "rank_generator", "rank_rows", "rank_seed", "shard_indices",
]
