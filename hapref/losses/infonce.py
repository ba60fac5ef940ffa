"""InfoNCE on a batch similarity matrix, in the S2VS convention (HAP-VR's L_base, the released S2VS code, https://github.com/gkordo/s2vs)."""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from hapref.losses._reduction import check_reduction
from hapref.losses.embeddings import EmbeddingLoss, refuse_labels_as_relevance
from hapref.utils import float32_compute
from hapref.validation import check_scores_relevance, renamed_keywords


def _promote(scores: Tensor) -> Tensor:
    """Half-precision scores in float32 (exp/log need the range); float32/64 unchanged."""
    return scores.float() if scores.dtype in (torch.float16, torch.bfloat16) else scores


def _square(scores: Tensor, relevance: Tensor, ignore: Tensor | None) -> tuple[Tensor, Tensor, Tensor]:
    """Validate an N×N batch matrix; return scores, relevance and the ignore flags with the diagonal added."""
    scores, relevance, ignore = check_scores_relevance(scores, relevance, ignore, finite=True)
    n, m = scores.shape
    if n != m:
        raise ValueError(f"scores must be a square N×N batch similarity matrix, got shape {(n, m)}")
    eye = torch.eye(n, dtype=torch.bool, device=scores.device)
    return scores, relevance, eye if ignore is None else ignore | eye


class InfoNCE(EmbeddingLoss, nn.Module):
    """InfoNCE over video similarities (HAP-VR Eq. 15, L_base; S2VS form).

    For query i and every positive j ≠ i:
    ``−log e^{s_ij/τ} / (e^{s_ij/τ} + Σ_{k∈N_i} e^{s_ik/τ} + 10⁻⁶)``; other positives stay out of the
    denominator. The per-query mean over positives is averaged over queries that have one (0 if none);
    ``reduction="sum"`` sums them, ``reduction="none"`` returns them, ``[N]`` (0 for a query without a
    positive). ``temperature`` is τ. Computed with log-sum-exp, so τ = 0.03 does not overflow.

    Examples:
        >>> scores = torch.tensor([[1.0, 0.9, 0.1], [0.9, 1.0, 0.2], [0.1, 0.2, 1.0]])
        >>> relevance = torch.tensor([[1, 1, 0], [1, 1, 0], [0, 0, 1]])
        >>> loss = InfoNCE(temperature=0.1)(scores, relevance)  # mean of log(1 + e^-8) and log(1 + e^-7)
        >>> round(loss.item(), 6)
        0.000624
        >>> _ = torch.manual_seed(0)
        >>> InfoNCE().on_embeddings(torch.randn(6, 4), torch.tensor([0, 0, 1, 1, 2, 2])).shape
        torch.Size([])
    """

    def __init__(self, temperature: float = 0.03, eps: float = 1e-6, reduction: str = "mean") -> None:
        super().__init__()
        if temperature <= 0:
            raise ValueError(f"temperature must be > 0, got {temperature}")
        self.temperature, self.eps = temperature, eps
        self.reduction = check_reduction(reduction)

    @renamed_keywords(mask="ignore")
    @float32_compute
    def forward(self, scores: Tensor, relevance: Tensor, ignore: Tensor | None = None) -> Tensor:
        """The loss of a batch's ``[N, N]`` finite float similarity matrix, ``[N, N]`` bool relevance and
        optional ``[N, N]`` bool ``ignore`` (True = left out; the diagonal always is). Returns a 0-d tensor
        (``[N]`` with ``reduction="none"``), float32 for half-precision scores.

        Examples:
            >>> scores = torch.tensor([[1.0, 0.9, 0.1], [0.9, 1.0, 0.2], [0.1, 0.2, 1.0]])
            >>> relevance = torch.tensor([[1, 1, 0], [1, 1, 0], [0, 0, 1]], dtype=torch.bool)
            >>> ignore = torch.zeros(3, 3, dtype=torch.bool)
            >>> loss = InfoNCE(temperature=0.1)
            >>> bool(loss(scores, relevance, ignore=ignore) == loss(scores, relevance)), loss(scores, relevance).ndim
            (True, 0)
            >>> InfoNCE(temperature=0.1, reduction="none")(scores, relevance)  # query 2 has no positive: 0
            tensor([0.0003, 0.0009, 0.0000])
        """
        refuse_labels_as_relevance(self, scores, relevance)
        scores, relevance, ignore = _square(scores, relevance, ignore)
        logits = _promote(scores) / self.temperature
        positive, negative = relevance & ~ignore, ~relevance & ~ignore
        neg_lse = torch.logsumexp(logits.masked_fill(~negative, -math.inf), dim=1, keepdim=True)
        neg_lse = torch.logaddexp(neg_lse, torch.full_like(neg_lse, math.log(self.eps)))
        nll = torch.logaddexp(logits, neg_lse) - logits                      # −log p_ij, all (i, j)
        n_pos = positive.sum(1)
        per_query = (nll * positive).sum(1) / n_pos.clamp(min=1)
        has_pos = n_pos > 0
        if self.reduction == "none":
            return per_query
        if self.reduction == "sum":
            return (per_query * has_pos).sum()
        return (per_query * has_pos).sum() / has_pos.sum().clamp(min=1)
