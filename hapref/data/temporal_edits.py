"""Temporal-edit evaluation splits: the same benchmark instance with every copy edited in time.

A frame-level descriptor is computed frame by frame, so editing a video in time is a re-indexing of its
frames' features: :func:`temporal_edit_split` applies one edit of :data:`TEMPORAL_EDIT_SPLITS` to the
chosen database videos (typically every copy, the videos relevant to some query) of region or frame features
``[M, T, ...]`` with valid flags ``[M, T]``, and leaves the queries, the other videos and the relevance as they
are. Each edit is a map from the edited video's frames to the original's (:func:`edit_indices`):

* ``"none"`` — unchanged (the split the benchmark itself is);
* ``"reversed"`` — played backwards;
* ``"2x"`` — twice as fast (every other frame);
* ``"0.5x"`` — half as fast (every frame twice);
* ``"pause"`` — one frame held for a quarter of the video's length, at a random point;
* ``"local_shuffle"`` — the frames of each run of :data:`SHUFFLE_WINDOW` consecutive frames in a random order.
"""

from __future__ import annotations

import torch
from torch import Tensor

from hapref.validation import check_flags

__all__ = ["SHUFFLE_WINDOW", "TEMPORAL_EDIT_SPLITS", "edit_indices", "temporal_edit_split"]

TEMPORAL_EDIT_SPLITS = ("none", "reversed", "2x", "0.5x", "pause", "local_shuffle")
#: Frames per shuffled run of ``"local_shuffle"``.
SHUFFLE_WINDOW = 4


def edit_indices(length: int, edit: str, generator: torch.Generator | None = None) -> Tensor:
    """Frame indices (long ``[T']``) into a video of ``length`` frames that make its version under ``edit``.

    Examples:
        >>> edit_indices(5, "reversed").tolist(), edit_indices(5, "2x").tolist()
        ([4, 3, 2, 1, 0], [0, 2, 4])
        >>> edit_indices(3, "0.5x").tolist()
        [0, 0, 1, 1, 2, 2]
        >>> g = torch.Generator().manual_seed(0)
        >>> pause = edit_indices(8, "pause", g)                # one frame held for 8 // 4 = 2 more frames
        >>> len(pause), sorted(set(pause.tolist())) == list(range(8))
        (10, True)
        >>> sorted(edit_indices(8, "local_shuffle", g)[:4].tolist())   # a run keeps its own frames
        [0, 1, 2, 3]
    """
    if edit not in TEMPORAL_EDIT_SPLITS:
        raise ValueError(f"edit must be one of {TEMPORAL_EDIT_SPLITS}, got {edit!r}")
    if isinstance(length, bool) or not isinstance(length, int) or length < 1:
        raise ValueError(f"length must be an integer >= 1, got {length!r}")
    index = torch.arange(length)
    if edit == "reversed":
        return index.flip(0)
    if edit == "2x":
        return index[::2]
    if edit == "0.5x":
        return index.repeat_interleave(2)
    if edit == "pause":
        at = int(torch.randint(0, length, (), generator=generator))
        hold = index.new_full((max(1, length // 4),), at)
        return torch.cat([index[:at + 1], hold, index[at + 1:]])
    if edit == "local_shuffle":
        runs = index.split(SHUFFLE_WINDOW)
        return torch.cat([run[torch.randperm(len(run), generator=generator)] for run in runs])
    return index


def temporal_edit_split(database: Tensor, database_valid: Tensor, edit: str, edited: Tensor,
                        seed: int = 0) -> tuple[Tensor, Tensor]:
    """The database with every video marked in ``edited`` given the temporal ``edit`` (:func:`edit_indices`).

    Args:
        database: ``[M, T, ...]`` per-frame features (region ``[M, T, R, D]`` or frame ``[M, T, D]``), padded.
        database_valid: ``[M, T]`` bool, real frames first.
        edit: one of :data:`TEMPORAL_EDIT_SPLITS`.
        edited: ``[M]`` bool, the videos to edit (e.g. ``relevance.any(dim=0)``: every copy).
        seed: seeds the random edits (the pause's position, the local shuffle), video by video in order.

    Returns:
        ``(database' [M, T', ...], valid' [M, T'])`` in the dtype of ``database``: the edited videos re-indexed,
        the others unchanged, all padded with zeros to the longest (``T' >= 1``).

    Examples:
        >>> db = torch.arange(6.0).view(2, 3, 1)                  # two videos of 3 one-dim frames
        >>> valid = torch.tensor([[True, True, True], [True, True, False]])
        >>> out, v = temporal_edit_split(db, valid, "reversed", torch.tensor([False, True]))
        >>> out[..., 0].tolist(), v.tolist()
        ([[0.0, 1.0, 2.0], [4.0, 3.0, 0.0]], [[True, True, True], [True, True, False]])
        >>> temporal_edit_split(db, valid, "0.5x", torch.tensor([True, False]))[0].shape
        torch.Size([2, 6, 1])
    """
    if not isinstance(database, Tensor) or database.ndim < 2 or database.shape[0] == 0:
        shape = tuple(database.shape) if isinstance(database, Tensor) else type(database).__name__
        raise ValueError(f"database must be a tensor [M, T, ...] of per-frame features, got {shape}")
    valid = check_flags(database_valid, "database_valid", shape=database.shape[:2])
    edited = check_flags(edited, "edited", shape=database.shape[:1], meaning="True = a video to edit")
    lengths = valid.sum(dim=1)
    if not torch.equal(torch.arange(valid.shape[1])[None] < lengths[:, None], valid):
        raise ValueError("database_valid must mark a prefix of real frames (padding after the last real frame)")
    if edit not in TEMPORAL_EDIT_SPLITS:
        raise ValueError(f"edit must be one of {TEMPORAL_EDIT_SPLITS}, got {edit!r}")
    generator = torch.Generator().manual_seed(seed)
    videos = []
    for i in range(database.shape[0]):
        n = int(lengths[i])
        frames = database[i, :n]
        if bool(edited[i]) and n > 0:
            frames = frames[edit_indices(n, edit, generator)]
        videos.append(frames)
    longest = max(1, max(len(v) for v in videos))
    out = database.new_zeros((database.shape[0], longest, *database.shape[2:]))
    out_valid = torch.zeros(database.shape[0], longest, dtype=torch.bool)
    for i, frames in enumerate(videos):
        out[i, :len(frames)] = frames
        out_valid[i, :len(frames)] = True
    return out, out_valid
