"""SSHN: hard-negative and self-similarity terms of S2VS (HAP-VR L_base, the released S2VS code, https://github.com/gkordo/s2vs)."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from hapref.losses._reduction import check_reduction
from hapref.losses.embeddings import EmbeddingLoss
from hapref.losses.infonce import _promote, _square
from hapref.utils import float32_compute
from hapref.validation import renamed_keywords


class SSHN(EmbeddingLoss, nn.Module):
    """Self-similarity + hard-negative loss (HAP-VR Eq. 15, L_base; S2VS).

    ``hard_negative = −mean_i log max(1 − max_{k∈N_i} s_ik, ε)`` over queries with a negative, and
    ``self = −mean_i log max(s_ii, ε)``; forward returns both (S2VS weighs their sum by λ = 3).
    An empty batch gives two zeros attached to the graph. ``reduction="sum"`` sums over the rows instead
    of averaging; ``reduction="none"`` returns both terms per row, ``[N]`` each (the hard-negative term is 0
    for a row without a negative, which the mean leaves out).

    Examples:
        >>> scores = torch.tensor([[1.0, 0.5], [0.5, 1.0]])
        >>> hard_negative, self_sim = SSHN()(scores, torch.eye(2, dtype=torch.bool))
        >>> round(hard_negative.item(), 4), self_sim.item()
        (0.6931, -0.0)
    """

    def __init__(self, eps: float = 1e-3, reduction: str = "mean") -> None:
        super().__init__()
        if not 0 < eps < 1:
            raise ValueError(f"eps must lie in (0, 1), got {eps}")
        self.eps = eps
        self.reduction = check_reduction(reduction)

    @renamed_keywords(mask="ignore")
    @float32_compute
    def forward(self, scores: Tensor, relevance: Tensor, ignore: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """``(hard_negative, self_similarity)`` 0-d tensors of a batch's ``[N, N]`` finite float similarities
        (diagonal = self-similarity), ``[N, N]`` bool relevance and optional ``[N, N]`` bool ``ignore``.

        Examples:
            >>> scores = torch.tensor([[1.0, 0.5, 0.9], [0.5, 1.0, 0.1], [0.9, 0.1, 1.0]])
            >>> ignore = torch.tensor([[False, False, True], [False, False, False], [True, False, False]])
            >>> hard_negative, self_sim = SSHN()(scores, torch.eye(3, dtype=torch.bool), ignore=ignore)
            >>> hard_negative.ndim, self_sim.ndim
            (0, 0)
            >>> [t.shape for t in SSHN(reduction="none")(scores, torch.eye(3, dtype=torch.bool))]
            [torch.Size([3]), torch.Size([3])]
        """
        scores, relevance, ignore = _square(scores, relevance, ignore)
        scores = _promote(scores)
        if scores.shape[0] == 0:
            zero = scores.sum(dim=1) if self.reduction == "none" else scores.sum() * 0
            return zero, zero.clone()
        negative = ~relevance & ~ignore
        hardest = scores.masked_fill(~negative, -torch.inf).amax(1)
        has_neg = negative.any(1)
        log_self = torch.log(torch.diagonal(scores).clamp(min=self.eps))
        if self.reduction == "none":
            hn_rows = -torch.log((1 - hardest.masked_fill(~has_neg, 0)).clamp(min=self.eps))
            return hn_rows.masked_fill(~has_neg, 0), -log_self
        hn = -torch.log((1 - hardest[has_neg]).clamp(min=self.eps))
        if self.reduction == "sum":
            return hn.sum(), -log_self.sum()
        hard_negative = hn.mean() if has_neg.any() else scores.sum() * 0
        self_sim = -log_self.mean()
        return hard_negative, self_sim
