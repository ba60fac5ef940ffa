"""Average precision: per list (AP), mean over queries (mAP) and pooled over queries (μAP).

Definition (HAP-VR Eq. 6 read as AP = 1 − AP risk; the S2VS evaluation code, https://github.com/gkordo/s2vs): rank the items of a list by descending score,
let ``P@k`` be the fraction of relevant items among the first ``k`` and ``R`` the number of
relevant items; then ``AP = (1/R) Σ_k P@k · rel_k``, the mean precision at the ranks of the
relevant items.

Ties: items with equal scores form one group that is retrieved together, so every relevant item
of a group gets the precision measured at the group's *last* rank. This is exactly the
convention of ``sklearn.metrics.average_precision_score`` (one operating point per distinct
score), equals HAP-VR Eq. 6 with the step function taken as H(0) = 1, and makes AP independent
of the order in which tied items are stored.
"""

from __future__ import annotations

import torch
from torch import Tensor

from hapref.metrics._ranking import check_nonempty, kept_entries, rank_rows, row_chunks, tie_groups, work_dtype
from hapref.validation import check_scores_relevance, renamed_keywords


def ap_per_row(scores: Tensor, relevance: Tensor, keep: Tensor) -> tuple[Tensor, Tensor]:
    """AP of every row of [Q,M] inputs (0 where a row has no relevant item) and its number of relevant items.

    HAP-VR Eq. 6 (the S2VS evaluation code, https://github.com/gkordo/s2vs). ``scores`` float [Q,M],
    ``relevance`` and ``keep`` (True = ranked) bool [Q,M]; no input checks (see :func:`mean_average_precision`).

    Examples:
        >>> keep = torch.ones(1, 3, dtype=torch.bool)
        >>> ap_per_row(torch.tensor([[0.9, 0.8, 0.7]]), torch.tensor([[False, True, True]]), keep)
        (tensor([0.5833]), tensor([2.]))
    """
    dtype = work_dtype(scores.dtype)
    order = rank_rows(scores, keep)
    sorted_scores, sorted_keep = scores.gather(-1, order), keep.gather(-1, order)
    rel = (relevance & keep).gather(-1, order).to(dtype)
    _, last = tie_groups(sorted_scores, sorted_keep)
    hits = rel.cumsum(-1)
    precision_at_group_end = hits.gather(-1, last) / (last + 1).to(dtype)
    n_relevant = rel.sum(-1)
    ap = (rel * precision_at_group_end).sum(-1) / n_relevant.clamp_min(1)
    return ap, n_relevant


def average_precision(scores: Tensor, relevance: Tensor) -> Tensor:
    """Non-interpolated AP of one ranked list, HAP-VR Eq. 6 (the S2VS evaluation code, https://github.com/gkordo/s2vs).

    Args:
        scores: [M] float similarities (higher = ranked earlier).
        relevance: [M] bool or 0/1 labels.

    Returns:
        0-d tensor (float32, or float64 for float64 scores) on the scores' device. Tied scores
        form one group (scikit-learn's convention, see the module docstring).

    Raises:
        ValueError: bad shapes/dtypes, NaN scores, empty input, or no relevant item (AP undefined).

    Examples:
        >>> average_precision(torch.tensor([0.9, 0.8, 0.7]), torch.tensor([0, 1, 1]))  # (1/2 + 2/3) / 2
        tensor(0.5833)
        >>> import numpy as np
        >>> average_precision(np.array([0.5, 0.5]), np.array([False, True]))  # a tie: both at rank 2
        tensor(0.5000, dtype=torch.float64)
    """
    scores, relevance, _ = check_scores_relevance(scores, relevance, ndim=1)
    check_nonempty(scores)
    ap, n_relevant = ap_per_row(scores[None], relevance[None], torch.ones_like(relevance)[None])
    if n_relevant[0] == 0:
        raise ValueError("relevance has no relevant item: AP is undefined")
    return ap[0]


@renamed_keywords(mask="ignore")
def mean_average_precision(scores: Tensor, relevance: Tensor, ignore: Tensor | None = None) -> Tensor:
    """mAP: the mean over queries of the per-query AP, HAP-VR Sec. 4.1 "Evaluation Metrics" (the S2VS evaluation code, https://github.com/gkordo/s2vs).

    Args:
        scores: [Q,M] float similarities of Q queries to M database items.
        relevance: [Q,M] bool or 0/1 labels.
        ignore: optional [Q,M] bool, True = leave this entry out of the ranking (e.g. the query itself).

    Returns:
        0-d tensor. Queries without a relevant (not ignored) item are skipped, as in the FIVR
        evaluation. Ties as in :func:`average_precision`. Rows are processed in chunks to bound memory.

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
    scores, relevance, ignore = check_scores_relevance(scores, relevance, ignore, ndim=2)
    check_nonempty(scores)
    keep = kept_entries(scores, ignore)
    aps, counts = [], []
    for rows in row_chunks(*scores.shape):
        ap, n_relevant = ap_per_row(scores[rows], relevance[rows], keep[rows])
        aps.append(ap)
        counts.append(n_relevant)
    ap, has_relevant = torch.cat(aps), torch.cat(counts) > 0
    if not has_relevant.any():
        raise ValueError("relevance has no relevant (not ignored) item in any query: mAP is undefined")
    return ap[has_relevant].mean()


@renamed_keywords(mask="ignore")
def micro_average_precision(scores: Tensor, relevance: Tensor, ignore: Tensor | None = None) -> Tensor:
    """μAP (micro AP, the "detection" metric), HAP-VR Sec. 4.1 "Evaluation Metrics" (the S2VS evaluation code, https://github.com/gkordo/s2vs).

    All (query, item) pairs not ignored are pooled into one list and ranked by score globally; the AP
    of that list rewards similarities that work with a single threshold across queries.

    Args:
        scores: [Q,M] float similarities.
        relevance: [Q,M] bool or 0/1 labels.
        ignore: optional [Q,M] bool, True = leave the pair out (e.g. query == item).

    Returns:
        0-d tensor; ties as in :func:`average_precision`.

    Raises:
        ValueError: bad inputs, or no relevant pair that is not ignored.

    Examples:
        >>> scores = torch.tensor([[0.9, 0.2], [0.8, 0.1]])
        >>> relevance = torch.tensor([[1, 0], [0, 1]])
        >>> micro_average_precision(scores, relevance)  # pooled ranking: rel, non, non, rel
        tensor(0.7500)
    """
    scores, relevance, ignore = check_scores_relevance(scores, relevance, ignore, ndim=2)
    check_nonempty(scores)
    keep = kept_entries(scores, ignore)
    pooled_scores, pooled_relevance = scores[keep], relevance[keep]
    if not pooled_relevance.any():
        raise ValueError("relevance has no relevant (not ignored) pair: μAP is undefined")
    ap, _ = ap_per_row(pooled_scores[None], pooled_relevance[None], torch.ones_like(pooled_relevance)[None])
    return ap[0]


def map_and_micro_ap(scores: Tensor, relevance: Tensor, ignore: Tensor | None = None) -> dict[str, float]:
    """``{"mAP", "uAP"}``: retrieval (:func:`mean_average_precision`) and detection (:func:`micro_average_precision`)
    of query × database ``scores`` (HAP-VR Sec. 4.1, "Evaluation Metrics"), as the training pipelines report them.

    Args:
        scores: [Q, M] float (or a NumPy array).
        relevance: [Q, M] bool.
        ignore: optional [Q, M] bool, True = leave the entry out of both rankings.

    Returns:
        Python floats under the keys ``"mAP"`` and ``"uAP"``.

    Examples:
        >>> map_and_micro_ap(torch.tensor([[0.9, 0.1], [0.2, 0.8]]), torch.tensor([[True, False], [False, True]]))
        {'mAP': 1.0, 'uAP': 1.0}
    """
    return {"mAP": float(mean_average_precision(scores, relevance, ignore)),
            "uAP": float(micro_average_precision(scores, relevance, ignore))}
