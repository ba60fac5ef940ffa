"""DINO's ViT-S/16 in plain torch (hapref.features.vit), the DINO teacher of the HAP-VR trainer and its region pooling.

The ViT is checked against a literal transcription (a loop over patches and heads, LayerNorm, softmax, GELU and
DINO's bicubic positional-embedding interpolation written out) in float64; checkpoints in the official layout are
written to tmp files and loaded back.
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from hapref.features import (DINO_VITS16, ResNet50, ResNet50Backbone, VisionTransformer, dino_backbone_state,
                             dino_input, load_dino_vits16, pool_layers, released_l3imac)
from hapref.models.hapvr import DinoTeacher
from hapref.train.hapvr import PROFILES, FrameEncoder

D, DEPTH, HEADS, PATCH = 384, 12, 6, 16


def official_layout() -> dict[str, tuple[int, ...]]:
    """The keys and shapes of facebookresearch/dino's vit_small(patch_size=16), written out."""
    layout = {"cls_token": (1, 1, D), "pos_embed": (1, 197, D), "patch_embed.proj.weight": (D, 3, PATCH, PATCH),
              "patch_embed.proj.bias": (D,), "norm.weight": (D,), "norm.bias": (D,)}
    for i in range(DEPTH):
        b = f"blocks.{i}."
        layout.update({b + "norm1.weight": (D,), b + "norm1.bias": (D,), b + "attn.qkv.weight": (3 * D, D),
                       b + "attn.qkv.bias": (3 * D,), b + "attn.proj.weight": (D, D), b + "attn.proj.bias": (D,),
                       b + "norm2.weight": (D,), b + "norm2.bias": (D,), b + "mlp.fc1.weight": (4 * D, D),
                       b + "mlp.fc1.bias": (4 * D,), b + "mlp.fc2.weight": (D, 4 * D), b + "mlp.fc2.bias": (D,)})
    return layout


def random_vit(dtype: torch.dtype = torch.float32, seed: int = 0) -> VisionTransformer:
    """ViT-S/16 with every parameter random (LayerNorm weights near 1, all biases non-zero)."""
    g = torch.Generator().manual_seed(seed)
    with torch.device("meta"):          # skip the slow truncated-normal initialisation: every value is set below
        vit = VisionTransformer(**DINO_VITS16)
    vit = vit.to_empty(device="cpu").to(dtype)
    with torch.no_grad():
        for name, p in vit.named_parameters():
            noise = torch.randn(p.shape, generator=g, dtype=torch.float64).to(dtype)
            if "norm" in name and name.endswith("weight"):
                p.copy_(1 + 0.1 * noise)
            elif name in ("cls_token", "pos_embed"):
                p.copy_(0.5 * noise)
            else:
                p.copy_(noise / math.sqrt(p[0].numel() if p.ndim > 1 else 16))
    return vit.eval()


@pytest.fixture(scope="module")
def vit64() -> VisionTransformer:
    return random_vit(torch.float64)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> tuple[Path, VisionTransformer]:
    """A random ViT-S/16 saved as the released backbone file (plain state dict, official keys)."""
    vit = random_vit()
    path = tmp_path_factory.mktemp("dino") / "dino_deitsmall16_pretrain.pth"
    torch.save(vit.state_dict(), path)
    return path, vit


# ---------------------------------------------------------------- the literal transcription

def literal_layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    mean = x.mean(dim=-1, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps) * weight + bias


def literal_gelu(x: torch.Tensor) -> torch.Tensor:
    return 0.5 * x * (1 + torch.erf(x / math.sqrt(2)))


def cubic(t: float, a: float = -0.75) -> float:
    t = abs(t)
    if t <= 1:
        return (a + 2) * t ** 3 - (a + 3) * t ** 2 + 1
    if t < 2:
        return a * t ** 3 - 5 * a * t ** 2 + 8 * a * t - 4 * a
    return 0.0


def literal_bicubic_matrix(n_in: int, scale: float) -> torch.Tensor:
    """[floor(n_in·scale), n_in]: PyTorch's bicubic (A = -0.75, half-pixel centres, border taps clamped) along one
    axis when it is given the scale factor itself (source = (i + 0.5) / scale - 0.5)."""
    n_out = math.floor(n_in * scale)
    m = torch.zeros(n_out, n_in, dtype=torch.float64)
    for i in range(n_out):
        src = (i + 0.5) / scale - 0.5
        x0 = math.floor(src)
        for k in (-1, 0, 1, 2):
            m[i, min(max(x0 + k, 0), n_in - 1)] += cubic(src - (x0 + k))
    return m


def literal_pos_embed(pos: torch.Tensor, height: int, width: int) -> torch.Tensor:
    """DINO's interpolate_pos_encoding: the stored embedding for a square input with the stored patch count, else
    the patch grid resized bicubically with scale factors (rows + 0.1) / √N and (cols + 0.1) / √N."""
    n = pos.shape[1] - 1
    rows, cols = height // PATCH, width // PATCH
    if rows * cols == n and height == width:
        return pos
    side = int(math.sqrt(n))
    grid = pos[0, 1:].reshape(side, side, -1)
    mr = literal_bicubic_matrix(side, (rows + 0.1) / math.sqrt(n))
    mc = literal_bicubic_matrix(side, (cols + 0.1) / math.sqrt(n))
    assert mr.shape[0] == rows and mc.shape[0] == cols
    out = torch.einsum("ra,cb,abd->rcd", mr, mc, grid.double()).reshape(rows * cols, -1)
    return torch.cat([pos[0, :1], out.to(pos.dtype)])[None]


def literal_vit(state: dict[str, torch.Tensor], images: torch.Tensor) -> torch.Tensor:
    """All output tokens [T, 1 + N, D] of DINO's ViT-S/16, one image, one patch and one head at a time."""
    out = []
    rows, cols = images.shape[-2] // PATCH, images.shape[-1] // PATCH
    pos = literal_pos_embed(state["pos_embed"], images.shape[-2], images.shape[-1])[0]
    hd = D // HEADS
    for image in images:
        tokens = [state["cls_token"][0, 0]]
        w = state["patch_embed.proj.weight"].reshape(D, -1)
        for r in range(rows):
            for c in range(cols):
                piece = image[:, r * PATCH:(r + 1) * PATCH, c * PATCH:(c + 1) * PATCH].reshape(-1)
                tokens.append(w @ piece + state["patch_embed.proj.bias"])
        x = torch.stack(tokens) + pos
        for i in range(DEPTH):
            b = f"blocks.{i}."
            h = literal_layer_norm(x, state[b + "norm1.weight"], state[b + "norm1.bias"])
            qkv = h @ state[b + "attn.qkv.weight"].T + state[b + "attn.qkv.bias"]
            q, k, v = qkv[:, :D], qkv[:, D:2 * D], qkv[:, 2 * D:]
            heads = []
            for j in range(HEADS):
                cut = slice(j * hd, (j + 1) * hd)
                scores = q[:, cut] @ k[:, cut].T / math.sqrt(hd)
                e = torch.exp(scores - scores.max(dim=-1, keepdim=True).values)
                heads.append((e / e.sum(dim=-1, keepdim=True)) @ v[:, cut])
            x = x + torch.cat(heads, dim=-1) @ state[b + "attn.proj.weight"].T + state[b + "attn.proj.bias"]
            h = literal_layer_norm(x, state[b + "norm2.weight"], state[b + "norm2.bias"])
            hidden = literal_gelu(h @ state[b + "mlp.fc1.weight"].T + state[b + "mlp.fc1.bias"])
            x = x + hidden @ state[b + "mlp.fc2.weight"].T + state[b + "mlp.fc2.bias"]
        out.append(literal_layer_norm(x, state["norm.weight"], state["norm.bias"]))
    return torch.stack(out)


# ---------------------------------------------------------------- the ViT

def test_state_dict_is_the_official_dino_vits16_layout() -> None:
    vit = VisionTransformer(**DINO_VITS16)
    assert {k: tuple(v.shape) for k, v in vit.state_dict().items()} == official_layout()
    assert vit.blocks[0].norm1.eps == vit.norm.eps == 1e-6 and vit.blocks[0].attn.qkv.bias is not None


@pytest.mark.parametrize("size", [(224, 224), (170, 213)])
def test_cls_and_patch_tokens_equal_the_literal_transcription(vit64, size: tuple[int, int]) -> None:
    vit = vit64
    images = torch.randn(1, 3, *size, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    with torch.no_grad():
        cls, patches = vit.encode(images)
        expected = literal_vit({k: v.detach() for k, v in vit.state_dict().items()}, images)
    rows, cols = size[0] // PATCH, size[1] // PATCH
    assert cls.shape == (images.shape[0], D) and patches.shape == (images.shape[0], rows * cols, D)
    assert (cls - expected[:, 0]).abs().max() < 1e-10
    assert (patches - expected[:, 1:]).abs().max() < 1e-10
    assert torch.equal(vit(images), cls)                      # DINO's forward: the CLS token after the final norm
    assert expected[:, 0].std() > 0.1                          # a non-degenerate check


def test_position_embedding_interpolation(vit64) -> None:
    vit = vit64
    # 224 x 224: the stored embedding itself, untouched
    assert vit.interpolate_pos_encoding(224, 224) is vit.pos_embed
    # another size: DINO's bicubic resize with the 0.1-offset scale factors, written out
    for height, width in ((160, 160), (288, 224), (170, 213), (64, 96)):
        pos = vit.interpolate_pos_encoding(height, width)
        rows, cols = height // PATCH, width // PATCH
        assert pos.shape == (1, 1 + rows * cols, D)
        assert torch.equal(pos[:, 0], vit.pos_embed[:, 0])
        assert (pos - literal_pos_embed(vit.pos_embed.detach(), height, width)).abs().max() < 1e-10
    # a constant embedding stays constant at any size
    small = VisionTransformer(patch_size=PATCH, embed_dim=8, depth=1, num_heads=2).double()
    with torch.no_grad():
        small.pos_embed.fill_(0.25)
    assert torch.allclose(small.interpolate_pos_encoding(96, 320), torch.full((1, 1 + 6 * 20, 8), 0.25,
                                                                              dtype=torch.float64), atol=1e-12)


def test_checkpoint_round_trip(checkpoint, tmp_path: Path) -> None:
    path, vit = checkpoint
    loaded = load_dino_vits16(path)
    assert not loaded.training and not any(p.requires_grad for p in loaded.parameters())
    images = torch.randn(2, 3, 224, 224, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        assert torch.equal(loaded(images), vit(images))
        cls, patches = loaded.encode(images)
    assert cls.shape == (2, D) and patches.shape == (2, 196, D)
    # DINO's full training checkpoint: the teacher under module./backbone. prefixes, plus the projection head
    state = vit.state_dict()
    wrapped = {"teacher": {**{f"backbone.{k}": v for k, v in state.items()}, "head.mlp.0.weight": torch.zeros(2, D)},
               "student": {f"module.backbone.{k}": torch.zeros_like(v) for k, v in state.items()}, "epoch": 100}
    torch.save(wrapped, tmp_path / "checkpoint.pth")
    with torch.no_grad():
        assert torch.equal(load_dino_vits16(tmp_path / "checkpoint.pth")(images), vit(images))
    student = dino_backbone_state({"student": wrapped["student"]})
    assert sorted(student) == sorted(state)


def test_wrong_checkpoints_are_clear_errors(checkpoint, tmp_path: Path) -> None:
    path, vit = checkpoint
    state = vit.state_dict()
    del state["blocks.3.mlp.fc1.bias"]
    state["pos_embed"] = torch.zeros(1, 50, D)
    state["head.weight"] = torch.zeros(10, D)
    torch.save(state, tmp_path / "broken.pth")
    with pytest.raises(ValueError) as err:
        load_dino_vits16(tmp_path / "broken.pth")
    message = str(err.value)
    assert "missing keys: blocks.3.mlp.fc1.bias" in message
    assert "unexpected keys: head.weight" in message
    assert "pos_embed (1, 50, 384) (expected (1, 197, 384))" in message
    assert "vit_small(patch_size=16)" in message and "pos_embed [1, 197, 384]" in message
    with pytest.raises(FileNotFoundError, match="nowhere.pth"):
        load_dino_vits16(tmp_path / "nowhere.pth")


def test_dino_input_is_resized_and_imagenet_normalised() -> None:
    frames = torch.randint(0, 256, (2, 224, 224, 3), dtype=torch.uint8)
    x = dino_input(frames)
    mean = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1)
    std = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1)
    torch.testing.assert_close(x, (frames.permute(0, 3, 1, 2).float() / 255 - mean) / std)
    assert dino_input(frames[:, :100, :60]).shape == (2, 3, 224, 224)


# ---------------------------------------------------------------- ResNet-50 without torchvision

@pytest.fixture(scope="module")
def resnet_hub(tmp_path_factory) -> tuple[Path, dict[str, torch.Tensor]]:
    """A torch hub folder holding a random torchvision-layout resnet50-0676ba61.pth."""
    hub = tmp_path_factory.mktemp("torch_home")
    torch.manual_seed(3)
    state = ResNet50().state_dict()
    (hub / "hub" / "checkpoints").mkdir(parents=True)
    torch.save(state, hub / "hub" / "checkpoints" / "resnet50-0676ba61.pth")
    return hub, state


def test_resnet50_has_torchvisions_layout_and_loads_its_file(resnet_hub, monkeypatch) -> None:
    hub, state = resnet_hub
    assert len(state) == 320 and tuple(state["fc.weight"].shape) == (1000, 2048)
    assert tuple(state["layer2.0.conv2.weight"].shape) == (128, 128, 3, 3)      # v1.5: the stride on the 3x3
    assert tuple(state["layer3.0.downsample.1.running_var"].shape) == (1024,)
    monkeypatch.setenv("TORCH_HOME", str(hub))
    net = ResNet50Backbone(image_size=224)
    torch.testing.assert_close(net.layers[3][2].conv3.weight, state["layer4.2.conv3.weight"])
    maps = net(torch.randint(0, 256, (1, 224, 224, 3), dtype=torch.uint8))
    assert [tuple(m.shape) for m in maps] == [(1, 256, 56, 56), (1, 512, 28, 28), (1, 1024, 14, 14), (1, 2048, 7, 7)]


# ---------------------------------------------------------------- the trainer's FrameEncoder

def test_released_profile_builds_with_a_dino_teacher(checkpoint, resnet_hub, monkeypatch) -> None:
    path, vit = checkpoint
    monkeypatch.setenv("TORCH_HOME", str(resnet_hub[0]))
    encode = FrameEncoder(replace(PROFILES["released"], dino_checkpoint=str(path)), 224)
    assert encode.pooling == "l3imac_released" and isinstance(encode.teacher, DinoTeacher)
    frames = torch.randint(0, 256, (2, 224, 224, 3), dtype=torch.uint8, generator=torch.Generator().manual_seed(4))
    regions, teacher = encode(frames)
    assert regions.shape == (2, 9, 256 + 512 + 1024 + 2048) and teacher.shape == (2, D)
    with torch.no_grad():
        # the teacher: DINO's CLS token of the ImageNet-normalised frames, as loaded from the checkpoint
        torch.testing.assert_close(teacher, vit(dino_input(frames)), rtol=0, atol=1e-5)
        # the student: the released S2VS / HAP-VR windows on the backbone's maps
        maps = encode.backbone(frames)
    torch.testing.assert_close(regions, released_l3imac(maps), rtol=0, atol=0)
    assert not torch.allclose(regions, pool_layers(maps, "l3imac"))


def test_resnet50_backbone_pools_the_released_windows(resnet_hub, monkeypatch) -> None:
    monkeypatch.setenv("TORCH_HOME", str(resnet_hub[0]))
    profile = replace(PROFILES["smoke"], backbone="resnet50")
    assert profile.pooling == "" and FrameEncoder.pooling_for(profile) == "l3imac_released"
    encode = FrameEncoder(profile, 224)
    frames = torch.rand(2, 3, 224, 224, generator=torch.Generator().manual_seed(5))
    regions, teacher = encode(frames)
    with torch.no_grad():
        maps = encode.backbone(frames)
    assert torch.equal(regions, released_l3imac(maps))
    assert torch.equal(teacher, maps[-1].mean(dim=(-2, -1)))              # the backbone stand-in teacher
    # an explicit setting wins over the automatic choice
    assert FrameEncoder.pooling_for(replace(profile, pooling="l3imac")) == "l3imac"
    with pytest.raises(ValueError, match="pooling"):
        FrameEncoder.pooling_for(replace(profile, pooling="imac"))


def test_dino_teacher_setting_errors_name_the_setting(tmp_path: Path) -> None:
    profile = replace(PROFILES["smoke"], backbone="small-cnn", teacher="dino")
    with pytest.raises(ValueError, match="dino_checkpoint"):
        FrameEncoder(profile, 32)
    with pytest.raises(FileNotFoundError, match="dino_checkpoint"):
        FrameEncoder(replace(profile, dino_checkpoint=str(tmp_path / "missing.pth")), 32)
    with pytest.raises(ValueError, match="teacher"):
        FrameEncoder(replace(profile, teacher="clip"), 32)
