"""Batched, cached frame/region feature extraction: backbone -> regional pooling -> PCA whitening.

HAP-VR §3.2 (L3-iMAC region features ``[T, 9, D]``) and TCA §3.2 (iMAC / L3-iRMAC ``[T, D]``).
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
import warnings
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from tqdm.auto import tqdm

from hapref.data.cache import source_digest
from hapref.features import backbones as backbones_module, pooling as pooling_module
from hapref.features.backbones import Backbone, load_backbone, to_float_frames
from hapref.features.pooling import POOLINGS, pool_layers
from hapref.features.whitening import PCAWhitening
from hapref.files import CorruptFileError, atomic_torch_save, load_verified, set_aside


def released_frames(frames: Tensor, resize: int = 256, crop: int = 224) -> Tensor:
    """Frames as the released S2VS / HAP-VR loaders feed the extractor: float ``[T, 3, crop, crop]`` in [0, 1].

    The shorter side is resized to ``resize`` (bicubic, aspect ratio kept), then the centre
    ``crop × crop`` square is cut (HAP-VR §3.2; https://github.com/gkordo/s2vs, ``utils.py``). Input: uint8
    ``[T, H, W, 3]`` or float ``[T, 3, H, W]`` in [0, 1].

    Examples:
        >>> import torch
        >>> tuple(released_frames(torch.zeros(2, 240, 320, 3, dtype=torch.uint8)).shape)
        (2, 3, 224, 224)
    """
    x = to_float_frames(frames)
    if resize < crop:
        raise ValueError(f"resize must be >= crop, got {resize} < {crop}")
    h, w = x.shape[-2:]
    ratio = resize / min(h, w)
    size = (max(crop, round(h * ratio)), max(crop, round(w * ratio)))
    x = F.interpolate(x, size=size, mode="bicubic", align_corners=False).clamp_(0, 1)
    top, left = (size[0] - crop) // 2, (size[1] - crop) // 2
    return x[..., top:top + crop, left:left + crop]


class FeatureExtractor(nn.Module):
    """Frames ``[T, H, W, 3]`` uint8 -> L3-iMAC regions ``[T, R, D]`` or iMAC / L3-iRMAC ``[T, D]``.

    ``backbone`` is a name for :func:`load_backbone` or a :class:`Backbone`; ``pooling`` one of
    ``"l3imac"``, ``"l3imac_released"``, ``"imac"``, ``"l3irmac"`` (default: ``"l3imac_released"`` for
    ``"resnet50"``, ``"l3imac"`` otherwise); ``whitening`` an optional :class:`PCAWhitening` (fit one
    with :meth:`fit_whitening`, or load the released ViSiL file with :meth:`hapref.features.PCAWhitening.load_visil`).
    Frames are processed ``batch_size`` at a time without gradients; the extractor is frozen.
    HAP-VR §3.2 region features; TCA §3.2 (Eq. 1) frame features.

    ``FeatureExtractor("resnet50", whitening=PCAWhitening.load_visil("pca_resnet50_vcdb_1M.pth"))`` is
    the released S2VS / HAP-VR extractor: frames through :func:`hapref.features.released_frames` (shorter side 256,
    centre crop 224), normalised with the released mean 0.45 and std 0.225 per channel, ResNet-50
    layer1..4 pooled by :func:`hapref.features.released_l3imac`, PCA-whitened to 512 and
    L2-normalised: features comparable with the DnS / S2VS HDF5 files (needs torchvision).

    Examples:
        >>> from hapref.features import SmallCNN
        >>> extractor = FeatureExtractor(SmallCNN(image_size=32))
        >>> extractor.pooling, extractor(torch.zeros(3, 32, 32, 3, dtype=torch.uint8)).shape
        ('l3imac', torch.Size([3, 9, 240]))
    """

    def __init__(self, backbone: str | Backbone = "efficientnet-lite0", pooling: str | None = None, grid: int = 3,
                 whitening: PCAWhitening | None = None, batch_size: int = 64) -> None:
        super().__init__()
        if pooling is None:
            pooling = "l3imac_released" if backbone == "resnet50" else "l3imac"
        if pooling not in POOLINGS:
            raise ValueError(f"pooling must be one of {POOLINGS}, got {pooling!r}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.backbone_name = backbone if isinstance(backbone, str) else type(backbone).__name__
        self.backbone = load_backbone(backbone) if isinstance(backbone, str) else backbone
        self.pooling, self.grid, self.batch_size = pooling, grid, batch_size
        self.whitening = whitening
        self.released = pooling == "l3imac_released"
        if self.released:  # the released frame normalisation (S2VS model/layers.py, VideoNormalizer)
            self.backbone.mean.fill_(0.45)
            self.backbone.std.fill_(0.225)

    @property
    def device(self) -> torch.device:
        """The device the backbone (hence every output and cached load) lives on; it follows ``.to(...)``.

        Examples:
            >>> from hapref.features import SmallCNN
            >>> FeatureExtractor(SmallCNN(image_size=32)).to("cpu").device
            device(type='cpu')
        """
        return self.backbone.mean.device

    @torch.no_grad()
    def descriptors(self, frames: Tensor) -> Tensor:
        """Pooled, L2-normalised descriptors before whitening, computed in batches of frames.

        uint8 frames ``[T, H, W, 3]`` (or float ``[T, 3, H, W]``) -> float32 ``[T, R, D]`` for the regional
        poolings (``R = grid²`` regions, D the sum of the backbone's channels) or ``[T, D]`` for ``"imac"`` /
        ``"l3irmac"``; ``batch_size`` frames go through the backbone at a time, which does not change the result.

        Examples:
            >>> from hapref.features import SmallCNN
            >>> g = torch.Generator().manual_seed(0)
            >>> frames = torch.randint(0, 256, (5, 32, 32, 3), dtype=torch.uint8, generator=g)
            >>> x = FeatureExtractor(SmallCNN(image_size=32), batch_size=2).descriptors(frames)
            >>> x.shape, torch.allclose(x.norm(dim=-1), torch.ones(5, 9))
            (torch.Size([5, 9, 240]), True)
            >>> one_batch = FeatureExtractor(SmallCNN(image_size=32), batch_size=64).descriptors(frames)
            >>> torch.allclose(x, one_batch, atol=1e-6)
            True
        """
        prepare = released_frames if self.released else (lambda x: x)
        outs = [pool_layers(self.backbone(prepare(frames[i:i + self.batch_size])), self.pooling, self.grid)
                for i in range(0, frames.shape[0], self.batch_size)]
        return torch.cat(outs) if outs else torch.empty(0, device=self.device)

    @torch.no_grad()
    def forward(self, frames: Tensor) -> Tensor:
        """Region descriptors ``[T, R, D]`` (whitened when a whitening is set) of uint8 frames ``[T, H, W, 3]``.

        Examples:
            >>> from hapref.features import SmallCNN
            >>> FeatureExtractor(SmallCNN(image_size=32))(torch.zeros(3, 32, 32, 3, dtype=torch.uint8)).shape
            torch.Size([3, 9, 240])
        """
        x = self.descriptors(frames)
        return self.whitening(x) if self.whitening is not None else x

    def fit_whitening(self, videos: Iterable[Tensor], dim: int | None = None,
                      frames_per_video: int | None = None) -> PCAWhitening:
        """Fit (and install) PCA whitening on descriptors of ``videos`` (every frame, or an even subsample).

        Args:
            videos: frame tensors, uint8 ``[T, H, W, 3]`` each; every region descriptor is a PCA sample.
            dim: whitened size kept (see :meth:`PCAWhitening.fit`).
            frames_per_video: at most this many evenly spaced frames per video (None: all).

        Examples:
            >>> from hapref.features import SmallCNN
            >>> g = torch.Generator().manual_seed(0)
            >>> videos = [torch.randint(0, 256, (6, 32, 32, 3), dtype=torch.uint8, generator=g) for _ in range(3)]
            >>> extractor = FeatureExtractor(SmallCNN(image_size=32))
            >>> pca = extractor.fit_whitening(videos, dim=16, frames_per_video=4)
            >>> extractor.whitening is pca, extractor(videos[0]).shape  # now [T, 9, 16]
            (True, torch.Size([6, 9, 16]))
            >>> torch.allclose(extractor(videos[0]), pca(extractor.descriptors(videos[0])))
            True
        """
        samples = []
        for frames in videos:
            if frames_per_video is not None and frames.shape[0] > frames_per_video:
                frames = frames[torch.linspace(0, frames.shape[0] - 1, frames_per_video).round().long()]
            samples.append(self.descriptors(frames).flatten(0, -2))
        self.whitening = PCAWhitening.fit(torch.cat(samples), dim=dim)
        return self.whitening

    def config_hash(self) -> str:
        """Short hash of everything that changes the output: backbone, pooling, grid, image size, whitening, code.

        A 16-character hex string; :meth:`extract` names its cache folder with it, so features computed
        under another configuration are never reused.

        Examples:
            >>> from hapref.features import SmallCNN
            >>> a, b = FeatureExtractor(SmallCNN(image_size=32)), FeatureExtractor(SmallCNN(image_size=32))
            >>> len(a.config_hash()), a.config_hash() == b.config_hash()  # same weights, same settings
            (16, True)
            >>> a.config_hash() == FeatureExtractor(SmallCNN(image_size=32), pooling="imac").config_hash()
            False
            >>> a.config_hash() == FeatureExtractor(SmallCNN(image_size=32, seed=1)).config_hash()  # other weights
            False
        """
        code = source_digest(backbones_module, pooling_module, sys.modules[__name__])
        spec = json.dumps([self.backbone_name, self.pooling, self.grid, self.backbone.image_size, code,
                           str(torch.get_default_dtype())])
        digest = hashlib.sha256(spec.encode())
        for tensor in self.backbone.state_dict().values():
            digest.update(tensor.detach().cpu().contiguous().numpy().tobytes()[:4096])
        if self.whitening is not None:
            for tensor in self.whitening.state_dict().values():
                digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
        return digest.hexdigest()[:16]

    def extract(self, videos: Mapping[str, Tensor] | Iterable[tuple[str, Tensor]],
                cache_dir: str | Path | None = None, progress: bool = True) -> dict[str, Tensor]:
        """Features for every ``(video_id, frames)``, as a dict, on the extractor's device.

        With ``cache_dir``, features are stored as ``<cache_dir>/<config hash>/<video id>-<frames
        hash>.pt`` (atomic writes, loaded with ``weights_only=True``) and reused on the next call; the
        frames' content is part of the name, so a regenerated video never reuses stale features.

        Args:
            videos: ``{video_id: frames}`` or ``(video_id, frames)`` pairs, frames uint8 ``[T, H, W, 3]``.
            cache_dir: folder for the feature cache (None: no cache).
            progress: show a tqdm progress bar.

        Returns:
            ``{video_id: features}``, each as :meth:`forward` gives it (``[T, R, D]`` or ``[T, D]``).

        Examples:
            >>> import tempfile
            >>> from pathlib import Path
            >>> from hapref.features import SmallCNN
            >>> g = torch.Generator().manual_seed(0)
            >>> videos = {"a": torch.randint(0, 256, (4, 32, 32, 3), dtype=torch.uint8, generator=g),
            ...           "b": torch.randint(0, 256, (2, 32, 32, 3), dtype=torch.uint8, generator=g)}
            >>> extractor = FeatureExtractor(SmallCNN(image_size=32))
            >>> with tempfile.TemporaryDirectory() as tmp:
            ...     first = extractor.extract(videos, cache_dir=tmp, progress=False)
            ...     cached = len(list(Path(tmp).rglob("*.pt")))
            ...     again = extractor.extract(videos, cache_dir=tmp, progress=False)  # read back from the cache
            >>> {k: tuple(v.shape) for k, v in first.items()}, cached
            ({'a': (4, 9, 240), 'b': (2, 9, 240)}, 2)
            >>> all(torch.equal(first[k], again[k]) for k in videos), torch.equal(first["a"], extractor(videos["a"]))
            (True, True)
        """
        items: Iterator[tuple[str, Tensor]] = iter(videos.items() if isinstance(videos, Mapping) else videos)
        folder = Path(cache_dir) / self.config_hash() if cache_dir is not None else None
        total = len(videos) if isinstance(videos, Mapping) else None
        features = {}
        for video_id, frames in tqdm(items, total=total, disable=not progress, desc="features"):
            path = None
            if folder is not None:
                content = hashlib.sha256(frames.detach().cpu().contiguous().numpy().tobytes()).hexdigest()[:16]
                path = folder / f"{re.sub(r'[^A-Za-z0-9_.-]', '_', str(video_id))}-{content}.pt"
            if path is not None and path.exists():
                try:
                    cached = load_verified(path, map_location=self.device, expect=Tensor)
                    if cached.ndim < 2 or cached.shape[0] != frames.shape[0] or not cached.is_floating_point():
                        raise CorruptFileError(f"{path} holds features of shape {tuple(cached.shape)} "
                                               f"({cached.dtype}) for {frames.shape[0]} frames")
                    features[video_id] = cached
                    continue
                except CorruptFileError as err:
                    aside = set_aside(path)
                    warnings.warn(f"{err}; set aside as {aside.name}, recomputing", stacklevel=2)
            features[video_id] = self(frames)
            if path is not None:
                atomic_torch_save(features[video_id].cpu(), path)
        return features
