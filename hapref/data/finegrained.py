"""A small class / sub-class video set in the spirit of Dog-Birds (Radial loss paper, "Datasets"), built offline.

A *class* is one real photograph; its *sub-classes* are distinct regions of it, each filmed with its
own camera-motion family (zoom in, pan right, pan down, rotate). Videos of one sub-class share region
and motion up to random jitter; videos of one class share the photo's look; other classes share
nothing. Frames come from :func:`hapref.data.sources.render_shot`. The samplers draw the index
tuples the Radial losses train on: quadlets (q, p, i, n), triplets (q, p, n) and the two negative
schemes of the Quadruplet-2 baseline.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from hapref.data.pixels import float32_draws
from hapref.data.sources import CameraPath, render_shot

__all__ = [
    "FINEGRAINED_PHOTOS",
    "MOTIONS",
    "FineGrainedVideos",
    "make_finegrained_videos",
    "sample_quadlets",
    "sample_triplets",
    "sample_quadruplets",
    "relevance_gains",
]

#: Photos used as classes, in order (colourful, visually distinct scenes).
FINEGRAINED_PHOTOS = ("astronaut", "coffee", "chelsea", "rocket", "immunohistochemistry", "hubble_deep_field")
#: Camera-motion families; sub-class k of every class uses ``MOTIONS[k % 4]``.
MOTIONS = ("zoom-in", "pan-right", "pan-down", "rotate")


@dataclass
class FineGrainedVideos:
    """Variable-length videos (uint8 ``[T_k, S, S, 3]``) with class and global sub-class labels ``[N]``.

    Examples:
        >>> train, _ = make_finegrained_videos(num_classes=2, subclasses_per_class=2, train_per_subclass=2,
        ...                                   test_per_subclass=2, frames=(4, 6), size=16)
        >>> train.class_names[:1], len(train.subclass_names)
        (('astronaut',), 4)
    """

    videos: list[Tensor]
    classes: Tensor
    subclasses: Tensor
    class_names: tuple[str, ...]
    subclass_names: tuple[str, ...]

    def __len__(self) -> int:
        return len(self.videos)


def _region_centres(count: int) -> list[tuple[float, float]]:
    """``count`` well-separated view centres on a ring around the photo centre (normalised coordinates)."""
    return [(0.15 * math.cos(2 * math.pi * k / count + 0.3), 0.15 * math.sin(2 * math.pi * k / count + 0.3))
            for k in range(count)]


def _camera_path(centre: tuple[float, float], motion: str, u: list[float]) -> CameraPath:
    cx, cy = centre[0] + 0.15 * (2 * u[0] - 1), centre[1] + 0.15 * (2 * u[1] - 1)
    view = 0.5 + 0.1 * u[2]
    step = 0.12 + 0.08 * u[3]
    if motion == "zoom-in":
        return CameraPath((cx, cy, view, 0.0), (cx, cy, view * 0.6, 0.0))
    if motion == "pan-right":
        return CameraPath((cx - step, cy, view, 0.0), (cx + step, cy, view, 0.0))
    if motion == "pan-down":
        return CameraPath((cx, cy - step, view, 0.0), (cx, cy + step, view, 0.0))
    if motion == "rotate":
        return CameraPath((cx, cy, view, -0.35), (cx, cy, view, 0.35))
    raise ValueError(f"motion must be one of {MOTIONS}, got {motion!r}")


@float32_draws
def make_finegrained_videos(num_classes: int = 4, subclasses_per_class: int = 3, train_per_subclass: int = 6,
                            test_per_subclass: int = 3, frames: tuple[int, int] = (10, 16), size: int = 96,
                            seed: int = 0) -> tuple[FineGrainedVideos, FineGrainedVideos]:
    """Build the (train, test) splits; lengths are uniform in ``frames`` (inclusive), all deterministic in ``seed``.

    Examples:
        >>> train, test = make_finegrained_videos(num_classes=2, subclasses_per_class=2, train_per_subclass=2,
        ...                                      test_per_subclass=2, frames=(4, 6), size=16)
        >>> len(train.videos), train.classes.tolist(), train.subclasses.tolist()
        (8, [0, 0, 0, 0, 1, 1, 1, 1], [0, 0, 1, 1, 2, 2, 3, 3])
        >>> train.videos[0].dtype, tuple(train.videos[0].shape[1:])
        (torch.uint8, (16, 16, 3))
    """
    if not 2 <= num_classes <= len(FINEGRAINED_PHOTOS):
        raise ValueError(f"num_classes must lie in [2, {len(FINEGRAINED_PHOTOS)}], got {num_classes}")
    if subclasses_per_class < 2:
        raise ValueError(f"subclasses_per_class must be >= 2 (intermediates need a sibling), got {subclasses_per_class}")
    if train_per_subclass < 2 or test_per_subclass < 2:
        raise ValueError("train_per_subclass and test_per_subclass must be >= 2 (positives need a partner), "
                         f"got {train_per_subclass}, {test_per_subclass}")
    if not 2 <= frames[0] <= frames[1]:
        raise ValueError(f"frames must be (min, max) with 2 <= min <= max, got {frames}")
    generator = torch.Generator().manual_seed(seed)
    centres = _region_centres(subclasses_per_class)
    splits: dict[str, tuple[list[Tensor], list[int], list[int]]] = {"train": ([], [], []), "test": ([], [], [])}
    subclass_names = []
    for c, photo in enumerate(FINEGRAINED_PHOTOS[:num_classes]):
        for k in range(subclasses_per_class):
            sub = c * subclasses_per_class + k
            motion = MOTIONS[k % len(MOTIONS)]
            subclass_names.append(f"{photo}/{k}:{motion}")
            for split, count in (("train", train_per_subclass), ("test", test_per_subclass)):
                for _ in range(count):
                    u = torch.rand(4, generator=generator, dtype=torch.float64).tolist()
                    length = int(torch.randint(frames[0], frames[1] + 1, (1,), generator=generator))
                    video = render_shot(photo, _camera_path(centres[k], motion, u), length, size)
                    splits[split][0].append(video)
                    splits[split][1].append(c)
                    splits[split][2].append(sub)
    names = tuple(FINEGRAINED_PHOTOS[:num_classes])
    return tuple(  # type: ignore[return-value]
        FineGrainedVideos(v, torch.tensor(cl), torch.tensor(sc), names, tuple(subclass_names))
        for v, cl, sc in (splits["train"], splits["test"]))


def _draw(valid: Tensor, generator: torch.Generator, what: str) -> Tensor:
    """One uniformly random True column per row of ``valid [B, N]``; ValueError if a row has none."""
    if not valid.any(dim=1).all():
        raise ValueError(f"some anchors have no valid {what}: the label set is too small for this sampler")
    keys = torch.rand(valid.shape, generator=generator).masked_fill(~valid, -1.0)
    return keys.argmax(dim=1)


def _check_labels(classes: Tensor, subclasses: Tensor) -> None:
    if classes.ndim != 1 or classes.shape != subclasses.shape or classes.numel() == 0:
        raise ValueError(f"classes and subclasses must be equally long non-empty 1-D tensors, "
                         f"got {tuple(classes.shape)} and {tuple(subclasses.shape)}")


def _anchors_and_positives(classes: Tensor, subclasses: Tensor, count: int, generator: torch.Generator,
                           eligible: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Anchors drawn among ``eligible`` items that also have a positive partner, and their positives."""
    n = classes.numel()
    same_sub = subclasses[:, None] == subclasses[None, :]
    anchors = ((same_sub.sum(1) > 1) & eligible).nonzero().flatten()
    if anchors.numel() == 0:
        raise ValueError("no item has both a positive partner and the other members this sampler needs")
    q = anchors[torch.randint(anchors.numel(), (count,), generator=generator)]
    p = _draw(same_sub[q] & (torch.arange(n)[None] != q[:, None]), generator, "positive")
    return q, p, classes[q], subclasses[q]


@float32_draws
def sample_quadlets(classes: Tensor, subclasses: Tensor, count: int, generator: torch.Generator) -> Tensor:
    """``[count, 4]`` indices (q, p, i, n): p same sub-class, i same class other sub-class, n other class (Radial Sec. 3).

    Examples:
        >>> classes, subclasses = torch.tensor([0, 0, 0, 0, 1, 1]), torch.tensor([0, 0, 1, 1, 2, 2])
        >>> sample_quadlets(classes, subclasses, 3, torch.Generator().manual_seed(0))
        tensor([[0, 1, 2, 5],
                [3, 2, 1, 5],
                [1, 0, 3, 5]])
    """
    _check_labels(classes, subclasses)
    same_class = classes[:, None] == classes[None, :]
    same_sub = subclasses[:, None] == subclasses[None, :]
    eligible = (same_class & ~same_sub).any(1) & (~same_class).any(1)
    q, p, _, _ = _anchors_and_positives(classes, subclasses, count, generator, eligible)
    i = _draw(same_class[q] & ~same_sub[q], generator, "intermediate")
    n = _draw(~same_class[q], generator, "negative")
    return torch.stack([q, p, i, n], dim=1)


@float32_draws
def sample_triplets(classes: Tensor, subclasses: Tensor, count: int, generator: torch.Generator) -> Tensor:
    """``[count, 3]`` indices (q, p, n): p same sub-class, n any other sub-class (the Triplet baseline's labels).

    Examples:
        >>> classes, subclasses = torch.tensor([0, 0, 0, 0, 1, 1]), torch.tensor([0, 0, 1, 1, 2, 2])
        >>> t = sample_triplets(classes, subclasses, 3, torch.Generator().manual_seed(0))
        >>> same, other = subclasses[t[:, 0]] == subclasses[t[:, 1]], subclasses[t[:, 0]] != subclasses[t[:, 2]]
        >>> bool(same.all() and other.all())
        True
    """
    _check_labels(classes, subclasses)
    other_sub = subclasses[:, None] != subclasses[None, :]
    q, p, _, _ = _anchors_and_positives(classes, subclasses, count, generator, other_sub.any(1))
    n = _draw(other_sub[q], generator, "negative")
    return torch.stack([q, p, n], dim=1)


@float32_draws
def sample_quadruplets(classes: Tensor, subclasses: Tensor, count: int, generator: torch.Generator,
                       negatives: str = "a") -> Tensor:
    """``[count, 4]`` indices (q, p, n1, n2) for the Quadruplet-2 loss (Chen et al. 2017), Radial "Baselines".

    n1 and n2 lie outside q's sub-class and in different sub-classes from each other. ``negatives="a"``
    (variant 2a) lets them be intermediates (same class as q); ``"b"`` (2b) takes them from other classes only.

    Examples:
        >>> classes, subclasses = torch.tensor([0, 0, 0, 0, 1, 1]), torch.tensor([0, 0, 1, 1, 2, 2])
        >>> q = sample_quadruplets(classes, subclasses, 3, torch.Generator().manual_seed(0), negatives="b")
        >>> bool((classes[q[:, 2]] != classes[q[:, 0]]).all())
        True
    """
    if negatives not in ("a", "b"):
        raise ValueError(f"negatives must be 'a' or 'b', got {negatives!r}")
    _check_labels(classes, subclasses)
    allowed = subclasses[:, None] != subclasses[None, :]
    if negatives == "b":
        allowed &= classes[:, None] != classes[None, :]
    # an anchor needs negatives from at least two sub-classes
    n_subs = torch.stack([(allowed & (subclasses[None, :] == s)).any(1) for s in subclasses.unique()]).sum(0)
    q, p, _, _ = _anchors_and_positives(classes, subclasses, count, generator, n_subs >= 2)
    allowed = allowed[q]
    n1 = _draw(allowed, generator, "first negative")
    n2 = _draw(allowed & (subclasses[None, :] != subclasses[n1][:, None]), generator, "second negative")
    return torch.stack([q, p, n1, n2], dim=1)


def relevance_gains(query_classes: Tensor, query_subclasses: Tensor, db_classes: Tensor,
                    db_subclasses: Tensor) -> Tensor:
    """Graded relevance ``[Q, M]``: 2 same sub-class, 1 same class only, 0 other class (NDCG gains, Radial "Metrics").

    Examples:
        >>> relevance_gains(torch.tensor([0]), torch.tensor([0]), torch.tensor([0, 0, 1]), torch.tensor([0, 1, 2]))
        tensor([[2, 1, 0]])
    """
    same_class = query_classes[:, None] == db_classes[None, :]
    same_sub = query_subclasses[:, None] == db_subclasses[None, :]
    return same_class.long() + same_sub.long()
