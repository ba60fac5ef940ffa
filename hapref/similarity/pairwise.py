"""Pairwise cosine similarity between embedding sets."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from hapref.validation import check_float_tensor


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
    if x.shape[-1] != y.shape[-1]:
        raise ValueError(f"x and y must share the feature size, got {x.shape[-1]} and {y.shape[-1]}")
    if x.dtype in (torch.float16, torch.bfloat16) or y.dtype in (torch.float16, torch.bfloat16):
        # eps underflows in half precision (a zero row would give 0/0): normalise in float32, return x's dtype
        return pairwise_cosine(x.float(), y.float(), eps).to(x.dtype)
    return F.normalize(x, dim=-1, eps=eps) @ F.normalize(y, dim=-1, eps=eps).transpose(-1, -2)
