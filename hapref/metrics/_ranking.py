"""Row-wise ranking helpers shared by the metrics: sort by score, find groups of tied scores.

Every metric ranks each row by descending score. Ignored items are moved behind all
kept items, so a rank ``j`` (0-based) among the kept items is simply position ``j``.
"""

from __future__ import annotations

import torch
from torch import Tensor


def work_dtype(dtype: torch.dtype) -> torch.dtype:
    """Accumulation dtype: float64 stays float64, float16/bfloat16/float32 compute in float32.

    Examples:
        >>> work_dtype(torch.float16), work_dtype(torch.float64)
        (torch.float32, torch.float64)
    """
    return torch.promote_types(dtype, torch.float32)


def rank_rows(scores: Tensor, keep: Tensor) -> Tensor:
    """Per-row permutation [Q,M]: kept items by descending score (stable), then ignored ones.

    Examples:
        >>> rank_rows(torch.tensor([[0.2, 0.9, 0.5]]), torch.tensor([[True, True, False]]))  # ignored item last
        tensor([[1, 0, 2]])
    """
    by_score = torch.argsort(scores, dim=-1, descending=True, stable=True)
    if bool(keep.all()):
        return by_score
    ignored_first_key = (~keep.gather(-1, by_score)).to(torch.uint8)
    kept_first = torch.argsort(ignored_first_key, dim=-1, stable=True)
    return by_score.gather(-1, kept_first)


def tie_groups(sorted_scores: Tensor, sorted_keep: Tensor) -> tuple[Tensor, Tensor]:
    """0-based (first, last) position of the tie group each sorted position belongs to, [Q,M] each.

    A group is a maximal run of equal scores among kept items; ignored items never share a group
    with kept ones.

    Examples:
        >>> tie_groups(torch.tensor([[0.9, 0.5, 0.5, 0.1]]), torch.ones(1, 4, dtype=torch.bool))
        (tensor([[0, 1, 1, 3]]), tensor([[0, 2, 2, 3]]))
    """
    m = sorted_scores.shape[-1]
    pos = torch.arange(m, device=sorted_scores.device).expand_as(sorted_scores)
    same_as_next = (sorted_scores[..., 1:] == sorted_scores[..., :-1]) & (
        sorted_keep[..., 1:] == sorted_keep[..., :-1])
    edge = torch.ones_like(sorted_keep[..., :1])
    is_last = torch.cat([~same_as_next, edge], dim=-1)
    is_first = torch.cat([edge, ~same_as_next], dim=-1)
    last = torch.where(is_last, pos, m - 1).flip(-1).cummin(-1).values.flip(-1)
    first = torch.where(is_first, pos, 0).cummax(-1).values
    return first, last


def row_chunks(n_rows: int, n_cols: int, max_elements: int = 1 << 24) -> list[slice]:
    """Slices over rows so that one chunk holds at most ``max_elements`` entries (bounds memory).

    Examples:
        >>> row_chunks(5, 4, max_elements=8)
        [slice(0, 2, None), slice(2, 4, None), slice(4, 5, None)]
    """
    step = max(1, max_elements // max(n_cols, 1))
    return [slice(i, min(i + step, n_rows)) for i in range(0, n_rows, step)]


def check_nonempty(scores: Tensor) -> None:
    """Raise ValueError when ``scores`` has no entries.

    Examples:
        >>> check_nonempty(torch.zeros(2, 0))
        Traceback (most recent call last):
        ...
        ValueError: scores must not be empty, got shape (2, 0)
    """
    if scores.numel() == 0:
        raise ValueError(f"scores must not be empty, got shape {tuple(scores.shape)}")


def kept_entries(scores: Tensor, ignore: Tensor | None) -> Tensor:
    """Entries that take part in the ranking: the complement of ``ignore`` (True = ignore), or all.

    Examples:
        >>> kept_entries(torch.zeros(1, 2), torch.tensor([[True, False]]))
        tensor([[False,  True]])
    """
    return torch.ones(scores.shape, dtype=torch.bool, device=scores.device) if ignore is None else ~ignore
