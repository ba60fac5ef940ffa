"""Normalised discounted cumulative gain for graded relevance (Radial loss paper, "Evaluation Metrics").

``DCG@k = Σ_{r ≤ k} g_r / log2(r + 1)`` over the ranked list (rank r from 1), and
``NDCG@k = DCG@k / IDCG@k`` with IDCG the DCG of the ideal order (gains sorted descending).
Gains are used as given (linear gain, as ``sklearn.metrics.ndcg_score``); pass ``2**rel - 1``
for the exponential variant. The Radial paper grades positive > intermediate > negative, e.g.
gains 2 / 1 / 0.
"""

from __future__ import annotations

import torch
from torch import Tensor

from hapref.metrics._ranking import check_nonempty, kept_entries, rank_rows, row_chunks, tie_groups, work_dtype
from hapref.validation import as_tensor, check_binary, check_float_tensor, renamed_keywords


def check_gains(gains: object, scores: Tensor) -> Tensor:
    """Return ``gains`` (tensor or NumPy array) as a float tensor on the scores' device; ValueError unless
    finite, ≥ 0 and of the scores' shape. The graded relevance of the Radial paper's NDCG.

    Examples:
        >>> import numpy as np
        >>> check_gains(np.array([2, 1, 0]), torch.zeros(3))
        tensor([2., 1., 0.])
    """
    gains = as_tensor(gains)
    if not isinstance(gains, Tensor):
        raise TypeError(f"gains must be a torch.Tensor or a NumPy array, got {type(gains).__name__}")
    if gains.shape != scores.shape:
        raise ValueError(f"gains must have shape {tuple(scores.shape)} (that of the scores), got {tuple(gains.shape)}")
    if gains.is_complex():
        raise ValueError(f"gains must be real, got {gains.dtype}")
    gains = gains.to(device=scores.device, dtype=work_dtype(scores.dtype))
    if not torch.isfinite(gains).all() or (gains < 0).any():
        raise ValueError("gains must be finite and ≥ 0")
    return gains


def dcg_per_row(scores: Tensor, gains: Tensor, keep: Tensor, k: int | None) -> tuple[Tensor, Tensor]:
    """Tie-averaged DCG@k and ideal DCG@k ``[Q]`` each of every row of [Q,M] inputs. The NDCG of Radial Table 2.

    ``keep`` is the bool [Q,M] complement of ``ignore``; ``gains`` float [Q,M].

    Examples:
        >>> dcg, ideal = dcg_per_row(torch.tensor([[0.9, 0.5]]), torch.tensor([[0.0, 1.0]]),
        ...                          torch.ones(1, 2, dtype=torch.bool), None)
        >>> round(dcg.item(), 4), ideal.item()  # the gain sits at rank 2: 1 / log2(3)
        (0.6309, 1.0)
    """
    dtype = gains.dtype
    m = scores.shape[-1]
    order = rank_rows(scores, keep)
    sorted_scores, sorted_keep = scores.gather(-1, order), keep.gather(-1, order)
    sorted_gains = (gains * keep).gather(-1, order)
    discount = 1.0 / torch.log2(torch.arange(2, m + 2, device=scores.device, dtype=dtype))
    if k is not None:
        discount[k:] = 0
    first, last = tie_groups(sorted_scores, sorted_keep)
    cum = torch.cat([torch.zeros_like(sorted_gains[:, :1]), sorted_gains.cumsum(-1)], dim=-1)
    group_mean = (cum.gather(-1, last + 1) - cum.gather(-1, first)) / (last - first + 1).to(dtype)
    dcg = (group_mean * discount).sum(-1)
    ideal = ((gains * keep).sort(-1, descending=True).values * discount).sum(-1)
    return dcg, ideal


@renamed_keywords(mask="ignore")
def ndcg(scores: Tensor, gains: Tensor, k: int | None = None, ignore: Tensor | None = None) -> Tensor:
    """Mean NDCG@k over queries with graded relevance, Radial loss paper, "Evaluation Metrics" (Radial loss paper, "Evaluation Metrics").

    Args:
        scores: [Q,M] (or [M] for one query) float similarities.
        gains: same shape, graded relevance ≥ 0 (int or float), e.g. 2 / 1 / 0 for
            positive / intermediate / negative.
        k: optional cut-off (only the first k ranks count); None = whole list.
        ignore: optional bool, True = leave the entry out of the ranking (e.g. the query itself).

    Returns:
        The mean NDCG, a 0-d tensor. A group of tied scores shares its mean gain over the group's ranks
        (McSherry & Najork 2008), equal to ``sklearn.metrics.ndcg_score``'s default. Queries whose
        gains are all 0 are skipped (scikit-learn scores them 0 instead).

    Raises:
        ValueError: bad inputs, k < 1, or every query has zero ideal DCG.

    Examples:
        >>> scores = torch.tensor([[0.9, 0.8, 0.1], [0.1, 0.5, 0.9]])
        >>> gains = torch.tensor([[2, 1, 0], [2, 1, 0]])  # positive / intermediate / negative
        >>> ndcg(scores, gains)  # the first query is ideal, the second fully reversed
        tensor(0.8100)
        >>> import numpy as np
        >>> ndcg(np.array([0.3, 0.9]), np.array([1, 0]), k=1)  # NumPy arrays work too
        tensor(0., dtype=torch.float64)
    """
    scores = check_float_tensor(scores, "scores", (1, 2))
    check_nonempty(scores)
    gains = check_gains(gains, scores)
    if k is not None and (not isinstance(k, int) or isinstance(k, bool) or k < 1):
        raise ValueError(f"k must be a positive int or None, got {k!r}")
    if ignore is not None:
        ignore = check_binary(ignore, "ignore", scores.shape).to(scores.device)
    keep = kept_entries(scores, ignore)
    if scores.ndim == 1:
        scores, gains, keep = scores[None], gains[None], keep[None]
    values = []
    for rows in row_chunks(*scores.shape):
        dcg, ideal = dcg_per_row(scores[rows], gains[rows], keep[rows], k)
        values.append(torch.stack([dcg, ideal], -1))
    dcg, ideal = torch.cat(values).unbind(-1)
    useful = ideal > 0
    if not useful.any():
        raise ValueError("gains are 0 for every (not ignored) item of every query: NDCG is undefined")
    return (dcg[useful] / ideal[useful]).mean()
