"""Elementwise step functions and their smooth surrogates used inside relaxed-rank AP losses."""

from __future__ import annotations

from abc import ABC, abstractmethod

import torch
from torch import Tensor
from torch.autograd import Function
from torch.autograd.function import once_differentiable

from hapref.utils import at_least_float32, float32_compute
from hapref.validation import renamed_keywords


def heaviside(x: Tensor) -> Tensor:
    """Strict step H(x) = 1[x > 0] (HAP-VR Eq. 6 and Eq. 9) of a float tensor, same shape and dtype; no gradient.

    Examples:
        >>> heaviside(torch.tensor([-0.5, 0.0, 0.5]))
        tensor([0., 0., 1.])
    """
    return (x > 0).to(x.dtype)


class StepSurrogate(ABC):
    """A differentiable relaxation φ of the step H for positive–negative pairs (HAP-VR Eq. 7 and Eq. 10).

    Calling it gives φ(x) with autograd (half-precision ``x`` is computed in, and returned as, float32: the
    QuadLinear line 1 + 2x/δ overflows float16 at ``|x|`` ≈ 1e4); :meth:`value_and_slope_` gives φ(x) and φ'(x) without autograd, which
    is what :func:`hapref.losses.relaxed_rank_ap` needs to fuse its largest sums (see :func:`negative_step_sum`).

    Examples:
        >>> x = torch.tensor([-1.0, 0.0, 1.0], requires_grad=True)
        >>> y = QuadLinearStep(1.0)(x)  # any subclass is called like a function
        >>> y.sum().backward()
        >>> y.detach(), x.grad
        (tensor([0., 1., 3.]), tensor([0., 2., 2.]))
    """

    @abstractmethod
    def value_and_slope_(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """φ(x) and φ'(x), computed without autograd; ``x`` is overwritten.

        ``x`` is a float tensor of any shape; both results have its shape and dtype (the value may reuse ``x``'s
        storage, so pass a copy when ``x`` is still needed). The slope equals autograd's derivative of φ.

        Examples:
            >>> step, x = QuadLinearStep(0.5), torch.tensor([-1.0, -0.25, 0.0, 0.5])
            >>> value, slope = step.value_and_slope_(x.clone())  # a copy: the argument is overwritten
            >>> value, slope  # 0, (x/δ + 1)², 1 + 2x/δ and slopes 0, (2/δ)(x/δ + 1), 2/δ
            (tensor([0.0000, 0.2500, 1.0000, 3.0000]), tensor([0., 2., 4., 4.]))
            >>> x.requires_grad_()  # Eq. 10 written out with torch ops, differentiated by autograd
            tensor([-1.0000, -0.2500,  0.0000,  0.5000], requires_grad=True)
            >>> literal = torch.where(x <= 0, (x / 0.5 + 1).clamp(min=0) ** 2, 1 + 2 * x / 0.5)
            >>> torch.equal(torch.autograd.grad(literal.sum(), x)[0], slope)
            True
        """

    @float32_compute
    def __call__(self, x: Tensor) -> Tensor:
        return _Surrogate.apply(at_least_float32(x), self)


class _Surrogate(Function):
    """φ(x) with the slope from the forward pass kept for backward (one saved tensor, no recomputation)."""

    @staticmethod
    def forward(ctx, x: Tensor, step: StepSurrogate) -> Tensor:
        value, slope = step.value_and_slope_(x.clone())
        ctx.save_for_backward(slope)
        return value

    @staticmethod
    @once_differentiable
    def backward(ctx, grad: Tensor) -> tuple[Tensor, None]:
        (slope,) = ctx.saved_tensors
        return grad.to(slope.dtype) * slope, None


class SigmoidStep(StepSurrogate):
    """Smooth-AP's relaxation G(x; τ) = 1 / (1 + exp(-x/τ)) of the step H (HAP-VR Eq. 7), ``temperature`` τ > 0.

    ``torch.sigmoid`` saturates without overflow, so no clamping is needed for large ``|x|/τ``.

    Examples:
        >>> SigmoidStep(temperature=0.01)(torch.tensor([-0.1, 0.0, 0.1]))
        tensor([4.5398e-05, 5.0000e-01, 9.9995e-01])
    """

    @renamed_keywords(tau="temperature")
    def __init__(self, temperature: float) -> None:
        if temperature <= 0:
            raise ValueError(f"temperature must be positive, got {temperature}")
        self.temperature = temperature

    def value_and_slope_(self, x: Tensor) -> tuple[Tensor, Tensor]:
        value = x.div_(self.temperature).sigmoid_()
        return value, (value - value * value).div_(self.temperature)  # G' = G (1 - G) / τ


class QuadLinearStep(StepSurrogate):
    """QuadLinear surrogate R⁻(x; δ) for positive–negative pairs, HAP-VR Eq. 10.

    Zero for x ≤ −δ, the parabola (x/δ + 1)² on (−δ, 0] and the tangent line 1 + 2x/δ for x > 0:
    continuous, C¹, convex, non-decreasing, equal to 1 at 0 and never below the step H. Computed in place
    as c² + 2·[t − 1]₊ with t = x/δ + 1 and c = clamp(t, 0, 1); its slope is (2/δ)·c.

    Examples:
        >>> QuadLinearStep(0.2)(torch.tensor([-0.3, -0.1, 0.0, 0.1]))
        tensor([0.0000, 0.2500, 1.0000, 2.0000])
    """

    def __init__(self, delta: float) -> None:
        if delta <= 0:
            raise ValueError(f"delta must be positive, got {delta}")
        self.delta = delta

    def value_and_slope_(self, x: Tensor) -> tuple[Tensor, Tensor]:
        t = x.div_(self.delta).add_(1)
        c = t.clamp(min=0, max=1)
        value = t.sub_(1).clamp_(min=0).mul_(2).addcmul_(c, c)
        return value, c.mul_(2 / self.delta)


@renamed_keywords(tau="temperature")
def sigmoid_step(x: Tensor, temperature: float) -> Tensor:
    """G(x; τ) of HAP-VR Eq. 7 with ``temperature`` τ as a function (see :class:`SigmoidStep`); float tensor in,
    same shape out (float32 for half precision).

    Examples:
        >>> sigmoid_step(torch.tensor([0.0]), temperature=0.01)
        tensor([0.5000])
    """
    return SigmoidStep(temperature)(x)


def quad_linear(x: Tensor, delta: float) -> Tensor:
    """R⁻(x; δ) of HAP-VR Eq. 10 as a function (see :class:`QuadLinearStep`); float tensor in, same shape out
    (float32 for half precision).

    Examples:
        >>> quad_linear(torch.tensor([-0.09, 0.09]), delta=0.18)
        tensor([0.2500, 2.0000])
    """
    return QuadLinearStep(delta)(x)


class _NegativeStepSum(Function):
    """``out[q, j] = Σ_k N[q, k] · φ(s[q, k] − p[q, j])``, with a backward of two batched matrix products.

    The ``[Q, P, M]`` differences are built once and overwritten by φ; only φ' is kept. Backward never
    materialises a ``[Q, P, M]`` gradient: ∂/∂s[q, k] = N[q, k] Σ_j g[q, j] φ'[q, j, k] and
    ∂/∂p[q, j] = −g[q, j] Σ_k N[q, k] φ'[q, j, k].
    """

    @staticmethod
    def forward(ctx, scores: Tensor, pos_scores: Tensor, negative: Tensor, step: StepSurrogate) -> Tensor:
        value, slope = step.value_and_slope_(scores.unsqueeze(1) - pos_scores.unsqueeze(2))
        ctx.save_for_backward(slope, negative)
        return (value @ negative.unsqueeze(-1)).squeeze(-1)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad: Tensor) -> tuple[Tensor, Tensor, None, None]:
        slope, negative = ctx.saved_tensors
        grad = grad.to(slope.dtype)       # one dtype in both products, whatever reaches backward
        grad_scores = (grad.unsqueeze(1) @ slope).squeeze(1).mul_(negative)
        grad_pos = (slope @ negative.unsqueeze(-1)).squeeze(-1).mul_(grad).neg_()
        return grad_scores, grad_pos, None, None


@float32_compute
def negative_step_sum(scores: Tensor, pos_scores: Tensor, negative: Tensor, step: StepSurrogate) -> Tensor:
    """Σ_{k ∈ N} φ(s_qk − s_qj) ``[Q, P]`` for scores ``[Q, M]``, positive scores ``[Q, P]`` and a float 0/1
    negative flags ``[Q, M]``: the negative part of rank(j) in HAP-VR Eq. 8 and Eq. 11, fused (see above).
    Half precision is computed in, and returned as, float32 (the sums overflow float16 at ``|s|`` ≈ 1e4).

    Examples:
        >>> scores, negative = torch.tensor([[0.9, 0.8, 0.1]]), torch.tensor([[0.0, 1.0, 0.0]])
        >>> negative_step_sum(scores, torch.tensor([[0.9, 0.1]]), negative, QuadLinearStep(0.2))
        tensor([[0.2500, 8.0000]])
    """
    work = torch.promote_types(torch.promote_types(scores.dtype, pos_scores.dtype), torch.float32)
    return _NegativeStepSum.apply(scores.to(work), pos_scores.to(work), negative.to(work), step)
