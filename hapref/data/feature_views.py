"""Training on pre-extracted frame features (the DnS / S2VS HDF5 layout): temporal views and a held-out check.

Released HAP-VR, S2VS and TCA runs read per-video frame features from HDF5 files holding one dataset per
video id, ``[T, R, D]`` region features or ``[T, D]`` frame features (https://github.com/gkordo/s2vs,
https://github.com/xwen99/temporal_context_aggregation). Without pixels only the temporal part of the
S2VS augmentations applies: :func:`temporal_view` takes a window (weak) or one S2VS temporal transform then a
window (strong; shuffle-dropout's blanked frames become zero descriptors). :func:`feature_batch` gives a batch
of weak/strong views with S2VS labels, :func:`held_out_copies` a retrieval check on videos kept out of
training: each held-out video's strong view queries the weak views of all held-out videos.
"""

from __future__ import annotations

import os

import torch
from torch import Tensor

from hapref.data.augment import TEMPORAL_P, temporal_indices
from hapref.data.views import s2vs_labels

__all__ = ["feature_batch", "held_out_copies", "read_feature_videos", "temporal_view"]


def read_feature_videos(path: str | os.PathLike, ids: list[str] | None = None, min_len: int = 4,
                        ) -> tuple[list[str], list[Tensor]]:
    """Ids and float32 ``[T, R, D]`` features of the videos of an HDF5 file (``[T, D]`` becomes ``[T, 1, D]``).

    ``ids`` (default: every dataset, sorted) selects videos; ids absent from the file are skipped. Every video
    needs the same ``R`` and ``D``.

    Examples:
        >>> import tempfile, pathlib, h5py, numpy as np
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "features.hdf5"
        >>> with h5py.File(path, "w") as f:
        ...     _ = f.create_dataset("v1", data=np.ones((5, 9, 8), np.float32))
        ...     _ = f.create_dataset("v2", data=np.ones((2, 9, 8), np.float32))
        >>> ids, videos = read_feature_videos(path)
        >>> ids, [tuple(v.shape) for v in videos]
        (['v1', 'v2'], [(5, 9, 8), (4, 9, 8)])
    """
    from hapref.data.loaders import HDF5Features

    if not os.path.isfile(path):
        raise ValueError(f"features must be an HDF5 file of per-video frame features, got {str(path)!r}")
    dataset = HDF5Features(path, ids=ids, min_len=min_len)
    videos = [dataset[i]["frames"] for i in range(len(dataset))]
    if len(videos) < 2:
        raise ValueError(f"{path} must hold at least 2 videos, got {len(videos)}")
    shapes = {tuple(v.shape[1:]) for v in videos}
    if len(shapes) != 1:
        raise ValueError(f"every video of {path} must have the same [R, D] per frame, got {sorted(shapes)}")
    return dataset.ids, videos


def temporal_view(video: Tensor, length: int, strong: bool, generator: torch.Generator,
                  temporal_p: tuple[float, ...] = TEMPORAL_P) -> Tensor:
    """``length`` frames of ``video [T, ...]``: a random window (weak) or a temporal transform + window (strong),
    the transform drawn with the weights ``temporal_p`` (:data:`hapref.data.augment.TEMPORAL_P`).

    Examples:
        >>> v = torch.arange(6.0)[:, None]
        >>> temporal_view(v, 4, False, torch.Generator().manual_seed(0)).shape
        torch.Size([4, 1])
    """
    index, code = temporal_indices(video.shape[0], length, strong, generator, temporal_p=temporal_p)
    view = video[index]
    blank = code != 0
    if blank.any():
        view = view.clone()
        view[blank] = 0
    return view


def feature_batch(videos: list[Tensor], length: int, generator: torch.Generator,
                  temporal_p: tuple[float, ...] = TEMPORAL_P) -> tuple[Tensor, Tensor]:
    """Views ``[2B, length, ...]`` (weak views of ``videos``, then strong ones with the temporal mix
    ``temporal_p``) and S2VS labels ``[2B, 2B]``.

    Examples:
        >>> views, labels = feature_batch([torch.randn(6, 2, 4), torch.randn(9, 2, 4)], 4,
        ...                               torch.Generator().manual_seed(0))
        >>> tuple(views.shape), labels.int().tolist()
        ((4, 4, 2, 4), [[1, 0, 1, 0], [0, 1, 0, 1], [1, 0, 1, 0], [0, 1, 0, 1]])
    """
    weak = [temporal_view(v, length, False, generator) for v in videos]
    strong = [temporal_view(v, length, True, generator, temporal_p) for v in videos]
    return torch.stack(weak + strong), s2vs_labels(torch.eye(len(videos)))


def held_out_copies(videos: list[Tensor], length: int, generator: torch.Generator,
                    ) -> tuple[Tensor, Tensor, Tensor]:
    """Queries ``[N, length, ...]`` (strong views), database ``[N, length, ...]`` (weak views), relevance ``[N, N]``.

    Each query is relevant to the weak view of its own video only (copy detection of temporal edits).

    Examples:
        >>> q, db, rel = held_out_copies([torch.randn(8, 1, 4) for _ in range(3)], 4, torch.Generator().manual_seed(0))
        >>> tuple(q.shape), bool(rel.equal(torch.eye(3, dtype=torch.bool)))
        ((3, 4, 1, 4), True)
    """
    database = torch.stack([temporal_view(v, length, False, generator) for v in videos])
    queries = torch.stack([temporal_view(v, length, True, generator) for v in videos])
    return queries, database, torch.eye(len(videos), dtype=torch.bool)
