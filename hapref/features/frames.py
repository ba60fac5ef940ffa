"""Frozen per-frame features of whole data splits, shared by the pipelines that train on top of a fixed CNN.

:func:`extract_finegrained_features` embeds every video of the fine-grained set (Radial's FgVR setting, also
the AutoSSVH pipeline's data) with a frozen backbone, one global vector per frame (Radial Fig. 1(i)).
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor

from hapref.data.finegrained import make_finegrained_videos
from hapref.features.backbones import load_backbone
from hapref.models.radial import frame_features, pad_features

__all__ = ["FeatureSplit", "extract_finegrained_features"]


@dataclass
class FeatureSplit:
    """Padded frozen frame features ``[N, T, F]`` (float32), lengths ``[N]`` (int64) and labels of one split.

    Examples:
        >>> import torch
        >>> split = FeatureSplit(torch.zeros(2, 3, 4), torch.tensor([3, 2]), torch.tensor([0, 1]), torch.tensor([0, 2]))
        >>> tuple(split.features.shape), split.lengths.tolist()
        ((2, 3, 4), [3, 2])
    """

    features: Tensor
    lengths: Tensor
    classes: Tensor
    subclasses: Tensor


def extract_finegrained_features(data: dict, backbone: dict, data_seed: int = 0) -> tuple[FeatureSplit, FeatureSplit]:
    """Frozen-backbone frame features of the (train, test) fine-grained videos made with ``data`` settings.

    ``data`` holds keyword arguments of :func:`hapref.data.finegrained.make_finegrained_videos`, ``backbone``
    those of :func:`hapref.features.load_backbone`.

    Examples:
        >>> data = dict(num_classes=2, subclasses_per_class=2, train_per_subclass=2, test_per_subclass=2,
        ...             frames=(2, 3), size=32)
        >>> train, test = extract_finegrained_features(data, dict(name="small-cnn", image_size=32))
        >>> train.features.shape[0], test.features.shape[0], train.features.dtype
        (8, 8, torch.float32)
    """
    cnn = load_backbone(**backbone)
    splits = []
    for videos in make_finegrained_videos(seed=data_seed, **data):
        features, lengths = pad_features([frame_features(cnn, v) for v in videos.videos])
        splits.append(FeatureSplit(features, lengths, videos.classes, videos.subclasses))
    return splits[0], splits[1]
