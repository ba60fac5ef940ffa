"""A cross-query AP term: the batch's score matrix ranked as one list (a μAP-oriented extension of HAP-VR).

Not part of HAP-VR. Every ranking loss of HAP-VR Eq. 15 (InfoNCE, SSHN, QuadLinear-AP) ranks the candidates of
one query row against each other, so nothing in the objective asks for a copy of one query to score above a
non-copy of *another* query. μAP (micro-AP) pools every (query, candidate) pair into one ranking, and that is
what this term trains: the off-diagonal entries of the batch matrix ``[N, N]`` flattened into a single row
``[1, N(N-1)]`` and scored by an AP loss (Smooth-AP / QuadLinear-AP style, here QuadLinear-AP), the pooled
ranking of the Smooth-AP paper's "AP over the whole batch" applied to query-candidate pairs rather than to one
query's candidates.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from hapref.validation import check_scores_relevance


def pooled_ap_loss(scores: Tensor, relevance: Tensor, loss: nn.Module, ignore: Tensor | None = None,
                   exclude_diagonal: bool = True) -> Tensor:
    """An AP loss of the pooled pairs: every kept entry of ``scores [Q, M]`` in one ranking (μAP's ranking).

    ``loss`` is any :class:`hapref.losses.RankingLoss` (``loss(scores [1, K], relevance [1, K])``); the kept
    entries are those not in ``ignore`` and, with ``exclude_diagonal`` (square matrices only), not on the
    diagonal: a batch's self-pairs, which a trained network scores highest and evaluation never ranks. Entries
    are flattened row by row; the loss does not depend on that order (AP of a set of scored pairs).

    Args:
        scores: ``[Q, M]`` finite float scores.
        relevance: ``[Q, M]`` bool (or 0/1).
        loss: the AP loss applied to the pooled row.
        ignore: optional ``[Q, M]`` bool, True = leave the entry out.
        exclude_diagonal: leave out ``scores[i, i]`` (``ValueError`` when ``Q != M``).

    Returns:
        0-d tensor on the graph (a zero when no kept entry is relevant).

    Examples:
        Two queries whose rows each rank their copy first (per-query AP 1) but on different scales: pooled, the
        second query's copy (0.5) falls below the first query's non-copy (0.6), so the pooled AP is below 1.

        >>> from hapref.losses import QuadLinearAP
        >>> from hapref.metrics import map_and_micro_ap
        >>> scores = torch.tensor([[0.9, 0.6], [0.5, 0.1]])
        >>> relevance = torch.tensor([[True, False], [True, False]])
        >>> {k: round(float(v), 4) for k, v in map_and_micro_ap(scores, relevance).items()}
        {'mAP': 1.0, 'uAP': 0.8333}
        >>> loss = QuadLinearAP(delta=0.18)
        >>> round(loss(scores, relevance).item(), 4)        # per query: both rows perfect
        0.0
        >>> round(pooled_ap_loss(scores, relevance, loss, exclude_diagonal=False).item(), 4)
        0.2568
    """
    scores, relevance, ignore = check_scores_relevance(scores, relevance, ignore, finite=True)
    keep = torch.ones_like(relevance) if ignore is None else ~ignore
    if exclude_diagonal:
        if scores.shape[0] != scores.shape[1]:
            raise ValueError(f"exclude_diagonal needs a square scores matrix, got {tuple(scores.shape)}")
        keep = keep & ~torch.eye(scores.shape[0], dtype=torch.bool, device=scores.device)
    return loss(scores[keep].unsqueeze(0), relevance[keep].unsqueeze(0))


class CrossQueryAP(nn.Module):
    """The per-query video loss plus ``weight`` × the pooled AP loss of :func:`pooled_ap_loss` (a named extension).

    ``row_loss(scores, relevance, ignore)`` is the paper's video-level term (QuadLinear-AP, Eq. 11-12, averaged
    over query rows); ``pooled_loss`` (default: ``row_loss``) ranks all off-diagonal pairs of the batch as one
    list. With ``weight = 0`` it is ``row_loss``. Called like any video ranking loss of
    :class:`hapref.losses.HAPVRObjective`.

    Examples:
        >>> from hapref.losses import QuadLinearAP
        >>> scores = torch.tensor([[1.0, 0.9, 0.6], [0.9, 1.0, 0.2], [0.6, 0.2, 1.0]])
        >>> relevance = torch.tensor([[1, 1, 0], [1, 1, 0], [0, 0, 1]], dtype=torch.bool)
        >>> term = CrossQueryAP(QuadLinearAP(delta=0.18), weight=0.5)
        >>> row = QuadLinearAP(delta=0.18)(scores, relevance)
        >>> pooled = pooled_ap_loss(scores, relevance, QuadLinearAP(delta=0.18))
        >>> torch.allclose(term(scores, relevance), row + 0.5 * pooled)
        True
        >>> term
        CrossQueryAP(
          weight=0.5
          (row_loss): QuadLinearAP(delta=0.18, p=1.0)
        )
    """

    def __init__(self, row_loss: nn.Module, pooled_loss: nn.Module | None = None, weight: float = 1.0) -> None:
        super().__init__()
        if not weight >= 0:
            raise ValueError(f"weight must be non-negative, got {weight}")
        self.row_loss, self.weight = row_loss, float(weight)
        self.pooled_loss = pooled_loss

    def forward(self, scores: Tensor, relevance: Tensor, ignore: Tensor | None = None) -> Tensor:
        """Scalar loss: the row loss of ``scores [B, N]`` against boolean ``relevance [B, N]`` (entries where the
        optional boolean ``ignore [B, N]`` is True count for neither) plus ``weight`` × their pooled AP loss.

        Examples:
            >>> from hapref.losses import QuadLinearAP
            >>> scores = torch.tensor([[1.0, 0.2], [0.3, 1.0]])
            >>> relevance = torch.eye(2, dtype=torch.bool)
            >>> CrossQueryAP(QuadLinearAP(), weight=0.0)(scores, relevance).item() == QuadLinearAP()(
            ...     scores, relevance).item()
            True
        """
        pooled = pooled_ap_loss(scores, relevance, self.pooled_loss or self.row_loss, ignore)
        return self.row_loss(scores, relevance, ignore) + self.weight * pooled

    def extra_repr(self) -> str:
        return f"weight={self.weight}"
