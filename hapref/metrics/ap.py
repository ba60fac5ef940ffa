"""Average precision: per list (AP), mean over queries (mAP) and pooled over queries (μAP).

Definition (HAP-VR Eq. 6 read as AP = 1 − AP risk; the S2VS evaluation code, https://github.com/gkordo/s2vs): rank the items of a list by descending score,
let ``P@k`` be the fraction of relevant items among the first ``k`` and ``R`` the number of
relevant items; then ``AP = (1/R) Σ_k P@k · rel_k``, the mean precision at the ranks of the
relevant items.

Ties: one policy per call, ``ties=``, in the words of :mod:`hapref.evaluation`:

* ``"grouped"`` (the default here; order-independent): items with equal scores form one group that is
  retrieved together, so every relevant item of a group gets the precision measured at the group's *last*
  rank. This is exactly the convention of ``sklearn.metrics.average_precision_score`` (one operating point
  per distinct score) and equals HAP-VR Eq. 6 with the step function taken as H(0) = 1. It stays the
  default of the training pipelines' metrics so that their recorded numbers keep their meaning.
* ``"expected"`` (the default of :func:`hapref.evaluation.evaluate`; order-independent): the expected AP over
  all orders of the tied items, each order equally likely.
* ``"released"``: the released evaluators' order, ``numpy.argsort(scores)[::-1]`` of each row's kept items
  in their stored order (computed with numpy on the CPU).

All three agree on tie-free scores and when every tied group is all relevant or all irrelevant. The top-N
metrics (:func:`hapref.metrics.map_at_n`) keep tied items in database order instead (a stable sort); the
book's chapter 1 ("Ties: three conventions") sets the conventions side by side on one list.
"""

from __future__ import annotations

import torch
from torch import Tensor

from hapref.metrics._ranking import check_nonempty, kept_entries, rank_rows, row_chunks, tie_groups, work_dtype
from hapref.validation import check_scores_relevance, renamed_keywords


#: Tie policies of the AP functions (module docstring); the first is their default.
TIES = ("grouped", "expected", "released")


def _check_ties(ties: object) -> str:
    if ties not in TIES:
        raise ValueError(f"ties must be one of {TIES}, got {ties!r}")
    return ties


def ap_per_row(scores: Tensor, relevance: Tensor, keep: Tensor, ties: str = "grouped") -> tuple[Tensor, Tensor]:
    """AP of every row of [Q,M] inputs (0 where a row has no relevant item) and its number of relevant items.

    HAP-VR Eq. 6 (the S2VS evaluation code, https://github.com/gkordo/s2vs). ``scores`` float [Q,M],
    ``relevance`` and ``keep`` (True = ranked) bool [Q,M]; ``ties``: ``"grouped"`` (default,
    order-independent), ``"expected"`` or ``"released"`` (module docstring); no input checks (see
    :func:`mean_average_precision`).

    Examples:
        >>> keep = torch.ones(1, 3, dtype=torch.bool)
        >>> ap_per_row(torch.tensor([[0.9, 0.8, 0.7]]), torch.tensor([[False, True, True]]), keep)
        (tensor([0.5833]), tensor([2.]))
    """
    dtype = work_dtype(scores.dtype)
    if ties == "released":
        return _released_rows(scores, relevance, keep, dtype)
    order = rank_rows(scores, keep)
    sorted_scores, sorted_keep = scores.gather(-1, order), keep.gather(-1, order)
    rel = (relevance & keep).gather(-1, order).to(dtype)
    first, last = tie_groups(sorted_scores, sorted_keep)
    hits = rel.cumsum(-1)
    n_relevant = rel.sum(-1)
    if ties == "expected":   # (1/L) Σ_{i=f}^{l} (h + 1 + (i - f)(m - 1)/(L - 1)) / (i + 1) for every relevant item
        m_cols = scores.shape[-1]
        harmonic = torch.cat([torch.zeros(1, dtype=torch.float64, device=scores.device),
                              (1.0 / torch.arange(1, m_cols + 1, dtype=torch.float64, device=scores.device)).cumsum(0)])
        h = (hits.gather(-1, first) - rel.gather(-1, first)).double()
        m = hits.gather(-1, last).double() - h
        size = (last - first + 1).double()
        part = harmonic[last + 1] - harmonic[first]
        slope = torch.where(size > 1, (m - 1) / (size - 1).clamp_min(1), torch.zeros_like(size))
        value = ((h + 1) * part + slope * (size - (first + 1).double() * part)) / size
        ap = (rel * value.to(dtype)).sum(-1) / n_relevant.clamp_min(1)
        return ap, n_relevant
    precision_at_group_end = hits.gather(-1, last) / (last + 1).to(dtype)
    ap = (rel * precision_at_group_end).sum(-1) / n_relevant.clamp_min(1)
    return ap, n_relevant


def _released_rows(scores: Tensor, relevance: Tensor, keep: Tensor, dtype: torch.dtype) -> tuple[Tensor, Tensor]:
    """Per row: the kept items in stored order, ranked by ``numpy.argsort(scores)[::-1]`` (the released
    ``calculate_metric``), AP = Σ_k P@k · rel_k / (relevant items)."""
    import numpy as np
    s = scores.detach().cpu().double().numpy()
    r = (relevance & keep).cpu().numpy()
    k = keep.cpu().numpy()
    aps, counts = [], []
    for row_s, row_r, row_k in zip(s, r, k):
        y = row_r[row_k][np.argsort(row_s[row_k])[::-1]]
        hits = np.flatnonzero(y)
        counts.append(hits.size)
        aps.append(float(np.sum(np.arange(1, hits.size + 1) / (hits + 1)) / max(hits.size, 1)))
    return (torch.tensor(aps, dtype=dtype, device=scores.device),
            torch.tensor(counts, dtype=dtype, device=scores.device))


def average_precision(scores: Tensor, relevance: Tensor, ties: str = "grouped") -> Tensor:
    """Non-interpolated AP of one ranked list, HAP-VR Eq. 6 (the S2VS evaluation code, https://github.com/gkordo/s2vs).

    Args:
        scores: [M] float similarities (higher = ranked earlier).
        relevance: [M] bool or 0/1 labels.
        ties: ``"grouped"`` (default, order-independent: tied scores form one group, scikit-learn's
            convention), ``"expected"`` (order-independent: the expected value over tie orders) or
            ``"released"`` (the released evaluators' order); see the module docstring.

    Returns:
        0-d tensor (float32, or float64 for float64 scores) on the scores' device.

    Raises:
        ValueError: bad shapes/dtypes, NaN scores, empty input, or no relevant item (AP undefined).

    Examples:
        >>> average_precision(torch.tensor([0.9, 0.8, 0.7]), torch.tensor([0, 1, 1]))  # (1/2 + 2/3) / 2
        tensor(0.5833)
        >>> import numpy as np
        >>> average_precision(np.array([0.5, 0.5]), np.array([False, True]))  # a tie: both at rank 2
        tensor(0.5000, dtype=torch.float64)
        >>> average_precision(np.array([0.5, 0.5]), np.array([False, True]), ties="expected")  # rank 1 or 2
        tensor(0.7500, dtype=torch.float64)
    """
    ties = _check_ties(ties)
    scores, relevance, _ = check_scores_relevance(scores, relevance, ndim=1)
    check_nonempty(scores)
    ap, n_relevant = ap_per_row(scores[None], relevance[None], torch.ones_like(relevance)[None], ties)
    if n_relevant[0] == 0:
        raise ValueError("relevance has no relevant item: AP is undefined")
    return ap[0]


@renamed_keywords(mask="ignore")
def mean_average_precision(scores: Tensor, relevance: Tensor, ignore: Tensor | None = None,
                           ties: str = "grouped") -> Tensor:
    """mAP: the mean over queries of the per-query AP, HAP-VR Sec. 4.1 "Evaluation Metrics" (the S2VS evaluation code, https://github.com/gkordo/s2vs).

    Args:
        scores: [Q,M] float similarities of Q queries to M database items.
        relevance: [Q,M] bool or 0/1 labels.
        ignore: optional [Q,M] bool, True = leave this entry out of the ranking (e.g. the query itself).
        ties: ``"grouped"`` (default, order-independent), ``"expected"`` or ``"released"``, as in
            :func:`average_precision`.

    Returns:
        0-d tensor. Queries without a relevant (not ignored) item are skipped, as in the FIVR
        evaluation. Rows are processed in chunks to bound memory.

    Raises:
        ValueError: bad inputs, or no query has a relevant item.

    Examples:
        >>> scores = torch.tensor([[1.0, 0.9, 0.2], [0.3, 1.0, 0.8]])
        >>> relevance = torch.tensor([[1, 0, 1], [0, 1, 1]])
        >>> mean_average_precision(scores, relevance)  # mean of (1 + 2/3) / 2 and 1
        tensor(0.9167)
        >>> mean_average_precision(scores, relevance, ignore=torch.eye(2, 3, dtype=torch.bool))
        tensor(0.7500)
    """
    ties = _check_ties(ties)
    scores, relevance, ignore = check_scores_relevance(scores, relevance, ignore, ndim=2)
    check_nonempty(scores)
    keep = kept_entries(scores, ignore)
    aps, counts = [], []
    for rows in row_chunks(*scores.shape):
        ap, n_relevant = ap_per_row(scores[rows], relevance[rows], keep[rows], ties)
        aps.append(ap)
        counts.append(n_relevant)
    ap, has_relevant = torch.cat(aps), torch.cat(counts) > 0
    if not has_relevant.any():
        raise ValueError("relevance has no relevant (not ignored) item in any query: mAP is undefined")
    return ap[has_relevant].mean()


@renamed_keywords(mask="ignore")
def micro_average_precision(scores: Tensor, relevance: Tensor, ignore: Tensor | None = None,
                            ties: str = "grouped") -> Tensor:
    """μAP (micro AP, the "detection" metric), HAP-VR Sec. 4.1 "Evaluation Metrics" (the S2VS evaluation code, https://github.com/gkordo/s2vs).

    All (query, item) pairs not ignored are pooled into one list and ranked by score globally; the AP
    of that list rewards similarities that work with a single threshold across queries.

    Args:
        scores: [Q,M] float similarities.
        relevance: [Q,M] bool or 0/1 labels.
        ignore: optional [Q,M] bool, True = leave the pair out (e.g. query == item).
        ties: ``"grouped"`` (default, order-independent), ``"expected"`` or ``"released"`` (the pooled list
            in row-major order, as the released μAP pools query after query), as in :func:`average_precision`.

    Returns:
        0-d tensor.

    Raises:
        ValueError: bad inputs, or no relevant pair that is not ignored.

    Examples:
        >>> scores = torch.tensor([[0.9, 0.2], [0.8, 0.1]])
        >>> relevance = torch.tensor([[1, 0], [0, 1]])
        >>> micro_average_precision(scores, relevance)  # pooled ranking: rel, non, non, rel
        tensor(0.7500)
    """
    ties = _check_ties(ties)
    scores, relevance, ignore = check_scores_relevance(scores, relevance, ignore, ndim=2)
    check_nonempty(scores)
    keep = kept_entries(scores, ignore)
    pooled_scores, pooled_relevance = scores[keep], relevance[keep]
    if not pooled_relevance.any():
        raise ValueError("relevance has no relevant (not ignored) pair: μAP is undefined")
    ap, _ = ap_per_row(pooled_scores[None], pooled_relevance[None], torch.ones_like(pooled_relevance)[None], ties)
    return ap[0]


@renamed_keywords(mask="ignore")
def map_and_micro_ap(scores: Tensor, relevance: Tensor, ignore: Tensor | None = None,
                     ties: str = "grouped") -> dict[str, float]:
    """``{"mAP", "uAP"}``: retrieval (:func:`mean_average_precision`) and detection (:func:`micro_average_precision`)
    of query × database ``scores`` (HAP-VR Sec. 4.1, "Evaluation Metrics"), as the training pipelines report them.

    Args:
        scores: [Q, M] float (or a NumPy array).
        relevance: [Q, M] bool.
        ignore: optional [Q, M] bool, True = leave the entry out of both rankings.
        ties: ``"grouped"`` (default, order-independent), ``"expected"`` or ``"released"`` (module docstring).

    Returns:
        Python floats under the keys ``"mAP"`` and ``"uAP"``.

    Examples:
        >>> map_and_micro_ap(torch.tensor([[0.9, 0.1], [0.2, 0.8]]), torch.tensor([[True, False], [False, True]]))
        {'mAP': 1.0, 'uAP': 1.0}
    """
    return {"mAP": float(mean_average_precision(scores, relevance, ignore, ties)),
            "uAP": float(micro_average_precision(scores, relevance, ignore, ties))}
