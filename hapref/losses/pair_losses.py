"""Pair-wise baselines of HAP-VR Table 2 on similarity scores: contrastive, triplet and Circle loss."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from hapref.losses._base import RankingLoss, gather_positives
from hapref.validation import renamed_keywords


def _masked_mean(values: Tensor, weights: Tensor) -> Tensor:
    return (values * weights).sum(dim=-1) / weights.sum(dim=-1).clamp(min=1)


class Contrastive(RankingLoss):
    """Contrastive loss (Hadsell et al. 2006) on similarities, HAP-VR Table 2.

    Per query: mean over positives of [m⁺ − s]₊ plus mean over negatives of [s − m⁻]₊. The defaults
    m⁺ = 1, m⁻ = 0 are pytorch-metric-learning's advice for cosine similarity; ``pos_margin`` must
    exceed ``neg_margin``. On class-balanced batches :meth:`~hapref.losses.EmbeddingLoss.on_embeddings` equals
    pytorch-metric-learning's ``ContrastiveLoss`` with cosine similarity and a ``MeanReducer``
    (its default ``AvgNonZeroReducer`` averages only the non-zero pair terms). ``reduction``: ``"mean"`` over
    the queries with a positive, ``"sum"``, or ``"none"`` (``[Q]``, see :class:`~hapref.losses.RankingLoss`).

    Examples:
        >>> scores = torch.tensor([[0.9, 0.2, 0.4]])
        >>> relevance = torch.tensor([[True, False, False]])
        >>> round(Contrastive()(scores, relevance).item(), 4)  # (1 - 0.9) + (0.2 + 0.4) / 2
        0.4
    """

    def __init__(self, pos_margin: float = 1.0, neg_margin: float = 0.0, reduction: str = "mean") -> None:
        super().__init__(reduction=reduction)
        if not pos_margin > neg_margin:
            raise ValueError(f"pos_margin must exceed neg_margin, got pos_margin={pos_margin}, neg_margin={neg_margin}")
        self.pos_margin, self.neg_margin = pos_margin, neg_margin

    def per_query(self, scores: Tensor, positive: Tensor, negative: Tensor) -> Tensor:
        pos_term = _masked_mean(F.relu(self.pos_margin - scores), positive.to(scores.dtype))
        neg_term = _masked_mean(F.relu(scores - self.neg_margin), negative.to(scores.dtype))
        return pos_term + neg_term

    def extra_repr(self) -> str:
        return self._with_reduction(f"pos_margin={self.pos_margin}, neg_margin={self.neg_margin}")


class Triplet(RankingLoss):
    """Triplet loss (Schroff et al. 2015) on similarities: mean over (p, n) of [s_n − s_p + margin]₊.

    A pair-wise baseline of HAP-VR Table 2 (Sun et al., Circle Loss, CVPR 2020); ``margin`` ≥ 0.
    On class-balanced batches :meth:`~hapref.losses.EmbeddingLoss.on_embeddings` equals pytorch-metric-learning's
    ``TripletMarginLoss`` with cosine similarity, all triplets and a ``MeanReducer``. ``reduction`` as in
    :class:`Contrastive`. :class:`~hapref.losses.EuclideanTripletLoss` is the Radial paper's triplet on
    explicit (q, p, n) embedding tuples with squared Euclidean distances.

    Examples:
        >>> scores = torch.tensor([[0.9, 0.85, 0.1]])
        >>> relevance = torch.tensor([[True, False, False]])
        >>> round(Triplet(margin=0.1)(scores, relevance).item(), 4)  # ([0.85 - 0.9 + 0.1]₊ + 0) / 2
        0.025
    """

    pairwise = True

    def __init__(self, margin: float = 0.1, max_elements: int = 2**25, reduction: str = "mean") -> None:
        super().__init__(max_elements, reduction)
        if margin < 0:
            raise ValueError(f"margin must be >= 0, got {margin}")
        self.margin = margin

    def per_query(self, scores: Tensor, positive: Tensor, negative: Tensor) -> Tensor:
        pos_scores, slot = gather_positives(scores, positive)
        hinge = F.relu(scores.unsqueeze(1) - pos_scores.unsqueeze(2) + self.margin)  # [q, p, k]
        neg_w = negative.to(scores.dtype)
        total = ((hinge @ neg_w.unsqueeze(-1)).squeeze(-1) * slot).sum(dim=1)
        return total / (slot.sum(dim=1) * neg_w.sum(dim=1)).clamp(min=1)

    def extra_repr(self) -> str:
        return self._with_reduction(f"margin={self.margin}")


class Circle(RankingLoss):
    """Circle loss (Sun et al., CVPR 2020, Eq. 6) per query, on a score matrix (any number of positives).

    softplus(logsumexp_n γ α_n (s_n − m) + logsumexp_p −γ α_p (s_p − 1 + m)) with detached weights
    α_p = [1 + m − s_p]₊, α_n = [s_n + m]₊; ``margin`` is the relaxation margin m, ``scale`` the scale
    factor γ. Defaults m = 0.25, γ = 256 (the Circle paper, TCA); m must lie in [0, 1) and γ be positive.
    ``reduction`` as in :class:`Contrastive`. On class-balanced batches
    :meth:`~hapref.losses.EmbeddingLoss.on_embeddings` equals pytorch-metric-learning's ``CircleLoss``
    with ``m = margin`` and ``gamma = scale``. :class:`~hapref.losses.MemoryBankCircle` is TCA's variant
    on memory-bank similarities (one positive in column 0, then the negatives). The scores are meant to be
    cosine similarities: the gradient γ·α grows with ``|s|``, and for float16 scores beyond ``|s|`` ≈ 1e2 it exceeds
    float16's range and comes back ±inf (never NaN, so a loss scaler sees the overflow); the value is float32.

    Examples:
        >>> scores = torch.tensor([[0.9, 0.1, 0.0]])
        >>> relevance = torch.tensor([[True, False, False]])
        >>> Circle(margin=0.25, scale=256.0)(scores, relevance).item() < 1e-3  # well separated: almost no loss
        True
        >>> Circle(gamma=80.0)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        TypeError: Circle.__init__() takes no keyword 'gamma': it is now 'scale' (γ > 0, ...)
    """

    @renamed_keywords(m="margin", gamma="scale")
    def __init__(self, margin: float = 0.25, scale: float = 256.0, reduction: str = "mean") -> None:
        super().__init__(reduction=reduction)
        if not 0 <= margin < 1 or not scale > 0:
            raise ValueError(f"margin must lie in [0, 1) and scale be > 0, got margin={margin}, scale={scale}")
        self.margin, self.scale = margin, scale

    def per_query(self, scores: Tensor, positive: Tensor, negative: Tensor) -> Tensor:
        m, gamma = self.margin, self.scale
        alpha_p = F.relu(1 + m - scores.detach())
        alpha_n = F.relu(scores.detach() + m)
        # A large finite floor (not -inf) keeps rows without negatives free of NaN gradients.
        floor = torch.finfo(scores.dtype).min / 4
        logit_p = torch.where(positive, -gamma * alpha_p * (scores - 1 + m), floor)
        logit_n = torch.where(negative, gamma * alpha_n * (scores - m), floor)
        return F.softplus(torch.logsumexp(logit_n, dim=1) + torch.logsumexp(logit_p, dim=1))

    def extra_repr(self) -> str:
        return self._with_reduction(f"margin={self.margin}, scale={self.scale}")
