"""S2VS training views (the released S2VS code, https://github.com/gkordo/s2vs): a weak and a strong augmentation of each clip, plus Video-in-Video.

Every random choice is made once per clip and applied to all of its frames (the same crop, flip, colour
change, overlay on every frame, like kornia's ``VideoSequential(same_on_frame=True)``). Parameters are drawn
on the CPU from a ``torch.Generator`` (so a seed reproduces a batch on any device); pixels are processed
batched with kornia on the clips' own device.

Deviation: the released S2VS ``FrameTransforms`` (``datasets/transforms/frame_trans.py``) draws the text overlay,
the emoji overlay and the blur for every frame on its own (each frame goes through the PIL transforms
separately), so an overlay of a released strong view comes and goes between frames; here one overlay layer and
one blur per clip cover all of its frames. The crop, flip and RandAugment are drawn once per clip in both.

* weak: temporal crop -> random resized crop (area 0.8–1) -> horizontal flip (p 0.5);
* strong: one temporal transform (shuffle-dropout 0.5, fast-forward, slow motion, reverse, pause, none 0.1
  each) -> temporal crop -> random resized crop (area 0.5–1) + flip -> RandAugment (2 ops, magnitude 9)
  -> text overlay (p 0.3), logo overlay (p 0.3, in place of S2VS's emoji), Gaussian blur (p 0.5, sigma 0.1–2);
* :func:`video_in_video`: at batch level, paste a shrunk clip into another one and report the overlap λ.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

from hapref.data import transforms
from hapref.data.pixels import float32_draws, round_pixels, snap

#: The temporal transforms of a strong view, in the order of a mix's probabilities.
TEMPORAL_EDITS = ("shuffle_dropout", "fast_forward", "slow_motion", "reverse", "pause", "none")
#: The S2VS mix: probability of each of :data:`TEMPORAL_EDITS` (shuffle-dropout 0.5, the others 0.1 each).
#: A setting, not a constant: ``HAPVRProfile.temporal_p`` passes another mix down to :func:`temporal_indices`.
TEMPORAL_P: tuple[float, ...] = (0.5, 0.1, 0.1, 0.1, 0.1, 0.1)
_RANDAUGMENT_OPS = ("identity", "brightness", "contrast", "color", "sharpness", "posterize", "solarize",
                    "autocontrast", "equalize", "rotate", "shear_x", "shear_y", "translate_x", "translate_y")


def check_temporal_p(temporal_p: object) -> tuple[float, ...]:
    """``temporal_p`` as a tuple of floats: one non-negative weight per :data:`TEMPORAL_EDITS`, not all zero.

    The weights need not sum to 1 (``torch.multinomial`` normalises them).

    Examples:
        >>> check_temporal_p([0, 0, 0, 1, 0, 0])
        (0.0, 0.0, 0.0, 1.0, 0.0, 0.0)
        >>> try:
        ...     check_temporal_p((1.0, 0.0))
        ... except ValueError as err:
        ...     print(str(err)[:35])
        temporal_p must hold 6 weights, one
    """
    try:
        values = tuple(float(x) for x in temporal_p)  # type: ignore[union-attr]
    except (TypeError, ValueError):
        raise ValueError(f"temporal_p must be a sequence of {len(TEMPORAL_EDITS)} numbers, "
                         f"got {temporal_p!r}") from None
    if len(values) != len(TEMPORAL_EDITS):
        raise ValueError(f"temporal_p must hold {len(TEMPORAL_EDITS)} weights, one per edit of {TEMPORAL_EDITS}, "
                         f"got {values}")
    if not all(math.isfinite(x) and x >= 0 for x in values) or sum(values) <= 0:
        raise ValueError(f"temporal_p must be finite weights >= 0 with a positive sum, got {values}")
    return values


def _check_clips(clips: object) -> Tensor:
    if not isinstance(clips, Tensor) or clips.ndim != 5 or clips.shape[-1] != 3:
        shape = tuple(clips.shape) if isinstance(clips, Tensor) else type(clips).__name__
        raise ValueError(f"clips must be a tensor [B, T, H, W, 3] (uint8 or float in [0, 1]), got {shape}")
    if clips.dtype != torch.uint8 and not clips.is_floating_point():
        raise ValueError(f"clips must be uint8 or floating point, got {clips.dtype}")
    if clips.shape[0] == 0 or clips.shape[1] == 0:
        raise ValueError(f"clips must hold at least one clip of one frame, got shape {tuple(clips.shape)}")
    return clips


def _to_float(clips: Tensor) -> Tensor:
    """[B, T, H, W, 3] -> float [B, T, 3, H, W] in [0, 1]: float64 on the CPU, float32 on an accelerator.

    float64 on the CPU so that uint8 views round to the same bytes on every CPU (float32 kernels differ in the
    last bit between instruction sets, which moves pixels near a rounding boundary by one level)."""
    x = clips.permute(0, 1, 4, 2, 3)
    x = x.double() if clips.device.type == "cpu" else x.float()
    return x / 255.0 if clips.dtype == torch.uint8 else x


def _snap(x: Tensor) -> Tensor:
    """Values on a grid of 2⁻¹⁶ (0.004 of a uint8 level) between the steps of a chain of ops (CPU only).

    Some ops are discontinuous (posterize truncates, solarize thresholds): a last-bit difference between two
    CPUs' kernels after one op would otherwise flip the next op's decision. Snapping first makes the inputs of
    every op identical across CPUs (see :mod:`hapref.data.pixels`)."""
    return snap(x, 65536.0) if x.device.type == "cpu" else x


def _from_float(x: Tensor, like: Tensor) -> Tensor:
    x = x.clamp(0, 1).permute(0, 1, 3, 4, 2)
    if like.dtype == torch.uint8:
        return round_pixels(x, 255.0).contiguous()
    return x.to(like.dtype).contiguous()


def _per_frame(values: Tensor, frames: int) -> Tensor:
    """Repeat per-clip values ``[B, ...]`` for each frame -> ``[B * T, ...]``."""
    return values.repeat_interleave(frames, dim=0)


def temporal_indices(length: int, window: int, strong: bool, generator: torch.Generator | None,
                     shuffle: bool = True, temporal_p: tuple[float, ...] = TEMPORAL_P) -> tuple[Tensor, Tensor]:
    """Frame indices ``[window]`` into a clip of ``length`` frames and a per-frame code (0 keep, 1 black, 2 noise).

    Strong views first apply one S2VS temporal transform; both views then take a random crop of ``window``
    frames, looping the sequence when it is shorter. ``shuffle=False`` replaces the shuffle-dropout draw by no
    transform (views that keep the clip's order: a departure from S2VS for data where order identifies a video).
    ``temporal_p`` weighs the transforms of :data:`TEMPORAL_EDITS` (default the S2VS mix :data:`TEMPORAL_P`).

    Examples:
        >>> index, code = temporal_indices(10, 4, strong=False, generator=torch.Generator().manual_seed(0))
        >>> index.shape, code.tolist()
        (torch.Size([4]), [0, 0, 0, 0])
    """
    index = torch.arange(length)
    code = torch.zeros(length, dtype=torch.long)
    if strong:
        weights = torch.tensor(check_temporal_p(temporal_p), dtype=torch.float32)   # as S2VS draws it
        kind = TEMPORAL_EDITS[int(torch.multinomial(weights, 1, generator=generator))]
        if kind == "shuffle_dropout" and not shuffle:
            kind = "none"
        if kind == "shuffle_dropout":
            index, code = _shuffle_dropout(length, generator)
        elif kind == "fast_forward":
            index = index[::int(torch.randint(2, 4, (), generator=generator))]
        elif kind == "slow_motion":
            index = index.repeat_interleave(2)
        elif kind == "reverse":
            index = index.flip(0)
        elif kind == "pause":
            at = int(torch.randint(0, length, (), generator=generator))
            repeats = int(torch.randint(1, max(2, window // 4 + 1), (), generator=generator))
            index = torch.cat([index[:at + 1], index.new_full((repeats,), at), index[at + 1:]])
        if kind != "shuffle_dropout":
            code = torch.zeros(index.numel(), dtype=torch.long)
    start = int(torch.randint(0, max(1, index.numel() - window + 1), (), generator=generator))
    take = (start + torch.arange(window)) % index.numel()
    return index[take], code[take]


def _shuffle_dropout(length: int, generator: torch.Generator | None) -> tuple[Tensor, Tensor]:
    """S2VS temporal shuffle-dropout: segments of 4–16 frames, shuffled (p 0.5); 30 % are removed or blanked."""
    sizes = []
    while sum(sizes) < length:
        sizes.append(int(torch.randint(4, 17, (), generator=generator)))
    if sum(sizes) > length and len(sizes) > 1:
        sizes.pop()  # the incomplete tail segment is dropped
    sizes[-1] = min(sizes[-1], length - sum(sizes[:-1]))
    starts = torch.tensor([0, *sizes[:-1]]).cumsum(0).tolist()
    segments = [torch.arange(s, s + n) for s, n in zip(starts, sizes)]
    if torch.rand((), generator=generator) < 0.5:
        segments = [segments[i] for i in torch.randperm(len(segments), generator=generator).tolist()]
    selected = torch.rand(len(segments), generator=generator) < 0.3
    index, code = [], []
    for seg, sel in zip(segments, selected.tolist()):
        if sel and 0 < int(selected.sum()) < len(segments):
            if torch.rand((), generator=generator) < 0.5:
                continue  # removed
            index.append(seg)  # kept, content replaced by black (1) or noise (2) frame by frame
            code.append(1 + (torch.rand(seg.numel(), generator=generator) < 0.5).long())
        else:
            index.append(seg)
            code.append(torch.zeros(seg.numel(), dtype=torch.long))
    return torch.cat(index), torch.cat(code)


def _uniform(shape: tuple[int, ...], low: float, high: float, generator: torch.Generator | None) -> Tensor:
    """float64 draws from U(low, high): ``torch.rand`` scaled in float64 (``uniform_(low, high)`` in float32 rounds
    differently on different CPUs)."""
    return low + (high - low) * torch.rand(shape, generator=generator).double()


def _resized_crop_boxes(b: int, h: int, w: int, scale: tuple[float, float], generator: torch.Generator | None,
                        ) -> Tensor:
    """Per-clip RandomResizedCrop boxes ``[B, 4, 2]`` (kornia corner order), aspect ratio in [3/4, 4/3]."""
    # drawn in float32 (the random stream), computed in float64: float32 exp differs between CPUs
    area = _uniform((b,), *scale, generator) * h * w
    log_ratio = _uniform((b,), math.log(3 / 4), math.log(4 / 3), generator)
    ratio = log_ratio.exp()
    cw = (area * ratio).sqrt().clamp(2, w)
    ch = (area / ratio).sqrt().clamp(2, h)
    x0 = torch.rand(b, generator=generator).double() * (w - cw)
    y0 = torch.rand(b, generator=generator).double() * (h - ch)
    x1, y1 = x0 + cw - 1, y0 + ch - 1
    return torch.stack([torch.stack([x0, y0], -1), torch.stack([x1, y0], -1),
                        torch.stack([x1, y1], -1), torch.stack([x0, y1], -1)], 1)


def _blend(image: Tensor, other: Tensor, factor: Tensor) -> Tensor:
    return (other + factor.view(-1, 1, 1, 1) * (image - other)).clamp(0, 1)


def _gray(x: Tensor) -> Tensor:
    return (0.299 * x[:, 0:1] + 0.587 * x[:, 1:2] + 0.114 * x[:, 2:3]).expand_as(x)


def _randaugment_op(name: str, x: Tensor, level: float, sign: Tensor) -> Tensor:
    """One RandAugment op at ``level`` in [0, 1] (magnitude / 30), signed per frame by ``sign`` (±1)."""
    import kornia.enhance as ke
    if name == "identity":
        return x
    if name in ("brightness", "contrast", "color", "sharpness"):
        factor = 1 + 0.9 * level * sign
        if name == "brightness":
            return _blend(x, torch.zeros_like(x), factor)
        if name == "contrast":
            return _blend(x, _gray(x).mean((1, 2, 3), keepdim=True).expand_as(x), factor)
        if name == "color":
            return _blend(x, _gray(x), factor)
        return ke.sharpness(x, factor.clamp(min=0))
    if name == "posterize":
        return ke.posterize(x, int(8 - round(4 * level)))
    if name == "solarize":
        return ke.solarize(x, 1.0 - level)
    if name == "autocontrast":
        lo, hi = x.amin((2, 3), keepdim=True), x.amax((2, 3), keepdim=True)
        return torch.where(hi > lo, (x - lo) / (hi - lo).clamp(min=1e-6), x)
    if name == "equalize":
        return ke.equalize(x)
    # geometric ops as one affine resampling in normalised coordinates (frames are square)
    theta = torch.zeros(x.shape[0], 2, 3, device=x.device, dtype=x.dtype)
    theta[:, 0, 0] = theta[:, 1, 1] = 1
    if name == "rotate":
        a = torch.deg2rad(30 * level * sign)
        theta[:, 0, 0], theta[:, 0, 1], theta[:, 1, 0], theta[:, 1, 1] = a.cos(), -a.sin(), a.sin(), a.cos()
    elif name == "shear_x":
        theta[:, 0, 1] = 0.3 * level * sign
    elif name == "shear_y":
        theta[:, 1, 0] = 0.3 * level * sign
    elif name == "translate_x":
        theta[:, 0, 2] = 0.9 * level * sign  # 0.45 of the width at magnitude 30
    elif name == "translate_y":
        theta[:, 1, 2] = 0.9 * level * sign
    grid = F.affine_grid(theta, list(x.shape), align_corners=False)
    return F.grid_sample(x, grid, mode="bilinear", padding_mode="zeros", align_corners=False)


class ClipAugmenter:
    """S2VS weak or strong views of a batch of clips, the released S2VS code, https://github.com/gkordo/s2vs (defaults of S2VS ``train_ssl.sh``).

    ``augmenter(clips, generator)`` maps clips ``[B, T, H, W, 3]`` (uint8, or float in [0, 1]) to views
    ``[B, num_frames, size, size, 3]`` of the same dtype on the same device; ``num_frames`` and ``size``
    default to the input's, so by default the shape is kept.

    Examples:
        >>> clips = torch.randint(0, 256, (2, 8, 32, 32, 3), dtype=torch.uint8)
        >>> views = ClipAugmenter("strong", num_frames=4, size=32)(clips, torch.Generator().manual_seed(0))
        >>> views.dtype, tuple(views.shape)
        (torch.uint8, (2, 4, 32, 32, 3))
    """

    def __init__(self, strength: str = "weak", num_frames: int | None = None, size: int | None = None,
                 scale: tuple[float, float] | None = None, p_flip: float = 0.5, randaugment_ops: int = 2,
                 magnitude: int = 9, p_text: float = 0.3, p_logo: float = 0.3, p_blur: float = 0.5,
                 sigma: tuple[float, float] = (0.1, 2.0), shuffle: bool = True,
                 temporal_p: tuple[float, ...] = TEMPORAL_P) -> None:
        if strength not in ("weak", "strong"):
            raise ValueError(f"strength must be 'weak' or 'strong', got {strength!r}")
        if not 0 <= magnitude <= 30:
            raise ValueError(f"magnitude must be in [0, 30] (RandAugment's scale), got {magnitude}")
        self.strength, self.num_frames, self.size = strength, num_frames, size
        self.scale = scale if scale is not None else ((0.8, 1.0) if strength == "weak" else (0.5, 1.0))
        self.p_flip, self.randaugment_ops, self.level = p_flip, randaugment_ops, magnitude / 30
        self.p_text, self.p_logo, self.p_blur, self.sigma = p_text, p_logo, p_blur, sigma
        self.shuffle = shuffle  # False: strong views never shuffle-dropout (temporal_indices)
        self.temporal_p = check_temporal_p(temporal_p)   # the strong views' mix of temporal transforms

    def __repr__(self) -> str:
        return (f"ClipAugmenter(strength={self.strength!r}, num_frames={self.num_frames}, size={self.size}, "
                f"scale={self.scale})")

    @float32_draws
    def __call__(self, clips: Tensor, generator: torch.Generator | None = None) -> Tensor:
        clips = _check_clips(clips)
        b, t, h, w, _ = clips.shape
        window = self.num_frames or t
        size = self.size or h
        strong = self.strength == "strong"
        device = clips.device
        # temporal: gather the chosen frames of every clip at once
        picks = [temporal_indices(t, window, strong, generator, self.shuffle, self.temporal_p) for _ in range(b)]
        index = torch.stack([p[0] for p in picks]).to(device)
        code = torch.stack([p[1] for p in picks]).to(device)
        x = _to_float(clips)[torch.arange(b, device=device)[:, None], index]  # [B, W, 3, H, W]
        noise = torch.rand(x.shape, generator=generator).to(device) if (code == 2).any() else None
        x = x.masked_fill((code == 1)[..., None, None, None], 0.0)
        if noise is not None:
            x = torch.where((code == 2)[..., None, None, None], noise, x)
        x = x.reshape(b * window, 3, h, w)
        # spatial: one crop box and one flip per clip
        from kornia.geometry.transform import crop_and_resize
        boxes = _resized_crop_boxes(b, h, w, self.scale, generator).to(device=device, dtype=x.dtype)
        x = _snap(crop_and_resize(x, _per_frame(boxes, window), (size, size)))
        flip = _per_frame(torch.rand(b, generator=generator) < self.p_flip, window).nonzero().squeeze(1).to(device)
        x[flip] = x[flip].flip(-1)
        if strong:
            x = self._strong_pixels(x, b, window, generator)
        return _from_float(x.reshape(b, window, 3, size, size), clips)

    def _strong_pixels(self, x: Tensor, b: int, window: int, generator: torch.Generator | None) -> Tensor:
        import kornia.filters as kf
        device = x.device
        for _ in range(self.randaugment_ops):
            ops = torch.randint(0, len(_RANDAUGMENT_OPS), (b,), generator=generator)
            sign = torch.where(torch.rand(b, generator=generator) < 0.5, -1.0, 1.0)
            ops_f, sign_f = _per_frame(ops, window).to(device), _per_frame(sign, window).to(device)
            for k in ops.unique().tolist():
                if _RANDAUGMENT_OPS[k] != "identity":
                    rows = (ops_f == k).nonzero().squeeze(1)
                    x[rows] = _snap(_randaugment_op(_RANDAUGMENT_OPS[k], x[rows], self.level, sign_f[rows]))
        x = _snap(self._overlay(x, b, window, generator))
        blur = _per_frame(torch.rand(b, generator=generator) < self.p_blur, window).to(device)
        sigma = _per_frame(_uniform((b,), *self.sigma, generator), window).to(device)
        k = 2 * math.ceil(3 * self.sigma[1]) + 1
        rows = blur.nonzero().squeeze(1)
        if rows.numel():
            x[rows] = kf.gaussian_blur2d(x[rows], (k, k), sigma[rows, None].expand(-1, 2).contiguous())
        return x

    def _overlay(self, x: Tensor, b: int, window: int, generator: torch.Generator | None) -> Tensor:
        """Text (p_text) then logo (p_logo) overlays: one layer per clip, shared by all of its frames (deviation:
        the released S2VS draws them per frame, see the module docstring).

        Text height is 10–25 % of the frame (smaller than S2VS's 0.2–0.5 so a word fits in small frames)."""
        size = x.shape[-1]
        layers = torch.zeros(2, b, 4, size, size)  # (text, logo) x clip x RGBA
        for i in range(b):
            if torch.rand((), generator=generator) < self.p_text:
                word = transforms.WORDS[int(torch.randint(0, len(transforms.WORDS), (), generator=generator))]
                font_px = max(6, round(size * float(_uniform((), 0.1, 0.25, generator))))
                mask = transforms.text_mask(word, font_px)[:size, :size]
                top = int(torch.randint(0, size - mask.shape[0] + 1, (), generator=generator))
                left = int(torch.randint(0, size - mask.shape[1] + 1, (), generator=generator))
                opacity = float(_uniform((), 0.7, 1.0, generator))
                layers[0, i, :3] = torch.rand(3, 1, 1, generator=generator)
                layers[0, i, 3, top:top + mask.shape[0], left:left + mask.shape[1]] = mask * opacity
            if torch.rand((), generator=generator) < self.p_logo:
                side = max(4, round(size * float(_uniform((), 0.2, 0.5, generator))))
                logo = F.interpolate(transforms.logo_rgba().permute(2, 0, 1)[None] / 255.0, size=(side, side),
                                     mode="bilinear", antialias=True, align_corners=False)[0]
                top, left = (int(torch.randint(0, size - side + 1, (), generator=generator)) for _ in range(2))
                logo[3] *= float(_uniform((), 0.7, 1.0, generator))
                layers[1, i, :, top:top + side, left:left + side] = logo
        for layer in layers:
            if layer[:, 3].any():
                layer = _per_frame(layer, window).to(x.device)
                x = x * (1 - layer[:, 3:]) + layer[:, :3] * layer[:, 3:]
        return x


@float32_draws
def video_in_video(clips: Tensor, generator: torch.Generator | None = None, p: float = 0.3,
                   overlap: tuple[float, float] = (0.3, 0.7)) -> tuple[Tensor, Tensor]:
    """S2VS Video-in-Video: with probability ``p`` clip i is shrunk into a box of area ``1 - λ`` (λ ~ U(overlap))
    inside another clip j of the batch; the result replaces slot i. Returns the clips and ``L [B, B]`` (identity
    plus ``L[i, j] = λ``), from which S2VS builds its positive pairs. Same layout, dtype and device as the input.

    Examples:
        >>> clips = torch.randint(0, 256, (4, 2, 16, 16, 3), dtype=torch.uint8)
        >>> mixed, overlap = video_in_video(clips, torch.Generator().manual_seed(0), p=1.0)
        >>> mixed.shape, overlap.shape, bool((overlap.diagonal() == 1).all())
        (torch.Size([4, 2, 16, 16, 3]), torch.Size([4, 4]), True)
    """
    clips = _check_clips(clips)
    b, t, h, w, _ = clips.shape
    labels = torch.eye(b, device=clips.device)
    if b < 2:
        return clips, labels
    out = clips.clone()
    for i in range(b):
        if torch.rand((), generator=generator) >= p:
            continue
        j = int(torch.randint(0, b - 1, (), generator=generator))
        j += j >= i
        lam = float(_uniform((), *overlap, generator))
        bh, bw = max(2, round(h * math.sqrt(1 - lam))), max(2, round(w * math.sqrt(1 - lam)))
        top = int(torch.randint(0, h - bh + 1, (), generator=generator))
        left = int(torch.randint(0, w - bw + 1, (), generator=generator))
        donor = clips[i].permute(0, 3, 1, 2).double()
        donor = F.interpolate(donor, size=(bh, bw), mode="bilinear", antialias=True, align_corners=False)
        donor = donor.permute(0, 2, 3, 1)
        donor = round_pixels(donor) if clips.dtype == torch.uint8 else donor
        out[i] = clips[j]
        out[i, :, top:top + bh, left:left + bw] = donor.to(clips.dtype)
        labels[i, j] = lam
    return out, labels
