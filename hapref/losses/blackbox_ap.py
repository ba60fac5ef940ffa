"""AP through exact ranks with blackbox-differentiation gradients (Rolínek et al., CVPR 2020)."""

from __future__ import annotations

import torch
from torch import Tensor
from torch.autograd import Function

from hapref.losses._base import RankingLoss
from hapref.utils import float32_compute


def descending_ranks(scores: Tensor) -> Tensor:
    """1-based rank of each entry in its row, highest score first; ties broken by position.

    The ranking inside BlackBox-AP (HAP-VR Table 2, https://github.com/martius-lab/blackbox-backprop).
    ``scores`` float ``[..., M]``; returns ranks of the same shape and dtype.

    Examples:
        >>> descending_ranks(torch.tensor([0.2, 0.9, 0.2]))
        tensor([2., 1., 3.])
    """
    order = torch.argsort(scores, dim=-1, descending=True, stable=True)
    return torch.argsort(order, dim=-1).to(scores.dtype) + 1


class _BlackboxRank(Function):
    """Forward: ranks / M. Backward: −(r(s) − r(s + λ·∂L/∂r)) / λ with r = rank / M (Rolínek et al. Eq. 6)."""

    @staticmethod
    def forward(ctx, scores: Tensor, lambda_: float) -> Tensor:
        ranks = descending_ranks(scores) / scores.shape[-1]
        ctx.save_for_backward(scores, ranks)
        ctx.lambda_ = lambda_
        return ranks

    @staticmethod
    def backward(ctx, grad_ranks: Tensor) -> tuple[Tensor, None]:
        scores, ranks = ctx.saved_tensors
        perturbed = descending_ranks(scores + ctx.lambda_ * grad_ranks) / scores.shape[-1]
        return -(ranks - perturbed) / ctx.lambda_, None


@float32_compute
def blackbox_ranks(scores: Tensor, lambda_: float) -> Tensor:
    """Descending ranks divided by the row length M (as the reference ranker normalises them),
    with the blackbox-interpolation gradient of strength λ. https://github.com/martius-lab/blackbox-backprop.

    Examples:
        >>> s = torch.tensor([[0.1, 0.5]], requires_grad=True)
        >>> r = blackbox_ranks(s, lambda_=4.0)
        >>> r
        tensor([[1.0000, 0.5000]], grad_fn=<_BlackboxRankBackward>)
        >>> r[0, 0].backward()  # lowering the first item's rank number needs a higher score
        >>> s.grad
        tensor([[-0.1250,  0.1250]])
    """
    return _BlackboxRank.apply(scores, lambda_)


class BlackBoxAP(RankingLoss):
    """BlackBox-AP loss 1 − mean_{j∈P} rank⁺(j) / rank(j) with exact ranks (HAP-VR Eq. 6, Table 2).

    The value is the exact AP (ties broken by position); the gradient of both rank vectors comes
    from blackbox differentiation with interpolation strength ``lambda_`` acting on ranks / M. The reference's random
    score margin and memory of past batches are left out. ``reduction``: ``"mean"`` over the queries with a
    positive, ``"sum"``, or ``"none"`` (``[Q]``, see :class:`~hapref.losses.RankingLoss`).

    Examples:
        >>> scores = torch.tensor([[0.9, 0.8, 0.1]], requires_grad=True)
        >>> loss = BlackBoxAP()(scores, torch.tensor([[True, False, True]]))
        >>> round(loss.item(), 4)  # exactly 1 − AP
        0.1667
        >>> loss.backward()
        >>> bool(scores.grad[0, 2] < 0)  # raising the low positive lowers the loss
        True
    """

    def __init__(self, lambda_: float = 4.0, reduction: str = "mean") -> None:
        super().__init__(reduction=reduction)
        if lambda_ <= 0:
            raise ValueError(f"lambda_ must be positive, got {lambda_}")
        self.lambda_ = lambda_

    def per_query(self, scores: Tensor, positive: Tensor, negative: Tensor) -> Tensor:
        bottom = torch.full_like(scores, float("-inf"))
        rank_all = blackbox_ranks(torch.where(positive | negative, scores, bottom), self.lambda_)
        rank_pos = blackbox_ranks(torch.where(positive, scores, bottom), self.lambda_)
        pos_w = positive.to(scores.dtype)
        return 1 - (rank_pos / rank_all * pos_w).sum(dim=1) / pos_w.sum(dim=1)

    def extra_repr(self) -> str:
        return self._with_reduction(f"lambda_={self.lambda_}")
