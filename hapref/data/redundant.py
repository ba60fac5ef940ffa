"""Videos where which frames are kept matters: a few informative frames among redundant title-card frames.

:func:`pad_with_title_cards` turns frame features ``[N, K, F]`` (``K`` informative frames per video, e.g. the
fine-grained videos of :mod:`hapref.data.finegrained` through a frozen backbone) into ``[N, T, F]`` videos:
the ``K`` informative frames keep their temporal order at random positions, and the other ``T - K`` positions
repeat one *title card* per video, a random direction that says nothing about the video's label but is the
same (up to a small per-frame jitter) on every padding frame of that video.

Why this design (chapter 7): two random views of a video almost always share title-card frames, so a view
contrast can tell the views of a video apart from those of other videos by the title card alone, a shortcut
that carries no label information. A sampler that drops the title-card frames removes the shortcut; a uniform
random sampler keeps, at a drop ratio of 0.75 with ``K = 3`` of ``T = 12`` frames, no informative frame at all
in 84 of 220 draws (``C(9, 3) / C(12, 3)``). The mean frame feature, the input of the training-free codes, is
dominated by the title card (weight ``(T - K) / T``).
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["pad_with_title_cards"]


def pad_with_title_cards(frames: Tensor, total: int, data_seed: int = 0, jitter: float = 0.05,
                         salt: int = 0, card_scale: float = 1.0) -> tuple[Tensor, Tensor]:
    """Pad ``K`` informative frames per video to ``total`` frames with a per-video title card.

    Args:
        frames: float ``[N, K, F]``, the informative frame features of ``N`` videos (``K < total``).
        total: frames per output video ``T``.
        data_seed: seed of the positions, title cards and jitter (another value, another instance).
        jitter: standard deviation of the per-frame noise on the title card, relative to the title card's
            per-feature scale (0 gives identical padding frames).
        salt: added to the seed so that two splits of one data seed get different title cards.
        card_scale: the title card's scale relative to the frames' per-feature scale (0: every padding
            frame is the frames' mean plus jitter, a blank frame with no per-video shortcut).

    Returns:
        ``(videos [N, T, F]`` of ``frames``' dtype, ``informative`` bool ``[N, T]``, True at the ``K`` positions
        holding the video's own frames, in their order``)``. A title card is a standard normal direction
        scaled to the mean norm of the informative frames, centred like them (their mean over all frames added).

    Examples:
        >>> x = torch.arange(12.0).view(2, 3, 2)
        >>> videos, informative = pad_with_title_cards(x, 6, data_seed=0, jitter=0.0)
        >>> videos.shape, informative.sum(1).tolist()
        (torch.Size([2, 6, 2]), [3, 3])
        >>> torch.equal(videos[informative].view(2, 3, 2), x)      # own frames, in order
        True
        >>> pad = videos[0][~informative[0]]                      # one title card, repeated
        >>> bool((pad == pad[0]).all())
        True
    """
    if not (isinstance(frames, Tensor) and frames.dim() == 3 and frames.is_floating_point()):
        raise ValueError(f"frames must be a float tensor [N, K, F], got {getattr(frames, 'shape', type(frames))}")
    n, k, f = frames.shape
    if not isinstance(total, int) or total <= k:
        raise ValueError(f"total must be an int larger than the {k} informative frames, got {total!r}")
    if jitter < 0 or card_scale < 0:
        raise ValueError(f"jitter and card_scale must be >= 0, got {jitter} and {card_scale}")
    generator = torch.Generator().manual_seed(1_000_003 * data_seed + 7 * salt + 12_345)
    # K sorted positions out of T per video: the first K of a random permutation, sorted
    positions = torch.rand(n, total, generator=generator).argsort(1)[:, :k].sort(1).values
    informative = torch.zeros(n, total, dtype=torch.bool).scatter(1, positions, True)
    work = frames.double()
    centre = work.mean((0, 1))
    scale = (work - centre).norm(dim=-1).mean() / f ** 0.5            # per-feature scale of the frames
    cards = torch.randn(n, f, generator=generator, dtype=torch.float64) * (card_scale * scale)
    noise = torch.randn(n, total, f, generator=generator, dtype=torch.float64) * (jitter * scale)
    videos = centre + cards[:, None] + noise
    videos[informative] = work.reshape(n * k, f)
    return videos.to(frames.dtype), informative
