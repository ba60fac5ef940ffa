"""Frozen per-frame features of whole data splits, shared by the pipelines that train on top of a fixed CNN.

:func:`frame_features` runs a backbone over a clip's frames (``[T, F]``) and :func:`pad_features` right-pads
variable-length clips into one batch; the quadlet network (:mod:`hapref.models.radial`) and the training
pipelines use both.

:func:`extract_finegrained_features` embeds every video of the fine-grained set (Radial's FgVR setting, also
the AutoSSVH pipeline's data) with a frozen backbone, one global vector per frame (Radial Fig. 1(i)).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import pad_sequence

from hapref.data.finegrained import make_finegrained_videos
from hapref.features.backbones import load_backbone

__all__ = ["FeatureSplit", "extract_finegrained_features", "frame_features", "pad_features"]


def frame_features(backbone: nn.Module, frames: Tensor, chunk: int = 64, grad: bool = False) -> Tensor:
    """Per-frame vectors ``[T, F]`` from a backbone, ``chunk`` frames at a time; gradients only with ``grad``.

    Backbones of :mod:`hapref.features` are used through their ``embed`` (global-average-pooled
    last stage); any other module must map frames to ``[T, F]`` itself.
    The per-frame CNN of the quadlet network (Radial Fig. 1(i)).

    Examples:
        >>> from hapref.features import SmallCNN
        >>> frame_features(SmallCNN(), torch.zeros(5, 32, 32, 3, dtype=torch.uint8)).shape
        torch.Size([5, 128])
        >>> cnn = SmallCNN(frozen=False)
        >>> frame_features(cnn, torch.zeros(2, 32, 32, 3, dtype=torch.uint8), grad=True).requires_grad
        True
    """
    embed = backbone.embed if hasattr(backbone, "embed") else backbone
    with torch.set_grad_enabled(grad and torch.is_grad_enabled()):
        return torch.cat([embed(frames[s:s + chunk]) for s in range(0, frames.shape[0], chunk)])


def pad_features(sequences: list[Tensor]) -> tuple[Tensor, Tensor]:
    """Right-pad ``[T_k, F]`` sequences to ``[B, T_max, F]``; also return the lengths ``[B]``.

    Input of the quadlet network's LSTM (Radial Fig. 1(i)).

    Examples:
        >>> padded, lengths = pad_features([torch.ones(2, 3), torch.ones(4, 3)])
        >>> padded.shape, lengths
        (torch.Size([2, 4, 3]), tensor([2, 4]))
    """
    if not sequences:
        raise ValueError("sequences must hold at least one [T, F] tensor")
    lengths = torch.tensor([s.shape[0] for s in sequences])
    if (lengths < 1).any():
        raise ValueError("every sequence in sequences needs at least one frame")
    return pad_sequence(sequences, batch_first=True), lengths


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
