"""Pairwise cosine similarity between embedding sets, and the L2 normalisation with a bounded gradient."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from hapref.utils import at_least_float32
from hapref.validation import check_float_tensor


#: Norms are floored at this in the value of :func:`l2_normalize` (``torch.nn.functional.normalize``'s default):
#: a zero row normalises to zero.
NORMALIZE_EPS = 1e-12

#: Rows whose norm is below this get the gradient of ``x / GRADIENT_EPS`` in :func:`l2_normalize` (their value is
#: unchanged): at most ``|g| / GRADIENT_EPS``, which fits float16 (65504) for an upstream gradient ``|g| <= 255``.
GRADIENT_EPS = 2.0 ** -8


def l2_normalize(x: Tensor, dim: int = -1) -> Tensor:
    """``x / max(‖x‖, NORMALIZE_EPS)`` along ``dim``: ``torch.nn.functional.normalize``'s value, with a bounded gradient.

    The exact gradient ``(I − n nᵀ) g / ‖x‖`` grows without bound as ``‖x‖ → 0`` (about 1e12·g at a zero row),
    which is ±inf once cast back to a float16 input. Rows whose norm is below :data:`GRADIENT_EPS` (zero rows
    included) therefore get the gradient of ``x / GRADIENT_EPS`` instead, at most ``|g| / GRADIENT_EPS``; larger
    rows get the exact gradient. The value is the same as ``F.normalize`` in every dtype. Half precision
    (float16/bfloat16) is computed in, and returned as, float32 (its norm would underflow); float32 and float64
    stay as they are.

    Examples:
        >>> x = torch.tensor([[3.0, 4.0], [0.0, 0.0]], dtype=torch.float16, requires_grad=True)
        >>> y = l2_normalize(x)
        >>> y.detach(), y.dtype
        (tensor([[0.6000, 0.8000],
                [0.0000, 0.0000]]), torch.float32)
        >>> y.sum().backward()
        >>> bool(torch.isfinite(x.grad).all()), x.grad[1].tolist()  # the zero row: 1 / GRADIENT_EPS per unit of g
        (True, [256.0, 256.0])
    """
    x = at_least_float32(x)
    norm = torch.linalg.vector_norm(x, dim=dim, keepdim=True)
    value = x / norm.clamp_min(NORMALIZE_EPS)
    small = norm < GRADIENT_EPS
    if not bool(small.any()):
        return value
    # Rows below GRADIENT_EPS: value of F.normalize, gradient of x / GRADIENT_EPS (straight-through).
    bounded = x / norm.clamp_min(GRADIENT_EPS)
    return torch.where(small, value.detach() + (bounded - bounded.detach()), value)


def pairwise_cosine(x: Tensor, y: Tensor | None = None, eps: float = 1e-8) -> Tensor:
    """Cosine similarities ``[..., N, M]`` between rows of ``x [..., N, D]`` and ``y [..., M, D]``.

    With ``y`` omitted, the self-similarity matrix of ``x`` (the N×N batch matrix of the losses).
    This is the frame/embedding similarity used throughout the papers (e.g. TCA Eq. 8). Float inputs;
    the result has the dtype of ``x`` (half precision is normalised in float32; a zero row scores 0).

    Examples:
        >>> pairwise_cosine(torch.tensor([[3.0, 0.0], [1.0, 1.0]]), torch.tensor([[0.0, 2.0]]))
        tensor([[0.0000],
                [0.7071]])
    """
    check_float_tensor(x, "x", ndim=None)
    y = x if y is None else check_float_tensor(y, "y", ndim=None)
    for name, t in (("x", x), ("y", y)):
        if t.ndim < 2:
            raise ValueError(f"{name} must be a set of row vectors [..., N, D] (2 or more dimensions), got shape "
                             f"{tuple(t.shape)}; for one vector use {name}[None]")
    if x.shape[-1] != y.shape[-1]:
        raise ValueError(f"x and y must share the feature size, got {x.shape[-1]} and {y.shape[-1]}")
    if x.dtype in (torch.float16, torch.bfloat16) or y.dtype in (torch.float16, torch.bfloat16):
        # eps underflows in half precision (a zero row would give 0/0): normalise in float32, return x's dtype
        return pairwise_cosine(x.float(), y.float(), eps).to(x.dtype)
    return F.normalize(x, dim=-1, eps=eps) @ F.normalize(y, dim=-1, eps=eps).transpose(-1, -2)
