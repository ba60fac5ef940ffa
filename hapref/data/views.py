"""Training views shared by the self-supervised pipelines: S2VS batches (HAP-VR) and per-clip copy views (TCA).

* :func:`s2vs_batch` draws the released S2VS/HAP-VR recipe for a batch of clips: a weak view (temporal crop,
  resized crop of 80–100 % area, flip with p 0.5) and a strong view (temporal transform, 50–100 % crop, flip,
  RandAugment, overlays, blur) of every clip, then Video-in-Video on the strong views; the labels mark the
  weak/strong pair of a clip and the clips mixed by Video-in-Video as positives (HAP-VR §3.4, Algorithm 1;
  https://github.com/gkordo/s2vs).
* :class:`FrameClips` serves decoded frames on disk as training clips of the benchmark's size and length.
* :func:`make_views` gives one clip a weak view and several strong views made of the named edits of
  :mod:`hapref.data.transforms` (the copy pairs the TCA pipeline contrasts).
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from pathlib import Path

import torch
from torch import Tensor

from hapref.data.augment import TEMPORAL_P, ClipAugmenter, video_in_video
from hapref.data.pixels import float32_draws, round_pixels
from hapref.data.transforms import TRANSFORMS

__all__ = ["STRONG_SPATIAL", "STRONG_TEMPORAL", "WEAK_EDITS", "FrameClips", "crop_or_pad", "fit_length",
           "make_padded_views", "make_views", "s2vs_batch",
           "s2vs_labels"]

WEAK_EDITS = ("crop_resize", "hflip")
STRONG_TEMPORAL = ("speed_change", "reverse", "pause", "frame_drop", "temporal_crop")
STRONG_SPATIAL = ("crop_resize", "hflip", "color_change", "blur", "text_overlay", "logo_overlay")


@float32_draws
def fit_length(frames: Tensor, length: int, generator: torch.Generator) -> Tensor:
    """A window of exactly ``length`` frames of ``frames [T, ...]``: a random window if longer, tiled if shorter.

    Examples:
        >>> fit_length(torch.arange(3), 5, torch.Generator().manual_seed(0)).tolist()
        [0, 1, 2, 0, 1]
    """
    if length < 1:
        raise ValueError(f"length must be >= 1, got {length}")
    if frames.shape[0] < length:
        frames = frames.repeat(math.ceil(length / frames.shape[0]), *([1] * (frames.ndim - 1)))
    start = int(torch.randint(0, frames.shape[0] - length + 1, (), generator=generator))
    return frames[start:start + length]


@float32_draws
def crop_or_pad(frames: Tensor, length: int, generator: torch.Generator) -> tuple[Tensor, Tensor]:
    """``length`` frames of ``frames [T, ...]`` and their valid flags ``[length]``: a random window if longer,
    else every frame followed by zero padding (valid False), as the released TCA loader pads to a fixed size.

    Examples:
        >>> x, valid = crop_or_pad(torch.ones(3, 2), 5, torch.Generator().manual_seed(0))
        >>> x[:, 0].tolist(), valid.tolist()
        ([1.0, 1.0, 1.0, 0.0, 0.0], [True, True, True, False, False])
    """
    if length < 1:
        raise ValueError(f"length must be >= 1, got {length}")
    n = frames.shape[0]
    if n >= length:
        start = int(torch.randint(0, n - length + 1, (), generator=generator))
        return frames[start:start + length], torch.ones(length, dtype=torch.bool)
    pad = frames.new_zeros((length - n, *frames.shape[1:]))
    return torch.cat([frames, pad]), torch.arange(length) < n


def _edited_views(clip: Tensor, count: int, generator: torch.Generator) -> Iterator[Tensor]:
    """The weak view and ``count`` strong views of ``clip`` before they are fitted to a length, one at a time
    (the caller fits each before the next is drawn, so the random stream is the same as fitting inline)."""
    def edit(frames: Tensor, names: list[str]) -> Tensor:
        for name in names:
            frames, _ = TRANSFORMS[name](frames, generator)
        return frames

    def pick(pool: tuple[str, ...], k: int) -> list[str]:
        return [pool[i] for i in torch.randperm(len(pool), generator=generator)[:k].tolist()]

    yield edit(clip, list(WEAK_EDITS))
    for _ in range(count):
        yield edit(clip, pick(STRONG_TEMPORAL, 1) + pick(STRONG_SPATIAL, 2))


@float32_draws
def make_padded_views(clip: Tensor, count: int, length: int, generator: torch.Generator,
                      ) -> tuple[list[Tensor], list[Tensor]]:
    """The views of :func:`make_views`, each cropped or zero-padded to ``length`` frames, and their valid flags.

    Examples:
        >>> clip = torch.randint(0, 256, (3, 16, 16, 3), dtype=torch.uint8)
        >>> views, valid = make_padded_views(clip, 1, 6, torch.Generator().manual_seed(0))
        >>> tuple(views[0].shape), valid[0].tolist()
        ((6, 16, 16, 3), [True, True, True, False, False, False])
    """
    fitted = [crop_or_pad(v, length, generator) for v in _edited_views(clip, count, generator)]
    return [v for v, _ in fitted], [m for _, m in fitted]


@float32_draws
def make_views(clip: Tensor, count: int, length: int, generator: torch.Generator) -> list[Tensor]:
    """One weak view (crop + flip) and ``count`` strong views (one temporal + two spatial edits) of ``clip``.

    ``clip`` is uint8 ``[T, H, W, 3]``; every view has ``length`` frames. Used for the TCA copy pairs.

    Examples:
        >>> clip = torch.randint(0, 256, (6, 32, 32, 3), dtype=torch.uint8)
        >>> [tuple(v.shape) for v in make_views(clip, 2, 4, torch.Generator().manual_seed(0))]
        [(4, 32, 32, 3), (4, 32, 32, 3), (4, 32, 32, 3)]
    """
    return [fit_length(v, length, generator) for v in _edited_views(clip, count, generator)]


def s2vs_labels(mixing: Tensor) -> Tensor:
    """Binary labels ``[2B, 2B]`` of [weak views; strong views] from Video-in-Video's ``mixing [B, B]``.

    ``L = [I; mixing]`` and ``labels = L Lᵀ > 0``: every view is relevant to itself, weak_i to strong_i, and a
    strong view that holds clip j (``mixing[i, j] > 0``) to both views of j (the S2VS collate function).

    Examples:
        >>> s2vs_labels(torch.eye(2)).int().tolist()
        [[1, 0, 1, 0], [0, 1, 0, 1], [1, 0, 1, 0], [0, 1, 0, 1]]
    """
    if mixing.ndim != 2 or mixing.shape[0] != mixing.shape[1]:
        raise ValueError(f"mixing must be a square [B, B] matrix, got shape {tuple(mixing.shape)}")
    stacked = torch.cat([torch.eye(mixing.shape[0], device=mixing.device), mixing.float()])
    return (stacked @ stacked.T) > 0


@float32_draws
def s2vs_batch(clips: Tensor, num_frames: int, generator: torch.Generator, video_in_video_p: float = 0.3,
               shuffle: bool = True, temporal_p: tuple[float, ...] = TEMPORAL_P) -> tuple[Tensor, Tensor, Tensor]:
    """Weak views, strong views and labels of a batch of clips, the released S2VS/HAP-VR recipe.

    ``clips`` uint8 ``[B, T, H, W, 3]`` -> weak ``[B, num_frames, H, W, 3]``, strong (after Video-in-Video with
    probability ``video_in_video_p`` per clip) of the same shape, labels bool ``[2B, 2B]`` (:func:`s2vs_labels`).
    ``shuffle=False`` keeps every view's frame order (no shuffle-dropout, :class:`hapref.data.augment.ClipAugmenter`);
    ``temporal_p`` is the strong views' mix of temporal transforms (:data:`hapref.data.augment.TEMPORAL_P`).

    Examples:
        >>> clips = torch.randint(0, 256, (3, 6, 32, 32, 3), dtype=torch.uint8)
        >>> weak, strong, labels = s2vs_batch(clips, 4, torch.Generator().manual_seed(0))
        >>> tuple(weak.shape), tuple(strong.shape), tuple(labels.shape), bool(labels.diagonal().all())
        ((3, 4, 32, 32, 3), (3, 4, 32, 32, 3), (6, 6), True)
    """
    weak = ClipAugmenter("weak", num_frames=num_frames)(clips, generator)
    strong = ClipAugmenter("strong", num_frames=num_frames, shuffle=shuffle, temporal_p=temporal_p)(clips, generator)
    strong, mixing = video_in_video(strong, generator, p=video_in_video_p)
    return weak, strong, s2vs_labels(mixing)


class FrameClips:
    """Training clips from decoded frames on disk (:class:`hapref.data.FramesDirectory`), in the benchmark's form.

    ``clips[i]`` is uint8 ``[length, size, size, 3]``: video i's frames resized (bilinear, antialiased) to
    ``size`` x ``size`` and cut to its first ``length`` frames (tiled when shorter), like the unlabeled split
    of :func:`hapref.data.build_copy_benchmark` that the self-supervised pipelines otherwise train on.

    Examples:
        >>> import tempfile, pathlib, numpy as np
        >>> root = pathlib.Path(tempfile.mkdtemp())
        >>> np.save(root / "a.npy", np.zeros((3, 20, 30, 3), np.uint8))
        >>> clips = FrameClips(root, size=16, length=4)
        >>> len(clips), tuple(clips[0].shape), clips[0].dtype
        (1, (4, 16, 16, 3), torch.uint8)
    """

    def __init__(self, root: str | os.PathLike, size: int, length: int) -> None:
        from hapref.data.loaders import FramesDirectory

        if not Path(root).is_dir():
            raise ValueError(f"frames must be a folder of <id>.npy files or <id>/ frame folders, got {str(root)!r}")
        if size < 8 or length < 1:
            raise ValueError(f"size must be >= 8 and length >= 1, got size={size}, length={length}")
        self.videos, self.size, self.length = FramesDirectory(root), size, length
        if len(self.videos) == 0:
            raise ValueError(f"{root} holds no videos (<id>.npy files or <id>/ frame folders)")

    def __len__(self) -> int:
        return len(self.videos)

    def __getitem__(self, index: int) -> Tensor:
        frames = self.videos[index]["frames"]
        frames = frames.repeat(math.ceil(self.length / frames.shape[0]), 1, 1, 1)[:self.length]
        x = frames.permute(0, 3, 1, 2).double()  # float64: the same rounded bytes on every CPU
        x = torch.nn.functional.interpolate(x, size=(self.size, self.size), mode="bilinear", antialias=True,
                                            align_corners=False)
        return round_pixels(x).permute(0, 2, 3, 1).contiguous()
