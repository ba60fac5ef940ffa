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
    """R⁻ with a hand-written backward: only x is saved (autograd would keep ~5 temporaries)."""

    @staticmethod
    def forward(ctx, x: Tensor, delta: float) -> Tensor:
        ctx.save_for_backward(x)
        ctx.delta = delta
        u = x / delta
        return torch.where(u > 0, 2 * u + 1, (u + 1).clamp_(min=0).square_())

    @staticmethod
    @once_differentiable
    def backward(ctx, grad: Tensor) -> tuple[Tensor, None]:
        (x,) = ctx.saved_tensors
        slope = (x / ctx.delta + 1).clamp_(min=0, max=1).mul_(2 / ctx.delta)  # R⁻'(x) = (2/δ)·clamp(x/δ + 1, 0, 1)
        return grad * slope, None


def quad_linear(x: Tensor, delta: float) -> Tensor:
    """QuadLinear surrogate R⁻(x; δ) for positive–negative pairs, HAP-VR Eq. 10.

    Zero for x ≤ −δ, the parabola (x/δ + 1)² on (−δ, 0] and the tangent line 1 + 2x/δ for x > 0:
    continuous, C¹, convex, non-decreasing, equal to 1 at 0 and never below the step H.
    """
    if delta <= 0:
        raise ValueError(f"delta must be positive, got {delta}")
    return _QuadLinear.apply(x, delta)
