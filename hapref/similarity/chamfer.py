"""Chamfer, TopK-Chamfer, symmetric Chamfer and mean-pooled similarity of similarity tensors.

Conventions: a similarity tensor ``sim [..., Q, T]`` compares Q query items (frames or regions)
with T target items; ``valid`` (broadcastable to ``sim``, True = valid) marks real entries, so
padded frames never count. Rows without any valid entry are left out of the query average; a
pair with no valid row scores 0.
"""

from __future__ import annotations

import torch
from torch import Tensor

from hapref.validation import check_flags, check_float_tensor, check_rate, renamed_keywords


def _check(sim: Tensor, valid: Tensor | None) -> Tensor | None:
    check_float_tensor(sim, "sim", ndim=None)
    if sim.ndim < 2:
        raise ValueError(f"sim must have shape [..., Q, T], got {tuple(sim.shape)}")
    if sim.shape[-1] == 0 or sim.shape[-2] == 0:
        raise ValueError(f"sim must have at least one query and one target item ([..., Q >= 1, T >= 1]), "
                         f"got shape {tuple(sim.shape)}")
    if valid is None:
        return None
    valid = check_flags(valid, "valid", broadcast_to=sim.shape, meaning="True = a real (query, target) cell")
    return valid.to(device=sim.device).expand_as(sim)


@renamed_keywords(query_mask="query_valid", target_mask="target_valid")
def pair_valid(query_valid: Tensor | None, target_valid: Tensor | None) -> Tensor | None:
    """Valid cells ``[..., Q, T]`` (True = both frames real) from valid-frame flags ``[..., Q]`` and ``[..., T]``; either may be None.

    Masks of padded frames for HAP-VR Eq. 3 and Eq. 5.

    Examples:
        >>> pair_valid(torch.tensor([True, False]), torch.tensor([True, True, False])).int()
        tensor([[1, 1, 0],
                [0, 0, 0]], dtype=torch.int32)
    """
    if query_valid is not None:
        query_valid = check_flags(query_valid, "query_valid")
    if target_valid is not None:
        target_valid = check_flags(target_valid, "target_valid")
    if query_valid is None and target_valid is None:
        return None
    if query_valid is None:
        return target_valid.bool().unsqueeze(-2)
    if target_valid is None:
        return query_valid.bool().unsqueeze(-1)
    return query_valid.bool().unsqueeze(-1) & target_valid.bool().unsqueeze(-2)


@renamed_keywords(mask="valid")
def topk_chamfer(sim: Tensor, k: float = 0.0, valid: Tensor | None = None) -> Tensor:
    """TopK-Chamfer similarity ``[...]`` of ``sim [..., Q, T]`` (HAP-VR Eq. 3 spatially, Eq. 5 temporally).

    For each query row keep the top ``K = max(1, round(k · n))`` values along the last axis
    (``n`` = valid entries of the row; ``round`` is half-to-even like Python's), average them,
    then average over the valid query rows. ``k -> 0`` is Chamfer (max, Eq. 2 / TCA Eq. 8),
    ``k = 1`` the plain mean. With HAP-VR's released rates K is 1 in most training shapes
    (spatial 0.1 · 9 regions, temporal 0.03 · 7 frames after ψ), so TopK only differs from Chamfer
    on long targets or with larger rates.

    Args:
        sim: ``[..., Q, T]`` float similarities (Q, T ≥ 1), e.g. a ``[Tx, Ty]`` frame-to-frame matrix of
            one video pair from :func:`hapref.similarity.frame_to_frame`.
        k: rate in [0, 1] (a float, not a tensor).
        valid: optional bool, broadcastable to ``sim``, True = a real (query, target) cell.

    Returns:
        ``[...]`` scores in the dtype of ``sim``.

    Examples:
        >>> sim = torch.tensor([[0.9, 0.1, 0.5], [0.2, 0.4, 0.3]])
        >>> topk_chamfer(sim, 0.0)  # Chamfer: mean of the row maxima 0.9 and 0.4
        tensor(0.6500)
        >>> topk_chamfer(sim, 0.67)  # the top 2 of each row: (0.9 + 0.5) / 2 and (0.4 + 0.3) / 2
        tensor(0.5250)
        >>> topk_chamfer(sim, 0.0, valid=torch.tensor([True, False, True]))  # 2nd target is padding: (0.9 + 0.3) / 2
        tensor(0.6000)
    """
    if isinstance(k, bool) or not isinstance(k, (int, float)):
        raise TypeError(f"k must be a float rate in [0, 1], got {type(k).__name__}; topk_chamfer takes one "
                        "similarity tensor sim [..., Q, T] (to compare two videos, build it with "
                        "hapref.similarity.frame_to_frame or pairwise_cosine first)")
    valid = _check(sim, valid)
    if not 0.0 <= k <= 1.0:
        raise ValueError(f"k must be a rate in [0, 1], got {k}")
    return reduce_topk_chamfer(sim, k, valid)


def reduce_topk_chamfer(sim: Tensor, k: float, valid: Tensor | None = None) -> Tensor:
    """:func:`topk_chamfer` without input checks, for hot paths that built ``sim`` and ``valid`` themselves.

    HAP-VR Eq. 3 and Eq. 5; ``valid`` must already have the shape of ``sim``. Only ``k`` is checked (a rate in
    [0, 1]; a Python check, no tensor scan).

    Examples:
        >>> reduce_topk_chamfer(torch.tensor([[0.9, 0.1], [0.2, 0.4]]), 1.0)
        tensor(0.4000)
    """
    check_rate(k, "k")
    if valid is None:
        top = max(1, round(k * sim.shape[-1]))
        rows = sim.amax(dim=-1) if top == 1 else sim.topk(top, dim=-1).values.mean(dim=-1)
        return rows.mean(dim=-1)
    n_valid = valid.sum(dim=-1)
    top = torch.round(n_valid.double() * k).clamp_min(1).long()  # float64 like Python's round(n * k)
    filled = sim.masked_fill(~valid, float("-inf"))
    k_max = int(top.max()) if top.numel() else 1
    if k_max == 1:
        rows = filled.amax(dim=-1)
    else:
        values = filled.topk(k_max, dim=-1).values
        values = torch.where(torch.isinf(values), torch.zeros_like(values), values)
        rows = values.cumsum(dim=-1).gather(-1, (top - 1).unsqueeze(-1)).squeeze(-1) / top
    row_valid = n_valid > 0
    rows = torch.where(row_valid, rows, torch.zeros_like(rows))
    return rows.sum(dim=-1) / row_valid.sum(dim=-1).clamp_min(1)


@renamed_keywords(mask="valid")
def chamfer_similarity(sim: Tensor, valid: Tensor | None = None) -> Tensor:
    """Chamfer similarity: mean over query rows of the row maximum (HAP-VR Eq. 2, TCA Eq. 8).

    ``sim [..., Q, T]`` float (Q, T ≥ 1), optional bool ``valid`` broadcastable to it; returns ``[...]``.

    Examples:
        >>> chamfer_similarity(torch.tensor([[0.9, 0.1], [0.2, 0.4]]))
        tensor(0.6500)
    """
    return topk_chamfer(sim, 0.0, valid)


@renamed_keywords(mask="valid")
def mean_similarity(sim: Tensor, valid: Tensor | None = None) -> Tensor:
    """Mean over all valid entries, i.e. TopK-Chamfer with k = 1; for frame sims this is TCA Eq. 10.

    ``sim [..., Q, T]`` float, optional bool ``valid`` broadcastable to it; returns ``[...]``.

    Examples:
        >>> mean_similarity(torch.tensor([[0.9, 0.1], [0.2, 0.4]]))
        tensor(0.4000)
    """
    return topk_chamfer(sim, 1.0, valid)


@renamed_keywords(mask="valid")
def symmetric_chamfer(sim: Tensor, valid: Tensor | None = None, k: float = 0.0) -> Tensor:
    """Symmetric (TopK-)Chamfer: average of the query->target and target->query scores (TCA Eq. 9).

    ``sim [..., Q, T]`` float, optional bool ``valid`` broadcastable to it, rate ``k``; returns ``[...]``.

    Examples:
        >>> sim = torch.tensor([[0.9, 0.1, 0.0], [0.2, 0.4, 0.0]])
        >>> symmetric_chamfer(sim)  # (0.9 + 0.4) / 2 and (0.9 + 0.4 + 0) / 3, averaged
        tensor(0.5417)
    """
    valid_t = None if valid is None else _check(sim, valid).transpose(-1, -2)
    return 0.5 * (topk_chamfer(sim, k, valid) + topk_chamfer(sim.transpose(-1, -2), k, valid_t))


def _masked_mean(x: Tensor, valid: Tensor | None, name: str) -> Tensor:
    if valid is None:
        return x.mean(dim=-2)
    valid = check_flags(valid, name, shape=x.shape[:-1])
    weights = valid.to(x.dtype).unsqueeze(-1)
    return (x * weights).sum(dim=-2) / weights.sum(dim=-2).clamp_min(1)


@renamed_keywords(x_mask="x_valid", y_mask="y_valid")
def mean_pooled_similarity(x: Tensor, y: Tensor, x_valid: Tensor | None = None, y_valid: Tensor | None = None,
                           normalize: bool = False) -> Tensor:
    """Similarity of mean-pooled frame descriptors ``x [..., Tx, D]``, ``y [..., Ty, D]`` -> ``[...]`` (TCA Eq. 10).

    Without ``normalize`` this is the dot product of the mean descriptors, which equals the mean
    of the frame-to-frame similarity matrix and therefore never exceeds the Chamfer similarity
    (mean ≤ max row by row). With ``normalize`` the means are L2-normalised first (a true
    cosine): that divides by norms ≤ 1 and can exceed Chamfer when frames disagree.

    Examples:
        >>> x = torch.tensor([[1.0, 0.0], [0.0, 1.0]])  # two orthogonal unit frames
        >>> mean_pooled_similarity(x, x), mean_pooled_similarity(x, x, normalize=True)
        (tensor(0.5000), tensor(1.0000))
    """
    check_float_tensor(x, "x", ndim=None)
    check_float_tensor(y, "y", ndim=None)
    if x.ndim < 2 or x.shape[-1] != y.shape[-1]:
        raise ValueError(f"x [..., Tx, D] and y [..., Ty, D] must share D, got {tuple(x.shape)}, {tuple(y.shape)}")
    mx, my = _masked_mean(x, x_valid, "x_valid"), _masked_mean(y, y_valid, "y_valid")
    if normalize:
        mx, my = torch.nn.functional.normalize(mx, dim=-1), torch.nn.functional.normalize(my, dim=-1)
    return (mx * my).sum(dim=-1)
