"""A small class / sub-class video set in the spirit of Dog-Birds (Radial loss paper, "Datasets"), built offline.

A *class* is one real photograph; its *sub-classes* are distinct regions of it, each filmed with its
own camera-motion family (zoom in, pan right, pan down, rotate). Videos of one sub-class share region
and motion up to random jitter; videos of one class share the photo's look; other classes share
nothing. Frames come from :func:`hapref.data.sources.render_shot`. The samplers draw the index
tuples the Radial losses train on: quadlets (q, p, i, n), triplets (q, p, n) and the two negative
schemes of the Quadruplet-2 baseline.

``design="motion"`` builds a harder set from the same photos: the sub-classes of a class film the *same*
region and differ only in the direction of the camera move (zoom in / zoom out, pan right / pan left). A clip
of the reversed sub-class is a forward clip played backwards, so any order-free summary of its frames (a
mean over frames, a bag of frames) is distributed identically for the two siblings: only the frame order
separates them.
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
    "motion_clip",
    "MOTIONS",
    "MOTION_PAIRS",
    "DESIGNS",
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
#: ``design="motion"``: sub-classes 2j and 2j + 1 of a class are ``MOTION_PAIRS[j]`` forward and reversed.
MOTION_PAIRS = (("zoom-in", "zoom-out"), ("pan-right", "pan-left"))
#: ``"region"`` (default): sub-classes are regions with their own motion; ``"motion"``: one region, the
#: sub-classes differ only in the motion's direction.
DESIGNS = ("region", "motion")


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


def motion_clip(photo: str, motion: str, u: list[float], length: int, size: int) -> Tensor:
    """One clip of ``design="motion"``: ``motion`` of :data:`MOTION_PAIRS` over the photo's centre region.

    ``u`` holds 5 uniforms: centre jitter (x, y), view size (pans), the start of the filmed part of the move and
    its speed. The clip films a short random stretch (15-35 %) of one long move, so where a clip lies along the
    move (its absolute zoom or position) says little about the direction; the second
    motion of a pair is the first one's clip played backwards, so the two have the same frames in reverse order.

    Examples:
        >>> u = [0.5, 0.5, 0.5, 0.2, 0.7]
        >>> zoom_in, zoom_out = (motion_clip("coffee", m, u, 5, 16) for m in ("zoom-in", "zoom-out"))
        >>> zoom_in.shape, torch.equal(zoom_out, zoom_in.flip(0))
        (torch.Size([5, 16, 16, 3]), True)
    """
    pairs = {m: (j, k) for j, pair in enumerate(MOTION_PAIRS) for k, m in enumerate(pair)}
    if motion not in pairs:
        raise ValueError(f"motion must be one of {[m for pair in MOTION_PAIRS for m in pair]}, got {motion!r}")
    pair, reverse = pairs[motion]
    cx, cy = 0.08 * (2 * u[0] - 1), 0.08 * (2 * u[1] - 1)
    span = 0.15 + 0.2 * u[4]                  # the clip films this fraction of one long move (speed jitter) ...
    a = (1 - span) * u[3]                     # ... starting this far along it (start offset)
    b = a + span
    if pair == 0:                             # the long move: zoom from view 0.9 down to 0.4
        lerp = lambda t: 0.9 - 0.5 * t
        path = CameraPath((cx, cy, lerp(a), 0.0), (cx, cy, lerp(b), 0.0))
    else:                                     # the long move: pan across 0.8 of the photo at view 0.5 + jitter
        view = 0.5 + 0.1 * u[2]
        lerp = lambda t: cx - 0.4 + 0.8 * t
        path = CameraPath((lerp(a), cy, view, 0.0), (lerp(b), cy, view, 0.0))
    video = render_shot(photo, path, length, size)
    return video.flip(0).contiguous() if reverse else video


@float32_draws
def make_finegrained_videos(num_classes: int = 4, subclasses_per_class: int = 3, train_per_subclass: int = 6,
                            test_per_subclass: int = 3, frames: tuple[int, int] = (10, 16), size: int = 96,
                            seed: int = 0, design: str = "region") -> tuple[FineGrainedVideos, FineGrainedVideos]:
    """Build the (train, test) splits; lengths are uniform in ``frames`` (inclusive), all deterministic in ``seed``.

    ``design`` (:data:`DESIGNS`): ``"region"`` gives each sub-class its own region and motion family;
    ``"motion"`` films every sub-class of a class over the same (jittered) centre region, sub-classes 2j and
    2j + 1 being the two directions of ``MOTION_PAIRS[j]`` (:func:`motion_clip`); it needs an even
    ``subclasses_per_class`` of at most ``2 * len(MOTION_PAIRS)``.

    Examples:
        >>> train, test = make_finegrained_videos(num_classes=2, subclasses_per_class=2, train_per_subclass=2,
        ...                                      test_per_subclass=2, frames=(4, 6), size=16)
        >>> len(train.videos), train.classes.tolist(), train.subclasses.tolist()
        (8, [0, 0, 0, 0, 1, 1, 1, 1], [0, 0, 1, 1, 2, 2, 3, 3])
        >>> train.videos[0].dtype, tuple(train.videos[0].shape[1:])
        (torch.uint8, (16, 16, 3))
        >>> motion, _ = make_finegrained_videos(num_classes=2, subclasses_per_class=2, train_per_subclass=2,
        ...                                    test_per_subclass=2, frames=(4, 6), size=16, design="motion")
        >>> motion.subclass_names
        ('astronaut/0:zoom-in', 'astronaut/1:zoom-out', 'coffee/0:zoom-in', 'coffee/1:zoom-out')
    """
    if design not in DESIGNS:
        raise ValueError(f"design must be one of {DESIGNS}, got {design!r}")
    if design == "motion" and (subclasses_per_class % 2 or subclasses_per_class > 2 * len(MOTION_PAIRS)):
        raise ValueError(f"design='motion' needs subclasses_per_class in (2, 4), got {subclasses_per_class}")
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
            motion = MOTIONS[k % len(MOTIONS)] if design == "region" else MOTION_PAIRS[k // 2][k % 2]
            subclass_names.append(f"{photo}/{k}:{motion}")
            for split, count in (("train", train_per_subclass), ("test", test_per_subclass)):
                for _ in range(count):
                    u = torch.rand(4 if design == "region" else 5, generator=generator, dtype=torch.float64).tolist()
                    length = int(torch.randint(frames[0], frames[1] + 1, (1,), generator=generator))
                    if design == "region":
                        video = render_shot(photo, _camera_path(centres[k], motion, u), length, size)
                    else:
                        video = motion_clip(photo, motion, u, length, size)
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
