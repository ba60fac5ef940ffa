"""Regional max pooling of CNN feature maps: L3-iMAC regions, iMAC and L3-iRMAC frame descriptors.

HAP-VR §3.2 (after ViSiL/S2VS) and TCA §3.2 (Eq. 1). For every layer: L2-normalise each
spatial position over channels, max-pool (a ``grid × grid`` layout of overlapping regions, or
the whole map), L2-normalise per layer, then concatenate the layers and L2-normalise again.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

POOLINGS = ("l3imac", "imac", "l3irmac")


def region_windows(size: int, grid: int) -> list[tuple[int, int]]:
    """``grid`` overlapping windows of length ceil(2·size/(grid+1)) spread evenly over ``size``.

    The L3-iMAC region geometry of HAP-VR §3.2 (the released HAP-VR code, https://github.com/yafeng19/HAP-VR).
    """
    length = max(1, math.ceil(2 * size / (grid + 1)))
    if grid == 1:
        return [(0, size)]
    starts = [math.floor(i * (size - length) / (grid - 1)) for i in range(grid)]
    return [(start, start + length) for start in starts]


def regional_max_pool(fmap: Tensor, grid: int = 3) -> Tensor:
    """Max over a ``grid × grid`` layout of overlapping regions: ``[T, C, H, W] -> [T, grid², C]``.

    Each window spans about half the map (as the 3×3 L3-iMAC pooling of ViSiL/S2VS, whose kernel
    is half the side with stride a quarter), so neighbouring regions overlap by half.
    """
    if fmap.ndim != 4:
        raise ValueError(f"fmap must have shape [T, C, H, W], got {tuple(fmap.shape)}")
    rows, cols = region_windows(fmap.shape[-2], grid), region_windows(fmap.shape[-1], grid)
    regions = [fmap[:, :, r0:r1, c0:c1].amax(dim=(-2, -1)) for r0, r1 in rows for c0, c1 in cols]
    return torch.stack(regions, dim=1)


def pool_layers(maps: Sequence[Tensor], pooling: str = "l3imac", grid: int = 3) -> Tensor:
    """Frame descriptors from a backbone's feature maps (HAP-VR §3.2; TCA §3.2, Eq. 1).

    - ``"l3imac"``: regions ``[T, grid², ΣC]`` (ViSiL/S2VS/HAP-VR region features, R = 9);
    - ``"imac"``: global max per channel, ``[T, ΣC]`` (TCA's iMAC);
    - ``"l3irmac"``: regions L2-normalised and summed, ``[T, ΣC]`` (TCA's L3-iRMAC).
    """
    if pooling not in POOLINGS:
        raise ValueError(f"pooling must be one of {POOLINGS}, got {pooling!r}")
    if len(maps) == 0:
        raise ValueError("maps must hold at least one feature map")
    parts = []
    for fmap in maps:
        fmap = F.normalize(fmap, dim=1)
        if pooling == "imac":
            parts.append(F.normalize(fmap.amax(dim=(-2, -1)), dim=-1))
            continue
        regions = F.normalize(regional_max_pool(fmap, grid), dim=-1)
        parts.append(F.normalize(regions.sum(dim=1), dim=-1) if pooling == "l3irmac" else regions)
    return F.normalize(torch.cat(parts, dim=-1), dim=-1)
