"""Elementwise step functions and their smooth surrogates used inside relaxed-rank AP losses."""

from __future__ import annotations

import torch
from torch import Tensor
from torch.autograd import Function
from torch.autograd.function import once_differentiable


def heaviside(x: Tensor) -> Tensor:
    """Strict step H(x) = 1[x > 0] (HAP-VR Eq. 6 and Eq. 9); carries no gradient."""
    return (x > 0).to(x.dtype)


def sigmoid_step(x: Tensor, tau: float) -> Tensor:
    """Smooth-AP's relaxation G(x; τ) = 1 / (1 + exp(-x/τ)) of the step H (HAP-VR Eq. 7).

    ``torch.sigmoid`` saturates without overflow, so no clamping is needed for large |x|/τ.
    """
    if tau <= 0:
        raise ValueError(f"tau must be positive, got {tau}")
    return torch.sigmoid(x / tau)


class _QuadLinear(Function):
    """R⁻ as c² + 2·[t − 1]₊ with t = x/δ + 1 and c = clamp(t, 0, 1), computed in place.

    Its slope is (2/δ)·c, so backward needs only c; the forward makes two full-size tensors.
    """

    @staticmethod
    def forward(ctx, x: Tensor, delta: float) -> Tensor:
        t = (x / delta).add_(1)
        c = t.clamp(min=0, max=1)
        ctx.save_for_backward(c)
        ctx.delta = delta
        return t.sub_(1).clamp_(min=0).mul_(2).addcmul_(c, c)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad: Tensor) -> tuple[Tensor, None]:
        (c,) = ctx.saved_tensors
        return (grad * c).mul_(2 / ctx.delta), None


def quad_linear(x: Tensor, delta: float) -> Tensor:
    """QuadLinear surrogate R⁻(x; δ) for positive–negative pairs, HAP-VR Eq. 10.

    Zero for x ≤ −δ, the parabola (x/δ + 1)² on (−δ, 0] and the tangent line 1 + 2x/δ for x > 0:
    continuous, C¹, convex, non-decreasing, equal to 1 at 0 and never below the step H.
    """
    if delta <= 0:
        raise ValueError(f"delta must be positive, got {delta}")
    return _QuadLinear.apply(x, delta)
