"""Regional max pooling of CNN feature maps: L3-iMAC regions, iMAC and L3-iRMAC frame descriptors.

HAP-VR §3.2 (after ViSiL/S2VS) and TCA §3.2 (Eq. 1). Two region geometries:

* hapref's even windows (``"l3imac"``, :func:`region_windows`): for every layer, L2-normalise each spatial
  position over channels, max-pool a ``grid × grid`` layout of overlapping windows spread evenly over the map (or
  the whole map), L2-normalise per layer, then concatenate the layers and L2-normalise again;
* the released S2VS / HAP-VR windows (``"l3imac_released"``, :func:`released_l3imac`): max pooling with
  kernel 28, 14, 6, 3 and stride ``⌈s/2⌉`` on ResNet-50's layer1..4, no per-position normalisation.

On 56- and 28-cell maps the two layouts coincide; on 14- and 7-cell maps (ResNet-50's layer3/4 at 224 pixels)
they differ (see :func:`region_windows`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

POOLINGS = ("l3imac", "imac", "l3irmac", "l3imac_released", "l3irmac_released")
#: Max-pooling kernel of ResNet-50 layer1..4 in the released S2VS / HAP-VR extractor (stride ⌈s/2⌉).
RELEASED_KERNELS = (28, 14, 6, 3)


def region_windows(size: int, grid: int) -> list[tuple[int, int]]:
    """hapref's even windows: ``grid`` overlapping windows of length ceil(2·size/(grid+1)) spread evenly over ``size``.

    The geometry of the ``"l3imac"`` pooling, hapref's own reading of the L3-iMAC regions of HAP-VR §3.2 (for any
    map size and grid): *not* the released S2VS / HAP-VR windows, which max-pool with a fixed kernel per ResNet-50
    layer (28, 14, 6, 3) and stride ``⌈s/2⌉`` (:func:`released_l3imac`, ``"l3imac_released"``). The two agree on
    56- and 28-cell maps ((0, 28), (14, 42), (28, 56) and (0, 14), (7, 21), (14, 28)) and differ on the others:
    14 cells give (0, 7), (3, 10), (7, 14) here and (0, 6), (3, 9), (6, 12) released; 7 cells give (0, 4), (1, 5),
    (3, 7) here and (0, 3), (2, 5), (4, 7) released.

    Examples:
        >>> region_windows(7, 3)  # three windows of length 4 over 7 cells
        [(0, 4), (1, 5), (3, 7)]
        >>> region_windows(14, 3)  # the released windows on 14 cells are (0, 6), (3, 9), (6, 12)
        [(0, 7), (3, 10), (7, 14)]
    """
    length = max(1, math.ceil(2 * size / (grid + 1)))
    if grid == 1:
        return [(0, size)]
    starts = [math.floor(i * (size - length) / (grid - 1)) for i in range(grid)]
    return [(start, start + length) for start in starts]


def regional_max_pool(fmap: Tensor, grid: int = 3) -> Tensor:
    """Max over hapref's even ``grid × grid`` windows (:func:`region_windows`): ``[T, C, H, W] -> [T, grid², C]``.

    Each window spans about half the map, so neighbouring regions overlap by half (as the released 3×3 pooling
    does on ResNet-50's 56- and 28-cell maps, kernel half the side and stride a quarter; on 14 and 7 cells the
    released kernels 6 and 3 are shorter, see :func:`released_l3imac`).

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


def released_tca_windows(size: int) -> list[tuple[int, int]]:
    """The released TCA extractor's L3-iRMAC windows on a ``size``-cell side: ``p = int(2·size/7)``, kernel
    ``int(1.5·p)``, stride ``p`` (56 cells: (0, 24), (16, 40), (32, 56); hapref's even windows are (0, 28), (14, 42),
    (28, 56), :func:`region_windows`). Maps below 4 cells fall back to one window over the whole side.

    Examples:
        >>> released_tca_windows(56), released_tca_windows(28), released_tca_windows(7)
        ([(0, 24), (16, 40), (32, 56)], [(0, 12), (8, 20), (16, 28)], [(0, 3), (2, 5), (4, 7)])
    """
    p = int(size * 2 / 7)
    if p < 1:
        return [(0, size)]
    k = int(1.5 * p)
    return [(a, a + k) for a in range(0, size - k + 1, p)]


def released_l3irmac(maps: Sequence[Tensor]) -> Tensor:
    """TCA's L3-iRMAC with the released extractor's windows (:func:`released_tca_windows`), ``[T, ΣC]`` float.

    Per layer: L2-normalise each position over channels, max-pool each window, L2-normalise each region, sum the
    regions, L2-normalise; the layers concatenated and L2-normalised (TCA Eq. 1).

    Examples:
        >>> maps = [torch.rand(2, 4, 56, 56), torch.rand(2, 6, 28, 28)]
        >>> x = released_l3irmac(maps)
        >>> tuple(x.shape), torch.allclose(x.norm(dim=-1), torch.ones(2))
        ((2, 10), True)
    """
    parts = []
    for fmap in maps:
        fmap = F.normalize(fmap, dim=1)
        rows, cols = released_tca_windows(fmap.shape[-2]), released_tca_windows(fmap.shape[-1])
        regions = torch.stack([fmap[..., r0:r1, c0:c1].amax(dim=(-2, -1)) for r0, r1 in rows for c0, c1 in cols],
                              dim=1)                                                     # [T, R, C]
        parts.append(F.normalize(F.normalize(regions, dim=-1).sum(dim=1), dim=-1))
    return F.normalize(torch.cat(parts, dim=-1), dim=-1)


def pool_layers(maps: Sequence[Tensor], pooling: str = "l3imac", grid: int = 3) -> Tensor:
    """Frame descriptors from a backbone's feature maps (HAP-VR §3.2; TCA §3.2, Eq. 1).

    - ``"l3imac"``: regions ``[T, grid², ΣC]`` on hapref's even windows (:func:`region_windows`, any backbone and
      map size), each position L2-normalised before pooling: hapref's version of the ViSiL/S2VS/HAP-VR region
      features (R = 9), not the released windows;
    - ``"l3imac_released"``: the released S2VS / HAP-VR windows of :func:`hapref.features.released_l3imac` (ResNet-50
      maps; ``grid`` unused), comparable with the DnS / S2VS HDF5 feature files;
    - ``"imac"``: global max per channel, ``[T, ΣC]`` (TCA's iMAC);
    - ``"l3irmac"``: regions L2-normalised and summed, ``[T, ΣC]`` (TCA's L3-iRMAC on hapref's even windows);
    - ``"l3irmac_released"``: the same on the released TCA extractor's windows (:func:`released_l3irmac`).

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
    if pooling == "l3irmac_released":
        return released_l3irmac(maps)
    parts = []
    for fmap in maps:
        fmap = F.normalize(fmap, dim=1)
        if pooling == "imac":
            parts.append(F.normalize(fmap.amax(dim=(-2, -1)), dim=-1))
            continue
        regions = F.normalize(regional_max_pool(fmap, grid), dim=-1)
        parts.append(F.normalize(regions.sum(dim=1), dim=-1) if pooling == "l3irmac" else regions)
    return F.normalize(torch.cat(parts, dim=-1), dim=-1)
