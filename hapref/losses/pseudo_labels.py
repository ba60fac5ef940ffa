"""Frame-level pseudo labels from a frozen teacher (HAP-VR §3.4, Eq. 13–14)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from hapref.validation import check_float_tensor
from hapref.utils import at_least_float32


def teacher_frame_similarity(features: Tensor, other: Tensor | None = None, center: bool = False) -> Tensor:
    """Cosine similarities of all frame pairs of all video pairs, ``[A, B, Ti, Tj]`` (HAP-VR Eq. 13).

    ``features [A, Ti, D']`` (and ``other [B, Tj, D']``, default the same batch) are the teacher's
    per-frame float embeddings; the result is float32.

    ``center=True`` subtracts each video's mean frame embedding before the cosine. A global CNN descriptor
    used as a stand-in teacher (:class:`hapref.models.BackboneTeacher`) is dominated by what all frames of a
    clip share, so every query frame ranks the same few target frames first and the pseudo labels of Eq. 14
    hardly differ from frame to frame (see :func:`positive_overlap`); centring keeps what distinguishes a frame
    within its video. A DINO teacher, whose frame embeddings already differ, is used uncentred.

    Examples:
        >>> features = torch.tensor([[[1.0, 0.0], [0.0, 2.0]]])  # one video, two frames
        >>> teacher_frame_similarity(features)
        tensor([[[[1., 0.],
                  [0., 1.]]]])
        >>> shared = torch.tensor([[[5.0, 1.0], [5.0, -1.0]]])  # a large shared part, a small frame-specific one
        >>> teacher_frame_similarity(shared).round(decimals=2)
        tensor([[[[1.0000, 0.9200],
                  [0.9200, 1.0000]]]])
        >>> teacher_frame_similarity(shared, center=True)
        tensor([[[[ 1., -1.],
                  [-1.,  1.]]]])
    """
    features = check_float_tensor(features, "features", ndim=3)
    other = features if other is None else check_float_tensor(other, "other", ndim=3)
    if features.shape[-1] != other.shape[-1]:
        raise ValueError(f"features and other must share D', got {features.shape[-1]} and {other.shape[-1]}")
    if not isinstance(center, bool):
        raise TypeError(f"center must be a bool, got {type(center).__name__}")
    a, b = at_least_float32(features), at_least_float32(other)
    if center:
        a, b = a - a.mean(dim=1, keepdim=True), b - b.mean(dim=1, keepdim=True)
    a, b = F.normalize(a, dim=-1), F.normalize(b, dim=-1)
    return torch.einsum("aid,bjd->abij", a, b)


def positive_overlap(positive: Tensor) -> Tensor:
    """How alike the pseudo-positive sets of different query frames are: the mean Jaccard index
    ``|P_a ∩ P_b| / |P_a ∪ P_b|`` over all pairs of query frames ``a ≠ b`` (HAP-VR Eq. 14 diagnostics).

    ``positive [..., Ti, Tj]`` is the bool output of :func:`frame_pseudo_labels` (leading axes: video pairs,
    averaged). 1 means every query frame got the same positives — labels that cannot teach frame-level
    matching; random sets of ``p`` out of ``Tj`` frames give about ``p / (2 Tj - p)``. Returns a float32 0-d tensor.

    Examples:
        >>> same = torch.tensor([[True, True, False, False]] * 3)
        >>> positive_overlap(same)
        tensor(1.)
        >>> diagonal = torch.eye(3, dtype=torch.bool)
        >>> positive_overlap(diagonal)
        tensor(0.)
    """
    if not isinstance(positive, Tensor) or positive.dtype != torch.bool:
        raise TypeError("positive must be a bool tensor [..., Ti, Tj] (the positives of frame_pseudo_labels)")
    if positive.ndim < 2 or positive.shape[-2] < 2:
        raise ValueError(f"positive must be [..., Ti, Tj] with Ti >= 2 query frames, got {tuple(positive.shape)}")
    p = at_least_float32(positive).flatten(0, -3) if positive.ndim > 2 else at_least_float32(positive)[None]
    inter = p @ p.transpose(1, 2)
    sizes = p.sum(-1)
    union = sizes[:, :, None] + sizes[:, None, :] - inter
    off = ~torch.eye(p.shape[1], dtype=torch.bool)
    return (inter / union.clamp(min=1))[:, off].mean()


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
