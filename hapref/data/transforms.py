"""Copy transformations: how a near-duplicate of a video is made (temporal, spatial and codec edits).

Every transformation takes uint8 frames ``[T, H, W, 3]`` and a ``torch.Generator`` and returns the edited
frames and a small dict of the parameters it drew, so each copy records exactly what was done to it.
Transformations that mix in other footage (insertion into a distractor, picture-in-picture) take the
host video as ``host``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from hapref.data.pixels import bilinear_resize, round_pixels

Params = dict[str, float | int | str]


def uniform(generator: torch.Generator, low: float, high: float) -> float:
    """A float drawn uniformly from [low, high) with ``generator``.

    Examples:
        >>> uniform(torch.Generator().manual_seed(0), 0.5, 0.8)
        0.7910159005419659
    """
    return low + (high - low) * torch.rand((), generator=generator, dtype=torch.float64).item()


def randint(generator: torch.Generator, low: int, high: int) -> int:
    """An integer in [low, high] (inclusive).

    Examples:
        >>> randint(torch.Generator().manual_seed(0), 1, 6)
        3
    """
    return int(torch.randint(low, high + 1, (), generator=generator).item())


def _to_float(frames: Tensor) -> Tensor:
    # float64 throughout the edits: the rounded uint8 result is then the same on every CPU (see render_shot)
    return frames.permute(0, 3, 1, 2).double() / 255.0


def _to_uint8(x: Tensor) -> Tensor:
    return round_pixels(x, 255.0).permute(0, 2, 3, 1).contiguous()


# ----------------------------------------------------------------------------------------- temporal
def temporal_crop(frames: Tensor, generator: torch.Generator, host: Tensor | None = None) -> tuple[Tensor, Params]:
    """Keep one contiguous segment with 50–80 % of the frames (a partial copy).

    Examples:
        >>> frames = torch.randint(0, 256, (12, 32, 32, 3), dtype=torch.uint8)
        >>> out, params = temporal_crop(frames, torch.Generator().manual_seed(0))
        >>> out.dtype, tuple(out.shape[1:]), sorted(params)
        (torch.uint8, (32, 32, 3), ['length', 'start'])
    """
    t = frames.shape[0]
    length = max(2, round(t * uniform(generator, 0.5, 0.8)))
    start = randint(generator, 0, t - length)
    return frames[start:start + length], {"start": start, "length": length}


def speed_change(frames: Tensor, generator: torch.Generator, host: Tensor | None = None) -> tuple[Tensor, Params]:
    """Fast-forward (keep every 2nd frame) or slow motion (show every frame twice).

    Examples:
        >>> frames = torch.randint(0, 256, (12, 32, 32, 3), dtype=torch.uint8)
        >>> out, params = speed_change(frames, torch.Generator().manual_seed(0))
        >>> out.dtype, tuple(out.shape[1:]), sorted(params)
        (torch.uint8, (32, 32, 3), ['factor'])
    """
    if torch.rand((), generator=generator).item() < 0.5:
        return frames[::2], {"factor": 2.0}
    return frames.repeat_interleave(2, dim=0), {"factor": 0.5}


def reverse(frames: Tensor, generator: torch.Generator, host: Tensor | None = None) -> tuple[Tensor, Params]:
    """Play the video backwards.

    Examples:
        >>> frames = torch.randint(0, 256, (12, 32, 32, 3), dtype=torch.uint8)
        >>> out, params = reverse(frames, torch.Generator().manual_seed(0))
        >>> torch.equal(out, frames.flip(0)), params
        (True, {})
    """
    return frames.flip(0), {}


def pause(frames: Tensor, generator: torch.Generator, host: Tensor | None = None) -> tuple[Tensor, Params]:
    """Freeze one frame for a quarter to a half of the video's length.

    Examples:
        >>> frames = torch.randint(0, 256, (12, 32, 32, 3), dtype=torch.uint8)
        >>> out, params = pause(frames, torch.Generator().manual_seed(0))
        >>> out.dtype, tuple(out.shape[1:]), sorted(params)
        (torch.uint8, (32, 32, 3), ['at', 'repeats'])
    """
    t = frames.shape[0]
    at = randint(generator, 0, t - 1)
    repeats = max(1, round(t * uniform(generator, 0.25, 0.5)))
    index = torch.cat([torch.arange(at + 1), torch.full((repeats,), at), torch.arange(at + 1, t)])
    return frames[index], {"at": at, "repeats": repeats}


def frame_drop(frames: Tensor, generator: torch.Generator, host: Tensor | None = None) -> tuple[Tensor, Params]:
    """Drop a random 20–40 % of the frames (keeping order).

    Examples:
        >>> frames = torch.randint(0, 256, (12, 32, 32, 3), dtype=torch.uint8)
        >>> out, params = frame_drop(frames, torch.Generator().manual_seed(0))
        >>> out.dtype, tuple(out.shape[1:]), sorted(params)
        (torch.uint8, (32, 32, 3), ['kept'])
    """
    t = frames.shape[0]
    keep = max(2, t - round(t * uniform(generator, 0.2, 0.4)))
    index = torch.randperm(t, generator=generator)[:keep].sort().values
    return frames[index], {"kept": keep}


def insert_into_distractor(frames: Tensor, generator: torch.Generator, host: Tensor | None = None,
                           ) -> tuple[Tensor, Params]:
    """Cut a 50–80 % segment of the video into an unrelated ``host`` video at a random position (a partial copy).

    Examples:
        >>> frames = torch.randint(0, 256, (12, 32, 32, 3), dtype=torch.uint8)
        >>> host = torch.zeros(20, 32, 32, 3, dtype=torch.uint8)
        >>> out, params = insert_into_distractor(frames, torch.Generator().manual_seed(0), host)
        >>> out.dtype, tuple(out.shape[1:]), sorted(params)
        (torch.uint8, (32, 32, 3), ['at', 'host_frames', 'length', 'start'])
    """
    if host is None:
        raise ValueError("host must be a uint8 video [T, H, W, 3] to insert the copy into, got None")
    segment, params = temporal_crop(frames, generator)
    at = randint(generator, 0, host.shape[0])
    out = torch.cat([host[:at], segment, host[at:]])
    return out, {**params, "at": at, "host_frames": int(host.shape[0])}


# ------------------------------------------------------------------------------------------ spatial
def crop_resize(frames: Tensor, generator: torch.Generator, host: Tensor | None = None) -> tuple[Tensor, Params]:
    """Crop a box with 50–85 % of the area (random aspect near 1) and resize it back to the frame size.

    Examples:
        >>> frames = torch.randint(0, 256, (12, 32, 32, 3), dtype=torch.uint8)
        >>> out, params = crop_resize(frames, torch.Generator().manual_seed(0))
        >>> out.dtype, tuple(out.shape[1:]), sorted(params)
        (torch.uint8, (32, 32, 3), ['height', 'left', 'top', 'width'])
    """
    h, w = frames.shape[1:3]
    area = uniform(generator, 0.5, 0.85)
    ratio = uniform(generator, 0.8, 1.25)
    ch = min(h, max(2, round(h * (area / ratio) ** 0.5)))
    cw = min(w, max(2, round(w * (area * ratio) ** 0.5)))
    top, left = randint(generator, 0, h - ch), randint(generator, 0, w - cw)
    x = _to_float(frames[:, top:top + ch, left:left + cw])
    x = bilinear_resize(x, (h, w))  # F.interpolate's bilinear, with the same weights on every CPU
    return _to_uint8(x), {"top": top, "left": left, "height": ch, "width": cw}


def hflip(frames: Tensor, generator: torch.Generator, host: Tensor | None = None) -> tuple[Tensor, Params]:
    """Mirror the frames left–right.

    Examples:
        >>> frames = torch.randint(0, 256, (12, 32, 32, 3), dtype=torch.uint8)
        >>> out, params = hflip(frames, torch.Generator().manual_seed(0))
        >>> torch.equal(out, frames.flip(2)), params
        (True, {})
    """
    return frames.flip(2), {}


def color_change(frames: Tensor, generator: torch.Generator, host: Tensor | None = None) -> tuple[Tensor, Params]:
    """Change brightness, contrast, saturation and hue (kornia.enhance).

    Examples:
        >>> frames = torch.randint(0, 256, (12, 32, 32, 3), dtype=torch.uint8)
        >>> out, params = color_change(frames, torch.Generator().manual_seed(0))
        >>> out.dtype, tuple(out.shape[1:]), sorted(params)
        (torch.uint8, (32, 32, 3), ['brightness', 'contrast', 'hue', 'saturation'])
    """
    import kornia.enhance as ke
    p = {"brightness": uniform(generator, -0.2, 0.2), "contrast": uniform(generator, 0.6, 1.4),
         "saturation": uniform(generator, 0.3, 1.7), "hue": uniform(generator, -0.4, 0.4)}
    x = _to_float(frames)
    x = ke.adjust_brightness(x, p["brightness"])
    x = ke.adjust_contrast(x, p["contrast"])
    x = ke.adjust_saturation(x, p["saturation"])
    x = ke.adjust_hue(x, p["hue"])
    return _to_uint8(x.clamp(0, 1)), p


def blur(frames: Tensor, generator: torch.Generator, host: Tensor | None = None) -> tuple[Tensor, Params]:
    """Gaussian blur with sigma 1–2.5 pixels (kornia.filters).

    Examples:
        >>> frames = torch.randint(0, 256, (12, 32, 32, 3), dtype=torch.uint8)
        >>> out, params = blur(frames, torch.Generator().manual_seed(0))
        >>> out.dtype, tuple(out.shape[1:]), sorted(params)
        (torch.uint8, (32, 32, 3), ['sigma'])
    """
    import kornia.filters as kf
    sigma = uniform(generator, 1.0, 2.5)
    k = 2 * int(3 * sigma) + 1
    x = kf.gaussian_blur2d(_to_float(frames), (k, k), (sigma, sigma), border_type="reflect")
    return _to_uint8(x), {"sigma": sigma}


@functools.lru_cache(maxsize=64)
def text_mask(text: str, font_px: int) -> Tensor:
    """Alpha mask ``[h, w]`` in [0, 1] of ``text`` in Pillow's bundled font, cropped to the ink.

    Examples:
        >>> mask = text_mask("hapref", 16)
        >>> mask.ndim, float(mask.min()), float(mask.max())
        (2, 0.0, 1.0)
    """
    from PIL import Image, ImageDraw, ImageFont
    canvas = Image.new("L", (font_px * (len(text) + 1), 2 * font_px), 0)
    ImageDraw.Draw(canvas).text((0, 0), text, fill=255, font=ImageFont.load_default(size=font_px))
    mask = torch.from_numpy(np.asarray(canvas, dtype=np.float64) / 255.0)
    ys, xs = torch.nonzero(mask > 0, as_tuple=True)
    if len(ys) == 0:
        return mask[:1, :1]
    return mask[int(ys.min()):int(ys.max()) + 1, int(xs.min()):int(xs.max()) + 1].contiguous()


def _blend(frames: Tensor, rgb: Tensor, alpha: Tensor, top: int, left: int) -> Tensor:
    """Alpha-blend an overlay (``rgb [h, w, 3]`` float 0–255, ``alpha [h, w]``) onto every frame at (top, left)."""
    h, w = alpha.shape
    h, w = min(h, frames.shape[1] - top), min(w, frames.shape[2] - left)
    out = frames.clone()
    region = out[:, top:top + h, left:left + w].double()
    a = alpha[:h, :w, None]
    out[:, top:top + h, left:left + w] = round_pixels(region * (1 - a) + rgb[:h, :w] * a)
    return out


WORDS = ("BREAKING", "LIVE", "REPLAY", "EXCLUSIVE", "HD", "NEWS", "2026", "WATCH", "VIRAL", "COPY")


def text_overlay(frames: Tensor, generator: torch.Generator, host: Tensor | None = None) -> tuple[Tensor, Params]:
    """Burn a caption (one or two words, random colour and opacity) into every frame.

    Examples:
        >>> frames = torch.randint(0, 256, (12, 32, 32, 3), dtype=torch.uint8)
        >>> out, params = text_overlay(frames, torch.Generator().manual_seed(0))
        >>> out.dtype, tuple(out.shape[1:]), sorted(params)
        (torch.uint8, (32, 32, 3), ['font_px', 'left', 'opacity', 'text', 'top'])
    """
    t, h, w, _ = frames.shape
    words = [WORDS[randint(generator, 0, len(WORDS) - 1)] for _ in range(randint(generator, 1, 2))]
    text = " ".join(words)
    font_px = max(8, round(h * uniform(generator, 0.12, 0.22)))
    mask = text_mask(text, font_px)[:h, :w]
    th, tw = mask.shape
    top, left = randint(generator, 0, h - th), randint(generator, 0, w - tw)
    colour = torch.rand(3, generator=generator) * 255
    opacity = uniform(generator, 0.7, 1.0)
    out = _blend(frames, colour.expand(th, tw, 3), mask * opacity, top, left)
    return out, {"text": text, "font_px": font_px, "top": top, "left": left, "opacity": opacity}


#: On-screen names of the channels of :func:`channel_template` (channel ``k`` shows ``CHANNEL_NAMES[k]``).
CHANNEL_NAMES = ("NEWS 1", "LIVE 24", "WORLD TV", "CITY NOW", "INFO 7", "SPORT+")


@functools.lru_cache(maxsize=64)
def _channel_bands(channel: int, height: int, width: int) -> tuple[Tensor, Tensor]:
    """uint8 ``[height, width, 3]`` top and bottom banners of ``channel``: the same bytes on every CPU (integer
    colours and stripes; the name's glyphs blended in float64 and rounded by ``round_pixels``)."""
    g = torch.Generator().manual_seed(7919 * (channel + 1))
    base, accent = torch.randint(30, 226, (2, 3), generator=g)
    period = int(torch.randint(4, 10, (), generator=g))
    slope = channel % 3 + 1
    y, x = torch.arange(height)[:, None], torch.arange(width)[None, :]
    top = torch.where((((x + slope * y) // period) % 2 == 1)[..., None], accent, base).to(torch.uint8)
    bottom = torch.where(((x // (2 * period) + 0 * y) % 3 == 0)[..., None], accent, base // 2).to(torch.uint8)
    mask = text_mask(CHANNEL_NAMES[channel], max(6, round(0.7 * height)))[:height, :width]
    ink = (255 - base).double().expand(*mask.shape, 3)
    bottom = _blend(bottom[None], ink, mask, (height - mask.shape[0]) // 2, 2)[0]
    return top, bottom


def channel_template(frames: Tensor, channel: int, banner: float = 0.25) -> Tensor:
    """Publish ``frames`` under channel ``channel``'s on-screen template: opaque banners over the top and bottom
    ``banner`` fraction of every frame (the top striped, the bottom with the channel's name), as a broadcaster or
    a re-uploader frames every video it publishes. Deterministic: no generator.

    ``frames`` uint8 ``[T, H, W, 3]``; ``channel`` in ``[0, len(CHANNEL_NAMES))``; ``banner`` in (0, 0.5).

    Examples:
        >>> frames = torch.zeros(2, 32, 32, 3, dtype=torch.uint8)
        >>> out = channel_template(frames, 1)
        >>> out.dtype, tuple(out.shape), bool((out[:, 8:24] == 0).all()), bool((out[:, :8] > 0).any())
        (torch.uint8, (2, 32, 32, 3), True, True)
        >>> torch.equal(channel_template(frames, 1)[:, :8], channel_template(frames + 9, 1)[:, :8])  # content-free
        True
    """
    if not 0 <= channel < len(CHANNEL_NAMES):
        raise ValueError(f"channel must be in [0, {len(CHANNEL_NAMES)}), got {channel}")
    if not 0.0 < banner < 0.5:
        raise ValueError(f"banner must be a fraction in (0, 0.5), got {banner}")
    t, h, w, _ = frames.shape
    band = max(1, round(banner * h))
    top, bottom = _channel_bands(channel, band, w)
    out = frames.clone()
    out[:, :band] = top
    out[:, h - band:] = bottom
    return out


@functools.lru_cache(maxsize=1)
def logo_rgba() -> Tensor:
    """scikit-image's logo as float RGBA ``[500, 500, 4]`` in [0, 255] (its alpha channel is the shape).

    Examples:
        >>> logo = logo_rgba()
        >>> logo.shape, logo.dtype, float(logo.max()) <= 255.0
        (torch.Size([500, 500, 4]), torch.float64, True)
    """
    import skimage.data
    return torch.from_numpy(np.asarray(skimage.data.logo())).double()


def logo_overlay(frames: Tensor, generator: torch.Generator, host: Tensor | None = None) -> tuple[Tensor, Params]:
    """Paste scikit-image's logo (its own alpha channel) at 20–35 % of the frame height in a random place.

    Examples:
        >>> frames = torch.randint(0, 256, (12, 32, 32, 3), dtype=torch.uint8)
        >>> out, params = logo_overlay(frames, torch.Generator().manual_seed(0))
        >>> out.dtype, tuple(out.shape[1:]), sorted(params)
        (torch.uint8, (32, 32, 3), ['left', 'opacity', 'size', 'top'])
    """
    t, h, w, _ = frames.shape
    side = max(4, round(h * uniform(generator, 0.2, 0.35)))
    logo = F.interpolate(logo_rgba().permute(2, 0, 1)[None], size=(side, side), mode="bilinear",
                         antialias=True, align_corners=False)[0].permute(1, 2, 0)
    top, left = randint(generator, 0, h - side), randint(generator, 0, w - side)
    opacity = uniform(generator, 0.7, 1.0)
    out = _blend(frames, logo[..., :3], logo[..., 3] / 255.0 * opacity, top, left)
    return out, {"size": side, "top": top, "left": left, "opacity": opacity}


def picture_in_picture(frames: Tensor, generator: torch.Generator, host: Tensor | None = None,
                       ) -> tuple[Tensor, Params]:
    """Show the video shrunk to 40–65 % of the side inside an unrelated ``host`` video.

    Examples:
        >>> frames = torch.randint(0, 256, (12, 32, 32, 3), dtype=torch.uint8)
        >>> host = torch.zeros(20, 32, 32, 3, dtype=torch.uint8)
        >>> out, params = picture_in_picture(frames, torch.Generator().manual_seed(0), host)
        >>> out.dtype, tuple(out.shape[1:]), sorted(params)
        (torch.uint8, (32, 32, 3), ['left', 'scale', 'top'])
    """
    if host is None:
        raise ValueError("host must be a uint8 video [T, H, W, 3] for picture-in-picture, got None")
    t, h, w, _ = frames.shape
    scale = uniform(generator, 0.4, 0.65)
    ph, pw = max(2, round(h * scale)), max(2, round(w * scale))
    small = _to_uint8(F.interpolate(_to_float(frames), size=(ph, pw), mode="bilinear", antialias=True,
                                    align_corners=False))
    top, left = randint(generator, 0, h - ph), randint(generator, 0, w - pw)
    out = host[torch.arange(t) % host.shape[0]].clone()
    out[:, top:top + ph, left:left + pw] = small
    return out, {"scale": scale, "top": top, "left": left}


# -------------------------------------------------------------------------------------------- codec
# BT.601 limited-range RGB <-> YCbCr, done here rather than by the codec library so the bytes are reproducible.
# float64 (not float32 through BLAS, whose kernels differ between CPUs) so the rounded bytes are portable.
_RGB_TO_YUV = np.array([[0.257, 0.504, 0.098], [-0.148, -0.291, 0.439], [0.439, -0.368, -0.071]], np.float64)
_YUV_TO_RGB = np.linalg.inv(_RGB_TO_YUV)
_YUV_OFFSET = np.array([16.0, 128.0, 128.0], np.float64)


def _rgb_to_yuv420p(rgb: np.ndarray) -> np.ndarray:
    """uint8 ``[T, H, W, 3]`` -> planar yuv420p frames as PyAV expects them, ``[T, H * 3 / 2, W]`` uint8."""
    t, h, w, _ = rgb.shape
    yuv = rgb.astype(np.float64) @ _RGB_TO_YUV.T + _YUV_OFFSET
    chroma = yuv[..., 1:].reshape(t, h // 2, 2, w // 2, 2, 2).mean((2, 4))
    planes = np.concatenate([yuv[..., 0].reshape(t, -1), chroma[..., 0].reshape(t, -1),
                             chroma[..., 1].reshape(t, -1)], axis=1)
    return round_pixels(planes).reshape(t, h * 3 // 2, w)


def _yuv420p_to_rgb(planes: np.ndarray, h: int, w: int) -> np.ndarray:
    """Inverse of :func:`_rgb_to_yuv420p` for frames ``[T, H * 3 / 2, W]`` (chroma upsampled by repetition)."""
    x = planes.reshape(planes.shape[0], -1).astype(np.float64)
    y = x[:, :h * w].reshape(-1, h, w)
    chroma = x[:, h * w:].reshape(-1, 2, h // 2, w // 2).repeat(2, axis=2).repeat(2, axis=3)
    yuv = np.stack([y, chroma[:, 0], chroma[:, 1]], -1) - _YUV_OFFSET
    return round_pixels(yuv @ _YUV_TO_RGB.T)


def h264_reencode(frames: Tensor, generator: torch.Generator, host: Tensor | None = None) -> tuple[Tensor, Params]:
    """Re-encode with H.264 (libx264 through PyAV) at a low quality, CRF 30–42.

    One encoder thread and no macroblock-tree rate control: with either, libx264's output varies from run to
    run here, and the benchmark must be the same bytes for the same seed.

    Examples:
        >>> frames = torch.randint(0, 256, (12, 32, 32, 3), dtype=torch.uint8)
        >>> out, params = h264_reencode(frames, torch.Generator().manual_seed(0))
        >>> out.dtype, tuple(out.shape[1:]), sorted(params)
        (torch.uint8, (32, 32, 3), ['crf', 'kbytes'])
    """
    import io

    import av
    crf = randint(generator, 30, 42)
    t, h, w, _ = frames.shape
    if h % 2 or w % 2:
        raise ValueError(f"frames must have even height and width for H.264 (yuv420p), got {h}x{w}")
    buffer = io.BytesIO()
    with av.open(buffer, mode="w", format="mp4") as container:
        stream = container.add_stream("libx264", rate=25)
        stream.width, stream.height, stream.pix_fmt = w, h, "yuv420p"
        stream.thread_count = 1
        stream.options = {"crf": str(crf), "preset": "veryfast", "x264-params": "threads=1:mbtree=0"}
        for i, planes in enumerate(_rgb_to_yuv420p(frames.numpy())):
            frame = av.VideoFrame.from_ndarray(planes, format="yuv420p")
            frame.pts = i
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    size = buffer.getbuffer().nbytes
    buffer.seek(0)
    with av.open(buffer, mode="r") as container:
        decoded = np.stack([f.to_ndarray(format="yuv420p") for f in container.decode(video=0)])
    return torch.from_numpy(_yuv420p_to_rgb(decoded, h, w)), {"crf": crf, "kbytes": round(size / 1024, 1)}


Transform = Callable[..., tuple[Tensor, Params]]

#: Transformation families: name -> {transformation name -> function}.
FAMILIES: dict[str, dict[str, Transform]] = {
    "temporal": {"temporal_crop": temporal_crop, "speed_change": speed_change, "reverse": reverse,
                 "pause": pause, "frame_drop": frame_drop, "insert_into_distractor": insert_into_distractor},
    "spatial": {"crop_resize": crop_resize, "hflip": hflip, "color_change": color_change, "blur": blur,
                "text_overlay": text_overlay, "logo_overlay": logo_overlay,
                "picture_in_picture": picture_in_picture},
    "codec": {"h264_reencode": h264_reencode},
}
#: Transformations after which only part of the source remains in the copy (FIVR's "duplicate scene", DS).
PARTIAL_COPY: frozenset[str] = frozenset({"temporal_crop", "insert_into_distractor"})
#: Transformations that need a host video.
NEEDS_HOST: frozenset[str] = frozenset({"insert_into_distractor", "picture_in_picture"})
TRANSFORMS: dict[str, Transform] = {name: fn for family in FAMILIES.values() for name, fn in family.items()}
