"""Training-free temporal descriptors of a clip's frame features: what a hand-crafted motion cue can say.

A clip of ``L`` valid frames has frame features ``x_0 … x_{L-1}`` (the rows of ``[..., T, D]`` with the
padding after ``L`` ignored). The mean ``m = (1/L) Σ_t x_t`` is blind to the frame order: a clip and its
reversal have the same mean. Each descriptor below changes sign or order under reversal, so it carries the
direction of a motion that the mean cannot, without any training:

* :func:`frame_differences`: the pooled signed difference ``Δ_k = 1/(L-k) Σ_{t<L-k} (x_{t+k} - x_t)``;
* :func:`temporal_trend`: the least-squares slope per dimension,
  ``b = Σ_t (t - t̄)(x_t - x̄) / Σ_t (t - t̄)²`` with ``t̄ = (L-1)/2``;
* :func:`temporal_pyramid`: the means of ``2^l`` consecutive segments at each pyramid level ``l``.

:func:`concat_with_mean` joins one of them to the mean at a weight ``w``:
``e = normalize([m/‖m‖, w · d/‖d‖])``. What they cannot do: every descriptor is a fixed linear function of
the frames, the same for every dimension, so it encodes a change that is linear in feature space over the
clip (a drift); it does not learn which dimensions matter, and it has no notion of a graded relevance beyond
what the frozen features already hold.

All functions take ``features`` ``[..., T, D]`` (floating point, any device; the result has the same dtype and
device) and optional ``lengths`` ``[...]`` (integer, ``1 <= lengths <= T``; ``None``: every frame is valid).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

__all__ = ["TEMPORAL_DESCRIPTORS", "concat_with_mean", "frame_differences", "temporal_mean",
           "temporal_pyramid", "temporal_trend", "valid_frames"]


def valid_frames(features: Tensor, lengths: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """The valid-frame mask ``[..., T]`` (bool) and the lengths ``[...]`` (int64) of padded clips.

    Checks the arguments every descriptor of this module takes: ``features`` floating ``[..., T, D]`` with
    ``T >= 1``; ``lengths`` integer of shape ``features.shape[:-2]`` with ``1 <= lengths <= T`` (``None``:
    all ``T`` frames are valid).

    Examples:
        >>> mask, lengths = valid_frames(torch.zeros(2, 3, 4), torch.tensor([3, 1]))
        >>> mask.tolist(), lengths.tolist()
        ([[True, True, True], [True, False, False]], [3, 1])
    """
    if not isinstance(features, Tensor) or features.ndim < 2 or not features.is_floating_point():
        raise ValueError(f"features must be a floating tensor [..., T, D], got "
                         f"{getattr(features, 'dtype', type(features).__name__)} of shape "
                         f"{tuple(getattr(features, 'shape', ()))}")
    steps = features.shape[-2]
    if steps < 1:
        raise ValueError(f"features must hold at least one frame (T >= 1), got shape {tuple(features.shape)}")
    if lengths is None:
        lengths = torch.full(features.shape[:-2], steps, dtype=torch.int64, device=features.device)
    else:
        if not isinstance(lengths, Tensor) or lengths.is_floating_point() or lengths.is_complex():
            raise ValueError(f"lengths must be an integer tensor, got {getattr(lengths, 'dtype', lengths)}")
        if tuple(lengths.shape) != tuple(features.shape[:-2]):
            raise ValueError(f"lengths must have shape {tuple(features.shape[:-2])} (features [..., T, D] without "
                             f"T, D), got {tuple(lengths.shape)}")
        lengths = lengths.to(device=features.device, dtype=torch.int64)
        if lengths.numel() and (int(lengths.min()) < 1 or int(lengths.max()) > steps):
            raise ValueError(f"lengths must lie in [1, T={steps}], got {int(lengths.min())} … {int(lengths.max())}")
    mask = torch.arange(steps, device=features.device) < lengths[..., None]
    return mask, lengths


def temporal_mean(features: Tensor, lengths: Tensor | None = None) -> Tensor:
    """The mean frame feature ``m = (1/L) Σ_{t<L} x_t``: ``[..., T, D] -> [..., D]`` (padding excluded).

    Order-free: a clip and its reversal have the same mean.

    Examples:
        >>> x = torch.tensor([[[1.0, 0.0], [3.0, 2.0], [9.0, 9.0]]])
        >>> temporal_mean(x, torch.tensor([2]))
        tensor([[2., 1.]])
    """
    mask, lengths = valid_frames(features, lengths)
    return (features * mask[..., None]).sum(-2) / lengths[..., None]


def frame_differences(features: Tensor, lengths: Tensor | None = None, lag: int = 1) -> Tensor:
    """Pooled signed frame differences ``Δ_k = 1/(L-k) Σ_{t=0}^{L-k-1} (x_{t+k} - x_t)``: ``[..., D]``.

    ``k = lag`` (an int ``>= 1``). For ``k = 1`` the sum telescopes to ``(x_{L-1} - x_0)/(L-1)``: the average
    step of the clip. Reversing a clip negates ``Δ_k``. A clip with ``L <= k`` has no pair and gives zeros.

    Examples:
        >>> x = torch.tensor([[0.0, 1.0], [1.0, 1.0], [4.0, 0.0]])
        >>> frame_differences(x)                 # ((1, 0) + (3, -1)) / 2
        tensor([ 2.0000, -0.5000])
        >>> frame_differences(x.flip(0))         # reversed: negated
        tensor([-2.0000,  0.5000])
        >>> frame_differences(x, lag=2)          # x_2 - x_0
        tensor([ 4., -1.])
    """
    if isinstance(lag, bool) or not isinstance(lag, int) or lag < 1:
        raise ValueError(f"lag must be an int >= 1, got {lag!r}")
    mask, lengths = valid_frames(features, lengths)
    if features.shape[-2] <= lag:
        return torch.zeros_like(features[..., 0, :])
    steps = features[..., lag:, :] - features[..., :-lag, :]
    pairs = mask[..., lag:]                      # x_{t+k} valid implies x_t valid
    count = (lengths - lag).clamp_min(1)
    return (steps * pairs[..., None]).sum(-2) / count[..., None]


def temporal_trend(features: Tensor, lengths: Tensor | None = None, unit_time: bool = False) -> Tensor:
    """Least-squares slope of each dimension against time: ``[..., T, D] -> [..., D]``.

    ``b = Σ_{t<L} (t - t̄)(x_t - x̄) / Σ_{t<L} (t - t̄)²``, ``t̄ = (L-1)/2`` (the denominator is
    ``L(L²-1)/12``), i.e. ``numpy.polyfit(t, x, 1)[0]`` per dimension. ``unit_time=True`` measures time in
    clip lengths (``τ = t/(L-1)``, slope ``(L-1)·b``): the fitted change over the whole clip rather than per
    frame. Reversing a clip negates ``b``; a one-frame clip gives zeros.

    Examples:
        >>> x = torch.tensor([[0.0, 5.0], [1.0, 5.0], [2.0, 5.0], [3.0, 5.0]])
        >>> temporal_trend(x)
        tensor([1., 0.])
        >>> temporal_trend(x, unit_time=True)   # three steps of 1 over the clip
        tensor([3., 0.])
    """
    mask, lengths = valid_frames(features, lengths)
    length = lengths.to(features.dtype)[..., None]                        # [..., 1]
    t = torch.arange(features.shape[-2], device=features.device, dtype=features.dtype)
    centred = (t - (length - 1) / 2) * mask                              # [..., T], zero on padding
    denominator = (length * (length ** 2 - 1) / 12).clamp_min(torch.finfo(features.dtype).tiny)
    slope = (centred[..., None] * features).sum(-2) / denominator        # Σ (t - t̄) x̄ = 0
    return slope * (length - 1) if unit_time else slope


def _segments(lengths: Tensor, parts: int, steps: int) -> Tensor:
    """Segment index ``[..., T]`` of each frame when ``L`` frames are cut into ``parts`` consecutive pieces as
    ``numpy.array_split`` does (the first ``L mod parts`` pieces one frame longer); ``parts`` on padding."""
    q, r = torch.div(lengths, parts, rounding_mode="floor")[..., None], (lengths % parts)[..., None]
    t = torch.arange(steps, device=lengths.device)
    boundary = r * (q + 1)
    index = torch.where(t < boundary, torch.div(t, q + 1, rounding_mode="floor"),
                        r + torch.div(t - boundary, q.clamp_min(1), rounding_mode="floor"))
    return torch.where(t < lengths[..., None], index, torch.full_like(index, parts))


def temporal_pyramid(features: Tensor, lengths: Tensor | None = None, levels: Sequence[int] = (0, 1, 2),
                     normalize: bool = True, centred: bool = False) -> Tensor:
    """Temporal pyramid pooling: at level ``l`` the means of ``2^l`` consecutive segments, concatenated.

    ``[..., T, D] -> [..., S·D]`` with ``S = Σ_l 2^l`` over ``levels`` (distinct ints ``>= 0``; level 0 is the
    mean, level 1 the two halves). Segment ``s`` of level ``l`` holds the frames ``numpy.array_split`` gives it
    when cutting the ``L`` valid frames into ``2^l`` pieces: ``p_{l,s} = mean_{t ∈ seg(l,s)} x_t``, or
    ``p_{l,s} - m`` when ``centred`` (the clip mean ``m`` removed, so only the change along the clip is
    left; level 0 would be zero and is refused), each L2-normalised when ``normalize``. Every clip needs ``L >= 2^l`` for the deepest level (a clear error
    otherwise). Where ``2^l`` divides ``L``, reversing a clip reverses the segments of level ``l``.

    Examples:
        >>> x = torch.tensor([[1.0], [3.0], [5.0], [7.0], [9.0]])
        >>> temporal_pyramid(x, levels=(0, 1), normalize=False)   # mean; frames 0-2 and 3-4
        tensor([5., 3., 8.])
        >>> temporal_pyramid(x, levels=(2,), normalize=False)     # pieces of 2, 1, 1, 1 frames
        tensor([2., 5., 7., 9.])
        >>> temporal_pyramid(x, levels=(1,), normalize=False, centred=True)   # halves minus the mean
        tensor([-2.,  3.])
    """
    levels = list(levels)
    if not levels or any(isinstance(v, bool) or not isinstance(v, int) or v < 0 for v in levels) \
            or len(set(levels)) != len(levels):
        raise ValueError(f"levels must be distinct ints >= 0, got {levels!r}")
    if centred and 0 in levels:
        raise ValueError("levels must not hold 0 when centred (the mean minus the mean is zero)")
    mask, lengths = valid_frames(features, lengths)
    deepest = 2 ** max(levels)
    if lengths.numel() and int(lengths.min()) < deepest:
        raise ValueError(f"lengths must be >= 2^{max(levels)} = {deepest} for pyramid level {max(levels)}, "
                         f"got a clip of {int(lengths.min())} frames")
    mean = temporal_mean(features, lengths)[..., None, :] if centred else 0
    pooled = []
    for level in levels:
        parts = 2 ** level
        onehot = F.one_hot(_segments(lengths, parts, features.shape[-2]), parts + 1)[..., :parts]
        onehot = onehot.to(features.dtype)                                 # [..., T, parts], padding: none
        means = onehot.transpose(-1, -2) @ features / onehot.sum(-2)[..., None] - mean   # [..., parts, D]
        pooled.append(F.normalize(means, dim=-1) if normalize else means)
    return torch.cat(pooled, dim=-2).flatten(-2)


def concat_with_mean(features: Tensor, descriptor: Tensor, lengths: Tensor | None = None,
                     weight: float = 1.0) -> Tensor:
    """The unit-norm embedding ``e = normalize([m/‖m‖, w · d/‖d‖])``: ``[..., D + E]``.

    ``m`` is :func:`temporal_mean` of ``features`` ``[..., T, D]``, ``d`` a descriptor ``[..., E]`` of the same
    clips (e.g. :func:`frame_differences`) and ``w = weight >= 0``. With unit parts, the cosine of two
    embeddings is ``(cos(m, m') + w² cos(d, d')) / (1 + w²)``: ``w`` sets how much the motion cue counts
    against the appearance. A zero descriptor stays zero (``F.normalize``'s epsilon).

    Examples:
        >>> x = torch.tensor([[[1.0, 0.0], [1.0, 1.0]], [[1.0, 1.0], [1.0, 0.0]]])   # a clip, reversed
        >>> e = concat_with_mean(x, frame_differences(x), weight=1.0)
        >>> e.shape, round(float(e[0] @ e[1]), 3)                  # (1 + (-1)) / 2
        (torch.Size([2, 4]), 0.0)
    """
    if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not weight >= 0:
        raise ValueError(f"weight must be a number >= 0, got {weight!r}")
    mean = temporal_mean(features, lengths)
    if not isinstance(descriptor, Tensor) or tuple(descriptor.shape[:-1]) != tuple(mean.shape[:-1]):
        raise ValueError(f"descriptor must be a tensor [..., E] with leading shape {tuple(mean.shape[:-1])}, "
                         f"got {tuple(getattr(descriptor, 'shape', ()))}")
    parts = [F.normalize(mean, dim=-1), weight * F.normalize(descriptor.to(mean.dtype), dim=-1)]
    return F.normalize(torch.cat(parts, dim=-1), dim=-1)


#: The order-aware descriptors by name (each ``fn(features, lengths, **options) -> [..., E]``).
TEMPORAL_DESCRIPTORS = {"differences": frame_differences, "trend": temporal_trend, "pyramid": temporal_pyramid}
