"""torch Datasets of videos keyed by id, and a collate function that pads variable-length videos."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor
from torch.utils.data import Dataset


class VideoDataset(Dataset):
    """Videos in memory: item ``i`` is ``{"id": str, "index": i, "frames": uint8 [T, H, W, 3]}``.

    Examples:
        >>> data = VideoDataset(["a", "b"], [torch.zeros(3, 8, 8, 3, dtype=torch.uint8),
        ...                                  torch.zeros(5, 8, 8, 3, dtype=torch.uint8)])
        >>> len(data), data[1]["id"], data[1]["frames"].shape
        (2, 'b', torch.Size([5, 8, 8, 3]))
    """

    def __init__(self, ids: Sequence[str], videos: Sequence[Tensor]) -> None:
        if len(ids) != len(videos):
            raise ValueError(f"ids and videos must have the same length, got {len(ids)} and {len(videos)}")
        for vid, frames in zip(ids, videos):
            if frames.dtype != torch.uint8 or frames.ndim != 4 or frames.shape[-1] != 3:
                raise ValueError(f"videos[{vid!r}] must be uint8 [T, H, W, 3], "
                                 f"got {frames.dtype} {tuple(frames.shape)}")
        self.ids = list(ids)
        self.videos = list(videos)

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, index: int) -> dict:
        return {"id": self.ids[index], "index": index, "frames": self.videos[index]}

    @property
    def num_frames(self) -> Tensor:
        """Length of every video, ``[N]`` int64 (``T`` of each ``frames``), e.g. to sort or bucket by length.

        Examples:
            >>> data = VideoDataset(["a", "b"], [torch.zeros(3, 8, 8, 3, dtype=torch.uint8),
            ...                                  torch.zeros(5, 8, 8, 3, dtype=torch.uint8)])
            >>> data.num_frames
            tensor([3, 5])
            >>> torch.equal(collate_videos([data[0], data[1]])["valid"].sum(dim=1), data.num_frames)
            True
        """
        return torch.tensor([v.shape[0] for v in self.videos])


def collate_videos(batch: Sequence[dict]) -> dict:
    """Stack videos of different lengths: ``frames [B, T_max, ...]`` zero-padded at the end, ``valid [B, T_max]`` bool
    (True on real frames), ``ids`` and ``index`` lists. Works for pixels and for per-frame features alike.

    Examples:
        >>> batch = collate_videos([{"id": "a", "index": 0, "frames": torch.ones(2, 4, 4, 3)},
        ...                         {"id": "b", "index": 1, "frames": torch.ones(3, 4, 4, 3)}])
        >>> batch["frames"].shape, batch["valid"]
        (torch.Size([2, 3, 4, 4, 3]), tensor([[ True,  True, False],
                [ True,  True,  True]]))
    """
    if len(batch) == 0:
        raise ValueError("batch must hold at least one item, got an empty batch")
    lengths = [item["frames"].shape[0] for item in batch]
    first = batch[0]["frames"]
    frames = first.new_zeros((len(batch), max(lengths), *first.shape[1:]))
    valid = torch.zeros(len(batch), max(lengths), dtype=torch.bool)
    for b, (item, n) in enumerate(zip(batch, lengths)):
        frames[b, :n] = item["frames"]
        valid[b, :n] = True
    return {"ids": [item["id"] for item in batch], "index": [item.get("index") for item in batch],
            "frames": frames, "valid": valid}
