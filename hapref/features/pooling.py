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

POOLINGS = ("l3imac", "imac", "l3irmac", "l3imac_released")
#: Max-pooling kernel of ResNet-50 layer1..4 in the released S2VS / HAP-VR extractor (stride ⌈s/2⌉).
RELEASED_KERNELS = (28, 14, 6, 3)


def region_windows(size: int, grid: int) -> list[tuple[int, int]]:
    """``grid`` overlapping windows of length ceil(2·size/(grid+1)) spread evenly over ``size``.

    The L3-iMAC region geometry of HAP-VR §3.2 (the released HAP-VR code, https://github.com/yafeng19/HAP-VR).

    Examples:
        >>> region_windows(7, 3)  # three windows of length 4 over 7 cells
        [(0, 4), (1, 5), (3, 7)]
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

    Examples:
        >>> fmap = torch.arange(16.0).view(1, 1, 4, 4)
        >>> regional_max_pool(fmap, grid=2).squeeze(-1)
        tensor([[10., 11., 14., 15.]])
    """
    if fmap.ndim != 4:
        raise ValueError(f"fmap must have shape [T, C, H, W], got {tuple(fmap.shape)}")
    rows, cols = region_windows(fmap.shape[-2], grid), region_windows(fmap.shape[-1], grid)
    regions = [fmap[:, :, r0:r1, c0:c1].amax(dim=(-2, -1)) for r0, r1 in rows for c0, c1 in cols]
    return torch.stack(regions, dim=1)


def released_l3imac(maps: Sequence[Tensor], kernels: Sequence[int] = RELEASED_KERNELS) -> Tensor:
    """L3-iMAC regions ``[T, R, ΣC]`` exactly as the released S2VS / HAP-VR extractor pools them (HAP-VR §3.2).

    Layer ``l`` (``[T, C_l, H_l, W_l]``) is max-pooled with kernel ``s_l`` and stride ``⌈s_l/2⌉``
    (s = 28, 14, 6, 3 for ResNet-50 layer1..4: a 3×3 grid each at 224×224 input), L2-normalised over
    channels, brought to the last layer's grid by adaptive max pooling (a no-op at 224) and
    normalised again; the layers are concatenated, regions listed row by row, and L2-normalised
    (https://github.com/gkordo/s2vs, model/extractors/resnet.py). No per-position normalisation
    before pooling, unlike ``"l3imac"``.

    Examples:
        >>> import torch
        >>> maps = [torch.rand(2, c, n, n) for c, n in ((4, 56), (5, 28), (6, 14), (7, 7))]
        >>> tuple(released_l3imac(maps).shape)
        (2, 9, 22)
    """
    if len(maps) != len(kernels):
        raise ValueError(f"maps must hold one feature map per kernel ({len(kernels)}), got {len(maps)}")
    parts = []
    for fmap, size in zip(maps, kernels):
        if fmap.ndim != 4 or min(fmap.shape[-2:]) < size:
            raise ValueError(f"every map must be [T, C, H, W] with H, W >= its kernel {size}, got {tuple(fmap.shape)}")
        parts.append(F.normalize(F.max_pool2d(fmap, size, math.ceil(size / 2)), dim=1))
    grid = parts[-1].shape[-2:]
    parts = [F.normalize(F.adaptive_max_pool2d(p, grid), dim=1) for p in parts]
    return F.normalize(torch.cat(parts, dim=1).flatten(2).transpose(1, 2), dim=-1)


def pool_layers(maps: Sequence[Tensor], pooling: str = "l3imac", grid: int = 3) -> Tensor:
    """Frame descriptors from a backbone's feature maps (HAP-VR §3.2; TCA §3.2, Eq. 1).

    - ``"l3imac"``: regions ``[T, grid², ΣC]`` (ViSiL/S2VS/HAP-VR region features, R = 9);
    - ``"l3imac_released"``: the released S2VS / HAP-VR windows of :func:`hapref.features.released_l3imac` (ResNet-50
      maps; ``grid`` unused), comparable with the DnS / S2VS HDF5 feature files;
    - ``"imac"``: global max per channel, ``[T, ΣC]`` (TCA's iMAC);
    - ``"l3irmac"``: regions L2-normalised and summed, ``[T, ΣC]`` (TCA's L3-iRMAC).

    Examples:
        >>> import torch
        >>> maps = [torch.rand(2, 4, 8, 8), torch.rand(2, 6, 4, 4)]
        >>> [tuple(pool_layers(maps, p).shape) for p in ("l3imac", "imac")]
        [(2, 9, 10), (2, 10)]
    """
    if pooling not in POOLINGS:
        raise ValueError(f"pooling must be one of {POOLINGS}, got {pooling!r}")
    if len(maps) == 0:
        raise ValueError("maps must hold at least one feature map")
    if pooling == "l3imac_released":
        return released_l3imac(maps)
    parts = []
    for fmap in maps:
        fmap = F.normalize(fmap, dim=1)
        if pooling == "imac":
            parts.append(F.normalize(fmap.amax(dim=(-2, -1)), dim=-1))
            continue
        regions = F.normalize(regional_max_pool(fmap, grid), dim=-1)
        parts.append(F.normalize(regions.sum(dim=1), dim=-1) if pooling == "l3irmac" else regions)
    return F.normalize(torch.cat(parts, dim=-1), dim=-1)
