"""Frame-level pseudo labels from a frozen teacher (HAP-VR §3.4, Eq. 13–14)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from hapref.validation import check_float_tensor


def teacher_frame_similarity(features: Tensor, other: Tensor | None = None) -> Tensor:
    """Cosine similarities of all frame pairs of all video pairs, ``[A, B, Ti, Tj]`` (HAP-VR Eq. 13).

    ``features [A, Ti, D']`` (and ``other [B, Tj, D']``, default the same batch) are the teacher's
    per-frame float embeddings; the result is float32.

    Examples:
        >>> features = torch.tensor([[[1.0, 0.0], [0.0, 2.0]]])  # one video, two frames
        >>> teacher_frame_similarity(features)
        tensor([[[[1., 0.],
                  [0., 1.]]]])
    """
    features = check_float_tensor(features, "features", ndim=3)
    other = features if other is None else check_float_tensor(other, "other", ndim=3)
    if features.shape[-1] != other.shape[-1]:
        raise ValueError(f"features and other must share D', got {features.shape[-1]} and {other.shape[-1]}")
    a, b = F.normalize(features.float(), dim=-1), F.normalize(other.float(), dim=-1)
    return torch.einsum("aid,bjd->abij", a, b)


def frame_pseudo_labels(similarity: Tensor, top_rate: float = 0.35, bottom_rate: float = 0.35,
                        ) -> tuple[Tensor, Tensor]:
    """Positive / negative target frames per query frame (HAP-VR Eq. 14).

    For every query frame (all leading axes of ``similarity [..., Tj]``) the ``max(round(Tj·r_p), 1)``
    most similar target frames are positives and the ``max(round(Tj·r_n), 1)`` least similar are
    negatives; the rest are neither (to be ignored). Defaults r_p = r_n = 0.35 are the released run's.
    Returns two bool tensors shaped like ``similarity``.

    Examples:
        >>> positive, negative = frame_pseudo_labels(torch.tensor([0.9, 0.1, 0.5, 0.7]), 0.25, 0.25)
        >>> positive, negative
        (tensor([ True, False, False, False]), tensor([False,  True, False, False]))
    """
    similarity = check_float_tensor(similarity, "similarity", ndim=None)
    if similarity.ndim < 1 or similarity.shape[-1] < 2:
        raise ValueError(f"similarity must end in a target-frame axis of size >= 2, got {tuple(similarity.shape)}")
    if not (0 < top_rate < 1 and 0 < bottom_rate < 1 and top_rate + bottom_rate <= 1):
        raise ValueError(f"need 0 < top_rate, bottom_rate and top_rate + bottom_rate <= 1, got {top_rate}, {bottom_rate}")
    t = similarity.shape[-1]
    n_pos, n_neg = max(round(t * top_rate), 1), max(round(t * bottom_rate), 1)
    if n_pos + n_neg > t:
        raise ValueError(f"{n_pos} positives + {n_neg} negatives exceed the {t} target frames")
    order = similarity.argsort(dim=-1, descending=True, stable=True)
    rank = torch.empty_like(order).scatter_(-1, order, torch.arange(t, device=order.device).expand_as(order))
    return rank < n_pos, rank >= t - n_neg
