"""Top-N metrics of the video-hashing literature: mAP@N (two conventions) and GMAP.

Hashing evaluation ranks the database by Hamming distance and scores only the first N results.
Pass ``scores = -hamming_distance`` (higher = closer). Hamming distances tie massively, so the
order inside a tie group matters for a truncated list: here ties keep their database order
(stable sort, lower index first), a deterministic stand-in for the released code's unstable
``np.argsort`` (the released AutoSSVH code, https://github.com/EliSpectre/CVPR25-AutoSSVH).
:func:`hapref.metrics.map_at_n_tie_aware` gives the expected value over tie orders instead; the book's
chapter 1 ("Ties: three conventions") compares the conventions.
"""

from __future__ import annotations

from collections.abc import Sequence
from numbers import Integral

import torch
from torch import Tensor

from hapref.metrics._ranking import check_nonempty, kept_entries, rank_rows, row_chunks, work_dtype
from hapref.validation import check_scores_relevance, renamed_keywords

CONVENTIONS = ("standard", "autossvh")
AUTOSSVH_NS = (5, 20, 40, 60, 80, 100)


@renamed_keywords(mask="ignore")
def map_at_ns(scores: Tensor, relevance: Tensor, ns: Sequence[int], convention: str = "standard",
              ignore: Tensor | None = None) -> Tensor:
    """mAP@N for several N from one sort: a [len(ns)] tensor (see :func:`map_at_n`).

    AutoSSVH's evaluation (the released AutoSSVH code, https://github.com/EliSpectre/CVPR25-AutoSSVH).

    Examples:
        >>> scores = -torch.tensor([[0.0, 2.0, 1.0, 3.0]])
        >>> map_at_ns(scores, torch.tensor([[1, 0, 0, 1]]), ns=[1, 4])
        tensor([1.0000, 0.7500])
    """
    if convention not in CONVENTIONS:
        raise ValueError(f"convention must be one of {CONVENTIONS}, got {convention!r}")
    if len(ns) == 0 or any(not isinstance(n, Integral) or isinstance(n, bool) or n < 1 for n in ns):
        raise ValueError(f"n must be a positive int (or a non-empty sequence of them), got {ns!r}")
    scores, relevance, ignore = check_scores_relevance(scores, relevance, ignore, ndim=2)
    check_nonempty(scores)
    keep = kept_entries(scores, ignore)
    has_relevant = (relevance & keep).any(-1)
    if not has_relevant.any():
        raise ValueError("relevance has no relevant (not ignored) item in any query: mAP@N is undefined")
    scores, relevance, keep = scores[has_relevant], relevance[has_relevant], keep[has_relevant]
    aps = [ap_at_ns_per_row(scores[rows], relevance[rows], keep[rows], ns, convention)
           for rows in row_chunks(*scores.shape)]
    return torch.cat(aps).mean(0)


def ap_at_ns_per_row(scores: Tensor, relevance: Tensor, keep: Tensor, ns: Sequence[int],
                     convention: str) -> Tensor:
    """AP@N of every row for every N: [Q, len(ns)]. AutoSSVH's evaluation (the released AutoSSVH code, https://github.com/EliSpectre/CVPR25-AutoSSVH).

    Examples:
        >>> keep = torch.ones(1, 3, dtype=torch.bool)
        >>> relevance = torch.tensor([[False, True, True]])
        >>> ap_at_ns_per_row(torch.tensor([[0.9, 0.5, 0.1]]), relevance, keep, [1, 3], "standard")
        tensor([[0.0000, 0.5833]])
    """
    dtype = work_dtype(scores.dtype)
    top = min(max(ns), scores.shape[-1])
    order = rank_rows(scores, keep)[:, :top]
    rel = (relevance & keep).gather(-1, order).to(dtype)
    hits = rel.cumsum(-1)
    ranks = torch.arange(1, top + 1, device=scores.device, dtype=dtype)
    precision_sum = (rel * hits / ranks).cumsum(-1)
    cut = torch.tensor([min(int(n), top) - 1 for n in ns], device=scores.device)
    p = precision_sum[:, cut]
    if convention == "standard":
        return p / hits[:, cut].clamp_min(1)
    return p / torch.tensor([int(n) for n in ns], device=scores.device, dtype=dtype)


@renamed_keywords(mask="ignore")
def map_at_n(scores: Tensor, relevance: Tensor, n: int, convention: str = "standard",
             ignore: Tensor | None = None) -> Tensor:
    """mAP@N, the hashing retrieval metric of AutoSSVH Sec. 4.2, "Evaluation Protocols" (the released AutoSSVH code, https://github.com/EliSpectre/CVPR25-AutoSSVH).

    For one query let ``rel_r`` mark a relevant item at rank r, ``P@r`` the precision of the
    first r results and ``p = Σ_{r ≤ N} P@r · rel_r``. Then

    * ``convention="standard"``: ``AP@N = p / (number of relevant items in the top N)``, and 0 when
      there is none — the usual hashing convention (e.g. the DeepHash evaluation code); a list
      whose hits all come first scores 1. (Information retrieval's truncated AP divides by
      ``min(R, N)`` instead, R the number of relevant items; none of the four papers uses it.)
    * ``convention="autossvh"``: ``AP@N = p / N`` — what the released AutoSSVH / ConMH / S5VH code
      computes, so the mAP@N and GMAP numbers printed in those papers use this convention. It is
      never above the standard value and equals it when all (or none) of the top N are relevant.

    mAP@N is the mean over queries. Queries without any relevant (not ignored) item are skipped
    (in the AutoSSVH protocol this never happens: the query itself is in the database).

    Args:
        scores: [Q,M] float similarities (``-hamming`` for hash codes).
        relevance: [Q,M] bool or 0/1 labels.
        n: cut-off N ≥ 1 (lists shorter than N are scored in full; "autossvh" still divides by N).
        convention: "standard" or "autossvh".
        ignore: optional [Q,M] bool, True = leave the entry out of the ranking.

    Returns:
        0-d tensor. Ties keep database order (see the module docstring).

    Examples:
        >>> scores = -torch.tensor([[0.0, 2.0, 1.0, 3.0]])  # minus Hamming distances
        >>> relevance = torch.tensor([[1, 0, 1, 0]])
        >>> map_at_n(scores, relevance, n=3), map_at_n(scores, relevance, n=3, convention="autossvh")  # p/hits, p/N
        (tensor(1.), tensor(0.6667))
    """
    if not isinstance(n, Integral) or isinstance(n, bool):
        raise ValueError(f"n must be a positive int, got {n!r}")
    return map_at_ns(scores, relevance, [n], convention, ignore)[0]


@renamed_keywords(mask="ignore")
def gmap(scores: Tensor, relevance: Tensor, ns: Sequence[int] = AUTOSSVH_NS,
         convention: str = "autossvh", ignore: Tensor | None = None) -> Tensor:
    """GMAP exactly as printed in AutoSSVH Eq. 21: ``sqrt( Σ_{N ∈ ns} (mAP@N)² )``.

    The paper calls it a geometric mean, but the printed formula is the root of a *sum of
    squares* (the Euclidean norm of the vector of mAP@N values): it is not a mean of any kind and
    ranges over ``[0, sqrt(len(ns))]`` — with six cut-offs up to about 2.449, which is why GMAP values
    above 1 appear in the paper's tables. No GMAP code was released (the released AutoSSVH code, https://github.com/EliSpectre/CVPR25-AutoSSVH).

    Args:
        scores, relevance, ignore: as in :func:`map_at_n`.
        ns: the cut-offs, by default AutoSSVH's {5, 20, 40, 60, 80, 100}.
        convention: mAP@N convention; default "autossvh", the one behind the paper's numbers.

    Returns:
        0-d tensor.

    Examples:
        >>> scores = -torch.tensor([[0.0, 2.0, 1.0, 3.0], [1.0, 0.0, 2.0, 3.0]])
        >>> gmap(scores, torch.tensor([[1, 0, 1, 0], [0, 1, 0, 0]]), ns=[2, 4])
        tensor(0.8385)
    """
    return map_at_ns(scores, relevance, list(ns), convention, ignore).square().sum().sqrt()
