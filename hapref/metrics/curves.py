"""Score-threshold precision-recall curve (AutoSSVH Sec. 4.2 reports PR curves; HAP-VR's μAP is its area).

Every distinct score t is one operating point: retrieve everything scored ≥ t and measure
``precision = TP / retrieved`` and ``recall = TP / #relevant``. The step-wise area
``Σ (R_k − R_{k−1}) · P_k`` over these points is exactly :func:`average_precision` (or μAP for
pooled queries).
"""

from __future__ import annotations

import torch
from torch import Tensor

from hapref.metrics._ranking import check_nonempty, kept_entries, rank_rows, tie_groups, work_dtype
from hapref.validation import check_float_tensor, check_scores_relevance, renamed_keywords


@renamed_keywords(mask="ignore")
def precision_recall_curve(scores: Tensor, relevance: Tensor, ignore: Tensor | None = None,
                           ) -> tuple[Tensor, Tensor, Tensor]:
    """Precision and recall at every distinct score threshold, laid out like scikit-learn's.

    Args:
        scores: [M] scores of one list, or [Q,M] scores whose pairs (those not ignored) are pooled (the μAP view).
        relevance: same shape, bool or 0/1.
        ignore: optional bool of the same shape, True = leave the entry out.

    Returns:
        ``(precision, recall, thresholds)``: thresholds are the distinct scores in increasing
        order; precision and recall have one more entry, the conventional end point (1, 0). This
        matches ``sklearn.metrics.precision_recall_curve`` (``drop_intermediate=False``).

    Raises:
        ValueError: bad inputs or no relevant (not ignored) item.

    Examples:
        >>> precision, recall, thresholds = precision_recall_curve(torch.tensor([0.9, 0.8, 0.7]),
        ...                                                        torch.tensor([1, 0, 1]))
        >>> precision
        tensor([0.6667, 0.5000, 1.0000, 1.0000])
        >>> recall
        tensor([1.0000, 0.5000, 0.5000, 0.0000])
        >>> thresholds
        tensor([0.7000, 0.8000, 0.9000])
    """
    scores = check_float_tensor(scores, "scores", (1, 2))
    scores, relevance, ignore = check_scores_relevance(scores, relevance, ignore, ndim=scores.ndim)
    check_nonempty(scores)
    keep = kept_entries(scores, ignore)
    pooled_scores, pooled_relevance = scores[keep][None], relevance[keep][None]
    if not pooled_relevance.any():
        raise ValueError("relevance has no relevant (not ignored) item: recall is undefined")
    dtype = work_dtype(scores.dtype)
    everything = torch.ones_like(pooled_relevance)
    order = rank_rows(pooled_scores, everything)[0]
    sorted_scores, rel = pooled_scores[0, order], pooled_relevance[0, order].to(dtype)
    _, last = tie_groups(sorted_scores[None], everything)
    ends = torch.unique(last[0])
    true_positives = rel.cumsum(0)[ends]
    precision = true_positives / (ends + 1).to(dtype)
    recall = true_positives / true_positives[-1]
    one, zero = precision.new_ones(1), precision.new_zeros(1)
    return (torch.cat([precision.flip(0), one]), torch.cat([recall.flip(0), zero]),
            sorted_scores[ends].flip(0))
