"""Input checks shared by metrics and losses: clear errors that name the argument."""

from __future__ import annotations

import torch
from torch import Tensor


def check_float_tensor(x: object, name: str, ndim: int | tuple[int, ...] | None = None,
                       allow_nan: bool = False) -> Tensor:
    """Return ``x`` if it is a floating tensor of the given rank(s) without NaN, else raise ValueError."""
    if not isinstance(x, Tensor):
        raise ValueError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if not x.is_floating_point():
        raise ValueError(f"{name} must have a floating dtype (float16/32/64), got {x.dtype}")
    if ndim is not None:
        allowed = (ndim,) if isinstance(ndim, int) else ndim
        if x.ndim not in allowed:
            raise ValueError(f"{name} must have {' or '.join(map(str, allowed))} dimension(s), "
                             f"got shape {tuple(x.shape)}")
    if not allow_nan and torch.isnan(x).any():
        raise ValueError(f"{name} contains NaN")
    return x


def check_binary(x: object, name: str, shape: torch.Size) -> Tensor:
    """Return ``x`` as a bool tensor of ``shape``; it may be bool or hold only 0/1 values."""
    if not isinstance(x, Tensor):
        raise ValueError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if x.shape != shape:
        raise ValueError(f"{name} must have shape {tuple(shape)} (that of the scores), got {tuple(x.shape)}")
    if x.dtype == torch.bool:
        return x
    if x.is_complex() or not ((x == 0) | (x == 1)).all():
        raise ValueError(f"{name} must be boolean or hold only 0/1 values (dtype {x.dtype})")
    return x.bool()


def check_scores_relevance(scores: object, relevance: object, mask: object = None, ndim: int = 2,
                           ) -> tuple[Tensor, Tensor, Tensor | None]:
    """Validate a (scores, relevance[, mask]) triple of equal shape with ``ndim`` dimensions.

    Returns the scores unchanged, relevance as bool and mask as bool (or None). ``mask`` marks
    entries to ignore (True = ignored).
    """
    scores = check_float_tensor(scores, "scores", ndim)
    relevance = check_binary(relevance, "relevance", scores.shape).to(scores.device)
    if mask is not None:
        mask = check_binary(mask, "mask", scores.shape).to(scores.device)
    return scores, relevance, mask
