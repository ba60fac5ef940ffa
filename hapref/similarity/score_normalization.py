"""Score normalisation for retrieval: make one query's scores comparable with another query's.

mAP ranks each query's list on its own, so any increasing map of a query's row leaves its AP unchanged. μAP
(HAP-VR Sec. 4.1) pools the (query, video) pairs of *all* queries into one ranking, so it also asks that a
score mean the same thing from one query to the next: a query whose unrelated videos all score 0.6 pushes
them above another query's copies at 0.5. Two ways to recalibrate a score matrix ``scores [Q, M]`` (query ×
database, higher = more similar) before pooling:

* :func:`zscore_rows` — the per-query z-score of a score row (Eq. ``eq-score-zscore``),

  .. math:: z_{qj} = (s_{qj} - \\mu_q) / \\sigma_q,

  with ``μ_q`` and ``σ_q`` the mean and the (population) standard deviation of row ``q`` over its kept
  entries; a constant row (``σ_q = 0``) becomes all zeros, not NaN.
* :func:`background_normalize` — background-set normalisation (Eq. ``eq-score-background``, as in SSCD,
  Pizzi et al. 2022): ``s_qj − β · mean of the k largest scores of q against a background set`` of videos
  known to be unrelated to every query, ``background [Q, B]``; the subtracted term estimates how high
  query ``q`` scores an unrelated video.

Both are increasing affine maps of each row, so per-query rankings, AP and mAP are unchanged and only μAP
moves. They act on *scores of videos*; the ``normalize="zscore"`` option of
:mod:`hapref.similarity.alignment` is a different operation, the z-score of one pair's *frame-to-frame*
matrix before it is aligned. :func:`normalize_scores` picks one by name (:data:`SCORE_NORMALIZATIONS`), as
:func:`hapref.evaluation.evaluate` does with ``normalize=``.
"""

from __future__ import annotations

import torch
from torch import Tensor

from hapref.validation import check_binary, check_float_tensor

__all__ = ["SCORE_NORMALIZATIONS", "background_normalize", "normalize_scores", "zscore_rows"]

#: The names :func:`normalize_scores` accepts (``None``: the scores as they are).
SCORE_NORMALIZATIONS = (None, "zscore", "background")


def _scores(scores: object, name: str = "scores") -> Tensor:
    scores = check_float_tensor(scores, name, ndim=2, finite=True)
    if scores.shape[1] == 0:
        raise ValueError(f"{name} must be [Q, M] with M >= 1 videos per row, got shape {tuple(scores.shape)}")
    return scores


def _work(x: Tensor) -> Tensor:
    """float32 at least for the row statistics (a float16 row's sum of squares overflows)."""
    return x if x.dtype in (torch.float32, torch.float64) else x.float()


def zscore_rows(scores: Tensor, ignore: Tensor | None = None) -> Tensor:
    """The per-query z-score of each row of ``scores``: ``z_qj = (s_qj − μ_q) / σ_q`` (``eq-score-zscore``).

    Args:
        scores: ``[Q, M]`` float tensor (or NumPy array), query × database similarities; finite.
        ignore: optional ``[Q, M]`` bool, True = an entry left out of the row's mean and standard deviation
            (e.g. the query itself); it is still mapped with its row's statistics.

    Returns:
        ``[Q, M]`` in the dtype and on the device of ``scores``. ``σ_q`` is the population standard deviation
        (divided by the number of kept entries). A row whose kept entries are all equal (``σ_q`` zero or below
        the rounding of its values) or that keeps no entry becomes all zeros.

    Examples:
        >>> s = torch.tensor([[1.0, 2.0, 3.0], [5.0, 5.0, 5.0]], dtype=torch.float64)
        >>> zscore_rows(s)                      # sigma of (1, 2, 3) is sqrt(2/3); a constant row -> 0
        tensor([[-1.2247,  0.0000,  1.2247],
                [ 0.0000,  0.0000,  0.0000]], dtype=torch.float64)
        >>> zscore_rows(torch.tensor([[0.0, 2.0, 9.0]]), ignore=torch.tensor([[False, False, True]]))
        tensor([[-1.,  1.,  8.]])
    """
    scores = _scores(scores)
    keep = torch.ones_like(scores, dtype=torch.bool) if ignore is None else ~check_binary(ignore, "ignore",
                                                                                          scores.shape)
    keep = keep.to(scores.device)
    s = _work(scores)
    n = keep.sum(dim=1, keepdim=True)
    mean = torch.where(keep, s, 0).sum(dim=1, keepdim=True) / n.clamp_min(1)
    centred = s - mean
    std = (torch.where(keep, centred, 0).square().sum(dim=1, keepdim=True) / n.clamp_min(1)).sqrt()
    # equal values summed in floating point leave a residue of a few ulps: that is still a constant row
    scale = torch.where(keep, s.abs(), 0).amax(dim=1, keepdim=True)
    flat = (std <= 8 * torch.finfo(s.dtype).eps * scale) | (n == 0)
    z = torch.where(flat, torch.zeros_like(s), centred / torch.where(flat, torch.ones_like(std), std))
    return z.to(scores.dtype)


def background_normalize(scores: Tensor, background: Tensor, k: int = 10, beta: float = 1.0) -> Tensor:
    """Background-set normalisation (SSCD): ``s_qj − β · (1/k) Σ_{b ∈ top-k(q)} s_qb`` (``eq-score-background``).

    Args:
        scores: ``[Q, M]`` float tensor (or NumPy array), query × database similarities; finite.
        background: ``[Q, B]`` similarities of the same queries, by the same method, to ``B >= k`` background
            videos (unrelated to every query); finite.
        k: how many of each query's most similar background videos are averaged (>= 1).
        beta: weight of the subtracted term (SSCD's β; 1 subtracts the whole estimate), >= 0.

    Returns:
        ``[Q, M]`` in the dtype and on the device of ``scores``.

    Examples:
        >>> s = torch.tensor([[0.9, 0.5], [0.6, 0.55]], dtype=torch.float64)
        >>> bg = torch.tensor([[0.5, 0.4, 0.0], [0.2, 0.1, 0.0]], dtype=torch.float64)
        >>> background_normalize(s, bg, k=2)        # row 0 minus 0.45, row 1 minus 0.15
        tensor([[0.4500, 0.0500],
                [0.4500, 0.4000]], dtype=torch.float64)
    """
    scores = _scores(scores)
    background = _scores(background, "background").to(scores.device)
    if background.shape[0] != scores.shape[0]:
        raise ValueError(f"background must hold one row per query: [{scores.shape[0]}, B], got shape "
                         f"{tuple(background.shape)}")
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be an integer >= 1, got {k!r}")
    if k > background.shape[1]:
        raise ValueError(f"k must be at most the {background.shape[1]} background videos, got {k}")
    if not isinstance(beta, (int, float)) or isinstance(beta, bool) or not beta >= 0 or beta == float("inf"):
        raise ValueError(f"beta must be a finite number >= 0, got {beta!r}")
    level = _work(background).topk(k, dim=1).values.mean(dim=1, keepdim=True)
    return (_work(scores) - beta * level).to(scores.dtype)


def normalize_scores(scores: Tensor, how: str | None = None, background: Tensor | None = None, k: int = 10,
                     ignore: Tensor | None = None) -> Tensor:
    """``scores [Q, M]`` normalised by name: ``None`` (unchanged), ``"zscore"`` (:func:`zscore_rows`, with
    ``ignore``) or ``"background"`` (:func:`background_normalize` with ``background [Q, B]`` and ``k``).

    Examples:
        >>> s = torch.tensor([[1.0, 3.0]])
        >>> normalize_scores(s), normalize_scores(s, "zscore")
        (tensor([[1., 3.]]), tensor([[-1.,  1.]]))
        >>> normalize_scores(s, "background")
        Traceback (most recent call last):
        ...
        ValueError: how='background' needs background, the [Q, B] scores of the queries against a background set
    """
    if how not in SCORE_NORMALIZATIONS:
        raise ValueError(f"how must be one of {SCORE_NORMALIZATIONS}, got {how!r}")
    if how is None:
        return _scores(scores)
    if how == "zscore":
        return zscore_rows(scores, ignore)
    if background is None:
        raise ValueError("how='background' needs background, the [Q, B] scores of the queries against a "
                         "background set")
    return background_normalize(scores, background, k)
