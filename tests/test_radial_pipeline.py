"""Radial pipeline: fine-grained data and samplers, the CNN+LSTM model, training, detection helpers."""

from __future__ import annotations

import pytest
import torch
from conftest import devices

from hapref.data.finegrained import (MOTION_PAIRS, make_finegrained_videos, motion_clip, relevance_gains,
                                     sample_quadlets, sample_quadruplets, sample_triplets)
from hapref.data.highlights import make_highlight_video
from hapref.detection import (clip_critical_prf, detect_cuts, histogram_cut_scores, match_cuts,
                              window_features)
from hapref.models.radial import QuadletVideoNet, pad_features

CLASSES = torch.tensor([0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2])
SUBS = torch.tensor([0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5])


def test_quadlet_sampler_respects_the_hierarchy() -> None:
    idx = sample_quadlets(CLASSES, SUBS, 500, torch.Generator().manual_seed(0))
    q, p, i, n = idx.unbind(1)
    assert (q != p).all() and (SUBS[q] == SUBS[p]).all()
    assert (CLASSES[i] == CLASSES[q]).all() and (SUBS[i] != SUBS[q]).all()
    assert (CLASSES[n] != CLASSES[q]).all()
    assert set(q.tolist()) == set(range(10))  # class 2 has one sub-class: no intermediate, never an anchor
    assert set(n.tolist()) == set(range(12))


def test_triplet_and_quadruplet_samplers() -> None:
    g = torch.Generator().manual_seed(1)
    q, p, n = sample_triplets(CLASSES, SUBS, 300, g).unbind(1)
    assert (SUBS[q] == SUBS[p]).all() and (SUBS[n] != SUBS[q]).all() and (q != p).all()
    assert (CLASSES[n] == CLASSES[q]).any()  # intermediates count as negatives for the triplet baseline
    for variant in ("a", "b"):
        q, p, n1, n2 = sample_quadruplets(CLASSES, SUBS, 300, g, negatives=variant).unbind(1)
        assert (SUBS[n1] != SUBS[q]).all() and (SUBS[n2] != SUBS[q]).all() and (SUBS[n1] != SUBS[n2]).all()
        same_class = (CLASSES[n1] == CLASSES[q]) | (CLASSES[n2] == CLASSES[q])
        assert same_class.any() if variant == "a" else not same_class.any()
    with pytest.raises(ValueError, match="no item has"):
        sample_quadlets(torch.tensor([0, 0, 1, 1]), torch.tensor([0, 0, 1, 1]), 4, g)
    with pytest.raises(ValueError, match="negatives"):
        sample_quadruplets(CLASSES, SUBS, 4, g, negatives="c")


def test_relevance_gains_grades() -> None:
    gains = relevance_gains(CLASSES[:1], SUBS[:1], CLASSES, SUBS)
    assert gains.tolist() == [[2, 2, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0]]


def test_finegrained_videos_are_deterministic_and_labelled() -> None:
    kw = dict(num_classes=2, subclasses_per_class=2, train_per_subclass=2, test_per_subclass=2, frames=(3, 5), size=24)
    train, test = make_finegrained_videos(seed=3, **kw)
    again, _ = make_finegrained_videos(seed=3, **kw)
    assert len(train) == 8 and len(test) == 8
    assert all(torch.equal(a, b) for a, b in zip(train.videos, again.videos))
    assert {v.shape[0] for v in train.videos} <= {3, 4, 5} and train.videos[0].dtype == torch.uint8
    assert train.subclasses.tolist() == [0, 0, 1, 1, 2, 2, 3, 3] and train.classes.tolist() == [0] * 4 + [1] * 4
    with pytest.raises(ValueError, match="subclasses_per_class"):
        make_finegrained_videos(subclasses_per_class=1)


MOTION_KW = dict(num_classes=3, subclasses_per_class=2, train_per_subclass=3, test_per_subclass=2, frames=(4, 6),
                 size=24, design="motion")


def test_motion_design_shapes_labels_and_determinism() -> None:
    train, test = make_finegrained_videos(seed=5, **MOTION_KW)
    again, again_test = make_finegrained_videos(seed=5, **MOTION_KW)
    other, _ = make_finegrained_videos(seed=6, **MOTION_KW)
    assert len(train) == 18 and len(test) == 12
    assert all(torch.equal(a, b) for a, b in zip(train.videos + test.videos, again.videos + again_test.videos))
    assert not all(a.shape == b.shape and torch.equal(a, b) for a, b in zip(train.videos, other.videos))
    assert all(v.dtype == torch.uint8 and v.shape[1:] == (24, 24, 3) and 4 <= v.shape[0] <= 6 for v in train.videos)
    assert train.classes.tolist() == [0] * 6 + [1] * 6 + [2] * 6
    assert train.subclasses.tolist() == [s for s in range(6) for _ in range(3)]
    assert test.subclasses.tolist() == [s for s in range(6) for _ in range(2)]
    assert [n.split(":")[1] for n in train.subclass_names] == ["zoom-in", "zoom-out"] * 3
    four, _ = make_finegrained_videos(seed=0, **{**MOTION_KW, "subclasses_per_class": 4, "frames": (3, 3)})
    assert [n.split(":")[1] for n in four.subclass_names[:4]] == [m for pair in MOTION_PAIRS for m in pair]
    for bad in (3, 6):
        with pytest.raises(ValueError, match="design='motion'"):
            make_finegrained_videos(**{**MOTION_KW, "subclasses_per_class": bad})
    with pytest.raises(ValueError, match="design must be"):
        make_finegrained_videos(design="colour")


def test_region_design_is_the_default_and_unchanged() -> None:
    kw = dict(num_classes=2, subclasses_per_class=2, train_per_subclass=2, test_per_subclass=2, frames=(3, 5), size=24)
    default, explicit = make_finegrained_videos(seed=1, **kw)[0], make_finegrained_videos(seed=1, design="region", **kw)[0]
    assert all(torch.equal(a, b) for a, b in zip(default.videos, explicit.videos))


@pytest.mark.parametrize("pair", MOTION_PAIRS)
def test_motion_siblings_are_blind_to_order_free_pooling(pair: tuple[str, str]) -> None:
    """A reversed-order sibling has the same frames backwards: the same mean-pooled pixels, different order."""
    g = torch.Generator().manual_seed(0)
    for photo in ("astronaut", "coffee"):
        u = torch.rand(5, generator=g, dtype=torch.float64).tolist()
        forward, backward = (motion_clip(photo, motion, u, 7, 24) for motion in pair)
        assert torch.equal(backward, forward.flip(0))
        assert torch.equal(forward.double().mean(0), backward.double().mean(0))    # order-free summary: identical
        assert not torch.equal(forward, backward)                                   # the order is what differs
        assert (forward[0].double() - forward[-1].double()).abs().mean() > 1.0       # the camera really moves
    with pytest.raises(ValueError, match="motion must be"):
        motion_clip("coffee", "rotate", [0.5] * 5, 3, 16)


def test_motion_profile_mean_pool_cannot_separate_siblings() -> None:
    """Frozen features mean-pooled: a clip and its reversed twin embed to the same vector (to rounding)."""
    from hapref.features import SmallCNN
    from hapref.models.radial import frame_features

    cnn = SmallCNN(image_size=24).eval()
    u = [0.3, 0.7, 0.5, 0.4, 0.9]
    feats = [frame_features(cnn, motion_clip("chelsea", m, u, 6, 24)).mean(0) for m in ("zoom-in", "zoom-out")]
    assert torch.allclose(feats[0], feats[1], atol=1e-5)


@pytest.mark.parametrize("device", devices())
def test_model_ignores_padding_and_normalises(device: str) -> None:
    model = QuadletVideoNet(feature_dim=6, fc_dim=8, hidden_dim=5).to(device).double()
    seqs = [torch.randn(t, 6, dtype=torch.float64, device=device) for t in (2, 5, 3)]
    feats, lengths = pad_features(seqs)
    emb = model.embed_features(feats, lengths)
    assert emb.shape == (3, 5) and torch.allclose(emb.norm(dim=1), torch.ones(3, dtype=torch.float64, device=device))
    alone = model.embed_features(seqs[0][None], torch.tensor([2]))
    assert torch.allclose(emb[0], alone[0])
    garbage = feats.clone()
    garbage[0, 2:] = 1e3  # padding content must not matter
    assert torch.allclose(model.embed_features(garbage, lengths), emb)
    with pytest.raises(ValueError, match="lengths"):
        model.embed_features(feats, torch.tensor([2, 9, 3]))
    with pytest.raises(ValueError, match="no backbone"):
        model([torch.zeros(2, 8, 8, 3, dtype=torch.uint8)])


def test_model_with_a_backbone_embeds_raw_clips() -> None:
    from hapref.features import load_backbone
    backbone = load_backbone("small-cnn", image_size=32)
    model = QuadletVideoNet(backbone.channels[-1], fc_dim=8, hidden_dim=4, backbone=backbone)
    clips = [torch.randint(0, 255, (t, 32, 32, 3), dtype=torch.uint8) for t in (3, 4)]
    assert model(clips).shape == (2, 4)


def test_training_cli_smoke(capsys: pytest.CaptureFixture[str]) -> None:
    from hapref.train.__main__ import main
    from hapref.train.radial import LOSSES, build
    assert main(["radial", "--profile", "smoke", "--loss", "radial", "--no-progress"]) == 0
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert line.startswith("eval: QP=") and "NDCG=" in line and "MAP=" in line
    for loss in LOSSES:  # every loss builds and yields a finite first loss
        task, _ = build("smoke", loss, 0)
        model = task.build_model()
        assert torch.isfinite(task.loss(model, task.batch(0, torch.device("cpu")))["loss"])


def test_window_features_and_histogram_signal() -> None:
    video = make_highlight_video(num_clips=4, clip_frames=(14, 16), critical_frames=6, size=32, seed=0)
    assert len(video.cuts) == 3 and video.frames.shape[0] == video.clips[-1][1]
    assert int(video.critical_frames.sum()) == 6 * sum(video.critical)
    frames_t = torch.arange(20.0)[:, None].repeat(1, 3)
    windows = window_features(frames_t, 4)
    assert windows.shape == (17, 4, 3) and torch.equal(windows[5, :, 0], torch.arange(5.0, 9.0))
    scores = histogram_cut_scores(video.frames)
    assert scores.shape == (video.frames.shape[0] - 1,) and (scores >= 0).all() and (scores <= 2 + 1e-6).all()


def test_detect_cuts_on_a_piecewise_constant_embedding() -> None:
    embeddings = torch.cat([torch.zeros(10, 2), torch.ones(8, 2) * 5, -torch.ones(12, 2) * 5])
    cuts = detect_cuts(embeddings, window=4, cut_threshold=1.0)
    assert cuts == [13, 21]  # first new windows 10 and 18, plus W - 1


def test_match_cuts_and_clip_prf() -> None:
    assert match_cuts([10, 30, 52], [11, 50], tolerance=2) == {"precision": 2 / 3, "recall": 1.0, "f1": 0.8}
    assert match_cuts([], [5])["f1"] == 0.0
    video = make_highlight_video(num_clips=3, clip_frames=(14, 14), critical_frames=6, size=16, seed=2)
    flags = torch.tensor(video.critical)
    perfect = clip_critical_prf(video.clips, flags, video)
    assert perfect["recall"] == (1.0 if any(video.critical) else 0.0)
