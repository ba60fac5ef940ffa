"""The common frame of every ranking loss: validation, ignoring, query chunking and reduction."""

from __future__ import annotations

from abc import ABC, abstractmethod

import torch
from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint

from hapref.losses._reduction import check_reduction
from hapref.losses.embeddings import EmbeddingLoss, refuse_labels_as_relevance
from hapref.utils import float32_compute
from hapref.validation import check_scores_relevance, renamed_keywords


class RankingLoss(EmbeddingLoss, nn.Module, ABC):
    """Base of the losses called as ``loss(scores[Q, M], relevance[Q, M], ignore=None) -> scalar``.

    Row q ranks M candidates; ``relevance`` is boolean; ``ignore`` (True = leave out) removes entries
    from the ranking entirely, e.g. the self-pair on the diagonal of a batch's N×N matrix.
    Subclasses implement :meth:`per_query`; the loss is its mean over the queries that have a
    positive (HAP-VR Eq. 12); a batch without any positive returns a zero still attached to the graph.
    ``reduction="sum"`` sums over those queries instead; ``reduction="none"`` returns one value per query
    row, ``[Q]``, with 0 for a query without a positive (left out of the mean, as ``ignore_index`` entries
    are in ``torch.nn.functional.cross_entropy``).
    Half-precision scores are computed in float32 and the loss is returned in float32 (its value may
    not fit in float16). ``loss.on_embeddings(embeddings [N, D], labels [N])`` scores a labelled batch
    by cosine similarity, each query's self-pair ignored (:func:`hapref.losses.embedding_batch`).
    Scores must be finite: ±inf would make the value or the gradient NaN.

    Examples:
        >>> class TopScoreLoss(RankingLoss):  # 1 − (is the best-scored candidate a positive?)
        ...     def per_query(self, scores, positive, negative):
        ...         best = scores.masked_fill(~(positive | negative), float("-inf")).argmax(1, keepdim=True)
        ...         return 1 - positive.gather(1, best).squeeze(1).float()
        >>> loss = TopScoreLoss()
        >>> loss(torch.tensor([[0.9, 0.1], [0.2, 0.8]]), torch.tensor([[1, 0], [1, 0]]))
        tensor(0.5000)
        >>> loss(torch.tensor([[0.9, 0.1]]), torch.tensor([[1, 0]]), ignore=torch.tensor([[True, False]]))
        tensor(0.)
        >>> scores = torch.tensor([[0.9, 0.1], [0.2, 0.8], [0.5, 0.4]])
        >>> relevance = torch.tensor([[1, 0], [1, 0], [0, 0]])
        >>> TopScoreLoss(reduction="none")(scores, relevance)  # the last query has no positive: 0, left out of the mean
        tensor([0., 1., 0.])
        >>> TopScoreLoss(reduction="sum")(scores, relevance), TopScoreLoss()(scores, relevance)
        (tensor(1.), tensor(0.5000))
    """

    #: True when a query row costs ``O(|P|·M)`` memory (positives × candidates); such losses are
    #: chunked over queries so that one chunk holds at most ``max_elements`` pair terms.
    pairwise: bool = False

    def __init__(self, max_elements: int = 2**25, reduction: str = "mean") -> None:
        super().__init__()
        if max_elements < 1:
            raise ValueError(f"max_elements must be positive, got {max_elements}")
        self.max_elements = max_elements
        self.reduction = check_reduction(reduction)

    def _with_reduction(self, hyperparameters: str = "") -> str:
        """``extra_repr`` text: the hyper-parameters, then ``reduction`` when it is not the default."""
        if self.reduction == "mean":
            return hyperparameters
        return ", ".join(filter(None, [hyperparameters, f"reduction={self.reduction!r}"]))

    def extra_repr(self) -> str:
        return self._with_reduction()

    @abstractmethod
    def per_query(self, scores: Tensor, positive: Tensor, negative: Tensor) -> Tensor:
        """Loss of each query ``[Q]`` from float scores ``[Q, M]`` and disjoint bool flags ``[Q, M]`` of
        positives/negatives (every row has a positive); no input checks, see :meth:`hapref.losses.RankingLoss.forward`.

        Examples:
            >>> from hapref.losses import MAE
            >>> MAE().per_query(torch.tensor([[1.0, 0.5]]), torch.tensor([[True, False]]),
            ...                 torch.tensor([[False, True]]))
            tensor([0.2500])
        """

    @renamed_keywords(mask="ignore")
    @float32_compute
    def forward(self, scores: Tensor, relevance: Tensor, ignore: Tensor | None = None) -> Tensor:
        """The mean per-query loss (HAP-VR Eq. 12) of a score matrix (or their sum, or each, see ``reduction``).

        Args:
            scores: ``[Q, M]`` finite float scores (float16/bfloat16/float32/float64; NumPy arrays accepted).
            relevance: ``[Q, M]`` bool (or 0/1) labels, True = relevant to the query.
            ignore: optional ``[Q, M]`` bool, True = leave the entry out (e.g. ``torch.eye(N, dtype=bool)``
                on a batch's N×N matrix).

        Returns:
            0-d tensor in the scores' dtype (float32 for half-precision scores), attached to the graph;
            ``[Q]`` with ``reduction="none"``.

        Examples:
            >>> from hapref.losses import SmoothAP
            >>> scores = torch.tensor([[0.9, 0.8, 0.1], [0.2, 0.7, 0.6]])
            >>> relevance = torch.tensor([[True, False, True], [False, True, False]])
            >>> loss = SmoothAP(temperature=0.01)(scores, relevance)  # AP 5/6 and 1: loss ≈ (1/6 + 0) / 2
            >>> round(loss.item(), 3)
            0.083
            >>> [round(v, 3) for v in SmoothAP(temperature=0.01, reduction="none")(scores, relevance).tolist()]
            [0.167, 0.0]
        """
        refuse_labels_as_relevance(self, scores, relevance)
        scores, relevance, ignore = check_scores_relevance(scores, relevance, ignore, finite=True)
        if scores.dtype in (torch.float16, torch.bfloat16):
            scores = scores.float()
        valid = torch.ones_like(relevance) if ignore is None else ~ignore
        positive, negative = relevance & valid, ~relevance & valid
        has_positive = positive.any(dim=1)
        if not has_positive.any():  # zero(s), still on the graph
            return scores[:, :0].sum(dim=1) if self.reduction == "none" else scores[:0, :0].sum()
        every_row = bool(has_positive.all())
        rows = (scores, positive, negative) if every_row else \
            (scores[has_positive], positive[has_positive], negative[has_positive])
        values = self._chunked(*rows)
        if self.reduction == "mean":
            return values.mean()
        if self.reduction == "sum":
            return values.sum()
        return values if every_row else scores[:, :0].sum(dim=1).masked_scatter(has_positive, values)

    def _chunked(self, scores: Tensor, positive: Tensor, negative: Tensor) -> Tensor:
        """Per-query losses, in row chunks (recomputed in backward) when O(Q·|P|·M) exceeds the bound."""
        q, m = scores.shape
        per_row = m * int(positive.sum(dim=1).max())
        rows = max(1, self.max_elements // max(1, per_row)) if self.pairwise else q
        if rows >= q:
            return self.per_query(scores, positive, negative)
        needs_grad = torch.is_grad_enabled() and scores.requires_grad
        parts = []
        for start in range(0, q, rows):
            chunk = (scores[start:start + rows], positive[start:start + rows], negative[start:start + rows])
            parts.append(checkpoint(self.per_query, *chunk, use_reentrant=False) if needs_grad
                         else self.per_query(*chunk))
        return torch.cat(parts)


def gather_positives(scores: Tensor, positive: Tensor) -> tuple[Tensor, Tensor]:
    """Scores of each row's positives packed to the left, ``[Q, P_max]``, and which slots are real.

    Pair terms are then built for positives only (``[Q, P_max, M]`` instead of ``[Q, M, M]``).
    Used by the relaxed-rank AP losses (HAP-VR Eq. 8 and Eq. 11). ``scores`` float [Q, M], ``positive`` bool [Q, M].

    Examples:
        >>> gather_positives(torch.tensor([[0.1, 0.7, 0.3]]), torch.tensor([[False, True, True]]))
        (tensor([[0.7000, 0.3000]]), tensor([[True, True]]))
    """
    count = positive.sum(dim=1)
    width = int(count.max()) if count.numel() else 0
    order = torch.argsort((~positive).to(torch.uint8), dim=1, stable=True)[:, :width]
    slot = torch.arange(width, device=scores.device) < count.unsqueeze(1)
    return scores.gather(1, order), slot
