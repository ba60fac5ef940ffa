"""Point-wise baselines of HAP-VR Table 2: each score regressed onto its 0/1 relevance."""

from __future__ import annotations

from torch import Tensor

from hapref.losses._base import RankingLoss


class MAE(RankingLoss):
    """Mean absolute error ``|s − y|`` over a query's candidates, then over queries (HAP-VR Table 2).

    ``reduction``: ``"mean"`` over the queries with a positive, ``"sum"``, or ``"none"`` (``[Q]``, see
    :class:`~hapref.losses.RankingLoss`).

    Examples:
        >>> MAE()(torch.tensor([[0.75, 0.25]]), torch.tensor([[True, False]]))
        tensor(0.2500)
    """

    def per_query(self, scores: Tensor, positive: Tensor, negative: Tensor) -> Tensor:
        valid = (positive | negative).to(scores.dtype)
        return ((scores - positive.to(scores.dtype)).abs() * valid).sum(dim=1) / valid.sum(dim=1)


class MSE(RankingLoss):
    """Mean squared error (s − y)² over a query's candidates, then over queries (HAP-VR Table 2).

    ``reduction`` as in :class:`MAE`.

    Examples:
        >>> MSE()(torch.tensor([[0.5, 0.5]]), torch.tensor([[True, False]]))
        tensor(0.2500)
    """

    def per_query(self, scores: Tensor, positive: Tensor, negative: Tensor) -> Tensor:
        valid = (positive | negative).to(scores.dtype)
        return ((scores - positive.to(scores.dtype)) ** 2 * valid).sum(dim=1) / valid.sum(dim=1)
