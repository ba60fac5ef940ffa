"""HAP-VR pipeline: loss registry, views, batches, the training task and the CLI on the smoke profile."""

from __future__ import annotations

import re

import pytest
import torch

from hapref.models.hapvr import VIDEO_LOSSES, DinoTeacher, build_hapvr_network, video_ranking_loss
from hapref.train import fit, load_pipeline
from hapref.train.__main__ import main
from hapref.data.views import make_views, s2vs_batch, s2vs_labels
from hapref.train.hapvr import (
    DEFAULT_LOSS,
    LOSSES,
    PROFILES,
    HAPVRTask,
    Variant,
    config_for,
    summary_line,
)


def batch_relevance(clips: int) -> torch.Tensor:
    return s2vs_labels(torch.eye(clips))


@pytest.mark.parametrize("name", VIDEO_LOSSES)
def test_every_video_loss_gives_finite_gradients(name: str) -> None:
    loss = video_ranking_loss(name)
    if loss is None:
        assert name == "none"
        return
    sim = torch.rand(8, 8, requires_grad=True)
    value = loss(sim, batch_relevance(4))
    value.backward()
    assert torch.isfinite(value) and torch.isfinite(sim.grad).all() and sim.grad.abs().sum() > 0


def test_unknown_names_raise() -> None:
    with pytest.raises(ValueError, match="name"):
        video_ranking_loss("hinge")
    with pytest.raises(ValueError, match="video_loss"):
        Variant(video_loss="hinge")
    with pytest.raises(ValueError, match="temporal_k"):
        Variant(temporal_k=1.5)
    with pytest.raises(ValueError, match="checkpoint"):
        DinoTeacher("/nonexistent/dino_deitsmall16_pretrain.pth")


def test_batch_relevance_is_s2vs_labels() -> None:
    rel = batch_relevance(3)
    expected = torch.zeros(6, 6, dtype=torch.bool)
    for i in range(3):
        expected[i, i] = expected[i + 3, i + 3] = expected[i, i + 3] = expected[i + 3, i] = True
    assert torch.equal(rel, expected)


def test_video_in_video_mixing_makes_the_host_clip_relevant() -> None:
    mixing = torch.eye(3)
    mixing[0, 2] = 0.4                       # strong view 0 holds clip 2
    labels = s2vs_labels(mixing)
    assert labels[3, 2] and labels[3, 5] and labels[2, 3] and not labels[3, 1]
    assert torch.equal(labels, labels.T)


def test_s2vs_batch_follows_the_released_recipe() -> None:
    """Weak views keep 80-100 % of the frame (flip p 0.5); strong views differ from the weak ones."""
    clips = torch.randint(0, 256, (4, 12, 32, 32, 3), dtype=torch.uint8)
    weak, strong, labels = s2vs_batch(clips, 8, torch.Generator().manual_seed(0), video_in_video_p=1.0)
    assert weak.shape == strong.shape == (4, 8, 32, 32, 3)
    assert labels.shape == (8, 8) and labels.diagonal().all()
    assert labels.sum() > 8 + 8                      # weak/strong pairs plus the Video-in-Video hosts
    again = s2vs_batch(clips, 8, torch.Generator().manual_seed(0), video_in_video_p=1.0)
    assert torch.equal(weak, again[0]) and torch.equal(strong, again[1])


def test_defaults_are_the_papers_method() -> None:
    assert DEFAULT_LOSS == "quadlinear_ap" and Variant().temporal_k == 0.03 and Variant().frame_ap
    released = PROFILES["released"]
    assert (released.frames, released.batch_videos, released.lr, released.steps, released.warmup_steps) == \
        (28, 128, 4e-5, 30000, 1000)
    assert released.resample and released.backbone == "resnet50" and released.teacher == "dino"
    assert (config_for("released").weight_decay, config_for("released").eval_every) == (1e-2, 1500)


def test_views_have_the_requested_length() -> None:
    clip = torch.randint(0, 256, (12, 32, 32, 3), dtype=torch.uint8)
    views = make_views(clip, 3, 8, torch.Generator().manual_seed(0))
    assert len(views) == 4 and all(v.shape == (8, 32, 32, 3) and v.dtype == torch.uint8 for v in views)
    again = make_views(clip, 3, 8, torch.Generator().manual_seed(0))
    assert all(torch.equal(a, b) for a, b in zip(views, again))


@pytest.fixture(scope="module")
def smoke_task() -> HAPVRTask:
    return HAPVRTask("smoke", Variant(), seed=1)


def test_batches_are_deterministic_per_step(smoke_task: HAPVRTask) -> None:
    a, b = smoke_task.batch(3, torch.device("cpu")), smoke_task.batch(3, torch.device("cpu"))
    assert all(torch.equal(a[k], b[k]) for k in a)
    n = 2 * smoke_task.profile.batch_videos
    assert a["features"].shape[:2] == (n, smoke_task.profile.frames)
    assert a["teacher"].shape[:2] == (n, smoke_task.profile.frames)
    assert len({smoke_task.batch(s, torch.device("cpu"))["features"].sum().item() for s in range(10)}) > 1


def test_resampled_views_draw_fresh_batches(smoke_task: HAPVRTask) -> None:
    """The released path: every step augments its clips afresh and runs the frozen backbone."""
    from dataclasses import replace
    task = HAPVRTask("smoke", Variant(), seed=1)
    task.profile = replace(task.profile, resample=True)
    a, b = task.batch(0, torch.device("cpu")), task.batch(1, torch.device("cpu"))
    assert a["features"].shape == smoke_task.batch(0, torch.device("cpu"))["features"].shape
    assert not torch.equal(a["features"], b["features"])
    assert torch.equal(a["features"], task.batch(0, torch.device("cpu"))["features"])
    assert a["relevance"].diagonal().all()


def test_loss_terms_and_gradients_reach_attention_and_psi(smoke_task: HAPVRTask) -> None:
    model = smoke_task.build_model()
    terms = smoke_task.loss(model, smoke_task.batch(0, torch.device("cpu")))
    assert sorted(terms) == ["frame_ap", "infonce", "loss", "reg", "sshn", "video_ap"]
    assert all(torch.isfinite(v) for v in terms.values())
    terms["loss"].backward()
    assert model.attention.proj.weight.grad.abs().sum() > 0
    assert model.comparator.conv1.weight.grad.abs().sum() > 0


def test_training_lowers_the_smoke_loss(smoke_task: HAPVRTask) -> None:
    """Same batch before/after a short fit: the trained model has a lower Eq. 15 loss."""
    result = fit(smoke_task, config_for("smoke", seed=1), progress=False)
    fresh = smoke_task.build_model()
    batch = smoke_task.batch(0, torch.device("cpu"))
    with torch.no_grad():
        assert smoke_task.loss(result.model, batch)["loss"] < smoke_task.loss(fresh, batch)["loss"]
    assert 0.0 <= result.metrics["mAP"] <= 1.0 and 0.0 <= result.metrics["uAP"] <= 1.0


def test_network_defaults_are_the_released_rates() -> None:
    net = build_hapvr_network(16)
    assert (net.spatial_k, net.temporal_k) == (0.1, 0.03) and net.attention is not None


def test_cli_prints_the_eval_line_last_and_resumes(tmp_path, capsys) -> None:
    assert load_pipeline("hapvr").LOSSES == LOSSES
    assert main(["hapvr", "--profile", "smoke", "--loss", "smooth_ap", "--out", str(tmp_path), "--no-progress"]) == 0
    first = capsys.readouterr().out.strip().splitlines()[-1]
    assert re.fullmatch(r"eval: mAP=\d\.\d{4} uAP=\d\.\d{4}", first)
    assert main(["hapvr", "--profile", "smoke", "--loss", "smooth_ap", "--out", str(tmp_path), "--resume",
                 "--no-progress"]) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1] == first
    assert summary_line({"mAP": 0.5, "uAP": 0.25}) == "eval: mAP=0.5000 uAP=0.2500"
