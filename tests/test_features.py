"""Backbones, regional pooling, PCA whitening, cached extraction, and a copy-vs-non-copy property test."""

from __future__ import annotations

import importlib
import io

import numpy as np
import pytest
import skimage.data
import torch
import torch.nn.functional as F
from sklearn.decomposition import PCA

from hapref.features import (
    FeatureExtractor,
    PCAWhitening,
    load_backbone,
    pool_layers,
    regional_max_pool,
)


def test_backbone_shapes_inputs_and_frozen() -> None:
    net = load_backbone("efficientnet-lite0", image_size=128)
    frames = torch.randint(0, 256, (2, 90, 120, 3), dtype=torch.uint8)
    maps = net(frames)
    assert [tuple(m.shape) for m in maps] == [(2, 24, 32, 32), (2, 40, 16, 16), (2, 112, 8, 8), (2, 320, 4, 4)]
    # uint8 [T,H,W,3] and float [T,3,H,W] in [0,1] are the same input
    torch.testing.assert_close(net(frames.permute(0, 3, 1, 2).float() / 255)[-1], maps[-1])
    assert net.embed(frames).shape == (2, 320)
    # the frozen backbone folds batch norms into convolutions: same function as the plain network
    plain = load_backbone("efficientnet-lite0", image_size=128, frozen=False).eval()
    with torch.no_grad():
        for fused, reference in zip(maps, plain(frames)):
            torch.testing.assert_close(fused, reference, atol=1e-3, rtol=1e-4)
    net.train()
    assert not net.training and not any(p.requires_grad for p in net.parameters())
    small = load_backbone("small-cnn")
    assert [m.shape[1] for m in small(frames)] == list(small.channels)
    with pytest.raises(ValueError, match="frames"):
        net(torch.zeros(2, 3, 8, 8, dtype=torch.int32))
    with pytest.raises(ValueError, match="name"):
        load_backbone("vgg")
    for name in ("resnet50", "alexnet"):
        with pytest.raises((RuntimeError, FileNotFoundError), match="torchvision|weights"):
            load_backbone(name, weights_path=f"/nonexistent/{name}.pth")


@pytest.mark.parametrize("name", ["resnet50", "alexnet"])
def test_torchvision_backbones_give_their_declared_maps(name: str) -> None:
    try:
        importlib.import_module("torchvision")
    except Exception as err:  # a RuntimeError with the CPU torch of this project's CI
        pytest.skip(f"torchvision does not import here: {err}")
    net = load_backbone(name, pretrained=False, image_size=96)
    maps = net(torch.randint(0, 256, (2, 96, 96, 3), dtype=torch.uint8))
    assert [m.shape[1] for m in maps] == list(net.channels)
    assert all(m.shape[0] == 2 and m.shape[-1] > 1 for m in maps)


def test_regional_max_pool_matches_s2vs_geometry_and_loop() -> None:
    fmap = torch.randn(2, 5, 56, 56)
    # on a 56-pixel map the 3×3 regions are S2VS's kernel 28 / stride 14 max pooling
    expected = F.max_pool2d(fmap, 28, 14).flatten(2).transpose(1, 2)
    torch.testing.assert_close(regional_max_pool(fmap, 3), expected)
    fmap = torch.randn(1, 3, 7, 9)
    out = regional_max_pool(fmap, 3)
    assert out.shape == (1, 9, 3)
    rows, cols = [(0, 4), (1, 5), (3, 7)], [(0, 5), (2, 7), (4, 9)]
    literal = [fmap[0, :, r0:r1, c0:c1].amax(dim=(-1, -2)) for r0, r1 in rows for c0, c1 in cols]
    torch.testing.assert_close(out[0], torch.stack(literal))


def test_pool_layers_variants_and_normalisation() -> None:
    maps = [torch.rand(3, 4, 8, 8), torch.rand(3, 6, 4, 4)]
    l3 = pool_layers(maps, "l3imac")
    imac = pool_layers(maps, "imac")
    irmac = pool_layers(maps, "l3irmac")
    assert l3.shape == (3, 9, 10) and imac.shape == (3, 10) and irmac.shape == (3, 10)
    for x in (l3, imac, irmac):
        torch.testing.assert_close(x.norm(dim=-1), torch.ones(x.shape[:-1]))
    # literal iMAC: channel-normalise, global max, per-layer L2, concat, L2
    parts = [F.normalize(F.normalize(m, dim=1).amax(dim=(-1, -2)), dim=-1) for m in maps]
    torch.testing.assert_close(imac, F.normalize(torch.cat(parts, -1), dim=-1))
    # literal L3-iRMAC: sum of L2-normalised regions per layer
    parts = [F.normalize(F.normalize(regional_max_pool(F.normalize(m, dim=1)), dim=-1).sum(1), dim=-1) for m in maps]
    torch.testing.assert_close(irmac, F.normalize(torch.cat(parts, -1), dim=-1))
    with pytest.raises(ValueError, match="pooling"):
        pool_layers(maps, "gem")


def test_pca_whitening_identity_covariance_sklearn_and_round_trip() -> None:
    x = torch.randn(400, 12, dtype=torch.float64) @ torch.randn(12, 12, dtype=torch.float64) + 3.0
    pca = PCAWhitening.fit(x, dim=8)
    white = pca.whiten(x)
    torch.testing.assert_close(torch.cov(white.T), torch.eye(8, dtype=torch.float64))
    torch.testing.assert_close(white.mean(0), torch.zeros(8, dtype=torch.float64))
    reference = torch.from_numpy(PCA(n_components=8, whiten=True).fit_transform(x.numpy()))
    torch.testing.assert_close(white.abs(), reference.abs())  # same axes up to sign
    torch.testing.assert_close(pca(x).norm(dim=-1), torch.ones(400, dtype=torch.float64))
    buffer = io.BytesIO()
    torch.save(pca.state_dict(), buffer)
    buffer.seek(0)
    loaded = PCAWhitening.from_state_dict(torch.load(buffer, weights_only=True))
    torch.testing.assert_close(loaded(x), pca(x))
    with pytest.raises(ValueError, match="dim"):
        PCAWhitening.fit(x[:5], dim=8)
    with pytest.raises(ValueError, match="x"):
        pca(torch.randn(3, 5, dtype=torch.float64))


def test_extractor_whitening_cache_and_config_hash(tmp_path) -> None:
    extractor = FeatureExtractor("small-cnn", batch_size=3)
    videos = {f"v/{i}": torch.randint(0, 256, (5, 40, 40, 3), dtype=torch.uint8) for i in range(3)}
    raw = extractor(videos["v/0"])
    assert raw.shape == (5, 9, 240)
    key_before = extractor.config_hash()
    extractor.fit_whitening(videos.values(), dim=16, frames_per_video=4)
    assert extractor.config_hash() != key_before
    features = extractor.extract(videos, cache_dir=tmp_path, progress=False)
    assert sorted(features) == sorted(videos) and features["v/1"].shape == (5, 9, 16)
    files = sorted(p.name for p in (tmp_path / extractor.config_hash()).iterdir())
    assert [name.split("-")[0] for name in files] == ["v_0", "v_1", "v_2"]  # no temporary files left behind

    def fail(frames: torch.Tensor) -> torch.Tensor:
        raise AssertionError("cached features must not be recomputed")

    extractor.forward = fail
    cached = extractor.extract(list(videos.items()), cache_dir=tmp_path, progress=False)
    for key in videos:
        torch.testing.assert_close(cached[key], features[key])

    # a regenerated video under the same id must not reuse the stale cached features
    extractor.forward = FeatureExtractor.forward.__get__(extractor)
    changed = {"v/0": 255 - videos["v/0"]}
    fresh = extractor.extract(changed, cache_dir=tmp_path, progress=False)
    torch.testing.assert_close(fresh["v/0"], extractor(changed["v/0"]))
    assert not torch.allclose(fresh["v/0"], features["v/0"])


def _photo(name: str, size: int) -> torch.Tensor:
    image = getattr(skimage.data, name)()
    image = np.stack([image] * 3, -1) if image.ndim == 2 else image[..., :3]
    x = torch.from_numpy(np.ascontiguousarray(image)).permute(2, 0, 1).float()[None] / 255
    return F.interpolate(x, size=(size, size), mode="bilinear", antialias=True)[0]


def _separation(extractor: FeatureExtractor, originals: torch.Tensor, copies: torch.Tensor) -> tuple[float, float]:
    """AUC of copy-vs-non-copy similarities and the copy/non-copy gap in non-copy standard deviations."""
    sims = extractor(originals) @ extractor(copies).T
    positives, negatives = sims.diag(), sims[~torch.eye(len(sims), dtype=torch.bool)]
    auc = (positives[:, None] > negatives[None]).float().mean().item()
    return auc, ((positives.mean() - negatives.mean()) / negatives.std()).item()


def test_pretrained_features_separate_copies_better_than_random_weights() -> None:
    names = ["astronaut", "chelsea", "coffee", "rocket", "camera", "coins", "immunohistochemistry", "retina"]
    originals = torch.stack([_photo(n, 112) for n in names])
    crop = F.interpolate(originals[:, :, 12:92, 18:104], size=(112, 112), mode="bilinear", antialias=True)
    copies = (crop * torch.tensor([1.1, 0.9, 1.0]).view(3, 1, 1) + 0.05).clamp(0, 1).flip(-1)
    kwargs = {"image_size": 160}
    pretrained = FeatureExtractor(load_backbone("efficientnet-lite0", **kwargs), pooling="imac")
    random = FeatureExtractor(load_backbone("efficientnet-lite0", pretrained=False, **kwargs), pooling="imac")
    auc_pre, gap_pre = _separation(pretrained, originals, copies)
    auc_rand, gap_rand = _separation(random, originals, copies)
    assert auc_pre >= 0.95 and auc_pre > auc_rand
    assert gap_pre > 2 * gap_rand
