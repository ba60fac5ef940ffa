"""Similarity regulariser on the raw ψ output (ViSiL / S2VS, HAP-VR L_base)."""

from __future__ import annotations

import torch
from torch import Tensor

from hapref.validation import check_float_tensor


def similarity_regularization(raw: Tensor, low: float = -1.0, high: float = 1.0) -> Tensor:
    """``Σ |min(S − low, 0)| + Σ |max(S − high, 0)|`` over the pre-activation similarity map S (HAP-VR Eq. 15, L_base).

    Summed, not averaged, as in the released code: it penalises ψ outputs outside [low, high], where the
    hard-tanh that follows would cut their gradient.
    """
    raw = check_float_tensor(raw, "raw", ndim=None)
    return torch.relu(low - raw).sum() + torch.relu(raw - high).sum()
