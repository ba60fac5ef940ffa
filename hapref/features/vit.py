"""DINO's ViT-S/16 in plain torch: the frame teacher g' of HAP-VR §3.4 (its CLS embedding of every frame gives
the pseudo labels of the frame-level AP, Eq. 13–15).

The modules, hence the state-dict keys, follow ``vision_transformer.py`` of https://github.com/facebookresearch/dino
(``vit_small(patch_size=16)``: width 384, 12 blocks of 6 heads, MLP ratio 4, qkv bias, LayerNorm eps 1e-6, exact
GELU), so the released ``dino_deitsmall16_pretrain.pth`` loads as it is::

    cls_token [1, 1, 384]    pos_embed [1, 197, 384]    patch_embed.proj.{weight [384, 3, 16, 16], bias [384]}
    blocks.{0..11}.norm1.{weight, bias}    blocks.{i}.attn.qkv.{weight [1152, 384], bias}
    blocks.{i}.attn.proj.{weight, bias}    blocks.{i}.norm2.{weight, bias}
    blocks.{i}.mlp.fc1.{weight [1536, 384], bias}    blocks.{i}.mlp.fc2.{weight [384, 1536], bias}
    norm.{weight, bias}

Inputs of another size than 224 get DINO's bicubic interpolation of the positional embedding
(:meth:`VisionTransformer.interpolate_pos_encoding`). Dropout and stochastic depth (training only) are left out.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from hapref.features.backbones import IMAGENET_MEAN, IMAGENET_STD, to_float_frames

#: ``vit_small(patch_size=16)`` of DINO, the architecture of the released ViT-S/16 checkpoint.
DINO_VITS16: dict[str, int | float] = {"patch_size": 16, "embed_dim": 384, "depth": 12, "num_heads": 6,
                                       "mlp_ratio": 4.0, "image_size": 224}


class _PatchEmbed(nn.Module):
    """Non-overlapping ``p × p`` patches, linearly embedded: ``[T, 3, H, W] -> [T, (H//p)·(W//p), D]`` row by row."""

    def __init__(self, patch_size: int, embed_dim: int) -> None:
        super().__init__()
        self.patch_size = patch_size
        self.proj = nn.Conv2d(3, embed_dim, kernel_size=patch_size, stride=patch_size)

    def forward(self, x: Tensor) -> Tensor:
        """Images ``[T, 3, H, W]`` -> patch embeddings ``[T, N, D]``."""
        return self.proj(x).flatten(2).transpose(1, 2)


class _Attention(nn.Module):
    """Multi-head self-attention with a fused qkv projection (DINO's ``Attention``)."""

    def __init__(self, dim: int, num_heads: int) -> None:
        super().__init__()
        self.num_heads = num_heads
        self.scale = (dim // num_heads) ** -0.5
        self.qkv = nn.Linear(dim, 3 * dim, bias=True)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: Tensor) -> Tensor:
        """Tokens ``[T, N, D]`` -> ``[T, N, D]``."""
        b, n, c = x.shape
        q, k, v = self.qkv(x).reshape(b, n, 3, self.num_heads, c // self.num_heads).permute(2, 0, 3, 1, 4)
        attn = ((q @ k.transpose(-2, -1)) * self.scale).softmax(dim=-1)
        return self.proj((attn @ v).transpose(1, 2).reshape(b, n, c))


class _Mlp(nn.Module):
    """fc1 -> GELU (exact) -> fc2."""

    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x: Tensor) -> Tensor:
        """``[..., D] -> [..., D]``."""
        return self.fc2(self.act(self.fc1(x)))


class _Block(nn.Module):
    """Pre-norm transformer block: ``x + attn(norm1(x))``, then ``x + mlp(norm2(x))``."""

    def __init__(self, dim: int, num_heads: int, mlp_ratio: float, eps: float) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=eps)
        self.attn = _Attention(dim, num_heads)
        self.norm2 = nn.LayerNorm(dim, eps=eps)
        self.mlp = _Mlp(dim, int(dim * mlp_ratio))

    def forward(self, x: Tensor) -> Tensor:
        """Tokens ``[T, N, D]`` -> ``[T, N, D]``."""
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class VisionTransformer(nn.Module):
    """DINO's ViT (https://github.com/facebookresearch/dino, ``vision_transformer.py``) without a head.

    Defaults are ``vit_small(patch_size=16)`` (:data:`DINO_VITS16`); load the released weights with
    :func:`load_dino_vits16`. Takes images ``[T, 3, H, W]`` already resized and normalised (see :func:`dino_input`);
    ``forward`` gives DINO's output, the CLS token after the final LayerNorm ``[T, D]``, and :meth:`encode` also
    the patch tokens ``[T, (H//p)·(W//p), D]``. Fresh weights follow DINO's initialisation (truncated normal,
    std 0.02, for the embeddings and linear layers).

    Examples:
        >>> vit = VisionTransformer(patch_size=4, embed_dim=8, depth=1, num_heads=2, image_size=16)
        >>> vit.pos_embed.shape, vit(torch.rand(3, 3, 16, 16)).shape
        (torch.Size([1, 17, 8]), torch.Size([3, 8]))
    """

    def __init__(self, patch_size: int = 16, embed_dim: int = 384, depth: int = 12, num_heads: int = 6,
                 mlp_ratio: float = 4.0, image_size: int = 224, eps: float = 1e-6) -> None:
        super().__init__()
        if embed_dim % num_heads:
            raise ValueError(f"embed_dim must be a multiple of num_heads, got {embed_dim} and {num_heads}")
        if image_size < patch_size:
            raise ValueError(f"image_size must be >= patch_size, got {image_size} < {patch_size}")
        self.embed_dim = embed_dim
        self.patch_embed = _PatchEmbed(patch_size, embed_dim)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, embed_dim))
        self.pos_embed = nn.Parameter(torch.zeros(1, (image_size // patch_size) ** 2 + 1, embed_dim))
        self.blocks = nn.ModuleList(_Block(embed_dim, num_heads, mlp_ratio, eps) for _ in range(depth))
        self.norm = nn.LayerNorm(embed_dim, eps=eps)
        with torch.no_grad():
            nn.init.trunc_normal_(self.pos_embed, std=0.02)
            nn.init.trunc_normal_(self.cls_token, std=0.02)
            for module in self.modules():
                if isinstance(module, nn.Linear):
                    nn.init.trunc_normal_(module.weight, std=0.02)
                    nn.init.zeros_(module.bias)

    @property
    def patch_size(self) -> int:
        """Side ``p`` of the square patches.

        Examples:
            >>> VisionTransformer(patch_size=4, embed_dim=8, depth=1, num_heads=2, image_size=16).patch_size
            4
        """
        return self.patch_embed.patch_size

    def interpolate_pos_encoding(self, height: int, width: int) -> Tensor:
        """The positional embedding ``[1, 1 + (height//p)·(width//p), D]`` of an input of ``height × width`` pixels.

        DINO's ``interpolate_pos_encoding``: the stored embedding itself for a square input with the stored
        number of patches; otherwise the patch part, as a ``√N × √N`` grid, is resized bicubically with scale
        factors ``(height//p + 0.1) / √N`` and ``(width//p + 0.1) / √N`` (the 0.1 guards the floor of the output
        size against rounding), and the CLS position is kept.

        Examples:
            >>> vit = VisionTransformer(patch_size=4, embed_dim=8, depth=1, num_heads=2, image_size=16)
            >>> vit.interpolate_pos_encoding(16, 16) is vit.pos_embed, vit.interpolate_pos_encoding(24, 12).shape
            (True, torch.Size([1, 19, 8]))
        """
        n = self.pos_embed.shape[1] - 1
        rows, cols = height // self.patch_size, width // self.patch_size
        if rows * cols == n and height == width:
            return self.pos_embed
        side = math.sqrt(n)
        grid = self.pos_embed[:, 1:].reshape(1, int(side), int(side), -1).permute(0, 3, 1, 2)
        grid = F.interpolate(grid, scale_factor=((rows + 0.1) / side, (cols + 0.1) / side), mode="bicubic")
        if grid.shape[-2:] != (rows, cols):
            raise RuntimeError(f"interpolated a {rows} x {cols} patch grid to {tuple(grid.shape[-2:])}")
        return torch.cat([self.pos_embed[:, :1], grid.permute(0, 2, 3, 1).reshape(1, rows * cols, -1)], dim=1)

    def tokens(self, images: Tensor) -> Tensor:
        """All output tokens after the final LayerNorm, ``[T, 1 + N, D]`` (CLS first, then patches row by row).

        Examples:
            >>> vit = VisionTransformer(patch_size=4, embed_dim=8, depth=1, num_heads=2, image_size=16)
            >>> vit.tokens(torch.rand(2, 3, 16, 20)).shape
            torch.Size([2, 21, 8])
        """
        if images.ndim != 4 or images.shape[1] != 3:
            raise ValueError(f"images must have shape [T, 3, H, W], got {tuple(images.shape)}")
        if min(images.shape[-2:]) < self.patch_size:
            raise ValueError(f"images must be at least {self.patch_size} pixels on each side, "
                             f"got {tuple(images.shape[-2:])}")
        x = self.patch_embed(images)
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1)
        x = x + self.interpolate_pos_encoding(images.shape[-2], images.shape[-1])
        for block in self.blocks:
            x = block(x)
        return self.norm(x)

    def encode(self, images: Tensor) -> tuple[Tensor, Tensor]:
        """CLS embeddings ``[T, D]`` and patch tokens ``[T, N, D]`` of normalised images ``[T, 3, H, W]``.

        Examples:
            >>> vit = VisionTransformer(patch_size=4, embed_dim=8, depth=1, num_heads=2, image_size=16)
            >>> x = torch.rand(2, 3, 16, 16)
            >>> cls, patches = vit.encode(x)
            >>> cls.shape, patches.shape, torch.equal(cls, vit(x))
            (torch.Size([2, 8]), torch.Size([2, 16, 8]), True)
        """
        x = self.tokens(images)
        return x[:, 0], x[:, 1:]

    def forward(self, images: Tensor) -> Tensor:
        """DINO's output: the CLS token after the final LayerNorm, ``[T, D]``, of images ``[T, 3, H, W]``.

        Examples:
            >>> vit = VisionTransformer(patch_size=4, embed_dim=8, depth=1, num_heads=2, image_size=16)
            >>> x = torch.rand(2, 3, 16, 16)
            >>> torch.equal(vit(x), vit.tokens(x)[:, 0])
            True
        """
        return self.tokens(images)[:, 0]


def dino_input(frames: Tensor, size: int = 224) -> Tensor:
    """Frames as DINO's ViT takes them: float ``[T, 3, size, size]``, ImageNet-normalised.

    uint8 ``[T, H, W, 3]`` or float ``[T, 3, H, W]`` frames in [0, 1] are resized bicubically (antialiased,
    clamped to [0, 1]; DINO's transforms resize bicubically) to ``size × size`` when they have another size, whole
    (no centre crop, so the teacher sees the pixels the student sees), then every channel becomes
    ``(x - mean_c) / std_c`` with the ImageNet statistics, as DINO's ``Normalize`` does.

    Examples:
        >>> x = dino_input(torch.full((2, 64, 64, 3), 255, dtype=torch.uint8))
        >>> x.shape, [round(v, 4) for v in x[0, :, 0, 0].tolist()]
        (torch.Size([2, 3, 224, 224]), [2.2489, 2.4286, 2.64])
    """
    x = to_float_frames(frames)
    if x.shape[-2:] != (size, size):
        x = F.interpolate(x, size=(size, size), mode="bicubic", antialias=True, align_corners=False).clamp(0, 1)
    mean = torch.tensor(IMAGENET_MEAN, dtype=x.dtype, device=x.device).view(1, 3, 1, 1)
    std = torch.tensor(IMAGENET_STD, dtype=x.dtype, device=x.device).view(1, 3, 1, 1)
    return (x - mean) / std


def dino_backbone_state(checkpoint: Mapping[str, object]) -> dict[str, object]:
    """The ViT's own entries of a DINO checkpoint, under their ``vision_transformer.py`` names.

    Takes the released backbone weights (``dino_deitsmall16_pretrain.pth``: the keys as they are) or one of DINO's
    full training checkpoints (``checkpoint.pth``): its ``"teacher"`` network (DINO's default for evaluation), else
    its ``"student"``, whose keys carry a ``module.`` (DistributedDataParallel) and a ``backbone.`` (multi-crop
    wrapper) prefix; the prefixes are removed and the wrapper's projection head (``head.*``) is dropped.

    Examples:
        >>> t = torch.zeros(1)
        >>> sorted(dino_backbone_state({"teacher": {"backbone.cls_token": t, "head.mlp.0.weight": t},
        ...                             "student": {"module.backbone.cls_token": t}}))
        ['cls_token']
        >>> sorted(dino_backbone_state({"student": {"module.backbone.norm.bias": t, "module.head.last_layer": t}}))
        ['norm.bias']
        >>> sorted(dino_backbone_state({"cls_token": t}))
        ['cls_token']
    """
    if not isinstance(checkpoint, Mapping):
        raise ValueError(f"a DINO checkpoint must be a dict of tensors, got {type(checkpoint).__name__}")
    for key in ("teacher", "student"):
        if isinstance(checkpoint.get(key), Mapping):
            checkpoint = checkpoint[key]
            break
    state = {k.removeprefix("module."): v for k, v in checkpoint.items()}
    if any(k.startswith("backbone.") for k in state):
        state = {k.removeprefix("backbone."): v for k, v in state.items() if k.startswith("backbone.")}
    return state


def _check_layout(state: Mapping[str, object], model: nn.Module, source: str) -> None:
    expected = model.state_dict()
    missing = sorted(set(expected) - set(state))
    unexpected = sorted(set(state) - set(expected))
    shapes = sorted(f"{k} {tuple(v.shape) if isinstance(v, Tensor) else type(v).__name__} "
                    f"(expected {tuple(expected[k].shape)})"
                    for k, v in state.items() if k in expected and (not isinstance(v, Tensor)
                                                                    or v.shape != expected[k].shape))
    if not (missing or unexpected or shapes):
        return

    def listed(names: list[str]) -> str:
        return ", ".join(names[:6]) + (f" and {len(names) - 6} more" if len(names) > 6 else "")

    problems = [f"{label}: {listed(names)}" for label, names in
                (("missing keys", missing), ("unexpected keys", unexpected), ("wrong shapes", shapes)) if names]
    raise ValueError(f"{source} is not a DINO ViT-S/16 checkpoint ({'; '.join(problems)}). Expected the layout of "
                     "facebookresearch/dino vit_small(patch_size=16): cls_token [1, 1, 384], pos_embed [1, 197, 384], "
                     "patch_embed.proj.weight [384, 3, 16, 16] and .bias, blocks.0-11.{norm1, attn.qkv, attn.proj, "
                     "norm2, mlp.fc1, mlp.fc2}.{weight, bias}, norm.{weight, bias} (optionally under 'teacher' or "
                     "'student' with module./backbone. prefixes)")


def load_dino_vits16(path: str | Path) -> VisionTransformer:
    """DINO ViT-S/16 with the weights of a local checkpoint file, frozen and in eval mode; nothing is downloaded.

    ``path``: the released ``dino_deitsmall16_pretrain.pth`` or a DINO training checkpoint (see
    :func:`dino_backbone_state`), read with ``torch.load(..., weights_only=True)``. Every key and shape is checked
    against ``vit_small(patch_size=16)``: a ValueError names the missing, unexpected and wrongly shaped entries.
    The model is built in the default dtype (the checkpoint's float32 values are cast to it).

    Examples:
        >>> import tempfile, pathlib
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "vit.pth"
        >>> torch.save({"teacher": {"backbone.cls_token": torch.zeros(1, 1, 384)}}, path)
        >>> try:
        ...     load_dino_vits16(path)
        ... except ValueError as err:
        ...     print(str(err).split(" (")[1][:40])
        missing keys: blocks.0.attn.proj.bias, b
        >>> load_dino_vits16("/nonexistent/dino_deitsmall16_pretrain.pth")
        Traceback (most recent call last):
        ...
        FileNotFoundError: DINO ViT-S/16 checkpoint not found: /nonexistent/dino_deitsmall16_pretrain.pth
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"DINO ViT-S/16 checkpoint not found: {path}")
    state = dino_backbone_state(torch.load(path, map_location="cpu", weights_only=True))
    with torch.device("meta"):          # shapes only: every value comes from the checkpoint
        model = VisionTransformer(**DINO_VITS16)
    _check_layout(state, model, str(path))
    model.load_state_dict(state, assign=True)
    return model.to(torch.get_default_dtype()).requires_grad_(False).eval()
